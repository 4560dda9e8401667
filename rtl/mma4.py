"""MMA4: the pipelined 4x4x4 tensor-core step, D = A·B + C, in every Hopper input kind.

Golden twin: :func:`tcore.golden.mma.mma4`.
"""

from amaranth import *
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from tcore.numerics import ARCHS, HOPPER
from tcore.numerics.formats import INPUT_FORMATS

from .datapath import (ACC_WIDTH, PAIR_BITS, ADDEND_SHIFT, ADDEND_TERM_BITS, E_WIDTH, EXP_BIAS,
                       GRID, Multiplier, RoundPack, add_cin, addend_shift, coarse, dsp_operands,
                       extend, product_term)
from .formats import (FP16, FP32, Fields, FormatSel, InputKind, Mode, Operand, Special, UnpackAddend, format_select,
                      unpack_fields, unpack_finish)
from . import sizes
from .replica import replica

__all__ = ["Beat", "DTile", "MMA4", "BeatEntry", "GroupEntry", "InputKind", "Mode", "KDEPTH",
           "MAX_BEATS", "PASSES", "LANES", "ElementPick"]

MAX_BEATS = 4                   # a group fuses at most 4 beats: one Hopper block of the kind
#: k depth of one beat per kind: a and b hold 256 bits each, A 4 x KDEPTH and B KDEPTH x 4.
KDEPTH = {InputKind(f.code): f.beat_k for f in INPUT_FORMATS.values()}
#: Clocks (passes through the 64 multipliers) a beat takes per kind.
PASSES = {k: max(1, d // 4) for k, d in KDEPTH.items()}
MAX_PASSES = MAX_BEATS * max(PASSES.values())
#: Products per clock a core may be built with (:data:`tcore.rtl.sizes.LANES`): a pass's 64
#: products go through ``lanes`` multipliers in ``64 // lanes`` clocks, a slice of whole output
#: rows each clock.
LANES = sizes.LANES
# The 2:4 metadata of a dense beat (every row's byte 0b11_10_01_00): group 0 keeps rows 0, 1,
# group 1 rows 2, 3, i.e. stored k = logical k (see MMA4._b_of).
DENSE_META = 0xE4E4E4E4
# A group is one Hopper block: 4 beats of the kind are its block width.
for _kind, _name in ((InputKind.FP16, "fp16"), (InputKind.TF32, "tf32"), (InputKind.FP8, "fp8"), (InputKind.INT8, "int8")):
    assert HOPPER.step(_name).block == MAX_BEATS * KDEPTH[_kind], _name
#: INT8 groups have a fixed block exponent: nominal 25, so the accumulator counts units of 1
#: (products, at nominal exponent 20, are shifted right by 5: exact, as their sum is).
E_INT8 = GRID + EXP_BIAS


class Beat(data.Struct):
    """One input beat of the MMA4 stream (1032 bits).

    ``a`` holds A (4 x KD) and ``b`` B (KD x 4) in the elements of the group's kind: KD = 4
    16-bit elements (FP16, BF16), 2 32-bit ones (TF32: FP32 patterns, the 13 low fraction bits
    ignored) or 8 bytes (FP8, INT8) - :data:`KDEPTH`.  Either way a row of A and a column of B
    are 8 bytes: A by rows, B by columns in 16-bit units, as a tensor core's fragments hold
    them (each lane's register holds consecutive k of one row of A or one column of B), so
    the register file feeds every kind with the same reads.

    Members
    -------
    a : 16 x 16 bits
        Row i of A as the 8 bytes of the 16-bit words ``4*i .. 4*i + 3``: A[i][k] is word
        ``4*i + k`` (FP16/BF16), 32-bit word ``2*i + k`` (TF32), byte ``8*i + k`` (FP8, INT8).
    b : 16 x 16 bits
        Column j of B as the 8 bytes of the 16-bit words ``j, 4 + j, 8 + j, 12 + j``: B[k][j]
        is word ``4*k + j`` (FP16/BF16); the low and high halves of words ``8*k + j`` and
        ``8*k + 4 + j`` (TF32); the low (k even) or high byte of word ``4*(k // 2) + j`` (FP8,
        INT8).
    c : 16 x 32 bits
        C[i][j] at index ``4*i + j``: FP32, FP16 in the low half, or S32 (INT8).  Read on a
        group's first beat only.
    last : 1
        Ends a group.  A group is 1 to 4 consecutive beats fused into one block dot-add over
        all their products and C; a group also ends after its fourth beat.  Four beats are
        one Hopper block: K = 16 (FP16, BF16), 8 (TF32), 32 (FP8, INT8).
    mode : Mode
        InputKind, accumulator and variants (:class:`tcore.rtl.formats.Mode`); taken from a group's
        first beat.
    b_hi : 16 x 16 bits
        2:4 sparse beats (``mode.sparse``, FP16/BF16): B's rows 4..7 as ``b`` holds rows 0..3.
    meta : 32
        2:4 sparse beats: byte i holds row i's two groups of 4 logical k as the PTX nibbles
        ``i0 | i1 << 2`` (group 0 low, group 1 high; i0 < i1).

    A 2:4 sparse beat carries logical K = 8 (``mma.sp``): A's 4 stored values per row (stored
    k = 2g + s is the s-th kept value of group g), B's 8 rows, and the metadata; the product
    of stored k of row i takes B's row ``4g + i_s``.  Its group is 4 beats (logical K 32, the
    16 stored products of one ``mma.sp`` step), computed as a dense FP16/BF16 group: pruned k
    take no part.
    """

    a: data.ArrayLayout(16, 16)
    b: data.ArrayLayout(16, 16)
    c: data.ArrayLayout(32, 16)
    last: 1
    mode: Mode
    b_hi: data.ArrayLayout(16, 16)
    meta: 32


DTile = data.ArrayLayout(32, 16)
"""One output: D[i][j] at index ``4*i + j``: FP32 bits, FP16 bits in the low half, or S32."""


class BeatEntry(data.Struct):
    """A pass as the significand FIFO keeps it: 4x4x4 operands unpacked in their group's
    formats, with the biased exponent of each product and addend (0 for a zero term, below
    every real one).  An INT8 group's C is its raw S32 bits: ``c_sig`` the low 24, ``c_pe``
    the high 8."""

    a_sig: data.ArrayLayout(11, 16)
    a_neg: 16
    b_sig: data.ArrayLayout(11, 64)         # product (x = 4i + j, k)'s B at 4x + k
    b_neg: 64
    pe: data.ArrayLayout(E_WIDTH, 64)       # product (x = 4i + j, k) at 4x + k
    c_sig: data.ArrayLayout(24, 16)         # 0 after a group's first beat
    c_neg: 16
    c_pe: data.ArrayLayout(E_WIDTH, 16)


#: The :class:`BeatEntry` fields that hold rows of D (row-major): a slice holds 1/slices of
#: each.
ROW_FIELDS = ("a_sig", "a_neg", "b_sig", "b_neg", "pe", "c_sig", "c_neg", "c_pe")


def slice_entry(slices: int) -> data.StructLayout:
    """What the significand FIFO keeps per slice of a pass in a core of ``64 // slices``
    lanes: :class:`BeatEntry` with its row fields cut to ``1 / slices``."""
    if slices == 1:
        return data.Layout.cast(BeatEntry)
    fields = {}
    for name, field in data.Layout.cast(BeatEntry):
        shape = field.shape
        if name in ROW_FIELDS:
            shape = (data.ArrayLayout(shape.elem_shape, shape.length // slices)
                     if isinstance(shape, data.ArrayLayout) else field.width // slices)
        fields[name] = shape
    return data.StructLayout(fields)


def column_entry(sparse: bool = False) -> data.StructLayout:
    """What the significand FIFO keeps per pass in a 64-lane core: :class:`BeatEntry` with B
    once per element instead of once per product.  Without the 2:4 select B[k][j] is at
    ``4k + j`` (16 elements) and the multipliers of a column share it; with it, B's rows 0..3
    are at ``4k + j`` and the second group's rows (4..7, or a dense beat's rows 2, 3 again) at
    ``16 + 4k + j``, with the beat's metadata, and each product picks its B after the FIFO
    (:meth:`MMA4._b_row`): 416 bits of B instead of 768."""
    fields = {name: field.shape for name, field in data.Layout.cast(BeatEntry)}
    n = 32 if sparse else 16
    fields.update(b_sig=data.ArrayLayout(11, n), b_neg=n)
    if sparse:
        fields["meta"] = 32
    return data.StructLayout(fields)


class GroupEntry(data.Struct):
    """What the exponent lane learns of a whole group: each output's block exponent E (biased,
    FP16 floor applied; fixed for INT8), its special result (:class:`Special`),
    the group's mode and its pass count - 1."""

    e: data.ArrayLayout(E_WIDTH, 16)
    special: data.ArrayLayout(Special, 16)
    mode: Mode
    n: range(MAX_PASSES)


class Ctl(data.Struct):
    """The control that travels with a slice of a pass through the significand pipeline:
    the pass is its group's first / last, the slice is its pass's first (``load``: the pass
    is read out of the FIFO) / last (``end``).  A 64-lane core's pass is one slice."""

    first: 1
    last: 1
    load: 1
    end: 1


class XCtl(data.Struct):
    """The control that travels with a pass through the exponent lane."""

    first: 1
    last: 1
    mode: Mode
    n: range(MAX_PASSES)


class Sel(data.Struct):
    """A pass's selects, decoded one-hot ahead of X0: which bits of the beat its elements are
    (the 16-bit words, TF32's 32-bit ones, the 8-bit kinds' first or second four k) and the
    formats of A and B, so that X1's logic is AND-OR of flip-flops."""

    w16: 1
    w32: 1
    lo8: 1
    hi8: 1
    a: FormatSel
    b: FormatSel


class Flags(data.Struct):
    """A group's output flags, beside its data from L2 to the rounder."""

    f16: 1
    fp8: 1
    int8: 1
    sat: 1
    wide: 1         # FP16 or BF16: the generation's grid applies


def _reg(m, value, name):
    """A datapath register: no reset, no enable, loaded every clock."""
    if isinstance(value, (list, tuple)):
        return [_reg(m, v, f"{name}_{i}") for i, v in enumerate(value)]
    shape = value.shape() if isinstance(value, data.View) else Value.cast(value).shape()
    reg = Signal(shape, name=name, reset_less=True)
    m.d.sync += reg.eq(value)
    return reg


def _valid(m, value, name):
    """A valid bit: reset to 0."""
    reg = Signal(name=name)
    m.d.sync += reg.eq(value)
    return reg


def _step(counter, up, down):
    """``counter + up - down`` as one carry chain: adds 1, 0 or all ones (-1)."""
    w = len(counter)
    return (counter + Cat(up ^ down, (down & ~up).replicate(w - 1)))[:w]


def _max(a, b):
    return Mux(a > b, a, b)


class ElementPick(wiring.Component):
    """X0 -> X1 for one A or B element: its bits picked out of the pass (:class:`Sel`) and its
    format's fields (:func:`tcore.rtl.formats.unpack_fields`) registered at X1.

    It keeps its own X0 copy of the pass's selects, registered beside the raw beat from
    ``sel`` (the selects of the pass entering X0), so that each select register drives one
    element's logic only; synthesis keeps these components apart
    (``tcore.sim.synth.KEEP_HIERARCHY``), else the 32 copies would merge back into one.

    Members
    -------
    sel : In(Sel)
        The selects of the pass entering X0 (``operand`` picks the format, ``"a"`` or ``"b"``).
    w16, w32, lo8, hi8 : In(16), In(32), In(8), In(8)
        The element's candidates from the X0 beat (``w32`` only where ``tf32``).
    alt : In(1)
        X0: the operand is U8 (INT8), from the pass's mode.
    fields : Out(Fields)
        X1.

    Parameters
    ----------
    operand : "a" or "b"
    tf32 : bool
        The element has a TF32 candidate (``w32``).
    only16 : bool
        The element is read in FP16/BF16 beats only (B's rows 4..7 of a 2:4 sparse beat): its
        candidate is ``w16`` whatever the pass, its formats FP16 and BF16, so that synthesis
        keeps none of the other formats' logic.
    """

    def __init__(self, operand: str, tf32: bool, only16: bool = False):
        self._operand, self._tf32, self._only16 = operand, tf32, only16
        ports = {"sel": In(Sel), "w16": In(16), "lo8": In(8), "hi8": In(8), "alt": In(1),
                 "fields": Out(Fields)}
        if tf32:
            ports["w32"] = In(32)
        super().__init__(ports)

    def elaborate(self, platform):
        m = Module()
        sel = _reg(m, self.sel, "x0_sel")
        fmt = getattr(sel, self._operand)
        if self._only16:
            only = Signal(FormatSel)
            m.d.comb += [only.fp16.eq(fmt.fp16), only.bf16.eq(fmt.bf16)]
            m.d.sync += self.fields.eq(unpack_fields(m, Cat(self.w16, C(0, 16)), only, self.alt))
            return m
        out = C(0, 32)
        cands = [(sel.w16, self.w16), (sel.lo8, self.lo8), (sel.hi8, self.hi8)]
        if self._tf32:
            cands.append((sel.w32, self.w32))
        for s, v in cands:
            out = out | Cat(s.replicate(len(v)) & v)
        # A signal, not an expression: unpack_fields reads these bits many times over, and
        # Amaranth would build the AND-OR again for every read.
        bits = Signal(32)
        m.d.comb += bits.eq(out)
        fields = unpack_fields(m, bits, fmt, self.alt)
        m.d.sync += self.fields.eq(fields)
        return m


class MMA4(wiring.Component):
    """Pipelined 4x4x4 MMA core with Hopper-exact block fusion: D = A·B + C in FP16, BF16,
    TF32, FP8 (E4M3, E5M2, mixed) and INT8 (S8, U8), 64 multipliers.

    The core accepts one :class:`Beat` (A 4xKD, B KDx4, C 4x4) per clock, or per two clocks
    for the 8-bit kinds.  Beats are fused in groups (``last`` ends one): in **single-beat
    mode** every beat is its own group and gives one D 4x4; in **fused mode** four
    consecutive beats carry the four k slices of one Hopper block (K = 16 FP16/BF16, 8 TF32,
    32 FP8/INT8), C with the first, and give one D.

    A floating-point group is one block fused dot-add (``docs/numerics.md``): all its products
    and C are truncated on ONE grid 2**(E-25) (FP8: 2**(E-13)), E the largest exponent of the
    group, so no term may be aligned before the whole group has been seen (and a running
    partial sum may not be realigned: truncation does not commute with the sum).  An INT8
    group is the exact sum of its products and C, wrapped to S32 or clamped (``sat``).  The
    core therefore has two lanes:

    * the **exponent lane** takes each *pass* (4x4x4 products: a 16-bit beat is one pass,
      a TF32 beat one pass with two of its four k slots empty, an 8-bit beat two passes) into
      a register as it arrives with its selects decoded one-hot (X0), picks each element's
      format fields (X1, :class:`ElementPick`), unpacks them (X2), writes the significands and the biased product exponents into a significand
      FIFO (block RAM), and takes the maximum over the group (a tree per pass, then a running
      maximum) together with the group's NaN/Inf flags; at the group's last pass it pushes E
      into a group FIFO;
    * the **significand lane** starts a group once its E is known and an output slot is free
      (credits), and sends its passes through once, one per clock: shift amounts, the DSP
      multipliers (which also do the fine part of each product's shift), a 4:1 mux (with the
      FP8 grid's mask), an adder tree with negation through carry-ins, the accumulator, the
      normalise/round unit (which passes an INT8 result through, wrapped or clamped), and an
      output FIFO (block RAM), a skid register, and the register ``o`` is driven from.

    Rates, with ``o.ready`` high and ``lanes`` = 64: 64 FP16/BF16 products per clock, 32 TF32
    (a beat is two k slices: the Hopper ratio), 64 FP8/INT8 (a beat of 128 products takes two
    clocks: Hopper has twice the FP16 rate there; a second set of multipliers would be needed to
    match).  A core of ``lanes`` = 32 or 16 has that many multipliers, adder trees' worth of
    products, accumulators' and rounders' worth of outputs: it sends each pass through them in
    ``64 // lanes`` slices of ``lanes // 16`` rows of D, one slice per clock, and accepts a pass
    every ``64 // lanes`` clocks (:meth:`beat_clocks`); the exponent lane is the same, and the
    significand FIFO keeps a pass as its slices (``64 // lanes`` times deeper, as much
    narrower: the same block RAMs).  Each output's accumulator is then a chain of ``64 // lanes`` registers (a slice's
    running sum comes back round when its next pass does), and the rounders' results are
    gathered into a whole D before the output FIFO.  The bits are the same for every ``lanes``.

    Nothing in the significand lane stalls: a group is started only when the output FIFO has a
    place for its result, so backpressure on ``o`` holds beats in the FIFOs.  ``i.ready``
    comes from registered state only (not from ``i.valid`` or the payload): it falls when 16
    groups wait, and while an accepted 8-bit beat's second pass waits to enter (the beat is
    taken at its first pass and held).  Datapath registers have no reset; valid bits,
    pointers and counters do.

    Latency (:meth:`latency_of`): with no stalls D leaves :attr:`LATENCY` = 26 clocks after the
    cycle its group's last beat was accepted, plus one per further slice of the group: with
    64 lanes +0 single-beat and +3 fused for the 16-bit kinds and TF32, +2 single-beat and +8
    fused for the 8-bit kinds (a group's passes cross the multipliers after its last beat has
    arrived, and an 8-bit beat is accepted at its first pass); ``64 // lanes`` times as many
    slices with fewer lanes.

    Parameters
    ----------
    dsp : "generic" or "ecp5"
        How the 64 multipliers are written (:class:`tcore.rtl.datapath.Multiplier`): ``*`` between
        registers, or ECP5 ``MULT18X18D`` instances with their registers (synthesis).
    arch : "hopper", "ampere" or "volta"
        The generation's FP16/BF16 step (:mod:`numerics`): a group ends after block / 4 beats
        (Ampere 2, Volta 1), terms are truncated on its grid (the low ``25 - grid`` bits of
        each term cleared: Ampere 2**(E-24), Volta 2**(E-23)) and E is floored at its FP16
        floor (-20, -19).  TF32, FP8 and INT8 keep Hopper's rules (the other generations are
        not modelled for them).
    lanes : 64, 32 or 16
        Multipliers (products per clock); a pass takes ``64 // lanes`` clocks.
    sparse : bool
        Build the 2:4 sparse select network (the default).  Without it (a part too small for
        it: the 16-lane core on an ECP5-25F) ``b_hi``, ``meta`` and ``mode.sparse`` are
        ignored and a sparse beat is computed as a dense one: do not send any.  A 64-lane
        core keeps B once per element in its significand FIFO either way
        (:func:`column_entry`), with the select its rows 0..7 and the metadata.
    skid : bool
        Read the output FIFO from registered state only, with a skid register beside ``o``
        (the default: ``o.ready`` into the FIFO's word count was the 64-lane core's routed
        critical path).  Without it (a nearly full part: the skid is 514 flip-flops) ``o``
        is refilled from the RAM in the clock it is taken.  Bits, latency and rates are the
        same.

    Members
    -------
    i : In(stream.Signature(Beat))
    o : Out(stream.Signature(DTile))
    """

    GROUPS = 16                 # group FIFO: groups accepted and not yet started
    BEATS = GROUPS * MAX_PASSES  # significand FIFO (passes)
    # Output FIFO: more than the 16 clocks from a group's start to its result's pop, so that
    # credits never stop a stream with o.ready high; 512, one block-RAM row (yosys would put
    # a 32-deep one in LUT RAM, with a 512-bit read mux).
    OUTPUTS = 512
    # accept -> group FIFO write: X0 the raw pass, X1 the operands' fields, X2 the operands,
    # X3 product exponents, X4..X6 the maximum (the group's running maximum is written from X6).
    EXP_STAGES = 7
    # The significand lane's stages before the accumulator, L1..L8: the FIFO's output register
    # (L1), the shift amounts (L2), the DSP (L3..L5), the product terms (L6: the DSP's output
    # crosses to the fabric into a register of its own), two adder levels (L7, L8).
    LANE_STAGES = 8
    # accept -> o.valid: the exponent lane, one clock to start, the FIFO read (L0), the
    # significand lane, the accumulator, the rounder, the output FIFO (write, read) and o's
    # register.
    LATENCY = EXP_STAGES + 1 + 1 + LANE_STAGES + 1 + RoundPack.STAGES + 3
    assert LANE_STAGES == 2 + Multiplier.LATENCY + 3

    # What the FIFOs hold; a control-only model (formal/) overrides them with tags.
    _beat_layout, _group_layout, _word_layout = BeatEntry, GroupEntry, DTile

    def __init__(self, *, dsp: str = "generic", arch: str = "hopper", lanes: int = 64,
                 sparse: bool = True, skid: bool = True):
        if dsp not in ("generic", "ecp5"):
            raise ValueError(f"dsp must be 'generic' or 'ecp5', not {dsp!r}")
        if arch not in ARCHS:
            raise ValueError(f"arch must be one of {', '.join(ARCHS)}, not {arch!r}")
        if lanes not in LANES:
            raise ValueError(f"lanes must be one of {', '.join(map(str, LANES))}, not {lanes!r}")
        self._dsp, self._lanes, self._sparse, self._skid = dsp, lanes, bool(sparse), bool(skid)
        self._slices = 64 // lanes                        # clocks a pass takes
        self._outs = lanes // 4                           # outputs (D elements) per slice
        if self._slices > 1:    # the FIFO keeps slices (one BeatEntry's worth of rows each)
            self._beat_layout = slice_entry(self._slices)
            self.BEATS = self.GROUPS * MAX_PASSES * self._slices
        # B per element, not per product: a quarter of the B bits in the FIFO and its wires
        # without the 2:4 select, a half with it (a slice of a 16- or 32-lane core reads its
        # own B per product).  A subclass with layouts of its own (formal/) keeps them.
        self._b_cols = self._slices == 1
        if self._b_cols and self._beat_layout is BeatEntry:
            self._beat_layout = column_entry(self._sparse)
        step = ARCHS[arch].step("fp16")
        self._max_beats = step.block // 4                 # beats of a 16-bit group
        self._grid_bits = GRID - step.grid                # low term bits the grid drops
        self._f16_floor = step.f16_floor + EXP_BIAS
        super().__init__({
            "i": In(stream.Signature(Beat)),
            "o": Out(stream.Signature(DTile)),
        })

    @property
    def latency(self):
        return self.LATENCY

    @property
    def lanes(self):
        return self._lanes

    @classmethod
    def beat_clocks(cls, kind: InputKind = InputKind.FP16, lanes: int = 64) -> int:
        """Clocks one beat of ``kind`` takes through a core of ``lanes`` multipliers (no
        stalls): its passes times ``64 // lanes``."""
        if lanes not in LANES:
            raise ValueError(f"lanes must be one of {', '.join(map(str, LANES))}, not {lanes!r}")
        return PASSES[InputKind(kind)] * (64 // lanes)

    @classmethod
    def latency_of(cls, kind: InputKind = InputKind.FP16, beats: int = 1, lanes: int = 64) -> int:
        """Clocks from the acceptance of a group's last beat to its D on ``o`` (no stalls):
        :attr:`LATENCY` plus one per slice of the group after its first, plus, for the 8-bit
        kinds, the slices of the last beat's second pass (a beat is accepted at its first)."""
        if not 1 <= beats <= MAX_BEATS:
            raise ValueError(f"a group has 1 to {MAX_BEATS} beats, not {beats}")
        clocks = cls.beat_clocks(kind, lanes)
        return cls.LATENCY + beats * clocks - 1 + clocks - 64 // lanes

    @staticmethod
    def kdepth(kind) -> int:
        """k slices one beat carries in ``kind`` (:data:`KDEPTH`)."""
        return KDEPTH[InputKind(kind)]

    def elaborate(self, platform):
        m = Module()
        m.submodules.sig_fifo = sig_fifo = memory.Memory(shape=self._beat_layout, depth=self.BEATS,
                                                         init=[])
        m.submodules.grp_fifo = grp_fifo = memory.Memory(shape=self._group_layout,
                                                         depth=self.GROUPS, init=[])
        m.submodules.out_fifo = out_fifo = memory.Memory(shape=self._word_layout,
                                                         depth=self.OUTPUTS, init=[])
        started, pop = Signal(), Signal()
        grp_pushed = self._exponent_lane(m, sig_fifo.write_port(), grp_fifo.write_port(), started)
        launch = self._launcher(m, grp_fifo.read_port(domain="comb"),
                                sig_fifo.read_port(), started, pop, grp_pushed)
        out_pushed = self._significands(m, *launch, out_fifo.write_port())
        self._output(m, out_fifo.read_port(), pop, out_pushed)
        return m

    # ---- exponent lane: control -----------------------------------------------------------
    def _exponent_lane(self, m, sig_wr, grp_wr, started):
        beat = self.i.payload
        widx = Signal(range(MAX_PASSES))        # pass of the group being received
        g_mode = Signal(Mode)                   # the group's mode, from its first beat
        groups = Signal(range(self.GROUPS + 1))  # groups accepted and not yet started
        first = Signal(init=1)                  # the next pass is a group's first
        mode = Signal(Mode)
        m.d.comb += mode.eq(Mux(first, beat.mode, g_mode))

        def decode(md):     # a beat is two passes; a 16-bit kind
            return ((md.kind == InputKind.FP8) | (md.kind == InputKind.INT8),
                    (md.kind == InputKind.FP16) | (md.kind == InputKind.BF16))

        # The group's decode is kept beside its mode, so that only a first pass decodes the
        # payload's.
        g_two, g_wide = Signal(), Signal()
        b_two, b_wide = decode(beat.mode)
        two, wide = Mux(first, b_two, g_two), Mux(first, b_wide, g_wide)
        half = two & widx[0]                    # the beat's second pass
        beat_end = ~two | half                  # this pass ends the beat
        beat_no = Mux(two, widx[1:], widx)      # beats of the group before this one
        # X0, the pass as accepted, raw: the input port feeds flip-flops only.  ``hold``: X0
        # keeps an accepted 8-bit beat for its second pass (``first`` is then low, so the
        # mode is the group's; only the beat's own ``last`` is read back from X0).
        hold = Signal()
        x0 = Signal.like(beat, name="x0_beat", reset_less=True)
        with m.If(~hold):
            m.d.sync += x0.eq(beat)
        # A group of a 16-bit kind ends after the generation's block; the others after 4 beats.
        cap = Mux(wide, self._max_beats - 1, MAX_BEATS - 1)
        last = beat_end & (Mux(hold, x0.last, beat.last) | (beat_no == cap))
        space = ~first | (groups < self.GROUPS)
        # ``i.ready`` comes from registered state only (never from the payload or
        # ``i.valid``: it paced the tops' feeders through the kind's decode, their routed
        # critical path).  An 8-bit beat is therefore accepted at its first pass, and X0 keeps
        # it (``hold``) for its second while the port is not ready.
        if self._slices > 1:    # a pass every `slices` clocks: the significand lane's rate
            gap = Signal(range(self._slices))   # clocks until the next pass may enter
            space &= gap == 0
        take = (self.i.valid | hold) & space    # a pass enters X0
        if self._slices > 1:
            m.d.sync += gap.eq(Mux(take, self._slices - 1, Mux(gap == 0, 0, gap - 1)))
        m.d.comb += self.i.ready.eq(space & ~hold)
        with m.If(take):
            m.d.sync += [widx.eq(Mux(last, 0, widx + 1)), first.eq(last), hold.eq(~beat_end)]
            with m.If(first):
                m.d.sync += [g_mode.eq(beat.mode), g_two.eq(b_two), g_wide.eq(b_wide)]
        m.d.sync += groups.eq(_step(groups, take & first, started))

        # X0's control: the unpackers' selects come from registers, not from the mode mux.
        xc = Signal(XCtl)
        m.d.comb += [xc.first.eq(first), xc.last.eq(last), xc.mode.eq(mode), xc.n.eq(widx)]
        sel = Signal(Sel)
        tf32 = mode.kind == InputKind.TF32
        m.d.comb += [sel.w16.eq(~tf32 & ~two), sel.w32.eq(tf32), sel.lo8.eq(two & ~half),
                     sel.hi8.eq(half), sel.a.eq(format_select(mode.kind, mode.a_alt)),
                     sel.b.eq(format_select(mode.kind, mode.b_alt))]
        ctl, v = _reg(m, xc, "x0_ctl"), _valid(m, take, "x0_valid")
        # X1, X2 (the operands' fields, then the operands: inside _beat_unpack) and X3: the
        # pass as the significand FIFO keeps it (written from this register with 64 lanes;
        # with fewer, from ``x3_held`` (:meth:`_serialize`), and X3 keeps only what the
        # reduce reads).
        ent, aux = self._beat_unpack(m, x0, sel, ctl.first, ctl.mode)
        for s in (1, 2):
            ctl, v = _reg(m, ctl, f"x{s}_ctl"), _valid(m, v, f"x{s}_valid")
        x3, aux3 = _reg(m, ent, "x3_ent"), _reg(m, aux, "x3_aux")
        c_floored = self._floored_c(m, ent, ctl)
        wp = Signal(range(self.BEATS))
        if self._slices > 1:    # from X2 into a register of its own (X3 then keeps only pe)
            self._serialize(m, ent, v, sig_wr, wp)
        ctl, v = _reg(m, ctl, "x3_ctl"), _valid(m, v, "x3_valid")
        if self._slices == 1:
            m.d.comb += [sig_wr.addr.eq(wp), sig_wr.data.eq(x3), sig_wr.en.eq(v)]
            m.d.sync += wp.eq(Mux(v, wp + 1, wp))

        # X4..X6: the pass's reduction; the group's at X6, whose last pass pushes the group.
        x6 = self._beat_reduce(m, x3, aux3, c_floored)
        for s in range(4, self.EXP_STAGES):
            ctl, v = _reg(m, ctl, f"x{s}_ctl"), _valid(m, v, f"x{s}_valid")
        ent = Signal(self._group_layout)
        self._group_reduce(m, ent, x6, v, ctl.last, ctl.mode)
        m.d.comb += [ent.mode.eq(ctl.mode), ent.n.eq(ctl.n)]
        gwp = Signal(range(self.GROUPS))
        m.d.comb += [grp_wr.addr.eq(gwp), grp_wr.data.eq(ent), grp_wr.en.eq(v & ctl.last)]
        m.d.sync += gwp.eq(Mux(v & ctl.last, gwp + 1, gwp))
        return v & ctl.last             # a group entry written

    def _serialize(self, m, ent, v, sig_wr, wp):
        """Write the X2 pass ``ent`` into the significand FIFO as ``slices`` entries on
        consecutive clocks from X3 on (a pass comes every ``slices`` clocks): the pass is
        loaded into a register (``x3_held``, the X3 register of its significands) whose rows
        rotate down a slice a clock, and its first slice is written.  The FIFO is then as
        deep as ``slices`` passes and a ``slices``-th as wide, in the same block RAMs as one
        pass a row would be: block RAMs are 36 bits wide at most, and a pass is ~1,500 bits."""
        rest = Signal(range(self._slices + 1))      # slices of the held pass still to write
        held = Signal(ent.shape(), name="x3_held", reset_less=True)
        m.d.sync += held.eq(Mux(v, ent.as_value(), self._rotated(held)))
        layout = data.Layout.cast(self._beat_layout)
        parts = []                                  # slice 0 of the held pass, slice layout
        for name, field in data.Layout.cast(BeatEntry):
            parts.append(held.as_value()[field.offset:field.offset + layout[name].width])
        en = rest != 0
        m.d.comb += [sig_wr.addr.eq(wp), sig_wr.data.eq(Cat(*parts)), sig_wr.en.eq(en)]
        m.d.sync += [wp.eq(Mux(en, wp + 1, wp)), rest.eq(Mux(v, self._slices, Mux(en, rest - 1, 0)))]

    def _rotated(self, value, fields=ROW_FIELDS):
        """``value`` with its ``fields`` (arrays over rows of D, row-major) rotated down by one
        slice's rows (wiring only)."""
        bits, parts = Value.cast(value), []
        for fname, field in data.Layout.cast(value.shape()):
            f = bits[field.offset:field.offset + field.width]
            if fname in fields:
                step = field.width // self._slices
                f = Cat(f[step:], f[:step])
            parts.append(f)
        return Cat(*parts)

    # ---- exponent lane: data ---------------------------------------------------------------
    def _operand_bits(self, m, beat, sel, mode):
        """X0 -> X1 for the 32 operand elements of this pass, A[i][k] at 4i + k and B[k][j] at
        4k + j (k 0..3 of the pass): each an :class:`ElementPick` of its candidate bits in the
        X0 beat; returns their X1 :class:`tcore.rtl.formats.Fields`."""
        ra, rb = beat.a.as_value(), beat.b.as_value()

        def col_byte(j, c):                     # byte c of B's column j (see Beat)
            return rb[16 * (4 * (c // 2) + j) + 8 * (c % 2):][:8]

        def element(name, operand, alt, w16, w32, lo8, hi8, only16=False):
            e = m.submodules[name] = ElementPick(operand, tf32=w32 is not None, only16=only16)
            m.d.comb += [e.sel.eq(sel), e.w16.eq(w16), e.lo8.eq(lo8), e.hi8.eq(hi8), e.alt.eq(alt)]
            if w32 is not None:
                m.d.comb += e.w32.eq(w32)
            return e.fields

        fa, fb = [], []
        for x in range(16):
            i, k = divmod(x, 4)
            fa.append(element(f"pick_a{x}", "a", mode.a_alt, ra.word_select(x, 16),
                              ra.word_select(2 * i + k, 32) if k < 2 else None,
                              ra.word_select(8 * i + k, 8), ra.word_select(8 * i + k + 4, 8)))
            kb, j = divmod(x, 4)                # B: rows 4..7 on an 8-bit beat's second pass
            v32 = Cat(*(col_byte(j, 4 * kb + n) for n in range(4))) if kb < 2 else None
            fb.append(element(f"pick_b{x}", "b", mode.b_alt, rb.word_select(x, 16), v32,
                              col_byte(j, kb), col_byte(j, 4 + kb)))
        # 2:4 sparse beats (16-bit kinds): B's rows 4..7, word 4k + j of b_hi.
        fh = [element(f"pick_bh{x}", "b", mode.b_alt, beat.b_hi[x], None, C(0, 8), C(0, 8),
                      only16=True)
              for x in range(16)] if self._sparse else None
        return fa, fb, fh

    def _beat_unpack(self, m, beat, sel, first, mode):
        """X1, X2 and the combinational part of X3: each A/B element's format fields picked
        out (X1), then unpacked (X2); each addend carried raw through X1 and unpacked into X2
        as the FIFO keeps it; then the :class:`BeatEntry` with the product exponents, and per product
        and addend the NaN / +Inf / -Inf flags."""
        fa, fb, fh = self._operand_bits(m, beat, sel, mode)
        int8 = mode.kind == InputKind.INT8
        ua = _reg(m, [unpack_finish(m, f) for f in fa], "x2_a")
        vb = [unpack_finish(m, f) for f in fb]
        ub = _reg(m, vb, "x2_b")
        if self._sparse:
            # The dense pick folds into the sparse one: a dense beat reads B's rows 2, 3 through
            # the second group's registers and names rows 0..3 in metadata of its own, so that
            # each product's B is one 4-way pick and no 2-way dense/sparse mux follows it.
            x1_sparse = _reg(m, mode.sparse, "x1_sparse")
            vh = [unpack_finish(m, f) for f in fh]
            uh = _reg(m, [vh[x] if x < 8 else Mux(x1_sparse, vh[x], vb[x]) for x in range(16)],
                      "x2_bh")
            meta_d = Mux(x1_sparse, _reg(m, beat.meta, "x1_meta"), DENSE_META)
            if self._b_cols:    # 64 lanes: one register, also kept in the FIFO for the L1 pick
                meta = _reg(m, meta_d, "x2_meta")
                rows = [[meta[8 * i:8 * i + 8]] * 4 for i in range(4)]
            else:
                # Each output's products read its row's metadata from a copy of their own: with
                # fewer lanes the pick feeds the FIFO register (x3_held) in the same clock, and
                # one register's fan-out to all 64 picks was the routed critical path.
                rows = [[replica(m, meta_d[8 * i:8 * i + 8], f"x2_meta{i}{j}") for j in range(4)]
                        for i in range(4)]
        ent = Signal(self._beat_layout if self._b_cols else BeatEntry)
        if self._b_cols:
            for c, u in enumerate(ub + (uh if self._sparse else [])):
                u = data.View(Operand, u)       # uh's registers are plain (muxed) bits
                m.d.comb += [ent.b_sig[c].eq(u.sig), ent.b_neg[c].eq(u.sign)]
            if self._sparse:
                m.d.comb += ent.meta.eq(meta)
        # The addends cross X1 raw and are unpacked into X2, as the FIFO keeps them.
        c1, first, f16 = _reg(m, beat.c, "x1_craw"), _reg(m, first, "x1_first"), _reg(m, mode.acc_f16, "x1_f16")
        int8 = _reg(m, int8, "x1_int8")
        c_cls = []
        for x in range(16):
            c, ec = self._unpack_addend(m, f"uc{x}", c1[x], f16)
            cf = first & ~int8                  # C is read on a group's first pass; S32 has no specials
            raw = c1[x]
            c_cls.append(_reg(m, Cat(cf & c.nan, cf & c.inf & ~c.sign, cf & c.inf & c.sign),
                              f"x2_ccls{x}"))
            c2 = _reg(m, Cat(Mux(first, Mux(int8, raw[:24], c.sig), 0), c.sign & ~int8,
                             Mux(first, Mux(int8, raw[24:], Mux(c.zero, 0, ec)), 0)),
                      f"x2_c{x}")                # sig, neg, pe
            m.d.comb += [ent.c_sig[x].eq(c2[:24]), ent.c_neg[x].eq(c2[24]),
                         ent.c_pe[x].eq(c2[25:])]
        cls = []                                # per output: 4 products then C, 3 bits each
        for x in range(16):
            i, j = divmod(x, 4)
            for k in range(4):
                a = ua[4 * i + k]
                b = self._b_of(m, ub, uh, rows[i][j], j, k) if self._sparse else ub[4 * k + j]
                if not self._b_cols:
                    m.d.comb += [ent.b_sig[4 * x + k].eq(b.sig), ent.b_neg[4 * x + k].eq(b.sign)]
                m.d.comb += ent.pe[4 * x + k].eq(Mux(a.zero | b.zero, 0, a.bexp + b.bexp))
                nan, inf = Signal(), Signal()   # signals: each is read more than once
                m.d.comb += [nan.eq(a.nan | b.nan | (a.inf & b.zero) | (b.inf & a.zero)),
                             inf.eq((a.inf | b.inf) & ~nan)]
                neg = a.sign ^ b.sign
                cls += [nan, inf & ~neg, inf & neg]
            cls += [c_cls[x][0], c_cls[x][1], c_cls[x][2]]
            m.d.comb += [ent.a_sig[x].eq(ua[x].sig), ent.a_neg[x].eq(ua[x].sign)]
        return ent, Cat(*cls)

    @staticmethod
    def _b_row(meta_row, j, k, lo, hi):
        """The B element of product (i, j, k): the B row that row i's metadata byte
        ``meta_row`` names for its stored k (group g = k // 2, its s = k % 2-th index: row
        4g + i_s, of ``lo`` for g = 0, of ``hi`` for g = 1; each holds its rows' element of
        column j at ``4r + j``).  A dense beat's metadata is :data:`DENSE_META` (row k: rows
        0, 1 of ``lo``, rows 2, 3 of ``hi``, which then holds B's rows 2, 3)."""
        g, s = divmod(k, 2)
        idx = meta_row[4 * g + 2 * s:][:2]
        rows = [Value.cast((hi if g else lo)[4 * r + j]) for r in range(4)]
        return Mux(idx[1], Mux(idx[0], rows[3], rows[2]), Mux(idx[0], rows[1], rows[0]))

    def _b_of(self, m, ub, uh, meta_row, j, k):
        """X2: the B operand of product (i, j, k) (:meth:`_b_row`; ``meta_row`` is row i's
        metadata byte), for its exponent and flags
        (and, with slices, its significand)."""
        # A signal: the caller reads each of its fields, and a view of an expression would
        # build the mux again for each read.
        pick = Signal(Operand)
        m.d.comb += pick.eq(self._b_row(meta_row, j, k, ub, uh))
        return pick

    def _floored_c(self, m, ent, ctl):
        """X3: each C's exponent with the FP16 floor of a group's first pass, registered
        beside the entry (which keeps C's own exponent, for the alignment).  The select comes
        from X2's control, so that no gate sits between a register and X4's sixteen
        compares."""
        floor = Mux(ctl.first & ctl.mode.acc_f16, self._f16_floor, 0)
        return _reg(m, [_max(ent.c_pe[x], floor) for x in range(16)], "x3_cfl")

    def _beat_reduce(self, m, ent, cls, c_floored):
        """X4..X6: per output, the maximum over its 4 products and C (``c_floored``: C's
        exponent with the FP16 floor on a group's first pass, as X3 registered it), two
        compares per level, and the specials OR-ed; returns the X6 registers
        ``[(e, nan/+inf/-inf)]``."""
        w = E_WIDTH
        pe = ent.pe
        x4 = _reg(m, [Cat(_max(pe[4 * x], pe[4 * x + 1]), _max(pe[4 * x + 2], pe[4 * x + 3]),
                          c_floored[x]) for x in range(16)], "x4_e")
        x4_sp = _reg(m, [Cat(*(cls[15 * x + 3 * t + f] for t in range(5))).any()
                         for x in range(16) for f in range(3)], "x4_sp")
        x5 = _reg(m, [Cat(_max(x4[x][0:w], x4[x][w:2 * w]), x4[x][2 * w:3 * w]) for x in range(16)],
                  "x5_e")
        x5_sp = _reg(m, [Cat(*x4_sp[3 * x:3 * x + 3]) for x in range(16)], "x5_sp")
        x6 = _reg(m, [_max(x5[x][0:w], x5[x][w:2 * w]) for x in range(16)], "x6_e")
        return list(zip(x6, _reg(m, x5_sp, "x6_sp")))

    def _group_reduce(self, m, ent, x6, valid, last, mode):
        """The running maximum and specials over the group; ``ent`` (a :class:`GroupEntry`)
        gets E (fixed for INT8) and the special code including the pass now at X6."""
        int8 = mode.kind == InputKind.INT8
        for x, (e, sp) in enumerate(x6):
            # Cleared by the group's last pass (and by reset), so that a first pass finds them
            # zero: no select on `first` sits between X6 and the group FIFO's write.
            ge = Signal(E_WIDTH, name=f"grp_e{x}")
            gs = Signal(3, name=f"grp_sp{x}")
            e_new = _max(ge, e)
            s_new = gs | sp
            with m.If(valid):
                m.d.sync += [ge.eq(Mux(last, 0, e_new)), gs.eq(Mux(last, 0, s_new))]
            nan, pinf, ninf = s_new[0], s_new[1], s_new[2]
            m.d.comb += [ent.e[x].eq(Mux(int8, E_INT8, e_new)),
                         ent.special[x].eq(Mux(nan | (pinf & ninf), Special.NAN, Mux(
                             pinf, Special.POS_INF, Mux(ninf, Special.NEG_INF, Special.NONE))))]

    def _unpack_addend(self, m, name, bits, f16):
        """C and its biased exponent (nominal + EXP_BIAS)."""
        u = m.submodules[name] = UnpackAddend()
        m.d.comb += [u.bits.eq(bits), u.f16.eq(f16)]
        e5, e8 = bits[10:15], bits[23:31]
        exp = Mux(f16, Mux(e5 == 0, 1, e5) + (EXP_BIAS - FP16.bias),
                  Mux(e8 == 0, 1, e8) + (EXP_BIAS - FP32.bias))
        return u.o, exp[:E_WIDTH]

    # ---- launcher: start a group when its E is known and its output has a place ------------
    def _launcher(self, m, grp_rd, sig_rd, started, pop, grp_pushed):
        # Both counters are kept minus one, so that "none" is their sign bit (no compare).
        ready = Signal(range(-1, self.GROUPS), init=-1)     # groups in the group FIFO, - 1
        credits = Signal(range(-1, self.OUTPUTS), init=self.OUTPUTS - 1)    # - 1
        in_grp, left = Signal(), Signal(range(MAX_PASSES))
        grp_rp, sig_rp = Signal(range(self.GROUPS)), Signal(range(self.BEATS))
        head = grp_rd.data
        go_first = ~in_grp & ~ready[-1] & ~credits[-1]
        go = go_first | in_grp
        # The significand FIFO's read port is always enabled: its data is used only the clock
        # after go (l0_valid), and an enable would be one net to every block RAM and register.
        m.d.comb += [started.eq(go_first), grp_rd.addr.eq(grp_rp)]
        m.d.sync += [ready.eq(_step(ready, grp_pushed, go_first)),
                     credits.eq(_step(credits, pop, go_first))]
        grp = Signal(self._group_layout, reset_less=True)    # the group now in L0
        ctl = Signal(Ctl)
        if self._slices == 1:           # one slice a pass: a pass every clock of the group
            with m.If(go_first):
                m.d.sync += [grp.eq(head), grp_rp.eq(grp_rp + 1), in_grp.eq(head.n != 0),
                             left.eq(head.n)]
            with m.Elif(in_grp):
                m.d.sync += left.eq(left - 1)
                with m.If(left == 1):
                    m.d.sync += in_grp.eq(0)
            m.d.comb += [ctl.first.eq(go_first), ctl.last.eq(Mux(go_first, head.n == 0, left == 1)),
                         ctl.load.eq(1), ctl.end.eq(1)]
        else:                           # `slices` clocks a pass; left: passes after this one
            sub = Signal(range(self._slices))       # the slice issued next (in_grp)
            pass0 = Signal()                        # ... belongs to the group's first pass
            end = in_grp & (sub == self._slices - 1)
            with m.If(go_first):
                m.d.sync += [grp.eq(head), grp_rp.eq(grp_rp + 1), in_grp.eq(1), left.eq(head.n),
                             sub.eq(1), pass0.eq(1)]
            with m.Elif(in_grp):
                m.d.sync += sub.eq(sub + 1)         # wraps: slices is a power of two
                with m.If(end):
                    m.d.sync += [left.eq(left - 1), pass0.eq(0)]
                    with m.If(left == 0):
                        m.d.sync += in_grp.eq(0)
            m.d.comb += [ctl.first.eq(go_first | pass0), ctl.last.eq(Mux(go_first, head.n == 0, left == 0)),
                         ctl.load.eq(go_first | (in_grp & (sub == 0))), ctl.end.eq(end)]
        # The FIFO holds one entry per slice: one is read every clock of a group.
        m.d.comb += sig_rd.addr.eq(sig_rp)
        m.d.sync += sig_rp.eq(Mux(go, sig_rp + 1, sig_rp))
        # L0 holds the block RAM's data (its own output register, or the fabric's): the RAM's
        # clock-to-out is then not in front of the shift-amount subtractions.
        v0, ctl0 = _valid(m, go, "l0_valid"), _reg(m, ctl, "l0_ctl")
        ent1 = _reg(m, sig_rd.data, "l1_ent")
        if self._slices == 1:
            grp1 = _reg(m, grp, "l1_grp")
        else:   # L1 takes the group's E on a pass's first slice, then the next slice's rows
            grp1 = Signal(self._group_layout, name="l1_grp", reset_less=True)
            m.d.sync += grp1.eq(Mux(ctl0.load, grp, self._rotated(grp1, ("e", "special"))))
        return _valid(m, v0, "l1_valid"), _reg(m, ctl0, "l1_ctl"), grp1, ent1

    # ---- significand lane ------------------------------------------------------------------
    def _significands(self, m, v1, ctl1, grp, ent, out_wr):
        # The slice's outputs are the first n of grp's and ent's arrays (see _slicer), its A
        # elements the first n, B all 16.
        n = self._outs
        # L1: shift amounts E - pe (saturated at 31: nothing survives past 27), and each
        # output's rounding clamp F.  An INT8 C is added as it is (no shift).
        def sat(e, pe):
            d = (e - pe)[:E_WIDTH]
            return Mux(d[5:] != 0, 31, d[:5])

        mode = grp.mode
        flags = Signal(Flags)
        m.d.comb += [flags.f16.eq(mode.acc_f16), flags.fp8.eq(mode.kind == InputKind.FP8),
                     flags.int8.eq(mode.kind == InputKind.INT8), flags.sat.eq(mode.sat),
                     flags.wide.eq((mode.kind == InputKind.FP16) | (mode.kind == InputKind.BF16))]
        d = [sat(grp.e[p // 4], ent.pe[p]) for p in range(4 * n)]
        dc = [Mux(flags.int8, 0, sat(grp.e[x], ent.c_pe[x])) for x in range(n)]
        f = [RoundPack.clamp_of(grp.e[x], mode.acc_f16) for x in range(n)]
        vs, ctls, push, push_word = self._lane_control(m, v1, ctl1)
        d2, dc2, f2 = _reg(m, d, "l2_d"), _reg(m, dc, "l2_dc"), _reg(m, f, "l2_f")
        sp2, fl2 = _reg(m, [grp.special[x] for x in range(n)], "l2_sp"), _reg(m, flags, "l2_flags")
        a2, an2 = _reg(m, [ent.a_sig[x] for x in range(n)], "l2_a"), _reg(m, ent.a_neg[:n], "l2_an")
        if self._b_cols and self._sparse:   # L1 -> L2: each product picks its B (_b_row)
            els = [Cat(ent.b_sig[c], ent.b_neg[c]) for c in range(32)]
            picks = [self._b_row(ent.meta[8 * (p // 16):][:8], p // 4 % 4, p % 4, els[:16], els[16:])
                     for p in range(64)]
            b2 = _reg(m, [b[:11] for b in picks], "l2_b")
            bn2 = _reg(m, Cat(*(b[11] for b in picks)), "l2_bn")
        elif self._b_cols:      # product p = 4x + k (x = 4i + j) reads B[k][j], at 4k + j
            bc, bnc = _reg(m, [ent.b_sig[c] for c in range(16)], "l2_b"), _reg(m, ent.b_neg, "l2_bn")
            col = [4 * (p % 4) + p // 4 % 4 for p in range(4 * n)]
            b2, bn2 = [bc[c] for c in col], [bnc[c] for c in col]
        else:
            b2, bn2 = _reg(m, [ent.b_sig[p] for p in range(4 * n)], "l2_b"), _reg(m, ent.b_neg[:4 * n], "l2_bn")
        c2, cn2 = _reg(m, [ent.c_sig[x] for x in range(n)], "l2_c"), _reg(m, ent.c_neg[:n], "l2_cn")
        ch2 = _reg(m, [ent.c_pe[x][:8] for x in range(n)], "l2_ch")     # INT8: C's high byte

        # L2 -> L5: the DSPs (their own three registers); beside them the addend's two-level
        # shift and the group's per-output data.
        prods, q5, n5 = self._products(m, a2, an2, b2, bn2, d2)
        c3 = _reg(m, [addend_shift(m, c2[x].shift_left(ADDEND_SHIFT), dc2[x], 0) for x in range(n)], "l3_c")
        dc3, cn3, ch3 = _reg(m, dc2, "l3_dc"), _reg(m, cn2, "l3_cn"), _reg(m, ch2, "l3_ch")
        grp_data = {2: [f2, sp2, fl2]}
        for s in (3, 4, 5):
            grp_data[s] = _reg(m, grp_data[s - 1], f"l{s}_grp")
        cx4 = self._addend_terms(m, c3, dc3, cn3, ch3, grp_data[3][2])
        cx4, cn4 = _reg(m, cx4, "l4_cx"), _reg(m, cn3, "l4_cn")
        cx5, cn5 = _reg(m, cx4, "l5_cx"), _reg(m, cn4, "l5_cn")

        # L5 -> L6: the product mux (each product's term), registered: the DSP's output is
        # a long wire into the fabric.  L6 -> L7: the first adder level.  Each of the five ones'
        # complement terms owes +1 when negative: t0's and t2's ride on these carry-ins, t1's
        # and t3's on the next level, C's on the accumulator.
        t6, n6 = self._terms(m, prods, q5, n5, grp_data[5][2])
        ab7, owe7 = self._first_adders(m, t6, n6)
        cx6, cn6 = _reg(m, cx5, "l6_cx"), _reg(m, cn5, "l6_cn")
        cx7, cn7 = _reg(m, cx6, "l7_cx"), _reg(m, cn6, "l7_cn")
        grp7 = _reg(m, _reg(m, grp_data[5], "l6_grp"), "l7_grp")

        # L7 -> L8: A + B + C as a carry-save step and one chain.
        s8 = _reg(m, [self._sum3(ab7[x], owe7[x], cx7[x]) for x in range(n)], "l8_s")
        cn8 = _reg(m, cn7, "l8_cn")
        grp8 = _reg(m, grp7, "l8_grp")

        # L8 -> N0: the accumulator.  Its feedback is a chain of one register per slice (a
        # slice's sum comes back when its next pass does: a group's slices are back to back),
        # whose first register is cleared (a synchronous clear, no LUT) when the slice that
        # will read it is of a group's first pass (``slices`` stages behind L8).
        r, top = self._slices, self.LANE_STAGES
        # The clear as a register of the stage before, one copy per output: one gate's
        # fan-out to every accumulator's clear was a routed critical path.
        clear_d = vs[top - r - 1] & ctls[top - r - 1].first
        acc_out = []
        for x in range(n):
            clear = replica(m, clear_d, f"acc_clear{x}", reset_less=False)
            fb = [Signal(signed(ACC_WIDTH), name=f"acc_fb{x}" + (f"_{s}" if s else ""), reset_less=True)
                  for s in range(r)]
            new = add_cin(fb[-1], s8[x], cn8[x], ACC_WIDTH)
            m.d.sync += [fb[0].eq(Mux(clear, 0, new))] + [fb[s].eq(fb[s - 1]) for s in range(1, r)]
            acc_out.append(new)
        acc0 = _reg(m, acc_out, "n0_acc")
        f8, sp8, fl8 = grp8
        # The rounders' clamp decode, a stage ahead of their first (its compare and shift of F
        # into N1 were the routed critical path).
        f0 = _reg(m, [RoundPack.clamp_decode(f8[x], fl8.int8) for x in range(n)], "n0_clamp")
        sp0, fl0 = _reg(m, (sp8, fl8), "n0_grp")

        # N1..N5 and the pack: one rounder per output, into the output FIFO.
        self._push(m, out_wr, push_word, self._round(m, acc0, f0, sp0, fl0, push))
        return push_word                # a D written into the output FIFO

    def _addend_terms(self, m, c3, dc3, cn3, ch3, fl3):
        """L3 -> L4 (combinational part): each addend's second shift level and coarse grid,
        in ones' complement with its sign (its +1 rides on the accumulator's carry-in), or an
        INT8 C as the signed 32-bit value."""
        cx4 = []
        for x in range(self._outs):
            t = coarse(addend_shift(m, c3[x], dc3[x], 1), fl3.fp8, fl3.wide, self._grid_bits)
            fp = Cat(t ^ cn3[x].replicate(ADDEND_TERM_BITS), cn3[x]).as_signed()
            # INT8: c3 is C's low 24 bits << ADDEND_SHIFT, unshifted (dc = 0).
            s32 = Cat(c3[x][ADDEND_SHIFT:ADDEND_SHIFT + 24], ch3[x]).as_signed()
            cx4.append(Mux(fl3.int8, extend(s32, ACC_WIDTH), extend(fp, ACC_WIDTH)).as_signed())
        return cx4

    def _terms(self, m, prods, q5, n5, fl5):
        """L5 -> L6: each product's term (the product mux, the generation's grid, the ones'
        complement); returns the L6 registers: the terms and their signs."""
        base = self._grid_bits          # the generation's grid for the 16-bit kinds (Hopper: 0)
        t = [product_term(prods[p], q5[p], n5[p], fl5.fp8, fl5.wide, base)
             for p in range(4 * self._outs)]
        return _reg(m, t, "l6_t"), _reg(m, n5, "l6_neg")

    def _first_adders(self, m, t6, n6):
        """L6 -> L7: the pairs' adds; returns the L7 registers: per output the two pair sums and
        the two carries still owed."""
        ab7, owe7 = [], []
        for x in range(self._outs):
            t, nk = t6[4 * x:4 * x + 4], n6[4 * x:4 * x + 4]
            ab7.append(Cat(add_cin(t[0], t[1], nk[0], PAIR_BITS), add_cin(t[2], t[3], nk[2], PAIR_BITS)))
            owe7.append(Cat(nk[1], nk[3]))
        return _reg(m, ab7, "l7_ab"), _reg(m, owe7, "l7_owe")

    @staticmethod
    def _sum3(ab, owe, cx):
        """L7 -> L8 (combinational): one output's two pair sums and its addend as a carry-save
        step and one chain, with the two owed carries."""
        a = extend(ab[:PAIR_BITS].as_signed(), ACC_WIDTH)
        b = extend(ab[PAIR_BITS:].as_signed(), ACC_WIDTH)
        c = extend(cx, ACC_WIDTH)
        ssum, cy = a ^ b ^ c, (a & b) | (a & c) | (b & c)
        return add_cin(ssum, Cat(owe[0], cy[:ACC_WIDTH - 1]), owe[1], ACC_WIDTH)

    def _products(self, m, a2, an2, b2, bn2, d2):
        """L2 -> L5: the slice's 4 n products in the multipliers (their own three registers),
        with each product's term shift q and sign carried beside them to L5."""
        prods, qs, negs = [], [], []
        for p in range(4 * self._outs):
            x, k = divmod(p, 4)
            i, j = divmod(x, 4)
            mul = m.submodules[f"mul{p}"] = Multiplier(arch=self._dsp)
            da, db, q = dsp_operands(a2[4 * i + k], b2[p], d2[p])
            m.d.comb += [mul.a.eq(da), mul.b.eq(db)]
            prods.append(mul.p)
            qs.append(q)
            negs.append(an2[4 * i + k] ^ bn2[p])
        q5, n5 = qs, negs
        for s in (3, 4, 5):
            q5, n5 = _reg(m, q5, f"l{s}_q"), _reg(m, n5, f"l{s}_neg")
        return prods, q5, n5

    def _round(self, m, acc0, f0, sp0, fl0, push):
        """N1..N5 and the pack: one rounder per output; the D word (with fewer lanes, the last
        pass's slices gathered, the first lowest)."""
        word = []
        for x in range(self._outs):
            rp = m.submodules[f"round{x}"] = RoundPack()
            m.d.comb += [rp.acc.eq(acc0[x]), rp.clamp.eq(f0[x]), rp.f16.eq(fl0.f16),
                         rp.special.eq(sp0[x]), rp.cut13.eq(fl0.fp8 & ~fl0.f16),
                         rp.int8.eq(fl0.int8), rp.sat.eq(fl0.sat)]
            word.append(rp.bits)
        word = Cat(*word)
        r = self._slices
        if r > 1:
            held = Signal(len(word) * (r - 1), name="n5_held", reset_less=True)
            with m.If(push):
                m.d.sync += held.eq(Cat(held[len(word):], word))
            word = Cat(held, word)
        return word

    def _lane_control(self, m, v1, ctl1):
        """Valid bit and :class:`Ctl` of each significand-lane stage, L1..L8; the valid of a
        group's result slice through N0 (the accumulator) and the rounder's stages, and of its
        last slice: the clock its D is written into the output FIFO."""
        vs, ctls = {1: v1}, {1: ctl1}
        top = self.LANE_STAGES
        for s in range(2, top + 1):
            vs[s], ctls[s] = _valid(m, vs[s - 1], f"l{s}_valid"), _reg(m, ctls[s - 1], f"l{s}_ctl")
        push = _valid(m, vs[top] & ctls[top].last, "n0_valid")
        end = _reg(m, ctls[top].end, "n0_end") if self._slices > 1 else None
        for s in range(RoundPack.STAGES):
            push = _valid(m, push, f"n{s + 1}_valid")
            if self._slices > 1:
                end = _reg(m, end, f"n{s + 1}_end")
        return vs, ctls, push, (push & end if self._slices > 1 else push)

    def _push(self, m, out_wr, push, word):
        owp = Signal(range(self.OUTPUTS))
        m.d.comb += [out_wr.addr.eq(owp), out_wr.data.eq(word), out_wr.en.eq(push)]
        m.d.sync += owp.eq(Mux(push, owp + 1, owp))

    # ---- output FIFO, then a register that o is driven from --------------------------------
    def _output(self, m, out_rd, pop, pushed):
        # A block RAM's read data comes late in the clock (ECP5 DP16KD without its output
        # register: 5.8 ns clock-to-out, the core's routed critical path at 100 MHz), so o is
        # a register of its own, filled from the RAM's output ``held``.  The RAM reads the next
        # word (``fetch``) from registered state only, whatever o.ready says (o.ready into the
        # word count was the routed critical path): a read is issued while o, the RAM's output
        # and the skid register ``skid`` are not all full, and a word the RAM still holds when
        # the next one comes moves into the skid.  One word a clock leaves while o.ready stays
        # high; words leave in order (the skid's before the RAM's).
        count = Signal(range(-1, self.OUTPUTS), init=-1)  # written and not yet read out, - 1
        orp = Signal(range(self.OUTPUTS))
        held = Signal()                                    # the RAM's output is a word for o
        m.d.comb += [out_rd.addr.eq(orp), pop.eq(self.o.valid & self.o.ready)]
        if not self._skid:                  # o refilled in the clock it is taken
            take = held & (~self.o.valid | self.o.ready)
            fetch = ~count[-1] & (~held | take)
            m.d.comb += out_rd.en.eq(fetch)
            m.d.sync += [count.eq(_step(count, pushed, fetch)), orp.eq(Mux(fetch, orp + 1, orp)),
                         held.eq(fetch | (held & ~take))]
            with m.If(take):
                m.d.sync += [self.o.valid.eq(1), self.o.payload.eq(out_rd.data)]
            with m.Elif(self.o.ready):
                m.d.sync += self.o.valid.eq(0)
            return
        skid = Signal.like(self.o.payload, reset_less=True)
        skid_valid = Signal()
        fetch = ~count[-1] & ~(held & skid_valid & self.o.valid)
        free = ~self.o.valid | self.o.ready                # o takes a word this clock
        from_ram = free & ~skid_valid & held
        to_skid = held & fetch & ~from_ram                 # the RAM's word, about to be replaced
        m.d.comb += out_rd.en.eq(fetch)
        m.d.sync += [count.eq(_step(count, pushed, fetch)), orp.eq(Mux(fetch, orp + 1, orp)),
                     held.eq(fetch | (held & ~from_ram & ~to_skid)),
                     skid_valid.eq(to_skid | (skid_valid & ~free))]
        with m.If(to_skid):
            m.d.sync += skid.eq(out_rd.data)
        with m.If(free):
            m.d.sync += self.o.valid.eq(skid_valid | held)
            with m.If(skid_valid):
                m.d.sync += self.o.payload.eq(skid)
            with m.Elif(held):
                m.d.sync += self.o.payload.eq(out_rd.data)
