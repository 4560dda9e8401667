"""The tensor-core arithmetic of each generation: one MMA step's parameters per input kind.

This is the table of ``docs/numerics.md``.  Hopper's rows were measured on an H200 (FP16/BF16
with ``mma.sync`` and WMMA; FP8 through ``wgmma``; TF32 and INT8 through ``mma.sync`` and
``wgmma``, which agree); Ampere/Ada and Volta are published: Fasi, Higham, Mikaitis and Pranesh,
"Numerical behavior of NVIDIA tensor cores", PeerJ Comput. Sci. 7:e330 (2021) for Volta;
Khattak and Mikaitis, "Accurate Models of NVIDIA Tensor Cores" (arXiv 2512.07004, 2025) for
Volta, Ampere/Ada and Hopper, including the FP16-output floors on E.

It imports nothing of the project, so that the golden model (``golden/``) and the RTL
(``rtl/``) can both read it without the RTL importing the golden model.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["KINDS", "Step", "Arch", "VOLTA", "AMPERE", "HOPPER", "ARCHS", "get_arch"]

#: Input kinds: the element formats an MMA step takes, grouped by their datapath.
KINDS = ("fp16", "bf16", "tf32", "fp8", "int8")


@dataclass(frozen=True)
class Step:
    """How one MMA step fuses its products, for one generation and input kind.

    Parameters
    ----------
    block : int
        Block width n: how many products one step fuses.  A longer K is cut into steps of n
        (a last, shorter step fuses what is left); the rounded output of each step is the
        addend of the next.
    grid : int or None
        F: every term is truncated toward zero to a multiple of ``2**(E - F)``, E being the
        largest nominal exponent of the step.  None: integer kinds, whose sum is exact.
    f16_floor : int or None
        In FP16-output mode E is at least this; None where the kind has no FP16 output or no
        floor can show (FP8: products are multiples of 2**-32, above any grid a floor sets).
    fp32_cut : int or None
        Fraction bits an FP32 result keeps after its round-toward-zero (FP8 on Hopper: 13, so
        the 10 low fraction bits of every result are zero); None keeps all 23.
    """

    block: int
    grid: int | None
    f16_floor: int | None = None
    fp32_cut: int | None = None

    def __post_init__(self):
        if self.block < 1:
            raise ValueError(f"Block width must be at least 1, not {self.block!r}")
        if self.fp32_cut is not None and not 0 <= self.fp32_cut <= 23:
            raise ValueError(f"FP32 cut must be 0..23 fraction bits, not {self.fp32_cut!r}")


@dataclass(frozen=True)
class Arch:
    """One generation's parameters.

    ``block``, ``grid`` and ``f16_floor`` are its FP16 (and BF16) step, the path every generation
    has; ``steps`` holds the other input kinds it is modelled for, as ``{kind: Step}`` (kept as
    sorted pairs so that an Arch stays hashable).  :meth:`step` answers for any kind.

    Parameters
    ----------
    name : str
        ``"volta"``, ``"ampere"`` or ``"hopper"`` (or a name of one's own for an experiment).
    block, grid, f16_floor : int
        The FP16/BF16 step (see :class:`Step`).
    bf16 : bool
        Whether the generation has a BF16 path.
    steps : mapping of str to Step
        The TF32, FP8 and INT8 steps, where modelled.
    """

    name: str
    block: int
    grid: int
    f16_floor: int
    bf16: bool = True
    steps: tuple = ()

    def __post_init__(self):
        if self.block < 1:
            raise ValueError(f"Block width must be at least 1, not {self.block!r}")
        steps = dict(self.steps)
        for kind, step in steps.items():
            if kind not in KINDS[2:]:
                raise ValueError(f"Extra steps are for {', '.join(KINDS[2:])}, not {kind!r}")
            if not isinstance(step, Step):
                raise TypeError(f"steps[{kind!r}] must be a Step, not {type(step).__name__}")
        object.__setattr__(self, "steps", tuple(sorted(steps.items())))

    def has(self, kind: str) -> bool:
        """Whether this generation is modelled for the input kind."""
        return kind == "fp16" or (kind == "bf16" and self.bf16) or kind in dict(self.steps)

    def step(self, kind: str) -> Step:
        """The :class:`Step` of an input kind; ValueError naming what is modelled otherwise."""
        if kind not in KINDS:
            raise ValueError(f"Input kind must be one of {', '.join(KINDS)}, not {kind!r}")
        if kind in ("fp16", "bf16") and self.has(kind):
            return Step(self.block, self.grid, self.f16_floor)
        if kind in dict(self.steps):
            return dict(self.steps)[kind]
        have = ", ".join(k for k in KINDS if self.has(k))
        raise ValueError(f"{self.name} has no {kind.upper()} path modelled (it has: {have})")


VOLTA = Arch("volta", block=4, grid=23, f16_floor=-19, bf16=False)
AMPERE = Arch("ampere", block=8, grid=24, f16_floor=-20)
HOPPER = Arch("hopper", block=16, grid=25, f16_floor=-21, steps={
    "tf32": Step(block=8, grid=25),
    "fp8": Step(block=32, grid=13, fp32_cut=13),
    "int8": Step(block=32, grid=None),
})
ARCHS = {a.name: a for a in (VOLTA, AMPERE, HOPPER)}


def get_arch(arch) -> Arch:
    """Return the :class:`Arch` named by ``arch`` (a name or an Arch)."""
    if isinstance(arch, Arch):
        return arch
    try:
        return ARCHS[arch]
    except (KeyError, TypeError):
        raise ValueError(f"Architecture must be one of {sorted(ARCHS)}, not {arch!r}") from None

