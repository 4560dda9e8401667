"""The WMMA sequencer: fill / load / mma / store on the fragment bank and the MMA4 core.

Golden twin: :mod:`tcore.golden.wmma`.
"""

from typing import NamedTuple

from amaranth import *
from amaranth.lib import data, enum, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .feeder import BeatFeeder, DrainD
from .fragments import (ACCUMULATOR, MATRIX_A, MATRIX_B, WORD_BITS, FragmentBank, FragKind, Shape,
                        host_port, is_pair, storage_kind)
from .formats import InputKind
from .mma4 import MMA4

__all__ = ["Op", "FragKind", "Shape", "WmmaCmd", "WmmaResp", "WmmaSequencer", "WarpTop", "WORD_BITS"]


class Op(enum.Enum, shape=2):
    """WMMA operations (the command's ``op`` codes)."""
    FILL = 0
    LOAD = 1
    MMA = 2
    STORE = 3


class WmmaCmd(data.Struct):
    """One WMMA operation (all of a warp's lanes together).

    Members
    -------
    op : 2
        ``Op.FILL``, ``Op.LOAD``, ``Op.MMA`` or ``Op.STORE``.
    kind : 2
        Fill/load: 0 matrix_a, 1 matrix_b, 2 accumulator.  Store: accumulator only.
    col_major : 1
        Load/store memory layout (``mem_col_major`` for the accumulator).  The TF32, FP8 and
        INT8 kinds load A row-major and B column-major (each lane's register then holds
        consecutive k, as the PTX ``mma`` fragments do; see ``docs/fragments.md``).
    fmt : rtl.formats.InputKind
        Load of A/B: the element size ldm counts (1 byte FP8/INT8, 2 FP16/BF16, 4 TF32); MMA:
        the input kind.
    a_alt, b_alt, sat : 1
        MMA: A / B are E5M2 (FP8) or U8 (INT8); INT8 saturates (:class:`tcore.rtl.formats.Mode`).
    acc_f16 : 1
        Accumulator elements are FP16 (load/store: 16-bit in memory; MMA: C and D FP16).
    mnk : rtl.fragments.Shape
        The WMMA shape.  Fill/load/store/MMA: m16n16k16, or m32n8k16 / m8n32k16 (FP16/BF16 only).  An
        m32n8k16 matrix_a and an m8n32k16 matrix_b take fragments ``frag`` and ``frag + 1``
        of the matrix bank (a pair, like a GPU's 64-bit register pair); an mma_sync of those
        shapes names the pair by its first fragment.
    frag : 3
        Fill/load/store fragment; MMA: d.  Matrix kinds index the matrix bank, the
        accumulator kind the accumulator bank.
    fa, fb, fc : 3
        MMA sources: a, b (matrix bank), c (accumulator bank).  d may equal c.
    addr : 32
        Load/store byte address; must be 256-bit (32-byte) aligned.
    ldm : 16
        Leading dimension in elements: 16 bytes' worth (8 16-bit, 4 32-bit, 16 8-bit).
    value : 32
        Fill value (bits; the low 16 for 16-bit fragments).
    tag : 8
        Echoed in the response.
    """

    op: Op
    kind: FragKind
    col_major: 1
    fmt: InputKind
    a_alt: 1
    b_alt: 1
    sat: 1
    acc_f16: 1
    mnk: Shape
    frag: 3
    fa: 3
    fb: 3
    fc: 3
    addr: 32
    ldm: 16
    value: 32
    tag: 8


class WmmaResp(data.Struct):
    """Completion of a command: its ``tag`` and ``op``; ``error`` if it was refused (bad ldm or
    alignment, out-of-range address, bad fragment, or an invalid format combination), in which
    case no memory and no fragment was written."""

    tag: 8
    op: Op
    error: 1


class _Walk(NamedTuple):
    base: Value            # the first word
    wpl_m1: Value          # words per line - 1
    lines_m1: Value        # lines - 1
    span: Value            # words from the first line's start to the last line's


class _Decoded(NamedTuple):
    """What the sequencer reads off a command: kind, shape, memory walk, legality per unit,
    the fragments the core reads (pa, pb) and the masks of matrix fragments it writes or reads."""
    is_acc: Value
    shape: Value
    square: Value
    pair: Value
    stride: Value
    base: Value
    wpl_m1: Value
    lines_m1: Value
    span: Value
    mem_legal: Value
    mma_legal: Value
    pa: Value
    pb: Value
    cmd_writes: Value
    cmd_reads: Value


class _MemUnit(NamedTuple):
    """The memory unit's registers that the issue and response logic share with it."""
    busy: Signal
    op: Signal
    kind: Signal
    frag: Signal
    tag: Signal
    done: Signal
    err: Signal
    writes: Signal
    frag_is_b: Signal
    frag_shape: Array


class WmmaSequencer(wiring.Component):
    """Executes WMMA commands in order on two units that run concurrently.

    The *memory unit* runs fill (16 clocks: one register-file entry per clock; 32 for a pair),
    load_matrix_sync (one 128-bit word per clock: 32 clocks for a 16-bit 16x16 fragment, 64
    for FP32; 64 for the 32x16 of the other shapes, 16 for their 16x8; plus three: the range
    check a clock after issue, the memory's read, then a register before the register file) and
    store_matrix_sync (likewise, plus one clock: the register file's reads are registered).  A
    load or store whose walk leaves the memory is answered with an error a clock after issue.  The other shapes'
    mma_sync is the same 64 beats (their 32x8 accumulator is 16 blocks too).  The *MMA unit* runs mma_sync: 64 beats of the 4x4x4 core, one per clock
    (:class:`tcore.rtl.feeder.BeatFeeder`), D written back as each 4x4 block leaves the core:
    occupancy 64 clocks plus the core's latency.  A command issues as soon as its unit is free
    and it does not touch a fragment the other unit is using, so the next loads overlap an
    mma_sync (double-buffered fragments); accumulator loads and fills wait for a running
    mma_sync, whose D write-back shares the accumulator columns' write port (and an mma_sync
    waits for them).  Responses come in completion order, with the command's tag.

    Members
    -------
    cmd : In(stream.Signature(WmmaCmd))
    resp : Out(stream.Signature(WmmaResp))
    mem_rd : In(memory.ReadPort.Signature(...))
        The memory read port, driven (``addr`` out, ``data`` in one clock after the address).
    mem_wr : In(memory.WritePort.Signature(...))
        The memory write port, driven (``addr``, ``data``, ``en`` out).
    """

    def __init__(self, *, mem_words: int = 4096, matrix_frags: int = 4, acc_frags: int = 2,
                 lanes: int = 64):
        self._mem_words = mem_words
        self._nm, self._nc = matrix_frags, acc_frags
        self._lanes = lanes
        abits = max(1, (mem_words - 1).bit_length())
        super().__init__({
            "cmd": In(stream.Signature(WmmaCmd)),
            "resp": Out(stream.Signature(WmmaResp)),
            "mem_rd": In(memory.ReadPort.Signature(addr_width=abits, shape=WORD_BITS)),
            "mem_wr": In(memory.WritePort.Signature(addr_width=abits, shape=WORD_BITS)),
        })
        # load_stage: a load's word lands in the bank a clock after the load port carries it.
        # The memory unit stays busy until the clock after its response (itself a clock after
        # the last word), so the mma_sync, fill or store that waits for it reads or writes
        # once the word has landed.
        self.bank = FragmentBank(a_frags=matrix_frags, b_frags=matrix_frags, acc_frags=acc_frags,
                                 load_stage=True)
        self.core = MMA4(lanes=lanes)

    @property
    def mma_cycles(self):
        return self.mma_cycles_of(lanes=self._lanes)

    @staticmethod
    def mma_cycles_of(kind=InputKind.FP16, lanes: int = 64) -> int:
        """Clocks from an mma_sync's issue to its response, with no stalls: one clock to read
        beat 0, 63 beats of ``MMA4.beat_clocks(kind, lanes)`` (two clocks each for the 8-bit
        kinds, ``64 // lanes`` times as many on a core of fewer lanes) before the last is
        accepted, the core's fused-mode latency after it, and one clock to respond."""
        return 1 + 63 * MMA4.beat_clocks(kind, lanes) + MMA4.latency_of(kind, 4, lanes) + 1

    def elaborate(self, platform):
        m = Module()
        m.submodules.bank = bank = self.bank
        m.submodules.core = core = self.core
        m.submodules.feeder = feeder = BeatFeeder()
        m.submodules.drain = drain = DrainD()
        wiring.connect(m, feeder.rd, bank.mma_rd)
        wiring.connect(m, feeder.beat, core.i)
        wiring.connect(m, core.o, drain.d)
        wiring.connect(m, drain.wr, bank.mma_wr)
        cmd = self.cmd.payload

        # ---- unit state -------------------------------------------------------------------
        mem_busy, mma_busy = Signal(), Signal()
        mem_op, mem_kind, mem_frag = Signal(Op), Signal(FragKind), Signal(3)
        mma_c, mma_d = Signal(3), Signal(3)
        mma_reads = Signal(self._nm)            # matrix fragments the running mma_sync reads
        mem_writes = Signal(self._nm)           # matrix fragments the running fill/load writes
        frag_is_b = Signal(self._nm)            # storage kind of each matrix fragment
        frag_shape = Array(Signal(2, name=f"frag{f}_shape") for f in range(self._nm))
        dec = self._decode(m, cmd, frag_is_b, frag_shape)

        writes_matrix = ((cmd.op == Op.FILL) | (cmd.op == Op.LOAD)) & ~dec.is_acc
        mem_conflict, mma_conflict = self._hazards(
            cmd, dec, mma=(feeder.busy, mma_busy, mma_reads, mma_d),
            mem=(mem_busy, mem_op, mem_kind, mem_frag, mem_writes))

        is_mma = cmd.op == Op.MMA
        can_issue = Mux(is_mma, ~mma_busy & ~mma_conflict, ~mem_busy & ~mem_conflict)
        m.d.comb += self.cmd.ready.eq(can_issue)
        issue = self.cmd.valid & can_issue

        # ---- responses: MMA unit first, memory unit waits ----------------------------------
        mma_done, mem_done = Signal(), Signal()
        mma_tag, mem_tag = Signal(8), Signal(8)
        mem_err, mma_err = Signal(), Signal()
        m.d.comb += self.resp.valid.eq(mma_done | mem_done)
        with m.If(mma_done):
            m.d.comb += [self.resp.payload.tag.eq(mma_tag), self.resp.payload.op.eq(Op.MMA),
                         self.resp.payload.error.eq(mma_err)]
        with m.Else():
            m.d.comb += [self.resp.payload.tag.eq(mem_tag), self.resp.payload.op.eq(mem_op),
                         self.resp.payload.error.eq(mem_err)]
        mma_resp_taken = self.resp.ready & mma_done
        mem_resp_taken = self.resp.ready & mem_done & ~mma_done

        unit = _MemUnit(mem_busy, mem_op, mem_kind, mem_frag, mem_tag, mem_done, mem_err,
                        mem_writes, frag_is_b, frag_shape)
        self._memory_unit(m, bank, cmd, dec, issue & ~is_mma, writes_matrix, unit)
        with m.If(mem_resp_taken):
            m.d.sync += [mem_done.eq(0), mem_busy.eq(0)]

        # ---- MMA unit ----------------------------------------------------------------------
        with m.If(issue & is_mma):
            with m.If(~dec.mma_legal):
                m.d.sync += [mma_done.eq(1), mma_err.eq(1), mma_tag.eq(cmd.tag), mma_busy.eq(1)]
            with m.Else():
                m.d.comb += feeder.start.eq(1)
                m.d.sync += [mma_busy.eq(1), mma_tag.eq(cmd.tag), mma_err.eq(0),
                             mma_reads.eq(dec.cmd_reads), mma_c.eq(cmd.fc), mma_d.eq(cmd.frag)]
        m.d.comb += [feeder.a.eq(dec.pa), feeder.b.eq(dec.pb), feeder.c.eq(cmd.fc),
                     feeder.tall.eq(~dec.square), feeder.mode.kind.eq(cmd.fmt),
                     feeder.mode.acc_f16.eq(cmd.acc_f16), feeder.mode.a_alt.eq(cmd.a_alt),
                     feeder.mode.b_alt.eq(cmd.b_alt), feeder.mode.sat.eq(cmd.sat),
                     feeder.zero_c.eq(0), drain.frag.eq(mma_d)]
        with m.If(drain.done):
            m.d.sync += mma_done.eq(1)
        with m.If(mma_resp_taken):
            m.d.sync += [mma_done.eq(0), mma_busy.eq(0)]
        return m

    @staticmethod
    def _hazards(cmd, dec, mma, mem):
        """Whether the command conflicts with the other unit's in-flight operation: returns
        (memory command blocked by the MMA unit, mma_sync blocked by the memory unit)."""
        feeding, mma_busy, mma_reads, mma_d = mma
        mem_busy, mem_op, mem_kind, mem_frag, mem_writes = mem
        fills_or_loads = (cmd.op == Op.FILL) | (cmd.op == Op.LOAD)
        writes_matrix = fills_or_loads & ~dec.is_acc
        writes_acc = fills_or_loads & dec.is_acc
        # A and B are read only while beats are fed; C and D until the response.  The D
        # write-back owns the accumulator columns' write port while an mma_sync runs.
        mem_conflict = (
            (feeding & writes_matrix & (dec.cmd_writes & mma_reads).any()) |
            (mma_busy & writes_acc) |
            (mma_busy & (cmd.op == Op.STORE) & (cmd.frag == mma_d)))
        mem_fills_or_loads = (mem_op == Op.FILL) | (mem_op == Op.LOAD)
        mem_writes_matrix = mem_fills_or_loads & (mem_kind != ACCUMULATOR)
        mem_writes_acc = mem_fills_or_loads & (mem_kind == ACCUMULATOR)
        mma_conflict = mem_busy & (
            (mem_writes_matrix & (mem_writes & dec.cmd_reads).any()) |
            mem_writes_acc |
            ((mem_op == Op.STORE) & (mem_frag == cmd.frag)))
        return mem_conflict, mma_conflict

    def _decode(self, m, cmd, frag_is_b, frag_shape) -> "_Decoded":
        """A command's legality, its operand fragments and its memory walk (combinational)."""
        nm_bits = max(1, (self._nm - 1).bit_length())

        def onehot(f):
            """The matrix fragment f as a mask (none if f is past the bank)."""
            return Cat(f == n for n in range(self._nm))

        is_acc = cmd.kind == ACCUMULATOR
        kind_ok = (cmd.kind == MATRIX_A) | (cmd.kind == MATRIX_B) | is_acc
        esize32 = is_acc & ~cmd.acc_f16
        # A and B: 16 lines of 32 bytes in every kind; ldm counts the kind's elements.
        bytes8 = ~is_acc & ((cmd.fmt == InputKind.FP8) | (cmd.fmt == InputKind.INT8))
        bytes4 = ~is_acc & (cmd.fmt == InputKind.TF32)
        wide32 = esize32 | bytes4
        step_ok = Mux(wide32, cmd.ldm[:2] == 0, Mux(bytes8, cmd.ldm[:4] == 0,
                                                    cmd.ldm[:3] == 0)) & (cmd.ldm != 0)
        stride = Signal(16)                     # words between lines
        m.d.comb += stride.eq(Mux(wide32, cmd.ldm >> 2, Mux(bytes8, cmd.ldm >> 4, cmd.ldm >> 3)))
        # The other kinds' fragments hold k-consecutive bytes: A by rows, B by columns.
        narrow = bytes8 | bytes4
        layout_ok = ~narrow | Mux(cmd.kind == MATRIX_B, cmd.col_major, ~cmd.col_major)
        # The other shapes: FP16/BF16 only (CUDA's shapes for them), a pair within the bank.
        shape = cmd.mnk
        square = shape == Shape.M16N16K16
        pair = is_pair(shape.as_value(), cmd.kind.as_value())
        shape_ok = (shape.as_value() <= Shape.M8N32K16.value) & (
            square | (is_acc & (cmd.op != Op.MMA)) | (cmd.fmt.as_value() <= InputKind.BF16.value))
        walk = self._walk(m, cmd, shape, stride, esize32)
        frag_ok = Mux(is_acc, cmd.frag < self._nc, (cmd.frag + pair) < self._nm)
        mem_legal = Signal()
        with m.Switch(cmd.op):
            with m.Case(Op.FILL):
                m.d.comb += mem_legal.eq(frag_ok & kind_ok & shape_ok)
            with m.Case(Op.LOAD):
                m.d.comb += mem_legal.eq(frag_ok & kind_ok & step_ok & layout_ok & shape_ok &
                                         (cmd.addr[:5] == 0))
            with m.Case(Op.STORE):
                m.d.comb += mem_legal.eq(is_acc & (cmd.frag < self._nc) & shape_ok &
                                         step_ok & (cmd.addr[:5] == 0))
            with m.Default():           # MMA: checked by mma_legal
                m.d.comb += mem_legal.eq(0)
        # mma_sync: the core reads A from fragment pa (and pa + 1 in the other shapes) and B
        # from pb; m8n32k16 keeps its A in a B fragment and its B in an A pair (D^T = B^T A^T).
        flip = shape == Shape.M8N32K16
        pa = Mux(flip, cmd.fb, cmd.fa)
        pb = Mux(flip, cmd.fa, cmd.fb)
        is_b = Array(frag_is_b)
        f16_ok = (cmd.fmt == InputKind.FP16) | (cmd.fmt == InputKind.FP8)    # kinds with FP16 C/D
        mma_legal = ((cmd.fa < self._nm) & (cmd.fb < self._nm) & (cmd.fc < self._nc) &
                     (cmd.frag < self._nc) & shape_ok & ((pa + ~square) < self._nm) &
                     ~is_b[pa[:nm_bits]] & is_b[pb[:nm_bits]] &
                     (square | ~is_b[(pa + 1)[:nm_bits]]) &
                     (frag_shape[cmd.fa[:nm_bits]] == shape.as_value()) &
                     (frag_shape[cmd.fb[:nm_bits]] == shape.as_value()) &
                     (cmd.fmt.as_value() <= InputKind.INT8.value) & (~cmd.acc_f16 | f16_ok))
        cmd_writes = Mux(pair, onehot(cmd.frag) | onehot(cmd.frag + 1), onehot(cmd.frag))
        cmd_reads = onehot(pa) | onehot(pb) | Mux(square, 0, onehot(pa + 1))
        return _Decoded(is_acc, shape, square, pair, stride, walk.base, walk.wpl_m1,
                        walk.lines_m1, walk.span, mem_legal, mma_legal, pa, pb, cmd_writes, cmd_reads)

    def _walk(self, m, cmd, shape, stride, esize32) -> "_Walk":
        """The matrix in memory: log2 of its rows and columns, then of its lines and of the
        128-bit words of a line (8 16-bit or 4 FP32 elements; A and B lines are 32 bytes in
        every kind of m16n16k16); the span from its first line to its last (whether the last
        word is inside the memory is checked a clock after issue, from registers)."""
        rlog, clog = Signal(3), Signal(3)
        dims = {Shape.M16N16K16: ((4, 4), (4, 4), (4, 4)),
                Shape.M32N8K16: ((5, 4), (4, 3), (5, 3)),
                Shape.M8N32K16: ((3, 4), (4, 5), (3, 5))}
        m.d.comb += [rlog.eq(4), clog.eq(4)]
        for sh, per_kind in dims.items():
            for kd, (r, c) in zip((MATRIX_A, MATRIX_B, ACCUMULATOR), per_kind):
                with m.If((shape == sh) & (cmd.kind == kd)):
                    m.d.comb += [rlog.eq(r), clog.eq(c)]
        lines_log, wpl_log = Signal(3), Signal(2)
        m.d.comb += [lines_log.eq(Mux(cmd.col_major, clog, rlog)),
                     wpl_log.eq(Mux(cmd.col_major, rlog, clog) + esize32 - 3)]
        lines_m1 = Signal(5)
        wpl_m1 = Signal(3)
        m.d.comb += [lines_m1.eq((1 << lines_log) - 1), wpl_m1.eq((1 << wpl_log) - 1)]
        base = cmd.addr >> 4
        span = Mux(lines_log == 3, stride.shift_left(3),
                   Mux(lines_log == 4, stride.shift_left(4), stride.shift_left(5))) - stride
        return _Walk(base, wpl_m1, lines_m1, span[:len(stride) + 5])

    def _memory_unit(self, m, bank, cmd, dec, issue, writes_matrix, u):
        """Fill, load and store: one register-file entry or one memory word per clock."""
        line, word = Signal(5), Signal(3)
        line_base = Signal(32)
        m_stride, m_wpl_m1, m_lines_m1 = Signal(16), Signal(3), Signal(5)
        m_col, m_f16, m_value, m_shape, m_pair = Signal(), Signal(), Signal(32), Signal(Shape), Signal()
        rd_pending = Signal()                     # a read issued last clock: its data is here now
        rd_line, rd_word, rd_last = Signal(5), Signal(3), Signal()
        st_active, rd_active, fill_active = Signal(), Signal(), Signal()
        fill_entry = Signal(5)
        m_span = Signal.like(dec.span)
        check = Signal()            # a load or store issued last clock: its range is checked now

        with m.If(issue):
            m.d.sync += [u.op.eq(cmd.op), u.kind.eq(cmd.kind), u.frag.eq(cmd.frag),
                         u.tag.eq(cmd.tag), u.busy.eq(1), line.eq(0), word.eq(0),
                         line_base.eq(dec.base), m_stride.eq(dec.stride), m_wpl_m1.eq(dec.wpl_m1),
                         m_lines_m1.eq(dec.lines_m1), m_shape.eq(dec.shape), m_pair.eq(dec.pair),
                         m_col.eq(cmd.col_major), m_f16.eq(cmd.acc_f16), m_value.eq(cmd.value),
                         fill_entry.eq(0), u.writes.eq(Mux(writes_matrix, dec.cmd_writes, 0)),
                         m_span.eq(dec.span)]
            with m.If(~dec.mem_legal):
                m.d.sync += [u.err.eq(1), u.done.eq(1)]
            with m.Else():
                m.d.sync += u.err.eq(0)
                with m.If(cmd.op == Op.FILL):
                    m.d.sync += fill_active.eq(1)
                    with m.If(writes_matrix):
                        self._mark(m, u, dec.cmd_writes, dec.shape.as_value(), cmd.kind.as_value())
                with m.Else():
                    m.d.sync += check.eq(1)
        # A load's or store's last word inside the memory?  Checked a clock after issue, from
        # the registers loaded there: in the issue clock, the span, the sum and the compare
        # (three carry chains) came after the command's decode (the SoC's critical path).
        with m.If(check):
            m.d.sync += check.eq(0)
            with m.If(line_base + m_span + m_wpl_m1 < self._mem_words):
                with m.If(u.op == Op.LOAD):
                    m.d.sync += rd_active.eq(1)
                with m.Else():
                    m.d.sync += st_active.eq(1)
                self._mark(m, u, u.writes, m_shape.as_value(), u.kind.as_value())
            with m.Else():
                m.d.sync += [u.err.eq(1), u.done.eq(1)]

        cur_addr = line_base + word
        last_beat = (line == m_lines_m1) & (word == m_wpl_m1)

        def advance():
            with m.If(word == m_wpl_m1):
                m.d.sync += [word.eq(0), line.eq(line + 1), line_base.eq(line_base + m_stride)]
            with m.Else():
                m.d.sync += word.eq(word + 1)

        self._fill_phase(m, bank, u, fill_active, fill_entry, m_shape, m_pair, m_value)
        # Load: address phase, then data phase one clock later into the bank.
        m.d.sync += rd_pending.eq(0)
        with m.If(rd_active):
            m.d.comb += self.mem_rd.addr.eq(cur_addr)
            m.d.sync += [rd_pending.eq(1), rd_line.eq(line), rd_word.eq(word), rd_last.eq(last_beat)]
            advance()
            with m.If(last_beat):
                m.d.sync += rd_active.eq(0)
        # The word is registered before the bank (the block RAM's clock-to-out, 5.8 ns on ECP5,
        # ends at a flip-flop, not in the fragments' write muxes): written a clock later.
        ld_valid, ld_last = Signal(), Signal()
        ld_line, ld_word = Signal.like(rd_line), Signal.like(rd_word)
        ld_data = Signal.like(self.mem_rd.data, reset_less=True)
        m.d.sync += [ld_valid.eq(rd_pending), ld_last.eq(rd_pending & rd_last), ld_line.eq(rd_line),
                     ld_word.eq(rd_word), ld_data.eq(self.mem_rd.data)]
        with m.If(ld_valid):
            lw = bank.load[0]
            m.d.comb += [lw.en.eq(1), lw.kind.eq(u.kind), lw.mnk.eq(m_shape),
                         lw.col.eq(m_col), lw.f16.eq(m_f16),
                         lw.frag.eq(u.frag), lw.line.eq(ld_line), lw.word.eq(ld_word),
                         lw.data.eq(ld_data)]
            with m.If(ld_last):
                m.d.sync += u.done.eq(1)
        # Store: read the register file (data two clocks later), write memory, a word a clock.
        m.d.comb += [bank.store.frag.eq(u.frag), bank.store.col.eq(m_col), bank.store.mnk.eq(m_shape),
                     bank.store.f16.eq(m_f16), bank.store.line.eq(line), bank.store.word.eq(word)]
        self._store_phase(m, bank, u, st_active, cur_addr, last_beat, advance)

    @staticmethod
    def _fill_phase(m, bank, u, fill_active, fill_entry, m_shape, m_pair, m_value):
        """A fill's clocks: one register-file entry per clock (32 for a pair)."""
        with m.If(fill_active):
            m.d.comb += [bank.fill.en.eq(1),
                         bank.fill.kind.eq(storage_kind(m_shape.as_value(), u.kind.as_value())),
                         bank.fill.frag.eq(u.frag + fill_entry[4]), bank.fill.entry.eq(fill_entry[:4]),
                         bank.fill.value.eq(m_value)]
            m.d.sync += fill_entry.eq(fill_entry + 1)
            with m.If(fill_entry == Mux(m_pair, 31, 15)):
                m.d.sync += [fill_active.eq(0), u.done.eq(1)]

    def _mark(self, m, u, writes, shape, kind):
        """Record the storage kind and shape of the matrix fragments a fill or load writes
        (``writes``: their mask), which a later mma_sync's legality reads."""
        skind = storage_kind(shape, kind)
        for f in range(self._nm):
            with m.If(writes[f]):
                m.d.sync += [u.frag_is_b[f].eq(skind == MATRIX_B.value), u.frag_shape[f].eq(shape)]

    def _store_phase(self, m, bank, u, st_active, cur_addr, last_beat, advance):
        """A store's clocks: the register file read at the walk's position, its data written
        to memory two clocks later at the address registered with the read."""
        req, req_addr, req_last = Signal(), Signal.like(self.mem_wr.addr), Signal()
        m.d.sync += req.eq(0)
        with m.If(st_active):
            m.d.comb += bank.store.en.eq(1)
            m.d.sync += [req.eq(1), req_addr.eq(cur_addr), req_last.eq(last_beat)]
            advance()
            with m.If(last_beat):
                m.d.sync += st_active.eq(0)
        st_pending, st_addr, st_last = Signal(), Signal.like(self.mem_wr.addr), Signal()
        m.d.sync += [st_pending.eq(req), st_addr.eq(req_addr), st_last.eq(req & req_last)]
        with m.If(st_pending):
            m.d.comb += [self.mem_wr.en.eq(1), self.mem_wr.addr.eq(st_addr),
                         self.mem_wr.data.eq(bank.store.data)]
            with m.If(st_last):
                m.d.sync += u.done.eq(1)



class WarpTop(wiring.Component):
    """One warp: the WMMA sequencer with its memory (the ``wmma`` design).

    The memory (``lib.memory.Memory``) stands for global/shared memory: ``mem_words`` words of
    128 bits (8 FP16/BF16 or 4 FP32 elements), byte address = 16 * word address.  A host port
    lets a bench fill and read it while the sequencer is idle.

    Members
    -------
    cmd, resp : the sequencer's command and response streams
    host_addr, host_wdata, host_we : host write (and read address)
    host_rdata : Out(128), the word at ``host_addr`` one clock later
    """

    def __init__(self, *, mem_words: int = 4096, matrix_frags: int = 4, acc_frags: int = 2,
                 lanes: int = 64):
        if mem_words < 64 or mem_words & (mem_words - 1):
            raise ValueError(f"Memory words must be a power of two >= 64, not {mem_words!r}")
        self._mem_words = mem_words
        self.seq = WmmaSequencer(mem_words=mem_words, matrix_frags=matrix_frags,
                                 acc_frags=acc_frags, lanes=lanes)
        super().__init__({
            "cmd": In(stream.Signature(WmmaCmd)),
            "resp": Out(stream.Signature(WmmaResp)),
            **host_port(mem_words),
        })

    @property
    def mem_words(self):
        return self._mem_words

    def elaborate(self, platform):
        m = Module()
        m.submodules.seq = seq = self.seq
        m.submodules.mem = mem = memory.Memory(shape=WORD_BITS, depth=self._mem_words, init=[])
        rd, hrd = mem.read_port(), mem.read_port()
        wr = mem.write_port()       # one write port: several make simulators copy the array
        wiring.connect(m, wiring.flipped(self.cmd), seq.cmd)
        wiring.connect(m, seq.resp, wiring.flipped(self.resp))
        wiring.connect(m, seq.mem_rd, rd)
        m.d.comb += [hrd.addr.eq(self.host_addr), self.host_rdata.eq(hrd.data)]
        # The host writes while the sequencer is idle; it wins if both write.
        with m.If(self.host_we):
            m.d.comb += [wr.addr.eq(self.host_addr), wr.data.eq(self.host_wdata), wr.en.eq(1)]
        with m.Else():
            m.d.comb += [wr.addr.eq(seq.mem_wr.addr), wr.data.eq(seq.mem_wr.data),
                         wr.en.eq(seq.mem_wr.en)]
        return m
