"""cocotb bench for the beat player (``rtl/player.py``): the MMA4 core fed from memory.

* ``job``: the batch in the hand-over's ``job`` file (:class:`tcore.host.beats.Job`), D to its
  ``result`` file, as ``tcore.tb.mma4_bench``'s ``job`` but with no Python in the clocks of a run:
  each K step's beats go into the memory in one file (:mod:`tcore.tb.memh`, in runs of whole groups
  that fit), one ``start`` pulse, one wait for ``done``, one dump of the D blocks.  Used by
  ``tcore verify`` and the silicon tests when no stalls are asked for.

The hand-over gives the memory's ``depth`` (a build parameter).
"""

from __future__ import annotations

import time

import cocotb
import numpy as np
from cocotb.triggers import RisingEdge, with_timeout
from cocotb.utils import get_sim_time

from tcore.rtl.player import WORD_BITS
from tcore.tb import memh
from tcore.host.beats import blocks_to_tiles, load_jobs, unpack_outputs
from tcore.host.handover import handover
from tcore.tb.common import CLOCK_NS, start

D_MASK = (1 << 512) - 1


async def _reset(dut):
    await start(dut, zero=("start", "count", "expect"), after=1)


async def play(dut, payloads, groups: int) -> list[int]:
    """One run: ``payloads`` (``groups`` whole groups) through the core; the D words."""
    await memh.load_words(dut, 0, payloads, WORD_BITS)
    dut.count.value = len(payloads)
    dut.expect.value = groups
    dut.start.value = 1
    await RisingEdge(dut.clk)
    dut.start.value = 0
    # Two passes a beat at most (the 8-bit kinds), each the build's pass clocks, the core's
    # latency, slack.
    slices = handover().build.beat_clocks()
    await with_timeout(RisingEdge(dut.done), (3 * slices * len(payloads) + 200) * CLOCK_NS, "ns")
    return [w & D_MASK for w in await memh.dump_words(dut, 0, groups)]


async def run_job(dut, job, depth: int) -> np.ndarray:
    """Every K step of ``job``, each D fed back as the next step's C."""
    t = job.a.shape[0]
    c = job.c
    groups = t * 16
    for s in range(len(job.steps)):
        payloads = job.step_payloads(s, c)
        per_group = len(payloads) // groups
        assert per_group * groups == len(payloads), "a step's beats are not whole groups"
        run = max(1, depth // per_group)           # groups per run of the memory
        words = []
        for g in range(0, groups, run):
            n = min(run, groups - g)
            words += await play(dut, payloads[g * per_group:(g + n) * per_group], n)
        c = blocks_to_tiles(unpack_outputs(words, job.acc_f16), t)
    return c


@cocotb.test()
async def job(dut):
    """The batch in the hand-over's job file, D to its result file."""
    depth = handover().param("depth")
    await _reset(dut)
    out = {}
    for i, j in enumerate(load_jobs(handover().job)):
        t0, c0 = time.perf_counter(), get_sim_time("ns")
        out[f"d{i}"] = await run_job(dut, j, depth)
        out[f"cycles{i}"] = int((get_sim_time("ns") - c0) // CLOCK_NS)
        out[f"sim_s{i}"] = time.perf_counter() - t0
    np.savez(handover().result, **out)
