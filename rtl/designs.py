"""The top-level designs, and how each is built (:class:`Build`).

A :class:`Build` is one top with the constructor arguments that differ from its defaults: the
core's multipliers (``lanes``), the DSP flavour, the 2:4 sparse select, the skid register, the
warps, the memory words, the bus width.  It is what ``tcore verilog`` writes, ``tcore synth``
places and the simulators build, and it answers what the layers above ask of a design: whether
it computes an :class:`tcore.numerics.Op` (:meth:`Build.supports`), how many clocks a beat takes
(:meth:`Build.beat_clocks`), and the name of its build folder (:attr:`Build.tag`).  Named
presets (:data:`PRESETS`) are the builds the project uses: ``lint`` (what ``make lint``, the
benches and ``tcore verilog`` build), ``ecp5-85f`` (what ``tcore synth`` places) and
``ecp5-25f`` (the 16-lane dense core without its skid register, for the 25F parts).
"""

from dataclasses import dataclass
from functools import lru_cache

from amaranth.back import verilog
from amaranth.hdl import Shape
from amaranth.lib import data

__all__ = ["DESIGNS", "Build", "PRESETS", "preset", "LINT_PARAMS", "SYNTH_PARAMS", "MAX_WARPS",
           "make", "parameters", "to_verilog", "port_header", "bench_memory"]

from .sizes import LANES, MAX_WARPS


#: Each design: the module and top-level class, and the constructor arguments its build fixes.
_CLASSES = {"mma4": ("mma4", "MMA4", {}), "mma4play": ("player", "BeatPlayer", {}),
            "fragments": ("fragments", "FragmentBank", {}),
            "wmma": ("wmma", "WarpTop", {}),
            "gemm": ("gemm", "GemmTop", {}), "fp4dec": ("nvfp4", "Fp4Decoder", {"registered": True}),
            "fp4gemm": ("nvfp4", "Fp4GemmTop", {}), "axilregs": ("axil", "AxiLiteRegsTop", {}),
            "soc": ("soc", "GemmSoc", {}), "uart": ("uart", "Uart", {}),
            "axiram": ("board", "AxiRam", {})}


def _class(name: str):
    import importlib
    if name not in _CLASSES:
        raise ValueError(f"Design must be one of {sorted(_CLASSES)}, not {name!r}")
    module, cls, fixed = _CLASSES[name]
    return getattr(importlib.import_module(f"{__package__}.{module}"), cls), fixed


def _factory(name: str):
    def build(**params):
        cls, fixed = _class(name)
        return cls(**fixed, **params)
    return build


DESIGNS = {name: _factory(name) for name in _CLASSES}


def parameters(name: str) -> dict:
    """The build parameters a design takes, with their defaults (its constructor's integer
    keywords, less what its build fixes)."""
    return {k: v for k, v in _defaults(name).items() if type(v) is int}


def bench_memory(name: str) -> str:
    """Where a design's working memory is, for the simulation benches' load and dump hooks:
    the class's ``BENCH_MEMORY`` (instance names from the top, then the memory's), by default
    ``mem`` of the top module."""
    cls, _ = _class(name)
    return getattr(cls, "BENCH_MEMORY", "mem")


def make(name: str, **params):
    cls, fixed = _class(name)
    return cls(**fixed, **params)


@lru_cache(maxsize=None)
def _defaults(name: str) -> dict:
    """Every keyword a design's constructor takes, with its default (what its build fixes
    left out).  Cached: read it, never change it."""
    import inspect
    cls, fixed = _class(name)
    return {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()
            if k != "self" and k not in fixed and p.default is not inspect.Parameter.empty
            and p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)}


#: The designs whose datapath computes Ops (``tcore.numerics.Op``), and those of them with the
#: core's 2:4 sparse path.
_COMPUTES = ("mma4", "mma4play", "wmma", "gemm", "soc")
_SPARSE = ("mma4", "mma4play", "gemm")


@dataclass(frozen=True, init=False)
class Build:
    """How one top is built: the design's name and the constructor arguments that differ from
    its defaults (a default given is dropped, so two Builds of the same design are equal exactly
    when they elaborate the same RTL).

    ``Build("gemm", warps=2, lanes=16)``; a field the design does not take is a ValueError
    naming those it does.  Every field reads as an attribute (``build.lanes``), its default
    where not given.
    """
    design: str
    fields: tuple

    def __init__(self, design: str, **params):
        defaults = _defaults(design)
        unknown = sorted(set(params) - set(defaults))
        if unknown:
            raise ValueError(f"design {design} has no build field {unknown[0]!r} (it has "
                             f"{', '.join(sorted(defaults)) or 'none'})")
        if "warps" in params and not 1 <= params["warps"] <= MAX_WARPS:
            raise ValueError(f"warps must be 1 to {MAX_WARPS}, not {params['warps']}")
        if "lanes" in params and design in _COMPUTES and params["lanes"] not in LANES:
            raise ValueError(f"lanes must be one of {', '.join(map(str, LANES))}, not "
                             f"{params['lanes']}")
        object.__setattr__(self, "design", design)
        object.__setattr__(self, "fields", tuple(sorted(
            (k, v) for k, v in params.items() if v != defaults[k])))

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        defaults = _defaults(self.design)
        if name not in defaults:
            raise AttributeError(f"design {self.design} has no build field {name!r}")
        return dict(self.fields).get(name, defaults[name])

    @property
    def params(self) -> dict:
        """The constructor arguments that differ from the defaults."""
        return dict(self.fields)

    def replace(self, **changes) -> "Build":
        """This build with some fields changed."""
        return Build(self.design, **{**self.params, **changes})

    @property
    def tag(self) -> str:
        """The build's name: the design, then each field that differs from its default
        (``gemm-lanes16-warps2``): build folders, Verilog files and labels take it."""
        return self.design + "".join(f"-{k}{v}" for k, v in self.fields)

    def make(self):
        """The elaboratable top."""
        return make(self.design, **self.params)

    def verilog(self, header: bool = False) -> str:
        """Reproducible Verilog of this build (:func:`to_verilog`)."""
        return to_verilog(self.design, header=header, **self.params)

    def refusal(self, op) -> str | None:
        """Why this build does not compute ``op`` (a :class:`tcore.numerics.Op`), or None."""
        if self.design not in _COMPUTES:
            return f"the {self.design} design computes no MMA"
        if op.promote is not None:
            return ("cuBLASLt's FP32 promotion is the library's loop around the tensor core, not "
                    "a tensor-core operation: the RTL has no such mode")
        if op.sparse and self.design not in _SPARSE:
            return f"the {self.design} design has no 2:4 sparse path"
        if op.sparse and not self.sparse:
            return f"this {self.design} build has no 2:4 sparse path (sparse=False)"
        arch = self.arch if self.design == "mma4" else "hopper"
        from tcore.numerics import UnsupportedOp
        try:
            op.on(arch)
        except UnsupportedOp as e:
            return str(e)
        if arch != "hopper" and op.kind not in ("fp16", "bf16"):
            return f"the {arch} core is modelled for FP16 and BF16 only"
        return None

    def supports(self, op) -> bool:
        """Whether this build computes ``op`` (:meth:`refusal` says why not)."""
        return self.refusal(op) is None

    def beat_clocks(self, op=None) -> int:
        """Clocks one beat of ``op`` (default: a 16-bit one, a single pass) takes through this
        build's core, without stalls (:meth:`tcore.rtl.mma4.MMA4.beat_clocks`)."""
        from .formats import InputKind
        from .mma4 import MMA4
        kind = InputKind.FP16 if op is None else InputKind(op.mode_fields["kind"])
        return MMA4.beat_clocks(kind, self.lanes)

    def peak_fma(self, op=None) -> int:
        """Products per clock this build's cores do at most in ``op`` (default: a 16-bit one):
        a beat (4 x 4 x ``op.beat_k``, twice the logical products for a 2:4 sparse A) every
        :meth:`beat_clocks`, in each of its warps."""
        from tcore.numerics import Op
        op = op or Op("fp16")
        warps = self.warps if "warps" in _defaults(self.design) else 1
        return 16 * op.beat_k * (2 if op.sparse else 1) * warps // self.beat_clocks(op)


def _presets() -> dict:
    lint = {"mma4": Build("mma4"), "mma4play": Build("mma4play", depth=2048),
            "fragments": Build("fragments", a_frags=2, b_frags=2, acc_frags=2, load_ports=2),
            "wmma": Build("wmma", mem_words=16384), "gemm": Build("gemm", mem_words=32768),
            "fp4dec": Build("fp4dec", lanes=16), "fp4gemm": Build("fp4gemm", mem_words=32768),
            "axilregs": Build("axilregs"), "soc": Build("soc"),
            "uart": Build("uart", divisor=5, rx_depth=16), "axiram": Build("axiram", words=512)}
    # What tcore synth places: the GEMM tops with a 64 KiB memory (block RAMs hold it once per
    # read port).
    ecp5_85f = {"mma4": Build("mma4", dsp="ecp5"), "gemm": Build("gemm", mem_words=4096),
                "wmma": Build("wmma", mem_words=4096), "fp4dec": Build("fp4dec", lanes=16),
                "fp4gemm": Build("fp4gemm", mem_words=4096), "soc": Build("soc", data_width=128)}
    # The core that fits an ECP5-25F: 16 lanes, no 2:4 select network, no skid register.
    ecp5_25f = {"mma4": Build("mma4", dsp="ecp5", lanes=16, sparse=False, skid=False)}
    return {"lint": lint, "ecp5-85f": ecp5_85f, "ecp5-25f": ecp5_25f}


#: The named builds: preset name -> design -> :class:`Build`.
PRESETS = _presets()


def preset(name: str, design: str) -> Build:
    """The :class:`Build` preset ``name`` has for ``design`` (KeyError naming the choices)."""
    if name not in PRESETS:
        raise KeyError(f"no preset {name!r}; presets: {', '.join(PRESETS)}")
    if design not in PRESETS[name]:
        raise KeyError(f"preset {name} has no {design} build (it has "
                       f"{', '.join(PRESETS[name])})")
    return PRESETS[name][design]


# The presets' constructor arguments, as the flows' tables take them.
LINT_PARAMS = {d: b.params for d, b in PRESETS["lint"].items()}
SYNTH_PARAMS = {d: b.params for d, b in PRESETS["ecp5-85f"].items()}


def _layout_lines(layout, indent: str, base: int = 0, depth: int = 0) -> list:
    """The fields of a ``data`` layout, LSB first, as ``[hi:lo] name`` lines."""
    lines = []
    if isinstance(layout, data.ArrayLayout):
        elem = Shape.cast(layout.elem_shape).width if not isinstance(layout.elem_shape, data.Layout) \
            else data.Layout.cast(layout.elem_shape).size
        lines.append(f"{indent}{layout.length} elements of {elem} bits: element i at "
                     f"[{base} + {elem}*i +: {elem}]")
        return lines
    for name, field in layout:
        hi, lo = base + field.offset + field.width - 1, base + field.offset
        lines.append(f"{indent}[{hi}:{lo}] {name}" if hi != lo else f"{indent}[{lo}] {name}")
        shape = field.shape
        if depth < 2 and isinstance(shape, data.Layout) or (
                depth < 2 and isinstance(shape, type) and issubclass(shape, data.View)):
            lines += _layout_lines(data.Layout.cast(shape), indent + "    ", lo, depth + 1)
    return lines


def port_header(top, name: str, params: dict) -> str:
    """A Verilog comment block that says what the top's ports carry: direction, width and, for
    payloads with a ``data`` layout, the bit fields (LSB first), read from the same layouts the
    RTL uses.  Nested interface ports are named ``<path>__<member>`` in the Verilog."""
    lines = [f"// {name}: generated by tcore (Amaranth) with parameters "
             f"{', '.join(f'{k}={v}' for k, v in sorted(params.items())) or 'the defaults'}.",
             "// Clock clk (rising edge), synchronous active-high reset rst.", "//", "// Ports:"]
    for path, member, _ in top.signature.flatten(top):
        port = "__".join(str(p) for p in path)
        shape = member.shape
        is_layout = isinstance(shape, data.Layout) or (isinstance(shape, type) and issubclass(shape, data.View))
        width = data.Layout.cast(shape).size if is_layout else Shape.cast(shape).width
        lines.append(f"//   {'input ' if member.flow.name == 'In' else 'output'} [{width - 1}:0] {port}"
                     if width > 1 else f"//   {'input ' if member.flow.name == 'In' else 'output'}        {port}")
        if is_layout:
            lines += [f"//       {t}" for t in _layout_lines(data.Layout.cast(shape), "")]
    return "\n".join(lines) + "\n"


def to_verilog(name: str, header: bool = False, **params) -> str:
    """Reproducible Verilog of a design; the top module is named after the design.  With
    ``header``, a comment block describing the ports comes first (:func:`port_header`)."""
    top = make(name, **params)
    text = verilog.convert(top, name=name, emit_src=False)
    return port_header(top, name, params) + text if header else text
