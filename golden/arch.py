"""Parameter sets of the tensor-core arithmetic for each GPU generation.

Sources: ``docs/numerics.md`` (Hopper measured on an H200); Fasi, Higham, Mikaitis and
Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ Comput. Sci. 7:e330 (2021) for
Volta; Khattak and Mikaitis, "Accurate Models of NVIDIA Tensor Cores" (arXiv 2512.07004, 2025)
for Volta, Ampere/Ada and Hopper, including the FP16-output floors on E.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Arch", "VOLTA", "AMPERE", "HOPPER", "ARCHS", "get_arch"]


@dataclass(frozen=True)
class Arch:
    """One generation's block fused dot-add.

    Parameters
    ----------
    name : str
        ``"volta"``, ``"ampere"`` or ``"hopper"``.
    block : int
        Block width n: how many products one step fuses.  A longer K is cut into steps of n,
        the rounded output of each step being the addend of the next.
    grid : int
        F: every term is truncated toward zero to a multiple of ``2**(E - F)``.
    f16_floor : int
        In FP16-output mode E is at least this.
    bf16 : bool
        Whether the generation has a BF16 path.
    """

    name: str
    block: int
    grid: int
    f16_floor: int
    bf16: bool = True

    def __post_init__(self):
        if self.block < 1:
            raise ValueError(f"Block width must be at least 1, not {self.block!r}")


VOLTA = Arch("volta", block=4, grid=23, f16_floor=-19, bf16=False)
AMPERE = Arch("ampere", block=8, grid=24, f16_floor=-20)
HOPPER = Arch("hopper", block=16, grid=25, f16_floor=-21)
ARCHS = {a.name: a for a in (VOLTA, AMPERE, HOPPER)}


def get_arch(arch) -> Arch:
    """Return the :class:`Arch` named by ``arch`` (a name or an Arch)."""
    if isinstance(arch, Arch):
        return arch
    try:
        return ARCHS[arch]
    except KeyError:
        raise ValueError(f"Architecture must be one of {sorted(ARCHS)}, not {arch!r}") from None
