"""A GEMM run as data: :class:`GemmJob` says what to compute and where, :func:`run_job` runs it
(the GEMM top on a simulator, or the golden model), checks D bit for bit against the golden
model and measures its error against the exact product, and returns a :class:`GemmResult`.

Three kinds of job, by ``format``: FP16/BF16 (random operands, or the user's), the Hopper
low-precision inputs of :func:`lowprec_formats` (random), and NVFP4/MXFP4 (random float32
quantised by the golden quantiser, decoded by the FP4 front end).  But for NVFP4/MXFP4 a job
computes one :class:`tcore.numerics.Op` (:attr:`GemmJob.op`).  ``tcore gemm`` builds the job from its
arguments and prints the result.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from tcore.numerics import Op
from tcore.numerics.formats import INPUT_FORMATS

__all__ = ["GemmJob", "GemmResult", "GemmError", "run_job", "FILE_KINDS", "lowprec_formats",
           "format_choices", "FP4_FORMATS", "ACCUMULATORS"]

#: The input kinds whose operands may also be the user's matrices (float16 / bfloat16 arrays).
FILE_KINDS = ("fp16", "bf16")

#: The block-scaled 4-bit formats (``tcore.golden.nvfp4``).
FP4_FORMATS = ("nvfp4", "mxfp4")

#: ``--acc`` names (PTX's, and ``s32sat``): the accumulator format and whether it saturates.
ACCUMULATORS = {"f32": ("fp32", False), "f16": ("fp16", False), "s32": ("s32", False),
                "s32sat": ("s32", True)}


def lowprec_formats() -> dict:
    """The Hopper low-precision inputs of the GEMM top by their ``--format`` names, as (A, B)
    formats: each format of the table beyond :data:`FILE_KINDS` with its own (or default) B,
    and ``A_B`` for each other B it pairs with (``e4m3_e5m2``)."""
    table = [f for f in INPUT_FORMATS.values() if f.kind not in FILE_KINDS]
    return {**{f.name: (f.name, f.b_formats[0]) for f in table},
            **{f"{f.name}_{b}": (f.name, b) for f in table for b in f.b_formats[1:]}}


def format_choices() -> list[str]:
    """``tcore gemm --format``'s choices, read from the format table."""
    return [*(f.name for f in INPUT_FORMATS.values() if f.kind in FILE_KINDS),
            *lowprec_formats(), *FP4_FORMATS]


class GemmError(Exception):
    """The simulator failed, or the run was refused (size, memory, backend): one line."""


@dataclass
class GemmJob:
    """One GEMM D = A·B (+ C) of M x K by K x N."""

    m: int
    n: int
    k: int
    #: fp16, bf16, a :func:`lowprec_formats` key, or one of :data:`FP4_FORMATS`
    format: str = "fp16"
    #: the accumulator: f32, f16, s32 (INT8, wrapped) or s32sat
    acc: str = "f32"
    backend: str = "verilator"
    arch: str = "hopper"
    warps: int = 1
    #: multipliers of each core (64, 32, 16: ``tcore.rtl.mma4.LANES``)
    lanes: int = 64
    seed: int = 1
    #: FP16/BF16 bits of A (M x K) and B (K x N); None: random normal values from ``seed``
    a: Any = None
    b: Any = None
    #: bits of C (M x N, of the accumulator's format; golden backend), or None: C = 0
    c: Any = None
    #: the files A and B came from (reports name them)
    files: tuple[str, str] | None = None
    #: False, or the waveform's name (RTL backends)
    waves: bool | str = False
    #: a progress bar on stderr while a simulator runs
    progress: bool = True
    #: A made 2:4 sparse by the golden pruner (``tcore.golden.sparse.prune_24_bits``) and run as
    #: ``mma.sp`` k32 steps (FP16/BF16)
    sparse: bool = False

    @property
    def op(self) -> Op | None:
        """The :class:`tcore.numerics.Op` computed; None for NVFP4/MXFP4 (decoded to FP16/BF16 by
        the front end, their scales applied to the FP32 result)."""
        if self.format in FP4_FORMATS:
            return None
        a, b = lowprec_formats().get(self.format, (self.format, None))
        acc, sat = ACCUMULATORS[self.acc]
        return Op(a, b, acc, sat, sparse=self.sparse)

    @property
    def build(self):
        """The design the job runs on (:class:`tcore.rtl.designs.Build`): the GEMM top, the
        FP4 top for NVFP4/MXFP4, of ``warps`` warps with cores of ``lanes``; None on the
        golden model."""
        return None if self.backend == "golden" else self._top()

    def _top(self):
        """The GEMM top (the FP4 top for NVFP4/MXFP4) of ``warps`` warps of ``lanes``."""
        from tcore.rtl.designs import preset
        design = "fp4gemm" if self.format in FP4_FORMATS else "gemm"
        return preset("lint", design).replace(warps=self.warps, lanes=self.lanes)

    @property
    def out_fmt(self) -> str:
        """D's format: fp32, fp16 or s32."""
        return ACCUMULATORS[self.acc][0]

    @property
    def peak(self) -> int:
        """Products per clock of the warps (:meth:`tcore.rtl.designs.Build.peak_fma`; NVFP4 and
        MXFP4 run decoded, at the 16-bit rate)."""
        return self._top().peak_fma(self.op)


@dataclass
class GemmResult:
    """What a :class:`GemmJob` gave."""

    job: GemmJob
    #: D's bits (M x N) of ``job.out_fmt``
    d: Any
    #: clocks on the RTL, start to done; None on the golden backend
    cycles: int | None
    #: seconds spent computing D (simulating, or in the golden model)
    sim_s: float
    #: outputs that differ from the golden model
    mismatches: int
    #: max |D - exact| (FP16/BF16 and low precision: the float64 or, for INT8, integer product
    #: of the same inputs), or for NVFP4/MXFP4 the relative Frobenius error against the float64
    #: product of the unquantised inputs
    error: float
    #: the waveform file, where one was asked for
    waves: Path | None = None
    #: NVFP4/MXFP4: clocks of the GEMM proper (between decode and epilogue)
    gemm_cycles: int | None = None
    #: NVFP4/MXFP4: the tensor scales of A and B
    tensor_scales: tuple[float, float] | None = None


def run_job(job: GemmJob, mma: Callable | None = None) -> GemmResult:
    """Run ``job`` through :func:`tcore.sim.run.run`; ``mma`` is the golden model's function
    (default ``tcore.golden.mma``; a dask cluster's with ``functools.partial(
    golden.cluster.cluster_mma, client)``).  GemmError where the simulator fails or the
    run is refused."""
    if job.format in FP4_FORMATS:
        return _run_fp4(job)
    return _run_op(job, mma)


def _simulate(run, *args, **kw):
    """``run(*args, **kw)``, its errors (a refusal, a failed simulation) as GemmError."""
    from tcore.sim.run import RunError
    from tcore.sim.runner import SimError
    try:
        return run(*args, **kw)
    except (RunError, SimError, ValueError) as e:    # ValueError: sizes, memory
        raise GemmError(str(e)) from None


def _max_error(d, out_fmt, exact) -> float:
    """max |D - exact|, NaN where D is NaN everywhere."""
    import numpy as np
    from tcore.golden.formats import to_float
    with np.errstate(invalid="ignore"):
        diff = np.abs(to_float(d, out_fmt) - exact)
    return float(np.nanmax(diff)) if not np.isnan(diff).all() else float("nan")


def _run_op(job: GemmJob, mma) -> GemmResult:
    """A job of one :class:`tcore.numerics.Op`: its operands (random from ``seed``, or the user's;
    a 2:4 sparse A pruned by the golden pruner and compressed), D on the backend, checked
    against the golden model; the error against the float64 (INT8: the exact integer) product
    of the same inputs."""
    import numpy as np
    from tcore.golden.formats import to_float
    from tcore.sim.run import Operands, run

    op = job.op
    a, b, c = job.a, job.b, job.c
    if a is None:
        a, b = op.random_operands(job.m, job.n, job.k, job.seed)
    dense_a = a
    if op.sparse:
        from tcore.golden.sparse import compress
        sp = compress(a, op.a, prune=True)
        operands, dense_a = Operands(sp.values, b, None, sp.meta), sp.to_dense()
    else:
        operands = Operands(a, b, c)
    r = _simulate(run, job.build, op, operands, job.backend, arch=job.arch, mma=mma,
                  waves=job.waves, progress=job.progress)
    want = r.d if job.backend == "golden" else \
        run(None, op, operands, "golden", arch=job.arch, mma=mma).d
    if op.integer:
        exact = dense_a.view(op.a_dtype).astype(np.int64) @ b.view(op.b_dtype).astype(np.int64)
        if c is not None:
            exact = exact + c.view(op.acc_dtype)
        err = float(np.abs(r.d.view(op.acc_dtype).astype(np.int64) - exact).max())
    else:
        exact = to_float(dense_a, op.a) @ to_float(b, op.b)
        if c is not None:
            exact = exact + to_float(c, op.acc)
        err = _max_error(r.d, op.acc, exact)
    return GemmResult(job, r.d, r.cycles, r.sim_s, int((r.d != want).sum()), err,
                      waves=r.waves)


def _run_fp4(job: GemmJob) -> GemmResult:
    """NVFP4/MXFP4: random float32 A and B quantised by the golden quantiser, the block-scaled
    GEMM (the ``fp4gemm`` design, or ``tcore.golden.nvfp4.gemm``); the error is what 4 bits cost
    against the float64 product of the unquantised inputs."""
    import numpy as np
    from tcore.golden import nvfp4
    from tcore.sim.gemm import run_fp4_gemm
    from tcore.sim.operands import fp4_operands

    a, b = fp4_operands(job.m, job.n, job.k, job.seed)
    qa, qbt = nvfp4.quantize(a, job.format), nvfp4.quantize(np.ascontiguousarray(b.T), job.format)
    d, info = _simulate(run_fp4_gemm, job.backend, qa, qbt, build=job.build,
                        waves=job.waves, progress=job.progress)
    want = nvfp4.gemm(qa, qbt)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    got = d.view(np.float32).astype(np.float64)
    rel = float(np.linalg.norm(got - exact) / np.linalg.norm(exact))
    return GemmResult(job, d, info["cycles"], info["sim_s"], int((d != want).sum()), rel,
                      waves=info.get("waves"), gemm_cycles=info.get("gemm_cycles"),
                      tensor_scales=(float(qa.tensor_scale), float(qbt.tensor_scale)))
