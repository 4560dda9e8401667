"""The tiled-GEMM top: the classic matmulT kernel in hardware, on 1 to 8 warps.

Golden twin: :func:`tcore.golden.gemm.matmul_t`.
"""

from amaranth import *
from amaranth.lib import data, fifo, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from .sizes import MAX_WARPS
from .dispenser import TileDispenser, tile_layout
from .feeder import BeatFeeder, DrainD
from .fragments import (MATRIX_A, MATRIX_B, METADATA, WORD_BITS, FragmentBank, LoadSignature,
                        StoreSignature, host_port)
from .formats import InputKind, Mode
from .mma4 import MMA4

__all__ = ["GemmConfig", "MatmulTWarp", "GemmTop", "ADDR_BITS", "TILE_BITS", "WORD_READ", "DWrite"]

ADDR_BITS = 24          # word addresses: up to 256 MiB of memory
TILE_BITS = 12          # M, N, K up to 65520 (4095 tiles or steps of 16)

#: A memory read port of 128-bit words, as the memory sees it (``addr`` in, ``data`` out one
#: clock later); the engines that read take it flipped (``In(WORD_READ)``).
WORD_READ = memory.ReadPort.Signature(addr_width=ADDR_BITS, shape=WORD_BITS)


class DWrite(data.Struct):
    """A word of D to write: the payload of a warp's ``d`` stream (``ready`` when the shared
    write port takes it)."""
    addr: ADDR_BITS
    data: WORD_BITS


class GemmConfig(data.Struct):
    """The GEMM to run, held stable from ``start`` to ``done``.

    Word addresses are of 128-bit memory words (16 bytes).  A is M x K row-major (leading
    dimension K); B is K x N row-major (leading dimension N), or with ``b_cols`` column-major
    (B^T row-major, leading dimension K: the "TN" layout cuBLAS needs for FP8); D is M x N
    row-major, FP32, FP16 (``acc_f16``) or S32.  D = A·B, as matmulT computes it
    (``fill_fragment(c, 0)``).  A K step is one Hopper block of the kind: 16 FP16/BF16
    elements, 8 TF32, 32 FP8/INT8 - 32 bytes of a row of A (or of a column of B) in every kind.

    With ``sparse`` (FP16/BF16, B row-major) A is 2:4 sparse and a K step is one ``mma.sp``
    k32: A holds the stored values (M x K/2 row-major, :class:`tcore.golden.sparse.SparseA`'s
    ``values``, 32 bytes a row per step as before) and the metadata E its PTX words (M x K/32
    uint32 row-major, ``SparseA.meta``) from word address ``e_base`` on, packed (element
    ``r * steps + t`` of E is 32-bit lane ``% 4`` of word ``e_base + // 4``).
    """

    tiles_m: TILE_BITS        # M / 16
    tiles_n: TILE_BITS        # N / 16
    steps: TILE_BITS          # K / (the kind's K step)
    a_base: ADDR_BITS
    b_base: ADDR_BITS
    d_base: ADDR_BITS
    kind: InputKind
    acc_f16: 1
    a_alt: 1                  # FP8: A is E5M2; INT8: A is U8
    b_alt: 1                  # FP8: B is E5M2; INT8: B is U8
    sat: 1                    # INT8: each K step's result clamped to S32
    b_cols: 1                 # B is given column-major (N x K)
    sparse: 1                 # A is 2:4 sparse (values at a_base, metadata at e_base)
    e_base: ADDR_BITS


class StepInfo(data.Struct):
    """A loaded K step: the tile it belongs to, and whether it is the tile's first / last."""
    first: 1
    last: 1
    ti: TILE_BITS
    tj: TILE_BITS


class InFlight(data.Struct):
    """A step in the core (the write-back queue) or a finished tile (the store queue)."""
    acc: 1
    last: 1
    ti: TILE_BITS
    tj: TILE_BITS


class TileLoader(wiring.Component):
    """Asks for tiles and loads each K step's operands into pair ``pair`` (0, 1, 0, ...) once
    that pair is free; ``loaded`` pulses with the step's :class:`StepInfo` (``info``) when it
    is full.

    Two memory read ports, two register-file load ports, a word per clock each.  Dense: A and
    B at once (16 lines of 2 words), 32 clocks.  Sparse: B's 32 rows (64 clocks, into B
    fragments 2p and 2p + 1) on port 1 while port 0 loads A's stored values (32 clocks), then
    the 16 rows' metadata words (16 clocks).  A pair's B is always fragment 2p (+1).  A word
    reaches the register file two clocks after its address (the memory's read, then a
    register); ``loaded`` pulses with the step's last write, when the next step's reads may
    already run (they start two clocks after a step's last read: a step every 34 clocks
    dense, 66 sparse, while the pairs are free).
    """

    def __init__(self):
        super().__init__({
            "cfg": In(GemmConfig), "run": In(1),
            "claim": Out(stream.Signature(0)), "tile": In(tile_layout(TILE_BITS)),
            "a": In(WORD_READ), "b": In(WORD_READ),
            "load": Out(LoadSignature()).array(2),
            "pair_full": In(2),
            "loaded": Out(1), "pair": Out(1), "info": Out(StepInfo), "idle": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        sp = cfg.sparse
        have = Signal()                          # a tile is being loaded
        lti, ltj, lstep = Signal(TILE_BITS), Signal(TILE_BITS), Signal(TILE_BITS)
        lp = Signal()                            # the pair being read (self.pair: being written)
        loading = Signal()
        n = Signal(6)                            # the step's load clock: line n[1:], word n[0]
        a_row, b_row = Signal(ADDR_BITS), Signal(ADDR_BITS)     # word address of the current line
        e_idx = Signal(ADDR_BITS + 2)            # metadata element (32-bit) of the current row
        pend, pend_n, pend_lane, pend_last = Signal(), Signal(6), Signal(2), Signal()
        land = Signal()                          # the read words are written (see below)

        # A tile's first addresses take two clocks after its grant (a registered product, then
        # the base added): no multiplier on a step's path.  Each step then adds a constant.
        prep = Signal(2)
        prod_a, prod_b = Signal(ADDR_BITS + 1), Signal(ADDR_BITS)
        a_next, b_next = Signal(ADDR_BITS), Signal(ADDR_BITS)      # the next step's first line
        e_next = Signal(ADDR_BITS + 2)
        m.d.comb += self.claim.valid.eq(self.run & ~have & ~self.tile.none)
        with m.If(self.claim.valid & self.claim.ready):
            m.d.sync += [have.eq(1), lti.eq(self.tile.ti), ltj.eq(self.tile.tj), lstep.eq(0),
                         prep.eq(2)]
        a_stride = cfg.steps.shift_left(1)        # words per row of A (32 bytes per step)
        # Words per line of B: a row (N / 8), or a column of K like a row of A.
        b_stride = Mux(cfg.b_cols, a_stride, cfg.tiles_n.shift_left(1))
        # Per step: A 32 bytes on; B 16 rows down (32 sparse), or 32 bytes on (column-major).
        b_step = Mux(cfg.b_cols, 2, Mux(sp, b_stride.shift_left(5), b_stride.shift_left(4)))
        with m.If(prep == 2):
            m.d.sync += [prod_a.eq(lti.shift_left(4) * a_stride),      # the tile's first row of A
                         prod_b.eq(ltj.shift_left(4) * b_stride), prep.eq(1)]
        with m.If(prep == 1):
            m.d.sync += [a_next.eq(cfg.a_base + prod_a[:ADDR_BITS]),
                         b_next.eq(cfg.b_base + Mux(cfg.b_cols, prod_b, ltj.shift_left(1))),
                         e_next.eq(prod_a[1:]), prep.eq(0)]
        with m.If(have & (prep == 0) & ~loading & ~pend & ~self.pair_full.bit_select(lp, 1)):
            # E elements (16*ti + row) * steps + lstep: the tile's first row's, steps apart.
            m.d.sync += [loading.eq(1), n.eq(0), a_row.eq(a_next), b_row.eq(b_next),
                         e_idx.eq(e_next), a_next.eq(a_next + 2), b_next.eq(b_next + b_step),
                         e_next.eq(e_next + 1)]
        last_n = Mux(sp, 63, 31)
        meta = sp & n[5]                         # port 0 reads metadata (n 32..47)
        m.d.comb += [self.a.addr.eq(Mux(meta, cfg.e_base + e_idx[2:], a_row + n[0])),
                     self.b.addr.eq(b_row + n[0])]
        m.d.sync += pend.eq(0)
        with m.If(loading):
            m.d.sync += [pend.eq(1), pend_n.eq(n), pend_lane.eq(e_idx[:2]),
                         pend_last.eq(n == last_n), n.eq(n + 1)]
            with m.If(n[0]):
                m.d.sync += [a_row.eq(a_row + a_stride), b_row.eq(b_row + b_stride)]
            with m.If(meta):
                m.d.sync += e_idx.eq(e_idx + cfg.steps)
            with m.If(n == last_n):
                m.d.sync += loading.eq(0)
        # The words land in the register file a clock after the read's data: registered first,
        # so that the block RAM's clock-to-out (5.8 ns on ECP5) ends at a flip-flop and not in
        # the fragments' write muxes.  The next step's reads may start meanwhile (the pair and
        # step move on with the last read's data), so ``pair`` and ``info`` are registered too.
        land_n, land_lane, land_last = Signal(6), Signal(2), Signal()
        land_a, land_b = Signal.like(self.a.data, reset_less=True), Signal.like(self.b.data, reset_less=True)
        m.d.sync += [land.eq(pend), land_n.eq(pend_n), land_lane.eq(pend_lane),
                     land_last.eq(pend & pend_last), land_a.eq(self.a.data), land_b.eq(self.b.data)]
        self._write_words(m, land, land_n, land_lane, land_a, land_b)
        last_step = lstep == cfg.steps - 1
        m.d.sync += [self.info.first.eq(lstep == 0), self.info.last.eq(last_step),
                     self.info.ti.eq(lti), self.info.tj.eq(ltj), self.pair.eq(lp)]
        m.d.comb += [self.loaded.eq(land_last), self.idle.eq(~have & ~loading & ~pend & ~land)]
        with m.If(pend & pend_last):
            m.d.sync += [lp.eq(~lp), lstep.eq(lstep + 1)]
            with m.If(last_step):
                m.d.sync += have.eq(0)
        return m

    def _write_words(self, m, land, n, lane, a_word, b_word):
        """The register-file writes of load clock ``n`` (line n[1:], word n[0]; sparse: n 32..47
        are metadata rows, their element ``lane``) into pair ``self.pair``."""
        sp, lp = self.cfg.sparse, self.pair
        meta = sp & n[5]
        a_port, b_port = self.load
        m.d.comb += [a_port.en.eq(land & ~(meta & n[4])),
                     a_port.kind.eq(Mux(meta, METADATA, MATRIX_A)), a_port.col.eq(0),
                     a_port.frag.eq(lp),
                     a_port.line.eq(Mux(meta, n[:4], n[1:5])),
                     a_port.word.eq(Mux(meta, lane, n[0])),
                     b_port.en.eq(land), b_port.kind.eq(MATRIX_B), b_port.col.eq(self.cfg.b_cols),
                     b_port.frag.eq(Cat(sp & n[5], lp)),
                     b_port.line.eq(n[1:5]), b_port.word.eq(n[0])]
        for port, dat in ((a_port, a_word), (b_port, b_word)):
            m.d.comb += [port.f16.eq(0), port.data.eq(dat)]


class _Stored(data.Struct):
    """A word of D read from the register file, queued for the shared write port."""
    d: DWrite
    last: 1                             # the tile's last word


class TileStorer(wiring.Component):
    """Stores finished tiles (the ``job`` stream: accumulator and tile) to D on the ``d``
    stream, one word per clock while it is ready (the shared write port taken).  The register
    file's word comes two clocks after its read; it enters a queue of :attr:`DEPTH` words,
    and a read is issued only while the queue has room for it and the words still in
    flight, so that a stalled write port never loses one.  ``freed`` pulses (with ``acc``)
    when a tile's last word is written."""

    #: Words the queue holds: the two in flight and two more keep one word a clock.
    DEPTH = 4

    def __init__(self):
        super().__init__({
            "cfg": In(GemmConfig),
            "job": In(stream.Signature(InFlight)),
            "store": Out(StoreSignature()),
            "d": Out(stream.Signature(DWrite)),
            "freed": Out(1), "acc": Out(1), "busy": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        cfg = self.cfg
        m.submodules.queue = queue = fifo.SyncFIFOBuffered(width=_Stored.as_shape().size,
                                                           depth=self.DEPTH)
        active = Signal()                     # words left to read
        line, word = Signal(4), Signal(2)
        row = Signal(ADDR_BITS)
        wpl = Mux(cfg.acc_f16, 2, 4)            # D words per tile row
        d_stride = Mux(cfg.acc_f16, cfg.tiles_n.shift_left(1), cfg.tiles_n.shift_left(2))
        last = (line == 15) & (word == wpl - 1)
        # The reads in flight: issued one and two clocks ago, with their address and last flag.
        fly1, fly1_addr, fly1_last = Signal(), Signal(ADDR_BITS), Signal()
        fly2, fly2_addr, fly2_last = Signal(), Signal(ADDR_BITS), Signal()
        # The tile's first address one clock after the job is taken (a registered product).
        prep, prod, col = Signal(), Signal(ADDR_BITS), Signal(ADDR_BITS)
        job = self.job.payload
        drained = ~active & ~prep & ~fly1 & ~fly2 & (queue.level == 0)
        m.d.comb += self.job.ready.eq(drained)
        with m.If(self.job.valid & self.job.ready):
            m.d.sync += [prep.eq(1), self.acc.eq(job.acc), line.eq(0), word.eq(0),
                         prod.eq(job.ti.shift_left(4) * d_stride),
                         col.eq(Mux(cfg.acc_f16, job.tj.shift_left(1), job.tj.shift_left(2)))]
        with m.If(prep):
            m.d.sync += [prep.eq(0), active.eq(1), row.eq(cfg.d_base + prod + col)]
        read = active & (queue.level + fly1 + fly2 < self.DEPTH)
        m.d.comb += [self.store.en.eq(read), self.store.frag.eq(self.acc), self.store.col.eq(0),
                     self.store.f16.eq(cfg.acc_f16), self.store.line.eq(line),
                     self.store.word.eq(word), self.busy.eq(~drained)]
        m.d.sync += [fly1.eq(read), fly1_addr.eq(row + word), fly1_last.eq(last),
                     fly2.eq(fly1), fly2_addr.eq(fly1_addr), fly2_last.eq(fly1_last)]
        with m.If(read):
            with m.If(word == wpl - 1):
                m.d.sync += [word.eq(0), line.eq(line + 1), row.eq(row + d_stride)]
            with m.Else():
                m.d.sync += word.eq(word + 1)
            with m.If(last):
                m.d.sync += active.eq(0)
        into, out = Signal(_Stored), Signal(_Stored)
        m.d.comb += [into.d.addr.eq(fly2_addr), into.d.data.eq(self.store.data),
                     into.last.eq(fly2_last),
                     queue.w_en.eq(fly2), queue.w_data.eq(into), out.eq(queue.r_data),
                     self.d.valid.eq(queue.r_rdy), self.d.payload.eq(out.d),
                     queue.r_en.eq(self.d.ready),
                     self.freed.eq(queue.r_rdy & self.d.ready & out.last)]
        return m


class MatmulTWarp(wiring.Component):
    """One warp running matmulT: for each 16x16 tile of D it is given, for each 16-wide step of
    K: load the A and B tiles, mma_sync into the tile's accumulator; then store the tile.

    Small engines overlap, so that the core takes a beat every clock:

    * the :class:`TileLoader` reads the A and B tiles of the next step at once into one of two
      fragment pairs of the register file (double buffering);
    * the :class:`tcore.rtl.feeder.BeatFeeder` sends a loaded pair's 64 beats to the core, one per
      clock, with C = 0 on a tile's first step (matmulT's ``fill_fragment(c, 0)``) and the
      accumulator after that; back-to-back steps leave no gap;
    * the :class:`tcore.rtl.feeder.DrainD` writes D blocks into the accumulator named by the head of
      the write-back queue (a ``SyncFIFOBuffered`` of the steps in the core);
    * the :class:`TileStorer` writes finished accumulators (the store queue) to D while the next
      tile runs in the other accumulator.

    A step therefore occupies the core for 64 clocks (``64 * 64 // lanes`` with a core of
    fewer lanes, whose ``i.ready`` paces the feeder); with K >= 32 nothing waits in steady
    state.  A 2:4 sparse step (``cfg.sparse``, logical K 32) is 64 sparse beats too, 128
    logical FMA each; its load takes 64 clocks (B's 32 rows) plus two, so a 64-lane core
    gets a step every 66 clocks.  ``run`` low holds every engine in reset (a cleared warp
    starts from nothing).  ``sparse=False`` builds the warp without the 2:4 hardware (core
    select network, metadata, B's second read port).
    """

    def __init__(self, *, lanes: int = 64, sparse: bool = True):
        super().__init__({
            "cfg": In(GemmConfig),
            "run": In(1),                       # high while a GEMM runs; low clears the warp
            "claim": Out(stream.Signature(0)), "tile": In(tile_layout(TILE_BITS)),
            "a": In(WORD_READ), "b": In(WORD_READ),                  # A (and E), B
            "d": Out(stream.Signature(DWrite)),                      # D, a word at a time
            "stored": Out(1),                   # one clock per tile written to D
            "beats": Out(1),                    # one clock per beat accepted by the core
            "idle": Out(1),
        })
        # Column-major loads: B in the TN layout (b_cols).  Pair p's B is fragment 2p, and
        # 2p + 1 for a sparse step's K rows 16..31.
        self.bank = FragmentBank(a_frags=2, b_frags=4, acc_frags=2, load_ports=2,
                                 col_major=True, sparse=sparse)
        self.core = MMA4(lanes=lanes, sparse=sparse)

    def elaborate(self, platform):
        m = Module()
        bank, loader, feeder, drain, storer, wbq, stq = self._parts(m)
        cfg = self.cfg

        # ---- loaded pairs ----------------------------------------------------------------
        pair_full = Signal(2)
        pair_info = [Signal(StepInfo, name=f"pair{p}") for p in range(2)]
        m.d.comb += loader.pair_full.eq(pair_full)
        set_full, clr_full = Signal(2), Signal(2)
        with m.If(loader.loaded):
            for p in range(2):
                with m.If(loader.pair == p):
                    m.d.comb += set_full[p].eq(1)
                    m.d.sync += pair_info[p].eq(loader.info)

        # ---- feeding: a full pair and (on a tile's first step) a free accumulator ---------
        fp = Signal()                            # pair to feed next
        cur_acc = Signal(init=1)                 # accumulator of the tile being fed
        acc_busy = Signal(2)                     # an accumulator holds a tile not yet stored
        info = Mux(fp, pair_info[1].as_value(), pair_info[0].as_value())
        info = StepInfo(info)
        next_acc = Mux(info.first, ~cur_acc, cur_acc)
        acc_free = ~acc_busy.bit_select(next_acc, 1) | ~info.first
        feeding_pair = Signal()                  # the pair the feeder reads
        go = feeder.ready & pair_full.bit_select(fp, 1) & acc_free & wbq.w_rdy
        m.d.comb += [feeder.start.eq(go), feeder.a.eq(fp), feeder.b.eq(Cat(C(0, 1), fp)),
                     feeder.c.eq(next_acc),
                     feeder.mode.kind.eq(cfg.kind), feeder.mode.acc_f16.eq(cfg.acc_f16),
                     feeder.mode.a_alt.eq(cfg.a_alt), feeder.mode.b_alt.eq(cfg.b_alt),
                     feeder.mode.sat.eq(cfg.sat), feeder.mode.sparse.eq(cfg.sparse),
                     feeder.zero_c.eq(info.first)]
        # The step's outputs leave the core a few clocks after its first beat, so the
        # write-back learns its destination when the step starts.
        wb_in = InFlight(wbq.w_data)
        m.d.comb += [wbq.w_en.eq(go), wb_in.acc.eq(next_acc), wb_in.last.eq(info.last),
                     wb_in.ti.eq(info.ti), wb_in.tj.eq(info.tj)]
        set_busy, clr_busy = Signal(2), Signal(2)
        with m.If(go):
            m.d.sync += [cur_acc.eq(next_acc), fp.eq(~fp), feeding_pair.eq(fp)]
            with m.If(info.first):
                m.d.comb += set_busy.bit_select(next_acc, 1).eq(1)
        # A pair is free once its last beat has been read (the beat register holds it then).
        with m.If(feeder.last):
            m.d.comb += clr_full.bit_select(feeding_pair, 1).eq(1)

        # ---- write-back: D blocks into the head step's accumulator ------------------------
        head = InFlight(wbq.r_data)
        m.d.comb += [drain.frag.eq(head.acc), wbq.r_en.eq(drain.done)]
        st_in = InFlight(stq.w_data)
        m.d.comb += [stq.w_en.eq(drain.done & head.last), st_in.eq(head)]
        wiring.connect(m, stq.r_stream, storer.job)
        with m.If(storer.freed):
            m.d.comb += clr_busy.bit_select(storer.acc, 1).eq(1)
        m.d.sync += [pair_full.eq((pair_full | set_full) & ~clr_full),
                     acc_busy.eq((acc_busy | set_busy) & ~clr_busy)]

        m.d.comb += self.idle.eq(loader.idle & (pair_full == 0) & ~feeder.busy & ~wbq.r_rdy &
                                 ~stq.r_rdy & ~storer.busy)
        # A cleared warp starts from nothing.
        return ResetInserter({"sync": ~self.run})(m)


    def _parts(self, m):
        """The warp's engines, connected to one another and to the warp's ports."""
        m.submodules.bank = bank = self.bank
        m.submodules.core = core = self.core
        m.submodules.loader = loader = TileLoader()
        m.submodules.feeder = feeder = BeatFeeder()
        m.submodules.drain = drain = DrainD()
        m.submodules.storer = storer = TileStorer()
        qbits = Shape.cast(InFlight).width
        m.submodules.wbq = wbq = fifo.SyncFIFOBuffered(width=qbits, depth=2)
        m.submodules.stq = stq = fifo.SyncFIFOBuffered(width=qbits, depth=2)
        cfg = self.cfg

        for i in range(2):
            wiring.connect(m, loader.load[i], bank.load[i])
        wiring.connect(m, feeder.rd, bank.mma_rd)
        wiring.connect(m, feeder.beat, core.i)
        wiring.connect(m, core.o, drain.d)
        wiring.connect(m, drain.wr, bank.mma_wr)
        wiring.connect(m, storer.store, bank.store)
        wiring.connect(m, wiring.flipped(self.claim), loader.claim)
        wiring.connect(m, wiring.flipped(self.a), loader.a)
        wiring.connect(m, wiring.flipped(self.b), loader.b)
        wiring.connect(m, storer.d, wiring.flipped(self.d))
        m.d.comb += [
            loader.cfg.eq(cfg), loader.run.eq(self.run), loader.tile.eq(self.tile),
            storer.cfg.eq(cfg), self.stored.eq(storer.freed), self.beats.eq(feeder.accepted),
        ]
        return bank, loader, feeder, drain, storer, wbq, stq


class GemmTop(wiring.Component):
    """The GEMM top (the ``gemm`` design): ``warps`` matmulT warps, each with its own 4x4x4 core,
    sharing a memory, and a tile dispenser that hands out 16x16 tiles of D in row-major order.

    Write the operands into the memory, set ``cfg``, pulse ``start``; ``done`` rises when every
    tile is stored, and ``cycles`` holds the clocks from ``start`` to ``done``.  ``beats``
    counts core beats (64 FMA each; 128 logical FMA each when sparse), so utilisation =
    beats * 64 / (cycles * warps * lanes) either way.

    The memory (``lib.memory.Memory``, ``mem_words`` words of 128 bits) models global memory
    with two read ports per warp and one write port, shared by the warps' storers (lowest
    warp first; a storer waits while another writes) and the bench's host port, whose
    ``host_rdata`` is the word at ``host_addr`` two clocks later (one read a clock).

    Parameters
    ----------
    warps : int, 1..8
        Warps, each with one MMA4 core: peak ``lanes * warps`` FMA per clock.
    mem_words : int
    lanes : 64, 32 or 16
        Each core's multipliers (:class:`tcore.rtl.mma4.MMA4`).
    sparse : bool
        2:4 sparse A (``GemmConfig.sparse``) supported: each beat is then 128 logical FMA.
    """

    def __init__(self, *, warps: int = 1, mem_words: int = 32768, lanes: int = 64,
                 sparse: bool = True):
        if not 1 <= warps <= MAX_WARPS:
            raise ValueError(f"Warps must be 1 to {MAX_WARPS}, not {warps!r}")
        if mem_words < 64 or mem_words & (mem_words - 1) or mem_words > (1 << ADDR_BITS):
            raise ValueError(f"Memory words must be a power of two in 64..2**{ADDR_BITS}, not {mem_words!r}")
        self._warps, self._mem_words = warps, mem_words
        self._lanes, self._sparse = lanes, bool(sparse)
        self.warp_units = [MatmulTWarp(lanes=lanes, sparse=sparse) for _ in range(warps)]
        super().__init__({
            "cfg": In(GemmConfig), "start": In(1),
            "busy": Out(1), "done": Out(1), "cycles": Out(32), "beats": Out(32), "tiles_done": Out(2 * TILE_BITS),
            **host_port(mem_words),
        })

    @property
    def warps(self):
        return self._warps

    @property
    def lanes(self):
        return self._lanes

    @property
    def sparse(self):
        return self._sparse

    @property
    def mem_words(self):
        return self._mem_words

    def elaborate(self, platform):
        m = Module()
        m.submodules.mem = mem = memory.Memory(shape=WORD_BITS, depth=self._mem_words, init=[])
        hrd, wr = mem.read_port(), mem.write_port()
        # The host's read data leaves through a register of its own: the block RAM's
        # clock-to-out (5.8 ns on ECP5) then leaves a whole clock for the wire to the reader.
        m.d.comb += hrd.addr.eq(self.host_addr)
        m.d.sync += self.host_rdata.eq(hrd.data)
        # One write port (several make simulators copy the whole array every clock): the host
        # port while a bench writes, else the lowest-numbered warp that has a word to store.
        with m.If(self.host_we):
            m.d.comb += [wr.addr.eq(self.host_addr), wr.data.eq(self.host_wdata), wr.en.eq(1)]
        writer_busy = self.host_we
        cfg = Signal(GemmConfig)
        run = Signal()

        m.submodules.dispenser = disp = TileDispenser(ports=self._warps, tile_bits=TILE_BITS)
        m.d.comb += [disp.start.eq(self.start & ~run), disp.tiles_m.eq(self.cfg.tiles_m),
                     disp.tiles_n.eq(self.cfg.tiles_n)]
        stored_now = Signal(range(self._warps + 1))
        beats_now = Signal(range(self._warps + 1))
        with m.If(self.start & ~run):
            m.d.sync += [run.eq(1), cfg.eq(self.cfg),
                         self.tiles_done.eq(0), self.cycles.eq(0), self.beats.eq(0), self.done.eq(0)]
        for w, warp in enumerate(self.warp_units):
            m.submodules[f"warp{w}"] = warp
            rd_a, rd_b = mem.read_port(), mem.read_port()
            with m.If(warp.d.valid & ~writer_busy):
                m.d.comb += [wr.addr.eq(warp.d.payload.addr), wr.data.eq(warp.d.payload.data),
                             wr.en.eq(1), warp.d.ready.eq(1)]
            busy_next = Signal(name=f"writer_busy{w}")
            m.d.comb += busy_next.eq(writer_busy | warp.d.valid)
            writer_busy = busy_next
            m.d.comb += [warp.cfg.eq(cfg), warp.run.eq(run),
                         rd_a.addr.eq(warp.a.addr), warp.a.data.eq(rd_a.data), rd_a.en.eq(warp.a.en),
                         rd_b.addr.eq(warp.b.addr), warp.b.data.eq(rd_b.data), rd_b.en.eq(warp.b.en),
                         warp.tile.eq(disp.tile)]
            wiring.connect(m, warp.claim, disp.claims[w])
        m.d.comb += [stored_now.eq(sum(w.stored for w in self.warp_units)),
                     beats_now.eq(sum(w.beats for w in self.warp_units))]
        # The run ends in the clock its last tiles are stored.  Tiles still to store (``left``)
        # are compared with the 0..warps this clock could store from registers only: the
        # stores themselves (which follow the host's and the warps' write handshake) then
        # meet only the small ``stored_now == k`` select, not an adder and a wide compare.
        left = Signal(2 * TILE_BITS)
        left_is = [Signal(name=f"left_is{k}") for k in range(self._warps + 1)]
        m.d.comb += [lk.eq(left == k) for k, lk in enumerate(left_is)]
        finished = Signal()             # (an empty GEMM, 0 tiles, ends in its first clock)
        m.d.comb += finished.eq(Cat(lk & (stored_now == k) for k, lk in enumerate(left_is)).any())
        with m.If(self.start & ~run):
            m.d.sync += left.eq(self.cfg.tiles_m * self.cfg.tiles_n)
        with m.If(run):
            m.d.sync += [self.cycles.eq(self.cycles + 1), self.tiles_done.eq(self.tiles_done + stored_now),
                         self.beats.eq(self.beats + beats_now), left.eq(left - stored_now)]
            with m.If(finished):
                m.d.sync += [run.eq(0), self.done.eq(1)]
        m.d.comb += self.busy.eq(run)
        return m
