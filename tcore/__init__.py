"""tcore: an open RTL model of an NVIDIA tensor core whose arithmetic is bit-exact to H200 silicon.

Everything lives in this one namespace:

- ``tcore.numerics``: the format table, the architectures, :class:`tcore.numerics.Op` (what to
  compute);
- ``tcore.golden``: the bit-exact model of every datapath;
- ``tcore.rtl``: the Amaranth designs and :mod:`tcore.rtl.designs` (how a design is built);
- ``tcore.host``: what a host writes into and reads out of the designs;
- ``tcore.tb``: the cocotb testbenches; ``tcore.sim``: the runner, the FPGA flow, the CLI;
- ``tcore.torch`` (the ``torch`` extra): PyTorch's GEMMs on CPU tensors with the bits an H200
  returns (``docs/torch.md``).  It is not imported here, so that ``import tcore`` works without
  PyTorch.

In a source checkout the subpackages are the folders beside this one (``golden/``, ``rtl/``,
...); an installed wheel holds them inside ``tcore/`` (``pyproject.toml`` maps them).
"""

import os as _os

_here = _os.path.dirname(_os.path.abspath(__file__))
_checkout = _os.path.dirname(_here)
# A source checkout: let tcore.golden, tcore.rtl, ... resolve to the folders at the root.
if not _os.path.isdir(_os.path.join(_here, "numerics")) and \
        _os.path.isfile(_os.path.join(_checkout, "numerics", "__init__.py")):
    __path__.append(_checkout)
