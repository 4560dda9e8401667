"""Parameter sets of the tensor-core arithmetic for each GPU generation.

The table itself lives in :mod:`numerics` (outside ``golden/``, so that the RTL can read the same
parameters without importing the golden model); this module re-exports it for the golden model.
"""

from tcore.numerics import AMPERE, ARCHS, HOPPER, KINDS, VOLTA, Arch, Step, get_arch

__all__ = ["Arch", "Step", "KINDS", "VOLTA", "AMPERE", "HOPPER", "ARCHS", "get_arch"]
