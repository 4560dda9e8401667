"""Host-side memory images and port words, as plain data (no cocotb): shared by the benches,
``sim/`` and the tests.

Every port word is packed from the RTL's own ``lib.data.Struct`` layout (:func:`pack_struct`,
:func:`unpack_struct`): a field added to, widened in or moved within ``GemmConfig``,
``Fp4Config``, ``WmmaCmd`` or ``WmmaResp`` moves here with it, and a value that does not fit
its field is an error, never a wrong bit.
"""

from __future__ import annotations

import numpy as np
from amaranth.lib import data

from tcore.numerics import Op

__all__ = ["sparse_layout", "sparse_image", "write_memh", "read_memh", "struct_fields", "pack_struct", "unpack_struct", "cfg_word", "fcfg_word",
           "gemm_layout", "clock_budget", "fp4_image", "fp4_extra_clocks"]


def struct_fields(layout) -> list[tuple[str, int, int]]:
    """(name, offset, width) of a ``lib.data.Struct``'s fields, LSB first: the RTL's own."""
    return [(name, field.offset, field.width) for name, field in data.Layout.cast(layout)]


def pack_struct(layout, **values) -> int:
    """A ``lib.data.Struct`` value as an integer (bit 0 = the port's bit 0).  Fields not given
    are 0; an unknown field or a value that does not fit is a ``ValueError``."""
    word = 0
    fields = {name: (off, width) for name, off, width in struct_fields(layout)}
    for name, v in values.items():
        if name not in fields:
            raise ValueError(f"{getattr(layout, '__name__', layout)} has no field {name!r}")
        off, width = fields[name]
        v = int(v)
        if not 0 <= v < (1 << width):
            raise ValueError(f"{name}={v} does not fit in {width} bits")
        word |= v << off
    return word


def unpack_struct(layout, word: int) -> dict:
    """Field name -> integer value of a ``lib.data.Struct`` port word."""
    return {name: (int(word) >> off) & ((1 << width) - 1)
            for name, off, width in struct_fields(layout)}


def cfg_word(**f) -> int:
    """:class:`tcore.rtl.gemm.GemmConfig` as the ``cfg`` port's integer (``bf16=True`` for
    ``kind=1``, BF16)."""
    from tcore.rtl.gemm import GemmConfig
    if "bf16" in f:
        f["kind"] = 1 if f.pop("bf16") else f.get("kind", 0)
    return pack_struct(GemmConfig, **f)


def fcfg_word(**f) -> int:
    """:class:`tcore.rtl.nvfp4.Fp4Config` as the ``fcfg`` port's integer."""
    from tcore.rtl.nvfp4 import Fp4Config
    return pack_struct(Fp4Config, **f)


def gemm_fields(in_fmt="fp16", b_fmt=None, out_fmt="fp32", saturate=False) -> dict:
    """The GemmConfig fields of an operation (kind, variants, accumulator, saturation, b_cols)
    besides sizes, bases and ``sparse``: :attr:`tcore.numerics.Op.mode_fields`."""
    return Op(in_fmt, b_fmt, out_fmt, saturate).mode_fields


def gemm_layout(m, n, k, acc_f16, esize=2):
    """The GEMM top's job layout in 128-bit words: A (M x K) at 0, B (K x N or N x K) after it,
    then D (M x N); ``esize`` bytes per A/B element.  Returns ``(a_base, b_base, d_base, end)``."""
    a_words = m * k * esize // 16
    b_words = k * n * esize // 16
    d_words = m * n * (2 if acc_f16 else 4) // 16
    return 0, a_words, a_words + b_words, a_words + b_words + d_words


def sparse_layout(m, n, k, acc_f16):
    """The GEMM top's layout of a 2:4 sparse job in 128-bit words: A's stored values (M x K/2
    FP16/BF16) at 0, its metadata (M x K/32 uint32, packed) after them, padded to a word, then
    B (K x N) and D.  Returns ``(a_base, e_base, b_base, d_base, end)``."""
    a_words = m * k // 16
    e_words = _words(m * (k // 32) * 4)
    b_base = a_words + e_words
    d_base = b_base + k * n * 2 // 16
    return 0, a_words, b_base, d_base, d_base + m * n * (2 if acc_f16 else 4) // 16


def sparse_image(values, meta, b) -> np.ndarray:
    """The memory image (bytes) of :func:`sparse_layout`: values, metadata padded to a word,
    B."""
    e = np.ascontiguousarray(meta, dtype="<u4").view(np.uint8).reshape(-1)
    pad = np.zeros(-len(e) % 16, np.uint8)
    return np.concatenate([np.ascontiguousarray(values).view(np.uint8).reshape(-1), e, pad,
                           np.ascontiguousarray(b).view(np.uint8).reshape(-1)])


def clock_budget(m, n, k, warps=1, extra=0, override=None) -> int:
    """Clocks a GEMM may take before its ``done`` counts as lost: twice the core beats per core
    (the GEMM top keeps its warps above 0.9 busy), 600 per 16x16 tile for loads and stores,
    ``extra`` (an FP4 design's decode and epilogue) and a margin; ``override`` if given."""
    if override:
        return int(override)
    beats = m * n * k // 64
    return 2 * beats // warps + 600 * (m // 16) * (n // 16) + extra + 5000


def _words(nbytes: int) -> int:
    return (nbytes + 15) // 16


def fp4_image(qa, qbt):
    """The memory image and configuration of a quantised GEMM (``tcore.golden.nvfp4.Quantized`` A and
    B^T) on the ``fp4gemm`` design.

    Word map: decoded A (M x K, 16-bit) at 0, decoded B (K x N) after it, D (M x N FP32), then
    A's packed codes, A's scales (M x K/block), B's packed codes in B's own K x N layout and
    B's scales as K/block x N.  Returns ``(bytes, gemm cfg fields, fcfg fields)``.
    """
    from tcore.golden.nvfp4 import pack_codes

    m, k = qa.codes.shape
    n = qbt.codes.shape[0]
    a_base, b_base, d_base, end = gemm_layout(m, n, k, acc_f16=False)
    parts = [np.zeros(end * 16, np.uint8)]
    bases = {}
    for name, arr in (("a_codes", qa.packed()), ("a_scales", qa.scales),
                      ("b_codes", pack_codes(qbt.codes.T)), ("b_scales", qbt.scales.T)):
        bases[name] = sum(len(p) for p in parts) // 16
        raw = np.ascontiguousarray(arr, np.uint8).reshape(-1)
        parts.append(np.concatenate([raw, np.zeros(_words(raw.size) * 16 - raw.size, np.uint8)]))
    alpha = np.float32(qa.tensor_scale) * np.float32(qbt.tensor_scale)
    fcfg = dict(bases, alpha=int(np.float32(alpha).view(np.uint32)), mx=qa.fmt == "mxfp4")
    cfg = dict(tiles_m=m // 16, tiles_n=n // 16, steps=k // 16, a_base=a_base, b_base=b_base,
               d_base=d_base, bf16=qa.fmt == "mxfp4", acc_f16=False)
    return np.concatenate(parts), cfg, fcfg


def fp4_extra_clocks(m, n, k) -> int:
    """The decode (3 clocks per word of A and B) and epilogue (2 per word of D) phases, with a
    margin: what the fp4gemm design adds to a GEMM's clock budget."""
    return 2 * (3 * (m * k + k * n) * 2 // 16 + 2 * m * n * 4 // 16)


def write_memh(path, image: np.ndarray):
    """A byte image as $readmemh text: one 128-bit word (32 hex digits) per line."""
    words = np.ascontiguousarray(image, np.uint8).reshape(-1, 16)[:, ::-1]
    with open(path, "w") as f:
        f.write("\n".join(w.tobytes().hex() for w in words))
        f.write("\n")


def write_memh_words(path, words, width: int):
    """Integers (``width``-bit memory words) as $readmemh text, one word per line."""
    digits = (width + 3) // 4
    with open(path, "w") as f:
        f.write("\n".join(f"{int(w):0{digits}x}" for w in words))
        f.write("\n")


def _memh_lines(path, nwords, base: int) -> list[str]:
    """The words of a $writememh file as hex strings.

    A word with an X or Z digit (an unwritten or undriven bit on Icarus) is a failure that
    names its word address (``base`` + line), never a zero.
    """
    with open(path) as f:
        lines = [ln.strip() for ln in f if ln.strip() and not ln.startswith("//")]
    if len(lines) != nwords:
        raise AssertionError(f"memory dump has {len(lines)} words, expected {nwords}")
    unknown = [i for i, ln in enumerate(lines) if any(ch in "xXzZ" for ch in ln)]
    if unknown:
        first = ", ".join(f"word {base + i} ({lines[i][:40]})" for i in unknown[:4])
        raise AssertionError(f"memory dump holds X or Z in {len(unknown)} of {nwords} words: "
                             f"{first}{' ...' if len(unknown) > 4 else ''}")
    return lines


def read_memh_words(path, nwords, base: int = 0) -> list[int]:
    """$writememh text back to integers, one per word (any width; X or Z fails)."""
    return [int(ln, 16) for ln in _memh_lines(path, nwords, base)]


def read_memh(path, nwords, base: int = 0) -> np.ndarray:
    """$writememh text (128-bit words) back to a byte image (X or Z fails)."""
    lines = _memh_lines(path, nwords, base)
    return np.frombuffer(b"".join(bytes.fromhex(ln.zfill(32))[::-1] for ln in lines),
                         np.uint8).copy()
