"""The GEMM top's cocotb driver (no tests of its own): reset, preload A and B through the
memory hook, launch with a ``GemmConfig`` packed from the RTL's layout, wait for ``done``
within a clock budget, read D once.  Used by ``tcore.tb.gemm_bench`` and ``tcore.tb.fp4_bench``."""

from __future__ import annotations

import numpy as np
from cocotb.triggers import RisingEdge, Timer

from tcore.tb import memh
from tcore.host.handover import handover
from tcore.host.images import cfg_word, clock_budget, gemm_layout, sparse_layout
from tcore.tb.common import CLOCK_NS, start
from tcore.numerics.formats import dtype_of

__all__ = ["CLOCK_NS", "GemmRunner", "random_operands"]

class GemmRunner:
    def __init__(self, dut):
        self.dut = dut

    async def start(self):
        d = self.dut
        # The clock runs in the simulator interface: no Python on the RTL's clock edges.
        await start(d, zero=("start", "host_we"), gpi=True)

    async def peek(self, base, nwords) -> np.ndarray:
        """Read words base.. at once through the memory dump hook (``tcore.tb.memh``)."""
        return await memh.dump(self.dut, base, nwords)

    async def preload(self, a, b, acc_f16):
        """Put A and B into the memory at once through the load hook (``tcore.tb.memh``); the
        design must be idle."""
        a_base, b_base = 0, a.nbytes // 16
        await memh.load(self.dut, a_base, np.concatenate([
            np.ascontiguousarray(a).view(np.uint8).reshape(-1),
            np.ascontiguousarray(b).view(np.uint8).reshape(-1)]))
        await RisingEdge(self.dut.clk)

    @staticmethod
    def shape(a, b, fields):
        """(M, N, K) of A and B as the memory holds them (B is N x K with ``b_cols``; a
        ``sparse`` A holds the stored values, K/2 a row)."""
        m, k = a.shape
        return m, (b.shape[0] if fields.get("b_cols") else b.shape[1]), k * (2 if fields.get("sparse") else 1)

    @staticmethod
    def layout(m, n, k, fields, esize):
        """``(a_base, e_base, b_base, d_base, end)`` of the job (``e_base`` 0 but sparse)."""
        if fields.get("sparse"):
            return sparse_layout(m, n, k, fields["acc_f16"])
        a_base, b_base, d_base, end = gemm_layout(m, n, k, fields["acc_f16"], esize)
        return a_base, 0, b_base, d_base, end

    async def launch(self, a, b, *, bf16=False, acc_f16=False, fields=None, kstep=16):
        """Set cfg for A (M x K) and B (K x N, or N x K with ``b_cols``) at the standard layout
        and pulse start.  ``fields`` (:func:`tcore.host.images.gemm_fields`) sets the format."""
        d = self.dut
        fields = fields or {"kind": int(bf16), "acc_f16": acc_f16}
        m, n, k = self.shape(a, b, fields)
        a_base, e_base, b_base, d_base, end = self.layout(m, n, k, fields, a.itemsize)
        d.cfg.value = cfg_word(tiles_m=m // 16, tiles_n=n // 16, steps=k // kstep, a_base=a_base,
                               b_base=b_base, d_base=d_base, e_base=e_base, **fields)
        await RisingEdge(d.clk)
        d.start.value = 1
        await RisingEdge(d.clk)
        d.start.value = 0

    async def run(self, a, b, *, bf16=False, acc_f16=False, fields=None, kstep=16, progress=None,
                  chunk=1024, preloaded=False, budget=None, extra=0):
        """Run a GEMM and return (D, cycles, beats); fail if ``done`` has not risen within
        ``budget`` clocks (default :func:`clock_budget`, ``extra`` added)."""
        d = self.dut
        fields = fields or {"kind": int(bf16), "acc_f16": acc_f16}
        acc_f16 = fields["acc_f16"]
        m, n, k = self.shape(a, b, fields)
        _, _, _, d_base, end = self.layout(m, n, k, fields, a.itemsize)
        h = handover()
        if budget is None:
            # Clocks scale with K / kstep steps of 64 beats, 2 passes a beat for 8-bit kinds,
            # each pass the build's clocks (Build.beat_clocks).
            k_clocks = (k * 16 // kstep * (2 if a.itemsize == 1 or fields.get("sparse") else 1)
                        * h.build.beat_clocks())
            budget = clock_budget(m, n, k_clocks, h.param("warps"), extra, h.option("clock_budget"))
        if not preloaded:
            await self.preload(a, b, acc_f16)
        await self.launch(a, b, fields=fields, kstep=kstep)
        total = (m // 16) * (n // 16)
        waited = 0
        while True:
            # A timer, not ClockCycles: no Python runs on the clock edges in between.
            step = max(1, min(chunk, budget - waited))
            await Timer(step * CLOCK_NS, unit="ns")
            waited += step
            if progress:
                with open(progress, "w") as f:
                    f.write(f"{d.tiles_done.value.to_unsigned()} {total} {d.cycles.value.to_unsigned()}\n")
            if not d.done.value.is_resolvable:
                raise AssertionError(f"X or Z on done {waited} clocks after start: {d.done.value}")
            if d.done.value == 1:
                break
            if waited >= budget:
                raise AssertionError(
                    f"done did not rise within {budget} clocks of start ({m}x{n}x{k} GEMM, "
                    f"{d.tiles_done.value} of {total} tiles stored, busy={d.busy.value})")
        out = (await self.peek(d_base, end - d_base)).view(dtype_of("fp16" if acc_f16 else "fp32")).reshape(m, n)
        return out, d.cycles.value.to_unsigned(), d.beats.value.to_unsigned()


def random_operands(rng, m, n, k, fmt):
    """Random A and B bits of ``fmt`` (:meth:`tcore.numerics.Op.random_operands`)."""
    from tcore.numerics import Op
    return Op(fmt).random_operands(m, n, k, rng)
