"""The tensor-core arithmetic as data, read by the golden model (``golden/``) and the RTL
(``rtl/``) alike, so that the RTL never imports the golden model.

* :mod:`tcore.numerics.arch`: one MMA step's parameters per generation and input kind
  (:class:`Arch`, :data:`HOPPER`; the table of ``docs/numerics.md``);
* :mod:`tcore.numerics.formats`: the element formats as one table (kind, width, K steps, pairings);
* :mod:`tcore.numerics.op`: :class:`Op`, one operation on those formats (what to compute).

It imports nothing of the project.
"""

from .arch import AMPERE, ARCHS, HOPPER, KINDS, VOLTA, Arch, Step, get_arch
from .op import Op, UnsupportedOp

__all__ = ["KINDS", "Step", "Arch", "VOLTA", "AMPERE", "HOPPER", "ARCHS", "get_arch", "Op",
           "UnsupportedOp"]
