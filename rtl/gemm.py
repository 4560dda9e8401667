"""The tiled-GEMM top: the classic matmulT kernel in hardware, on 1 to 8 warps.

Golden twin: :func:`golden.gemm.matmul_t`.
"""

from amaranth import *
from amaranth.lib import data, memory, wiring
from amaranth.lib.wiring import In, Out

from .fragments import ACCUMULATOR, MATRIX_A, MATRIX_B, WORD_BITS, FragmentBank
from .mma4 import MMA4

__all__ = ["GemmConfig", "MatmulTWarp", "GemmTop"]

ADDR_BITS = 20


class GemmConfig(data.Struct):
    """The GEMM to run, held stable from ``start`` to ``done``.

    Word addresses are of 128-bit memory words (16 bytes).  A is M x K row-major (leading
    dimension K), B is K x N row-major (leading dimension N), D is M x N row-major, FP32 or
    FP16 (``acc_f16``).  D = A·B, as matmulT computes it (``fill_fragment(c, 0)``).
    """

    tiles_m: 8        # M / 16
    tiles_n: 8        # N / 16
    steps: 8          # K / 16
    a_base: ADDR_BITS
    b_base: ADDR_BITS
    d_base: ADDR_BITS
    bf16: 1
    acc_f16: 1


class TileGrant(data.Struct):
    ti: 8
    tj: 8


class MatmulTWarp(wiring.Component):
    """One warp running matmulT: for each 16x16 tile of D it is given, for each 16-wide step of
    K: load the A and B tiles, mma_sync into the tile's accumulator; then store the tile.

    Three engines overlap, so that the core takes a beat every clock:

    * the *loader* reads the A and B tiles of the next step at once (two memory read ports, two
      bank load ports, 32 clocks) into one of two fragment pairs (double buffering);
    * the *feeder* sends a loaded pair's 64 beats to the core, one per clock, with C = 0 on a
      tile's first step (matmulT's ``fill_fragment(c, 0)``) and the accumulator after that;
    * the *storer* writes a finished accumulator to D (one word per clock) while the next tile
      runs in the other accumulator.

    A step therefore occupies the core for 64 clocks; with K >= 32 nothing waits in steady state.
    """

    def __init__(self):
        super().__init__({
            "cfg": In(GemmConfig),
            "run": In(1),                       # high while a GEMM runs; low clears the warp
            "tile_req": Out(1), "tile_ack": In(1), "tile": In(TileGrant), "tile_none": In(1),
            "a_addr": Out(ADDR_BITS), "a_data": In(WORD_BITS),
            "b_addr": Out(ADDR_BITS), "b_data": In(WORD_BITS),
            "d_addr": Out(ADDR_BITS), "d_data": Out(WORD_BITS), "d_en": Out(1), "d_ready": In(1),
            "stored": Out(1),                   # one clock per tile written to D
            "beats": Out(1),                    # one clock per beat accepted by the core
            "idle": Out(1),
        })
        self.bank = FragmentBank(matrix_frags=4, acc_frags=2, load_ports=2, col_major=False)
        self.core = MMA4()

    def elaborate(self, platform):
        m = Module()
        m.submodules.bank = bank = self.bank
        m.submodules.core = core = self.core
        cfg = self.cfg

        pair_full = Signal(2)
        pair_first = Signal(2)                  # the pair holds a tile's first step
        pair_last = Signal(2)                   # ... its last step
        pair_ti = [Signal(8, name=f"pair{p}_ti") for p in range(2)]
        pair_tj = [Signal(8, name=f"pair{p}_tj") for p in range(2)]
        acc_busy = Signal(2)                    # an accumulator holds a tile not yet stored

        # ---- loader ----------------------------------------------------------------------
        have = Signal()                          # a tile is being loaded
        lti, ltj, lstep = Signal(8), Signal(8), Signal(8)
        lp = Signal()                            # pair being filled
        loading = Signal()
        line, word = Signal(4), Signal()
        a_row, b_row = Signal(ADDR_BITS), Signal(ADDR_BITS)     # word address of the current line
        pend, pend_line, pend_word, pend_last = Signal(), Signal(4), Signal(), Signal()

        m.d.comb += self.tile_req.eq(self.run & ~have & ~self.tile_none)
        with m.If(self.tile_req & self.tile_ack):
            m.d.sync += [have.eq(1), lti.eq(self.tile.ti), ltj.eq(self.tile.tj), lstep.eq(0)]
        a_stride = cfg.steps.shift_left(1)        # words per row of A: K / 8
        b_stride = cfg.tiles_n.shift_left(1)      # words per row of B: N / 8
        with m.If(have & ~loading & ~pend & ~Mux(lp, pair_full[1], pair_full[0])):
            # A tile rows 16*ti.., columns 16*step..; B tile rows 16*step.., columns 16*tj..
            m.d.sync += [loading.eq(1), line.eq(0), word.eq(0),
                         a_row.eq(cfg.a_base + (lti.shift_left(4) * a_stride)[:ADDR_BITS] + lstep.shift_left(1)),
                         b_row.eq(cfg.b_base + (lstep.shift_left(4) * b_stride)[:ADDR_BITS] + ltj.shift_left(1))]
        last_word = (line == 15) & (word == 1)
        m.d.comb += [self.a_addr.eq(a_row + word), self.b_addr.eq(b_row + word)]
        m.d.sync += pend.eq(0)
        with m.If(loading):
            m.d.sync += [pend.eq(1), pend_line.eq(line), pend_word.eq(word), pend_last.eq(last_word),
                         word.eq(~word)]
            with m.If(word):
                m.d.sync += [line.eq(line + 1), a_row.eq(a_row + a_stride), b_row.eq(b_row + b_stride)]
            with m.If(last_word):
                m.d.sync += loading.eq(0)
        for port, kind, frag, dat in ((bank.lw[0], MATRIX_A, 2 * lp, self.a_data),
                                      (bank.lw[1], MATRIX_B, 2 * lp + 1, self.b_data)):
            m.d.comb += [port.en.eq(pend), port.kind.eq(kind), port.col.eq(0), port.f16.eq(0),
                         port.frag.eq(frag), port.line.eq(pend_line), port.word.eq(pend_word),
                         port.data.eq(dat)]
        with m.If(pend & pend_last):
            last_step = lstep == cfg.steps - 1
            for p in range(2):
                with m.If(lp == p):
                    m.d.sync += [pair_full[p].eq(1), pair_first[p].eq(lstep == 0),
                                 pair_last[p].eq(last_step), pair_ti[p].eq(lti), pair_tj[p].eq(ltj)]
            m.d.sync += [lp.eq(~lp), lstep.eq(lstep + 1)]
            with m.If(last_step):
                m.d.sync += have.eq(0)

        # ---- feeder ----------------------------------------------------------------------
        fp = Signal()                            # pair being fed
        feeding = Signal()
        cur_acc = Signal(init=1)                 # accumulator of the tile being fed
        bi, bj, bs = Signal(2), Signal(2), Signal(2)
        f_first = Signal()
        fp_full = Mux(fp, pair_full[1], pair_full[0])
        fp_first = Mux(fp, pair_first[1], pair_first[0])
        next_acc = Mux(fp_first, ~cur_acc, cur_acc)
        acc_free = ~Mux(next_acc, acc_busy[1], acc_busy[0]) | ~fp_first
        # The step's outputs start leaving the core a few clocks after its first beat, so the
        # write-back learns its destination when the step starts.
        wb_push = Signal()
        wb_acc, wb_last = Signal(), Signal()
        wb_ti, wb_tj = Signal(8), Signal(8)
        m.d.comb += [wb_acc.eq(next_acc), wb_last.eq(Mux(fp, pair_last[1], pair_last[0])),
                     wb_ti.eq(Mux(fp, pair_ti[1], pair_ti[0])), wb_tj.eq(Mux(fp, pair_tj[1], pair_tj[0]))]
        with m.If(~feeding & fp_full & acc_free):
            m.d.comb += wb_push.eq(1)
            m.d.sync += [feeding.eq(1), bi.eq(0), bj.eq(0), bs.eq(0), cur_acc.eq(next_acc),
                         f_first.eq(fp_first)]
            with m.If(fp_first):
                for a in range(2):
                    with m.If(next_acc == a):
                        m.d.sync += acc_busy[a].eq(1)
        m.d.comb += [bank.mr_a.eq(2 * fp), bank.mr_b.eq(2 * fp + 1), bank.mr_c.eq(cur_acc),
                     bank.mr_i.eq(bi), bank.mr_j.eq(bj), bank.mr_s.eq(bs)]
        m.d.comb += [core.i.valid.eq(feeding),
                     core.i.payload.a.eq(bank.mr_beat_a), core.i.payload.b.eq(bank.mr_beat_b),
                     core.i.payload.c.eq(Mux(f_first, 0, bank.mr_beat_c.as_value())),
                     core.i.payload.last.eq(bs == 3),
                     core.i.payload.bf16.eq(cfg.bf16), core.i.payload.acc_f16.eq(cfg.acc_f16)]
        m.d.comb += self.beats.eq(core.i.valid & core.i.ready)
        with m.If(core.i.valid & core.i.ready):
            m.d.sync += bs.eq(bs + 1)
            with m.If(bs == 3):
                m.d.sync += bj.eq(bj + 1)
                with m.If(bj == 3):
                    m.d.sync += bi.eq(bi + 1)
                    with m.If(bi == 3):
                        m.d.sync += feeding.eq(0)
                        for p in range(2):
                            with m.If(fp == p):
                                m.d.sync += pair_full[p].eq(0)
                        m.d.sync += fp.eq(~fp)

        # ---- write-back: D blocks into the accumulator, in order -------------------------
        # A two-entry queue of the steps whose outputs are still coming out of the core.
        q_acc, q_last = Signal(2), Signal(2)
        q_ti = [Signal(8, name=f"q{e}_ti") for e in range(2)]
        q_tj = [Signal(8, name=f"q{e}_tj") for e in range(2)]
        q_n = Signal(2)
        oi, oj = Signal(2), Signal(2)
        h_acc, h_last, h_ti, h_tj = q_acc[0], q_last[0], q_ti[0], q_tj[0]
        pop = Signal()
        m.d.comb += [core.o.ready.eq(1), bank.mw_en.eq(core.o.valid), bank.mw_frag.eq(h_acc),
                     bank.mw_i.eq(oi), bank.mw_j.eq(oj), bank.mw_data.eq(core.o.payload)]
        with m.If(core.o.valid):
            m.d.sync += oj.eq(oj + 1)
            with m.If(oj == 3):
                m.d.sync += oi.eq(oi + 1)
                with m.If(oi == 3):
                    m.d.comb += pop.eq(1)
        # queue update: entry 0 is the head
        n_after_pop = Mux(pop, q_n - 1, q_n)
        with m.If(pop):
            m.d.sync += [q_acc[0].eq(q_acc[1]), q_last[0].eq(q_last[1]),
                         q_ti[0].eq(q_ti[1]), q_tj[0].eq(q_tj[1])]
        with m.If(wb_push):
            with m.If(n_after_pop == 0):
                m.d.sync += [q_acc[0].eq(wb_acc), q_last[0].eq(wb_last), q_ti[0].eq(wb_ti), q_tj[0].eq(wb_tj)]
            with m.Else():
                m.d.sync += [q_acc[1].eq(wb_acc), q_last[1].eq(wb_last), q_ti[1].eq(wb_ti), q_tj[1].eq(wb_tj)]
        m.d.sync += q_n.eq(n_after_pop + wb_push)

        # ---- storer ----------------------------------------------------------------------
        # Finished tiles wait in a two-entry queue (one per accumulator).
        s_n = Signal(2)
        s_acc, s_ti, s_tj = Signal(2), [Signal(8, name=f"s{e}_ti") for e in range(2)], \
            [Signal(8, name=f"s{e}_tj") for e in range(2)]
        storing = Signal()
        st_acc = Signal()
        st_line, st_word = Signal(4), Signal(2)
        st_row = Signal(ADDR_BITS)
        done_push = pop & h_last
        wpl = Mux(cfg.acc_f16, 2, 4)            # D words per tile row
        d_stride = Mux(cfg.acc_f16, cfg.tiles_n.shift_left(1), cfg.tiles_n.shift_left(2))
        st_last = (st_line == 15) & (st_word == wpl - 1)
        start_store = ~storing & (s_n != 0)
        with m.If(start_store):
            m.d.sync += [storing.eq(1), st_acc.eq(s_acc[0]), st_line.eq(0), st_word.eq(0),
                         st_row.eq(cfg.d_base + (s_ti[0].shift_left(4) * d_stride)[:ADDR_BITS] +
                                   Mux(cfg.acc_f16, s_tj[0].shift_left(1), s_tj[0].shift_left(2)))]
        s_pop = start_store
        with m.If(s_pop):
            m.d.sync += [s_acc[0].eq(s_acc[1]), s_ti[0].eq(s_ti[1]), s_tj[0].eq(s_tj[1])]
        s_after = Mux(s_pop, s_n - 1, s_n)
        with m.If(done_push):
            with m.If(s_after == 0):
                m.d.sync += [s_acc[0].eq(h_acc), s_ti[0].eq(h_ti), s_tj[0].eq(h_tj)]
            with m.Else():
                m.d.sync += [s_acc[1].eq(h_acc), s_ti[1].eq(h_ti), s_tj[1].eq(h_tj)]
        m.d.sync += s_n.eq(s_after + done_push)
        m.d.comb += [bank.sr_frag.eq(st_acc), bank.sr_col.eq(0), bank.sr_f16.eq(cfg.acc_f16),
                     bank.sr_line.eq(st_line), bank.sr_word.eq(st_word)]
        with m.If(storing):
            m.d.comb += [self.d_en.eq(1), self.d_addr.eq(st_row + st_word), self.d_data.eq(bank.sr_data)]
        with m.If(storing & self.d_ready):
            with m.If(st_word == wpl - 1):
                m.d.sync += [st_word.eq(0), st_line.eq(st_line + 1), st_row.eq(st_row + d_stride)]
            with m.Else():
                m.d.sync += st_word.eq(st_word + 1)
            with m.If(st_last):
                m.d.comb += self.stored.eq(1)
                m.d.sync += storing.eq(0)
                for a in range(2):
                    with m.If(st_acc == a):
                        m.d.sync += acc_busy[a].eq(0)

        m.d.comb += self.idle.eq(~have & ~loading & ~pend & (pair_full == 0) & ~feeding &
                                 (q_n == 0) & (s_n == 0) & ~storing)
        # A cleared warp starts from nothing.
        with m.If(~self.run):
            m.d.sync += [have.eq(0), loading.eq(0), pend.eq(0), pair_full.eq(0), feeding.eq(0),
                         q_n.eq(0), s_n.eq(0), storing.eq(0), acc_busy.eq(0), oi.eq(0), oj.eq(0),
                         lp.eq(0), fp.eq(0), cur_acc.eq(1)]
        return m


class GemmTop(wiring.Component):
    """The GEMM top (the ``gemm`` design): ``cores`` matmulT warps, each with its own 4x4x4 core,
    sharing a memory, and a tile dispenser that hands out 16x16 tiles of D in row-major order.

    Write the operands into the memory, set ``cfg``, pulse ``start``; ``done`` rises when every
    tile is stored, and ``cycles`` holds the clocks from ``start`` to ``done``.  ``beats``
    counts core beats (64 FMA each), so utilisation = beats / (cycles * cores).

    The memory (``lib.memory.Memory``, ``mem_words`` words of 128 bits) models global memory
    with two read ports per warp and one write port, shared by the warps' storers (lowest
    warp first; a storer waits while another writes) and the bench's host port.

    Parameters
    ----------
    cores : int, 1..8
        Warps, each with one MMA4 core: peak 64 * cores FMA per clock.
    mem_words : int
    """

    def __init__(self, *, cores: int = 1, mem_words: int = 32768):
        if not 1 <= cores <= 8:
            raise ValueError(f"Cores must be 1 to 8, not {cores!r}")
        if mem_words < 64 or mem_words & (mem_words - 1) or mem_words > (1 << ADDR_BITS):
            raise ValueError(f"Memory words must be a power of two in 64..2**{ADDR_BITS}, not {mem_words!r}")
        self._cores, self._mem_words = cores, mem_words
        self.warps = [MatmulTWarp() for _ in range(cores)]
        abits = (mem_words - 1).bit_length()
        super().__init__({
            "cfg": In(GemmConfig), "start": In(1),
            "busy": Out(1), "done": Out(1), "cycles": Out(32), "beats": Out(32), "tiles_done": Out(16),
            "host_addr": In(abits), "host_wdata": In(WORD_BITS), "host_we": In(1),
            "host_rdata": Out(WORD_BITS),
        })

    @property
    def cores(self):
        return self._cores

    @property
    def mem_words(self):
        return self._mem_words

    def elaborate(self, platform):
        m = Module()
        self.build_into(m, self)
        return m

    def build_into(self, m, io):
        """Build the GEMM top into module ``m`` with its ports on ``io`` (this component, or
        signals of a design that wraps it and wants the memory in its own module)."""
        m.submodules.mem = mem = memory.Memory(shape=WORD_BITS, depth=self._mem_words, init=[])
        hrd, wr = mem.read_port(), mem.write_port()
        m.d.comb += [hrd.addr.eq(io.host_addr), io.host_rdata.eq(hrd.data)]
        # One write port (several make simulators copy the whole array every clock): the host
        # port while a bench writes, else the lowest-numbered warp that has a word to store.
        with m.If(io.host_we):
            m.d.comb += [wr.addr.eq(io.host_addr), wr.data.eq(io.host_wdata), wr.en.eq(1)]
        writer_busy = io.host_we
        cfg = Signal(GemmConfig)
        run = Signal()
        total = Signal(16)
        m.d.comb += total.eq(cfg.tiles_m * cfg.tiles_n)
        next_ti, next_tj = Signal(8), Signal(8)
        issued = Signal(16)
        stored_now = Signal(range(self._cores + 1))
        beats_now = Signal(range(self._cores + 1))
        with m.If(io.start & ~run):
            m.d.sync += [run.eq(1), cfg.eq(io.cfg), next_ti.eq(0), next_tj.eq(0), issued.eq(0),
                         io.tiles_done.eq(0), io.cycles.eq(0), io.beats.eq(0), io.done.eq(0)]
        granted = Signal()
        for w, warp in enumerate(self.warps):
            m.submodules[f"warp{w}"] = warp
            rd_a, rd_b = mem.read_port(), mem.read_port()
            with m.If(warp.d_en & ~writer_busy):
                m.d.comb += [wr.addr.eq(warp.d_addr), wr.data.eq(warp.d_data), wr.en.eq(1),
                             warp.d_ready.eq(1)]
            busy_next = Signal(name=f"writer_busy{w}")
            m.d.comb += busy_next.eq(writer_busy | warp.d_en)
            writer_busy = busy_next
            m.d.comb += [warp.cfg.eq(cfg), warp.run.eq(run),
                         rd_a.addr.eq(warp.a_addr), warp.a_data.eq(rd_a.data),
                         rd_b.addr.eq(warp.b_addr), warp.b_data.eq(rd_b.data),
                         warp.tile.ti.eq(next_ti), warp.tile.tj.eq(next_tj),
                         warp.tile_none.eq(issued == total)]
            # One grant per clock, lowest-numbered requesting warp first.
            with m.If(warp.tile_req & ~granted & (issued != total)):
                m.d.comb += [warp.tile_ack.eq(1)]
            granted_next = Signal(name=f"granted{w}")
            m.d.comb += granted_next.eq(granted | (warp.tile_req & (issued != total)))
            granted = granted_next
        any_grant = granted
        with m.If(run & any_grant):
            m.d.sync += issued.eq(issued + 1)
            with m.If(next_tj == cfg.tiles_n - 1):
                m.d.sync += [next_tj.eq(0), next_ti.eq(next_ti + 1)]
            with m.Else():
                m.d.sync += next_tj.eq(next_tj + 1)
        m.d.comb += [stored_now.eq(sum(w.stored for w in self.warps)),
                     beats_now.eq(sum(w.beats for w in self.warps))]
        finished = Signal()
        m.d.comb += finished.eq((io.tiles_done + stored_now) == total)
        with m.If(run):
            m.d.sync += [io.cycles.eq(io.cycles + 1), io.tiles_done.eq(io.tiles_done + stored_now),
                         io.beats.eq(io.beats + beats_now)]
            with m.If(finished):
                m.d.sync += [run.eq(0), io.done.eq(1)]
        m.d.comb += io.busy.eq(run)
