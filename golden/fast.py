"""The compiled engine of :func:`tcore.golden.mma.mma`: the block fused dot-add chain in numba kernels.

The arithmetic is the rule of ``docs/numerics.md`` exactly as :mod:`tcore.golden.dot` computes it
(the NumPy engine, kept as the checked twin): every factor is an exact float64 value with its
``2**nominal_exponent``; per output and K step, E is the largest product of powers (and c's
power, and the FP16-output floor), every term is scaled by the power of two ``2**(F - E)`` and
truncated (``trunc``), and the scaled integers are added in float64, exactly (below 2**53).
Inf x 0 and Inf - Inf give NaN by IEEE float64 arithmetic, as in the twin.  The only new code
is the rounding of that exact sum to FP32 (toward zero, optional cut) or FP16 (nearest-even),
done here on the float64's bit fields instead of NumPy's casts; tests compare the two engines
and the silicon captures bit for bit.

The kernels are cached on disk (numba's ``cache=True``, beside this file); a cache names its
module (``tcore.golden.fast``), so an edit of this file is what retires one written under an
older name.

Two kernels, the same arithmetic: :func:`run_fp` for wide products (a unit is a block of
output rows of one batch entry with all its columns, the vector loops run across columns) and
:func:`run_tiles` for batches of small tiles (a unit is a group of tiles, the vector loops run
across the tiles).  A unit carries its outputs' whole K chain; units are independent, so they
are spread over threads (the kernels release the GIL); K is never split.  (INT8 needs no kernel
here: :func:`tcore.golden.mma._int_blas_chunk` sums its steps exactly in float32 BLAS.)

numba compiles the kernels on first use and caches them (``cache=True``) beside this file.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numpy as np

from .formats import pow2_table, value_table

try:                                    # the engine is optional: mma falls back to NumPy
    from numba import njit
    import llvmlite.binding as _llvm
    # The vector loops are short (16 to 128 lanes): without this LLVM unrolls them by four
    # vectors (32 doubles) and a 16-lane loop runs only its scalar remainder.  (A process-wide
    # LLVM setting: it affects only how other numba code is unrolled, never what it computes.)
    _llvm.set_option("", "-force-vector-interleave=1")
    AVAILABLE = True
except ImportError:                     # pragma: no cover - numba is a dependency
    AVAILABLE = False

__all__ = ["AVAILABLE", "run_fp", "run_tiles", "tiles_mode", "default_workers"]

#: Output rows per unit and output columns per block of :func:`run_fp` (the kernel's own
#: ``rows`` and ``cols``; the working set stays in L2).
ROWS, COLS = 32, 128


def default_workers() -> int:
    return os.cpu_count() or 1


_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_pool_size = 0


def _map(fn, parts):
    """Run ``fn(lo, hi)`` over the parts, on threads when there are several."""
    global _pool, _pool_size
    if len(parts) == 1:
        fn(*parts[0])
        return
    with _pool_lock:
        if _pool is None or _pool_size < len(parts):
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool_size = max(len(parts), default_workers())
            _pool = ThreadPoolExecutor(_pool_size, thread_name_prefix="golden")
        pool = _pool
    for f in [pool.submit(fn, lo, hi) for lo, hi in parts]:
        f.result()


def _parts(units: int, workers: int):
    """Split ``range(units)`` into at most ``workers`` contiguous, nearly equal parts."""
    w = max(1, min(int(workers), units))
    edges = [units * i // w for i in range(w + 1)]
    return [(edges[i], edges[i + 1]) for i in range(w) if edges[i + 1] > edges[i]]


if AVAILABLE:
    _jit = njit(cache=True, nogil=True, error_model="numpy")

    @_jit
    def _pow2(e):
        """2.0**e for an integer e in float64's normal range, built from its bits."""
        return np.uint64((e + 1023) << 52).view(np.float64)

    @_jit
    def _dec32(b):
        """(value, power) of FP32 bits b: :func:`tcore.golden.formats.to_float` and pow2_nominal."""
        v = np.float64(np.uint32(b).view(np.float32))
        ef = (b >> 23) & 0xFF
        p = _pow2(max(ef, 1) - 127)
        if (b & 0x7FFFFFFF) == 0:
            p = 0.0
        if ef == 0xFF:
            p = 1.0
        return v, p

    @_jit
    def _dec16(b):
        """(value, power) of FP16 bits b."""
        ef = (b >> 10) & 0x1F
        fr = b & 0x3FF
        e = max(ef, 1)
        sig = fr | (1024 if ef > 0 else 0)
        v = sig * _pow2(e - 25)
        p = _pow2(e - 15)
        if ef == 0x1F:
            v = np.inf if fr == 0 else np.nan
            p = 1.0
        if (b & 0x7FFF) == 0:
            p = 0.0
        if b & 0x8000:
            v = -v
        return v, p

    @_jit
    def _rz32(v, cutmask):
        """FP32 bits of the exact float64 v: toward zero, >= 2**128 to Inf, subnormals kept,
        the cut mask applied, zero to +0, NaN canonical (:func:`tcore.golden.dot.round_output`)."""
        u = np.float64(v).view(np.uint64)
        s = np.int64(u >> np.uint64(63))
        e = np.int64((u >> np.uint64(52)) & np.uint64(0x7FF))
        if e >= 1151:                           # |v| >= 2**128, and Inf
            r = np.int64(0x7F800000)
        elif e >= 897:                          # normal FP32: drop 29 fraction bits
            r = ((e - 896) << 23) | np.int64((u >> np.uint64(29)) & np.uint64(0x7FFFFF))
        else:                                   # subnormal FP32 (and zero): units of 2**-149
            r = np.int64(abs(v) * 7.1362384635297994e+44)     # 2**149, then trunc
        r &= cutmask
        if r != 0:
            r |= s << 31
        if v != v:
            r = np.int64(0x7FFFFFFF)
        return r

    @_jit
    def _rne16(v):
        """FP16 bits of the exact float64 v, rounded once to nearest-even (NumPy's float64 to
        float16 cast), overflow to Inf, zero to +0, NaN canonical."""
        u = np.float64(v).view(np.uint64)
        s = np.int64(u >> np.uint64(63))
        e = np.int64((u >> np.uint64(52)) & np.uint64(0x7FF))
        if e >= 1039:                           # |v| >= 2**16, and Inf
            r = np.int64(0x7C00)
        elif e >= 1009:                         # FP16 normal range: round 53 bits to 11
            m = np.int64(u & np.uint64(0xFFFFFFFFFFFFF)) | (np.int64(1) << 52)
            q = m >> 42
            rem = m & ((np.int64(1) << 42) - 1)
            half = np.int64(1) << 41
            up = 1 if (rem > half or (rem == half and (q & 1) == 1)) else 0
            r = ((e - 1008) << 10) + (q - 1024) + up  # a carry moves into the exponent (or Inf)
        else:                                   # subnormal FP16: units of 2**-24
            x = abs(v) * 16777216.0
            fl = np.floor(x)
            d = x - fl
            q = np.int64(fl)
            if d > 0.5 or (d == 0.5 and (q & 1) == 1):
                q += 1
            r = q
        if r != 0:
            r |= s << 15
        if v != v:
            r = np.int64(0x7FFF)
        return r

    @_jit
    def _fp_kernel(va, pa, vb, pb, c, out, u0, u1, grid, block, floor_pow, fp16, cutmask,
                   promote):
        """Units u0..u1 of the floating-point chain.

        va, pa (T, M, K) and vb, pb (T, K, N): float64 values and powers of A and B; c and
        out (T, M, N): bits (uint32, or uint16 when fp16).  floor_pow: 2**floor or 0.
        promote: 0, or the K chunk of cuBLASLt's promoted FP8 accumulation.  The loops over a
        block's columns are the vector loops.
        """
        T, M, K = va.shape
        N = vb.shape[2]
        rows = min(M, 32)
        cols = min(N, 128)
        nrb = (M + rows - 1) // rows
        sgrid = (np.int64(grid) + 2046) << 52
        igrid = np.int64(grid) << 52
        cv = np.empty((rows, cols))
        cp = np.empty((rows, cols))
        cb = np.empty((rows, cols), np.int64)
        acc = np.empty((rows, cols), np.float32)
        big = np.empty(cols)
        scale = np.empty(cols)
        inv = np.empty(cols)
        tot = np.empty(cols)
        chunk = promote if promote > 0 else K
        for u in range(u0, u1):
            t = u // nrb
            i0 = (u % nrb) * rows
            ni = min(rows, M - i0)
            for j0 in range(0, N, cols):
                nj = min(cols, N - j0)
                if promote > 0:
                    acc[:, :] = 0.0
                for s0 in range(0, K, chunk):
                    s1 = min(s0 + chunk, K)
                    for ii in range(ni):            # the chain's addend: c, or 0 per chunk
                        crow = c[t, i0 + ii, j0:j0 + nj]
                        cvr = cv[ii]
                        cpr = cp[ii]
                        for j in range(nj):
                            b = np.int64(crow[j]) if promote == 0 else np.int64(0)
                            if fp16:
                                x, p = _dec16(b)
                            else:
                                x, p = _dec32(b)
                            cvr[j] = x
                            cpr[j] = p
                    for k0 in range(s0, s1, block):
                        k1 = min(k0 + block, s1)
                        for ii in range(ni):
                            i = i0 + ii
                            par = pa[t, i]
                            var = va[t, i]
                            cvr = cv[ii]
                            cpr = cp[ii]
                            cbr = cb[ii]
                            # E: the largest power among the step's terms (and the floor)
                            for j in range(nj):
                                big[j] = max(cpr[j], floor_pow)
                            for kk in range(k0, k1):
                                q = par[kk]
                                pbr = pb[t, kk, j0:j0 + nj]
                                for j in range(nj):
                                    big[j] = max(big[j], q * pbr[j])
                            for j in range(nj):
                                # 2**(F - E) and 2**(E - F) from E's bits (exact, no divide)
                                ub = np.float64(big[j]).view(np.int64)
                                sc = np.int64(sgrid - ub).view(np.float64) if ub > 0 else 1.0
                                inv[j] = np.int64(ub - igrid).view(np.float64) if ub > 0 else 1.0
                                scale[j] = sc
                                tot[j] = np.trunc(cvr[j] * sc)
                            for kk in range(k0, k1):
                                x = var[kk]
                                vbr = vb[t, kk, j0:j0 + nj]
                                for j in range(nj):
                                    tot[j] += np.trunc(x * vbr[j] * scale[j])
                            # round the exact sum, and read it back as the next addend
                            if fp16:
                                for j in range(nj):
                                    r = _rne16(tot[j] * inv[j])
                                    x, p = _dec16(r)
                                    cbr[j] = r
                                    cvr[j] = x
                                    cpr[j] = p
                            else:
                                for j in range(nj):
                                    r = _rz32(tot[j] * inv[j], cutmask)
                                    x, p = _dec32(r)
                                    cbr[j] = r
                                    cvr[j] = x
                                    cpr[j] = p
                    if promote > 0:
                        for ii in range(ni):
                            for j in range(nj):
                                acc[ii, j] += np.float32(cv[ii, j])   # float32: IEEE RNE
                for ii in range(ni):
                    orow = out[t, i0 + ii]
                    crow = c[t, i0 + ii]
                    for j in range(nj):
                        if promote > 0:
                            f = acc[ii, j] + np.uint32(crow[j0 + j]).view(np.float32)
                            r = np.int64(np.float32(f).view(np.uint32))
                            if f != f:
                                r = np.int64(0x7FFFFFFF)
                            orow[j0 + j] = r
                        else:
                            orow[j0 + j] = cb[ii, j]

    @_jit
    def _dec(bits, ebits, fbits, bias, finite, keep):
        """(value, power) of one pattern of a format: :func:`tcore.golden.formats.to_float` and
        :func:`tcore.golden.formats.pow2_nominal` (keep: the mask of the bits read, TF32's 13 low
        fraction bits cleared)."""
        b = np.int64(bits) & keep
        emax = (np.int64(1) << ebits) - 1
        fmask = (np.int64(1) << fbits) - 1
        ef = (b >> fbits) & emax
        fr = b & fmask
        e = max(ef, 1)
        sig = fr | ((np.int64(1) << fbits) if ef > 0 else np.int64(0))
        v = sig * _pow2(e - bias - fbits)
        p = _pow2(e - bias)
        if ef == 0 and fr == 0:
            p = 0.0
        if ef == emax:
            if finite:
                if fr == fmask:
                    v = np.nan
                    p = 1.0
            else:
                v = np.inf if fr == 0 else np.nan
                p = 1.0
        if (b >> (ebits + fbits)) & 1:
            v = -v
        return v, p

    @_jit
    def _tile_kernel(a, b, c, out, u0, u1, lanes, fa, fb, tav, tap, tbv, tbp, grid, block,
                     floor_pow, fp16, cutmask, promote):
        """Units u0..u1 of the floating-point chain on a batch of small tiles: a unit is
        ``lanes`` consecutive tiles, and the vector loops run across them (tile t's element
        (i, j) is lane t).  a (T, M, K), b (T, K, N) bits; fa, fb: (exp bits, fraction bits,
        bias, finite, keep mask) of A's and B's formats; tav, tap, tbv, tbp: float32 value and
        power of every pattern of an 8- or 16-bit format (:func:`tcore.golden.formats.value_table`,
        :func:`tcore.golden.formats.pow2_table`), or empty (TF32: decoded from its fields); c and out
        (T, M, N) bits."""
        T, M, K = a.shape
        N = b.shape[2]
        # float32 holds every factor's value and power exactly (products are formed in float64)
        va = np.empty((M, K, lanes), np.float32)
        pa = np.empty((M, K, lanes), np.float32)
        vb = np.empty((N, K, lanes), np.float32)
        pb = np.empty((N, K, lanes), np.float32)
        cv = np.empty(lanes)
        cp = np.empty(lanes)
        cb = np.empty(lanes, np.int64)
        acc = np.empty(lanes, np.float32)
        big = np.empty(lanes)
        scale = np.empty(lanes)
        inv = np.empty(lanes)
        tot = np.empty(lanes)
        sgrid = (np.int64(grid) + 2046) << 52
        igrid = np.int64(grid) << 52
        chunk = promote if promote > 0 else K
        for u in range(u0, u1):
            t0 = u * lanes
            nt = min(lanes, T - t0)
            # decode the unit's operands, lanes last (B transposed: its column is contiguous)
            for i in range(M):
                for kk in range(K):
                    if tav.size > 0:
                        for tl in range(nt):
                            x = a[t0 + tl, i, kk]
                            va[i, kk, tl] = tav[x]
                            pa[i, kk, tl] = tap[x]
                    else:
                        for tl in range(nt):
                            x, p = _dec(a[t0 + tl, i, kk], fa[0], fa[1], fa[2], fa[3], fa[4])
                            va[i, kk, tl] = x
                            pa[i, kk, tl] = p
            for kk in range(K):
                for j in range(N):
                    if tbv.size > 0:
                        for tl in range(nt):
                            x = b[t0 + tl, kk, j]
                            vb[j, kk, tl] = tbv[x]
                            pb[j, kk, tl] = tbp[x]
                    else:
                        for tl in range(nt):
                            x, p = _dec(b[t0 + tl, kk, j], fb[0], fb[1], fb[2], fb[3], fb[4])
                            vb[j, kk, tl] = x
                            pb[j, kk, tl] = p
            for j in range(N):                   # B's column stays in L1 over the rows
                for i in range(M):
                    if promote > 0:
                        acc[:nt] = 0.0
                    for s0 in range(0, K, chunk):
                        s1 = min(s0 + chunk, K)
                        for tl in range(nt):         # the chain's addend: c, or 0 per chunk
                            bb = np.int64(c[t0 + tl, i, j]) if promote == 0 else np.int64(0)
                            if fp16:
                                x, p = _dec16(bb)
                            else:
                                x, p = _dec32(bb)
                            cv[tl] = x
                            cp[tl] = p
                        for k0 in range(s0, s1, block):
                            k1 = min(k0 + block, s1)
                            for tl in range(nt):
                                big[tl] = max(cp[tl], floor_pow)
                            # four k per pass over the lanes (a max and a sum of exact
                            # integers: the order does not change them)
                            k4 = k0 + (k1 - k0) // 4 * 4
                            for kk in range(k0, k4, 4):
                                p0, q0 = pa[i, kk], pb[j, kk]
                                p1, q1 = pa[i, kk + 1], pb[j, kk + 1]
                                p2, q2 = pa[i, kk + 2], pb[j, kk + 2]
                                p3, q3 = pa[i, kk + 3], pb[j, kk + 3]
                                for tl in range(nt):
                                    m01 = max(np.float64(p0[tl]) * np.float64(q0[tl]),
                                              np.float64(p1[tl]) * np.float64(q1[tl]))
                                    m23 = max(np.float64(p2[tl]) * np.float64(q2[tl]),
                                              np.float64(p3[tl]) * np.float64(q3[tl]))
                                    big[tl] = max(big[tl], max(m01, m23))
                            for kk in range(k4, k1):
                                par = pa[i, kk]
                                pbr = pb[j, kk]
                                for tl in range(nt):
                                    big[tl] = max(big[tl], np.float64(par[tl]) * np.float64(pbr[tl]))
                            for tl in range(nt):
                                # 2**(F - E) and 2**(E - F) from E's bits (exact, no divide)
                                ub = np.float64(big[tl]).view(np.int64)
                                sc = np.int64(sgrid - ub).view(np.float64) if ub > 0 else 1.0
                                inv[tl] = np.int64(ub - igrid).view(np.float64) if ub > 0 else 1.0
                                scale[tl] = sc
                                tot[tl] = np.trunc(cv[tl] * sc)
                            for kk in range(k0, k4, 4):
                                x0, y0 = va[i, kk], vb[j, kk]
                                x1, y1 = va[i, kk + 1], vb[j, kk + 1]
                                x2, y2 = va[i, kk + 2], vb[j, kk + 2]
                                x3, y3 = va[i, kk + 3], vb[j, kk + 3]
                                for tl in range(nt):
                                    sc = scale[tl]
                                    s01 = (np.trunc(np.float64(x0[tl]) * np.float64(y0[tl]) * sc) +
                                           np.trunc(np.float64(x1[tl]) * np.float64(y1[tl]) * sc))
                                    s23 = (np.trunc(np.float64(x2[tl]) * np.float64(y2[tl]) * sc) +
                                           np.trunc(np.float64(x3[tl]) * np.float64(y3[tl]) * sc))
                                    tot[tl] += s01 + s23
                            for kk in range(k4, k1):
                                var = va[i, kk]
                                vbr = vb[j, kk]
                                for tl in range(nt):
                                    tot[tl] += np.trunc(np.float64(var[tl]) * np.float64(vbr[tl])
                                                        * scale[tl])
                            if fp16:
                                for tl in range(nt):
                                    r = _rne16(tot[tl] * inv[tl])
                                    x, p = _dec16(r)
                                    cb[tl] = r
                                    cv[tl] = x
                                    cp[tl] = p
                            else:
                                for tl in range(nt):
                                    r = _rz32(tot[tl] * inv[tl], cutmask)
                                    x, p = _dec32(r)
                                    cb[tl] = r
                                    cv[tl] = x
                                    cp[tl] = p
                        if promote > 0:
                            for tl in range(nt):
                                acc[tl] += np.float32(cv[tl])      # float32: IEEE RNE
                    for tl in range(nt):
                        if promote > 0:
                            f = acc[tl] + np.uint32(c[t0 + tl, i, j]).view(np.float32)
                            r = np.int64(np.float32(f).view(np.uint32))
                            if f != f:
                                r = np.int64(0x7FFFFFFF)
                            out[t0 + tl, i, j] = r
                        else:
                            out[t0 + tl, i, j] = cb[tl]


def _units(shape) -> int:
    t, m = shape[0], shape[1]
    return t * ((m + min(m, ROWS) - 1) // min(m, ROWS))


def _fmt_params(fmt):
    keep = ((1 << fmt.width) - 1) & ~((1 << fmt.ignored) - 1)
    return np.array([fmt.exp_bits, fmt.frac_bits, fmt.bias, int(fmt.finite), keep], np.int64)


_NO_TABLE = np.zeros(0, np.float32)


@lru_cache(maxsize=None)
def _tables(fmt):
    """float32 value and power tables of an 8- or 16-bit format (exact: every value and power
    of these formats is a float32); empty arrays for TF32."""
    if fmt.width > 16:
        return _NO_TABLE, _NO_TABLE
    return value_table(fmt).astype(np.float32), pow2_table(fmt).astype(np.float32)


#: Bytes of decoded operands a unit of tiles keeps (lanes are chosen to fit it).
_TILE_BYTES = 1 << 19


def tiles_mode(shape_a, shape_b) -> bool:
    """Whether the batch is many small tiles (vector loops across tiles) rather than wide
    products (vector loops across output columns)."""
    return shape_a[0] >= 8 and shape_b[-1] < 64


def run_tiles(a, b, c, a_fmt, b_fmt, *, grid, block, floor, fp16, cut, promote, workers):
    """The floating-point chain on a batch of small tiles: a (T, M, K), b (T, K, N) bits in
    ``a_fmt`` and ``b_fmt`` (:class:`tcore.golden.formats.Format`), c (T, M, N) output bits."""
    a, b, c = (np.ascontiguousarray(x) for x in (a, b, c))
    t, m, k = a.shape
    n = b.shape[2]
    out = np.empty(c.shape, c.dtype)
    cutmask = 0xFFFFFFFF if cut is None else (0xFFFFFFFF & ~((1 << (23 - cut)) - 1))
    floor_pow = 0.0 if floor is None else 2.0 ** floor
    lanes = int(max(8, min(64, _TILE_BYTES // (8 * k * (m + n)))))
    units = (t + lanes - 1) // lanes
    fa, fb = _fmt_params(a_fmt), _fmt_params(b_fmt)
    (tav, tap), (tbv, tbp) = _tables(a_fmt), _tables(b_fmt)

    def part(lo, hi):
        _tile_kernel(a, b, c, out, lo, hi, lanes, fa, fb, tav, tap, tbv, tbp, int(grid),
                     int(block), floor_pow, bool(fp16), cutmask, int(promote or 0))

    _map(part, _parts(units, workers))
    return out


def run_fp(va, pa, vb, pb, c, *, grid, block, floor, fp16, cut, promote, workers):
    """The floating-point chain on (T, M, K) x (T, K, N) float64 values and powers; c bits
    (T, M, N), uint32 or uint16 (``fp16``).  Returns the output bits, the dtype of c."""
    va, pa, vb, pb, c = (np.ascontiguousarray(x) for x in (va, pa, vb, pb, c))
    out = np.empty(c.shape, c.dtype)
    cutmask = 0xFFFFFFFF if cut is None else (0xFFFFFFFF & ~((1 << (23 - cut)) - 1))
    floor_pow = 0.0 if floor is None else 2.0 ** floor

    def part(lo, hi):
        _fp_kernel(va, pa, vb, pb, c, out, lo, hi, int(grid), int(block), floor_pow, bool(fp16),
                   cutmask, int(promote or 0))

    _map(part, _parts(_units(c.shape), workers))
    return out
