"""The golden model on dask arrays and on a dask.distributed cluster (golden.distributed,
``--scheduler``): the same bits as the serial model, which is the reference here.

One LocalCluster of two worker processes (one thread each) on 127.0.0.1 serves the module.
"""

import contextlib
import json
import os
import signal
import time
import warnings

import ml_dtypes
import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

from tcore import golden                                   # noqa: E402
from tcore.golden import distributed as gd           # noqa: E402
from tcore.sim.cli import main                        # noqa: E402

from .conftest import SILICON                   # noqa: E402

pytestmark = pytest.mark.timeout(180)


@contextlib.contextmanager
def _local_cluster():
    """Two worker processes and a scheduler, all on 127.0.0.1."""
    with warnings.catch_warnings():         # "Port 8787 is already in use": another test process's
        warnings.simplefilter("ignore")     # scheduler's HTTP server has it (on 127.0.0.1 too)
        cl = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                      dashboard_address=None, host="127.0.0.1", scheduler_port=0)
    with cl, distributed.Client(cl, set_as_default=False) as client:
        assert cl.scheduler_address.startswith("tcp://127.0.0.1:")
        assert cl.scheduler.http_server.address == "127.0.0.1"
        assert all(w.startswith("tcp://127.0.0.1:") for w in client.nthreads())
        yield cl, client


@pytest.fixture(scope="module")
def cluster():
    with _local_cluster() as both:
        yield both


def _rng():
    return np.random.default_rng(7)


def test_dask_array_gemm_same_bits_as_serial(cluster):
    """FP16 -> FP32 (with C, uneven chunks, K chunked in the input) through golden.matmul,
    FP8 E4M3 x E5M2 bits through golden.mma.mma (the plain chain and promote=128)."""
    _, client = cluster
    rng = _rng()
    a = rng.standard_normal((150, 200)).astype(np.float16)
    b = rng.standard_normal((200, 90)).astype(np.float16)
    c = rng.standard_normal((150, 90)).astype(np.float32)
    want = golden.matmul(a, b, c)
    x = golden.matmul(da.from_array(a, chunks=(64, 48)), da.from_array(b, chunks=(70, 32)), c)
    assert isinstance(x, da.Array)
    assert x.chunks == ((64, 64, 22), (32, 32, 26)) and x.dtype == np.float32
    got = client.compute(x).result()
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), want.view(np.uint32))
    # No C, FP16 output.
    want16 = golden.matmul(a, b, out="fp16")
    got16 = client.compute(golden.matmul(da.from_array(a, chunks=(50, 200)), b, out="fp16")).result()
    assert np.array_equal(got16.view(np.uint16), want16.view(np.uint16))

    a8 = rng.standard_normal((96, 300)).astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    b8 = (4 * rng.standard_normal((300, 80))).astype(ml_dtypes.float8_e5m2).view(np.uint8)
    c8 = rng.standard_normal((96, 80)).astype(np.float32).view(np.uint32)
    for promote in (None, 128):
        kw = dict(in_fmt="e4m3", b_fmt="e5m2", out_fmt="fp32", instr="wgmma", promote=promote)
        want8 = golden.mma(a8, b8, c8, **kw)
        y = golden.mma(da.from_array(a8, chunks=(40, 100)), da.from_array(b8, chunks=(128, 48)),
                       da.from_array(c8, chunks=(96, 80)), **kw)
        assert y.chunks == ((40, 40, 16), (48, 32))
        assert np.array_equal(client.compute(y).result(), want8)


def test_dask_array_errors_are_eager():
    a = da.zeros((32, 16), dtype=np.uint16, chunks=16)
    with pytest.raises(ValueError, match="K differs"):
        golden.mma(a, np.zeros((8, 16), np.uint16), np.zeros((32, 16), np.uint32))
    with pytest.raises(TypeError, match="must hold uint32"):
        golden.mma(a, np.zeros((16, 16), np.uint16), np.zeros((32, 16), np.float32))
    with pytest.raises(ValueError, match="Mode must be"):
        golden.mma(a, np.zeros((16, 16), np.uint16), np.zeros((32, 16), np.uint32), mode="x")
    with pytest.raises(TypeError, match="matmul takes"):
        golden.matmul(da.zeros((4, 4), dtype=np.float16), da.zeros((4, 4), dtype=np.float64))


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_verify_scheduler_same_lines(cluster, capsys):
    cl, _ = cluster
    files = [str(SILICON / "h200_ints.npz"), str(SILICON / "h200_matmulT_normal_64x64x64.npz"),
             str(SILICON / "lowprec" / "h200_fp8_normal43.npz"), str(SILICON / "sparse" / "h200_sparse_f16.npz")]
    code, out, _ = _run(capsys, "verify", *files)
    dcode, dout, _ = _run(capsys, "verify", *files, "--scheduler", cl.scheduler_address)
    assert (dcode, dout) == (code, out)
    assert code == 0 and out.splitlines()[-1].endswith("mismatches 0")
    # A mismatch is counted, and the exit status is 1, on the cluster as here.
    code, out, _ = _run(capsys, "verify", files[0], "--kernel", "f16_f32", "--tiles", "5",
                        "--arch", "volta")
    dcode, dout, _ = _run(capsys, "verify", files[0], "--kernel", "f16_f32", "--tiles", "5",
                          "--arch", "volta", "--scheduler", cl.scheduler_address)
    assert (dcode, dout) == (code, out)


def test_gemm_scheduler_same_output(cluster, capsys, tmp_path):
    cl, _ = cluster
    argv = ["gemm", "--m", "96", "--n", "80", "--k", "48", "--backend", "golden", "--json"]
    code, out, _ = _run(capsys, *argv, "-o", str(tmp_path / "serial.npz"))
    dcode, dout, _ = _run(capsys, *argv, "-o", str(tmp_path / "dask.npz"), "--scheduler",
                          cl.scheduler_address)
    assert code == dcode == 0
    lines, dlines = out.splitlines(), dout.splitlines()
    assert lines[:-2] == dlines[:-2]                       # all but "wrote" and the JSON
    r, dr = json.loads(lines[-1]), json.loads(dlines[-1])
    for x in (r, dr):
        x.pop("wall_s"), x.pop("output")
    assert r == dr
    assert np.array_equal(np.load(tmp_path / "serial.npz")["d_bits"],
                          np.load(tmp_path / "dask.npz")["d_bits"])


def test_scheduler_errors(capsys, monkeypatch):
    import dask
    f = str(SILICON / "h200_ints.npz")
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        code, out, err = _run(capsys, "verify", f, "--scheduler", "tcp://127.0.0.1:9")
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "cannot reach the dask scheduler at tcp://127.0.0.1:9" in err
    code, _, err = _run(capsys, "gemm", "--m", "16", "--n", "16", "--k", "16", "--backend",
                        "verilator", "--scheduler", "tcp://127.0.0.1:9")
    assert code == 2 and "--scheduler is for --backend golden" in err
    monkeypatch.setitem(__import__("sys").modules, "distributed", None)
    code, _, err = _run(capsys, "gemm", "--m", "16", "--n", "16", "--k", "16", "--backend",
                        "golden", "--scheduler", "tcp://127.0.0.1:9")
    assert code == 2 and err.count("\n") == 1 and "pip install 'dask[distributed]'" in err


def test_killed_worker_loses_no_tile():
    """A worker process killed while the GEMM's blocks run: dask recomputes what it held or was
    computing, and D is complete and bit-exact.  (A cluster of its own: a worker being
    replaced must not take part in the other tests' computations.)"""
    with _local_cluster() as (cl, client):
        _kill_a_worker_mid_gemm(cl, client)


def _kill_a_worker_mid_gemm(cl, client):
    rng = _rng()
    a = rng.standard_normal((128, 64)).astype(np.float16).view(np.uint16)
    b = rng.standard_normal((64, 128)).astype(np.float16).view(np.uint16)
    c = np.zeros((128, 128), np.uint32)
    want = golden.mma(a, b, c)

    def slow_mma(*blocks, **kw):                # the serial model, slowly (pickled by value)
        time.sleep(0.4)
        return golden.mma(*blocks, **kw)

    kw = {"in_fmt": "fp16", "out_fmt": "fp32", "workers": 1}
    d = gd._blockwise(slow_mma, da.from_array(a, chunks=(32, 64)), da.from_array(b, chunks=(64, 32)),
                      da.from_array(c, chunks=(32, 32)), np.uint32, kw)
    assert d.numblocks == (4, 4)
    pids = client.run(os.getpid)
    fut = client.compute(d, retries=2)
    deadline = time.monotonic() + 30
    victim = None
    while victim is None and time.monotonic() < deadline:
        busy = {w: t for w, t in client.processing().items() if t}
        held = client.has_what()
        # A worker computing a block and holding a finished one.
        victim = next((w for w in busy if w in pids and
                       any(d.name in str(key) for key in held.get(w, ()))), None)
        time.sleep(0.05)
    assert victim is not None, "no worker was computing and holding blocks"
    assert not fut.done()
    os.kill(pids[victim], signal.SIGKILL)
    got = fut.result(timeout=60)
    assert got.shape == want.shape and np.array_equal(got, want)
    # The nanny starts a fresh process in its place.
    client.wait_for_workers(2, timeout=30)
    assert pids[victim] not in client.run(os.getpid).values()
