"""Amaranth's own simulator as a backend: no compile, ~100x slower than Verilator.

Runs the same :class:`tcore.host.beats.Job` protocol as the cocotb ``job`` test: beats of each K step
in, D out, D fed back as the next step's C.
"""

from __future__ import annotations

import numpy as np
from amaranth.sim import Simulator

from tcore.host.beats import Job, blocks_to_tiles, unpack_outputs

__all__ = ["run_job"]


def run_job(dut, job: Job, vcd: str | None = None) -> tuple[np.ndarray, int, float]:
    """Run ``job`` through an MMA4 instance; return D tiles, clocks and simulation seconds."""
    import time
    t = job.a.shape[0]
    result = {"c": job.c, "cycles": 0}

    async def bench(ctx):
        ctx.set(dut.o.ready, 1)
        c = job.c
        cycles = 0
        for s in range(len(job.steps)):
            payloads = job.step_payloads(s, c)
            words, i = [], 0
            while len(words) < t * 16:
                if i < len(payloads):
                    ctx.set(dut.i.valid, 1)
                    ctx.set(dut.i.payload.as_value(), payloads[i])
                else:
                    ctx.set(dut.i.valid, 0)
                if ctx.get(dut.o.valid):
                    words.append(ctx.get(dut.o.payload.as_value()))
                if i < len(payloads) and ctx.get(dut.i.ready):
                    i += 1
                await ctx.tick()
                cycles += 1
                if cycles > 100 * (len(payloads) + 100) * len(job.steps):
                    raise RuntimeError("MMA4 produced too few outputs")
            c = blocks_to_tiles(unpack_outputs(words, job.acc_f16), t)
        ctx.set(dut.i.valid, 0)
        result["c"], result["cycles"] = c, cycles

    sim = Simulator(dut)
    sim.add_clock(1e-8)
    sim.add_testbench(bench)
    t0 = time.perf_counter()
    if vcd:
        with sim.write_vcd(vcd):
            sim.run()
    else:
        sim.run()
    return result["c"], result["cycles"], time.perf_counter() - t0
