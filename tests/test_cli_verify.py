"""``tcore verify``: output format, exit codes and errors."""

import numpy as np
import pytest

from tcore.sim.cli import main

from .conftest import SILICON


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_verify_all_kernels_counts_every_output(capsys):
    code, out, _ = run(capsys, "verify", str(SILICON / "h200_ints.npz"), str(SILICON / "h200_targeted.npz"))
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) == 2 * 3 + 1
    assert lines[-1] == f"checked {3 * (64 + 4) * 256} mismatches 0"


def test_verify_gemm_file_and_tiles(capsys):
    f = str(SILICON / "h200_matmulT_normal_128x256x64.npz")
    code, out, _ = run(capsys, "verify", f, "--kernel", "f16_f16", "--tiles", "3")
    assert code == 0 and out.strip().splitlines()[-1] == "checked 768 mismatches 0"
    code, out, _ = run(capsys, "verify", f, "--kernel", "bf16_f32")
    assert code == 0 and out.strip().splitlines()[-1] == f"checked {128 * 64} mismatches 0"


def test_verify_reports_mismatches_with_exit_1(tmp_path, capsys):
    data = dict(np.load(SILICON / "h200_ints.npz"))
    data["d_f16_f32"] = data["d_f16_f32"].copy()
    data["d_f16_f32"][0, 0, 0] ^= 1
    data["d_f16_f32"][5, 3, 2] ^= 0x80000000
    f = tmp_path / "bad.npz"
    np.savez(f, **data)
    code, out, _ = run(capsys, "verify", str(f), "--kernel", "f16_f32")
    assert code == 1 and out.strip().splitlines()[-1] == f"checked {64 * 256} mismatches 2"


def test_verify_wrong_arch_reports_mismatches(capsys):
    code, out, _ = run(capsys, "verify", str(SILICON / "h200_targeted.npz"), "--arch", "volta")
    assert code == 1
    assert "skipping bf16_f32" in out
    assert out.strip().splitlines()[-1].startswith(f"checked {2 * 1024} mismatches ")
    code, _, err = run(capsys, "verify", str(SILICON / "h200_targeted.npz"), "--arch", "volta",
                       "--kernel", "bf16_f32")
    assert code == 2 and "no BF16" in err


@pytest.mark.parametrize("mutate,msg", [
    (lambda d: d.pop("b"), "missing key 'b'"),
    (lambda d: d.pop("d_f16_f32"), "missing key 'd_f16_f32'"),
    (lambda d: d.update(a=d["a"].astype(np.int32)), "'a' must be uint16"),
    (lambda d: d.update(c=d["c"][:, :8]), "'c' must have shape"),
    (lambda d: d.update(b=d["b"][:, :, :3]), None),   # N = 3 does not match d's N
])
def test_verify_malformed_files_exit_2(tmp_path, capsys, mutate, msg):
    data = dict(np.load(SILICON / "h200_ints.npz"))
    mutate(data)
    f = tmp_path / "bad.npz"
    np.savez(f, **data)
    code, out, err = run(capsys, "verify", str(f), "--kernel", "f16_f32")
    assert code == 2 and len(err.strip().splitlines()) == 1 and out == ""
    if msg:
        assert msg in err


def test_verify_missing_and_unreadable_files(tmp_path, capsys):
    code, _, err = run(capsys, "verify", str(tmp_path / "nope.npz"))
    assert code == 2 and "no such file" in err
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"not a zip")
    code, _, err = run(capsys, "verify", str(junk))
    assert code == 2 and "not a readable .npz" in err


def test_verify_bad_tiles(capsys):
    code, _, err = run(capsys, "verify", str(SILICON / "h200_ints.npz"), "--tiles", "0")
    assert code == 2 and "--tiles" in err


def test_verify_the_cublas_library_captures(tmp_path, capsys):
    """torch_splitk/: split-K, epilogue and FP8-scale GEMMs, every output of the 16 files."""
    files = sorted((SILICON / "torch_splitk").glob("*.npz"))
    code, out, _ = run(capsys, "verify", *map(str, files))
    assert code == 0 and out.strip().splitlines()[-1] == "checked 1141152 mismatches 0"
    assert "split-K 12" in out
    data = dict(np.load(files[-1]))
    data["d32_rr0"] = data["d32_rr0"].copy()
    data["d32_rr0"][0, 0] ^= 1
    bad = tmp_path / "bad.npz"
    np.savez(bad, **data)
    code, out, _ = run(capsys, "verify", str(bad))
    assert code == 1 and out.strip().splitlines()[-1] == "checked 640 mismatches 1"
    code, _, err = run(capsys, "verify", str(files[0]), "--kernel", "f16_f32")
    assert code == 2 and "cuBLAS library capture" in err
