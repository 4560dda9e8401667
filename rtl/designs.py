"""The top-level designs that ``tcore verilog`` writes and the simulators build."""

from amaranth.back import verilog

__all__ = ["DESIGNS", "make", "to_verilog"]


def _mma4(**kw):
    from .mma4 import MMA4
    return MMA4(**kw)


def _fragments(**kw):
    from .fragments import FragmentBank
    return FragmentBank(**kw)


def _wmma(**kw):
    from .wmma import WarpTop
    return WarpTop(**kw)


def _gemm(**kw):
    from .gemm import GemmTop
    return GemmTop(**kw)


def _fp4dec(**kw):
    from .nvfp4 import Fp4Decoder
    return Fp4Decoder(registered=True, **kw)


def _fp4gemm(**kw):
    from .nvfp4 import Fp4GemmTop
    return Fp4GemmTop(**kw)


DESIGNS = {"mma4": _mma4, "fragments": _fragments, "wmma": _wmma, "gemm": _gemm, "fp4dec": _fp4dec, "fp4gemm": _fp4gemm}


def make(name: str, **params):
    try:
        factory = DESIGNS[name]
    except KeyError:
        raise ValueError(f"Design must be one of {sorted(DESIGNS)}, not {name!r}") from None
    return factory(**params)


# The parameters ``tcore verilog`` and ``make lint`` use: what the benches build.
LINT_PARAMS = {"mma4": {}, "fragments": {"a_frags": 2, "b_frags": 2, "acc_frags": 2, "load_ports": 2},
               "wmma": {"mem_words": 16384}, "gemm": {"cores": 1, "mem_words": 32768},
               "fp4dec": {"lanes": 16}, "fp4gemm": {"cores": 1, "mem_words": 32768}}


def to_verilog(name: str, **params) -> str:
    """Reproducible Verilog of a design; the top module is named after the design."""
    top = make(name, **params)
    return verilog.convert(top, name=name, emit_src=False)
