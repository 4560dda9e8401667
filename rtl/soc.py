"""The GEMM accelerator as an SoC block (design ``soc``): AXI4-Lite control registers, an AXI4
memory master, an interrupt, and the WMMA warp doing the arithmetic.

Golden twin: :func:`tcore.golden.mma.mma` (D = A·B + C, or A·B, chained over K in steps of the kind's
block), in every Hopper kind: FP16, BF16, TF32, FP8 (E4M3, E5M2, mixed; FP32 or FP16 C/D) and
INT8 (S8, U8 x S8; wrap or satfinite), as ``FORMAT`` selects.  TF32, FP8 and INT8 read B
column-major (B^T, N x K row-major in memory: the "TN" layout cuBLAS needs for FP8), as their
fragments hold it; a K step is then 32 bytes along a row of A and of B^T in every kind.

Data flow, per 16x16 tile of D (row-major tiles):

1. C: read the C tile from memory into the scratch memory and ``load_matrix_sync`` it into the
   accumulator (``FORMAT.c_given``), or ``fill_fragment(c, 0)``;
2. for each K step (16 FP16/BF16, 8 TF32, 32 FP8/INT8): read the A and B tiles into the scratch memory,
   ``load_matrix_sync`` both, ``mma_sync``;
3. ``store_matrix_sync`` into the scratch memory and write the D tile to memory.

The AXI4 master moves one tile row per INCR burst (split where a burst would cross a 4 KiB
boundary, as AXI requires) and holds VALID and payload on every channel until READY.  Its read
and write engines run at the same time: reads keep up to 8 bursts in flight and take the next
warp's transfer as soon as the current one's addresses are out, so the warps' transfers follow
each other on the read channel without a gap, while a D tile goes out on the write channels
(up to 4 bursts in flight, one beat a clock).  A read answered with SLVERR or DECERR ends the
run with that error code in ``STATUS.error``: the rest of the data asked for is consumed, no
further request is made, and no D tile whose operands failed is written.  A bad
configuration is refused at ``start`` with an error code and no memory access at all: the
configuration is latched at ``start``, checked the next clock and the verdict acted on the
clock after (two clocks before the first tile is claimed, or the refusal is done).

With ``warps`` warps, each warp walks its own D tiles (claimed in row-major order as it
becomes free), and its transfers share the AXI4 master with the other warps', so that one
warp's memory traffic overlaps the others' arithmetic.  Within one warp the steps run one after
another: one warp is bounded by its own sequence (read, load, mma_sync), several by the read
channel (a 16x16 A and B tile a K step: 64 beats of 128 bits).
"""

from functools import partial

from amaranth import *
from amaranth.lib import data, memory, stream, wiring
from amaranth.lib.wiring import In, Out

from tcore.numerics.formats import INPUT_FORMATS

from .sizes import MAX_WARPS
from .axil import AxiLiteRegs
from .dispenser import TileDispenser
from .fragments import ACCUMULATOR, MATRIX_A, MATRIX_B, WORD_BITS
from .regmap import ErrorCode, InFormat
from .formats import InputKind
from .wmma import Op, WarpTop

__all__ = ["AxiSignature", "TileDma", "TileWorker", "GemmSoc", "RunConfig", "TileClaim", "DmaRequest", "RESP_OKAY", "RESP_SLVERR", "RESP_DECERR"]

RESP_OKAY, RESP_SLVERR, RESP_DECERR = 0, 2, 3
MAX_TILES_LOG2 = 10               # M, N, K up to 16 * 1024 (the CAPS field says so)
SCRATCH_WORDS = 128               # A tile (32 words), B tile (32), C/D tile (64)
A_WORD, B_WORD, C_WORD = 0, 32, 64


class AxiSignature(wiring.Signature):
    """An AXI4 interface from the master's side (``Out`` = driven by the master): INCR bursts,
    ``data_width``-bit data, ``addr_width``-bit byte addresses, 1-bit IDs (always 0)."""

    def __init__(self, addr_width: int, data_width: int):
        if data_width not in (32, 64, 128):
            raise ValueError(f"AXI data width must be 32, 64 or 128, not {data_width!r}")
        self._aw, self._dw = addr_width, data_width
        super().__init__({
            "awid": Out(1), "awaddr": Out(addr_width), "awlen": Out(8), "awsize": Out(3),
            "awburst": Out(2), "awcache": Out(4), "awprot": Out(3), "awvalid": Out(1),
            "awready": In(1),
            "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wlast": Out(1),
            "wvalid": Out(1), "wready": In(1),
            "bid": In(1), "bresp": In(2), "bvalid": In(1), "bready": Out(1),
            "arid": Out(1), "araddr": Out(addr_width), "arlen": Out(8), "arsize": Out(3),
            "arburst": Out(2), "arcache": Out(4), "arprot": Out(3), "arvalid": Out(1),
            "arready": In(1),
            "rid": In(1), "rdata": In(data_width), "rresp": In(2), "rlast": In(1),
            "rvalid": In(1), "rready": Out(1),
        })

    @property
    def addr_width(self):
        return self._aw

    @property
    def data_width(self):
        return self._dw


class DmaRequest(data.Struct):
    """One tile transfer: what a warp asks of the AXI4 master, and the payload of
    :class:`TileDma`'s request streams."""
    write: 1
    addr: 64
    stride: 32           # bytes between rows
    rows: 5              # rows of the tile (a warp's tiles: 16)
    row_words: 3         # 128-bit words a row
    word: 7              # first scratch word
    tag: 3               # the warp asking (its index): where the read data goes


class TileDma(wiring.Component):
    """The AXI4 master: moves tiles of ``rows`` rows of ``row_words`` 128-bit words between AXI
    memory (row r at byte address ``addr + r * stride``) and a warp's scratch memory (word
    ``word`` on, rows packed).  A read engine and a write engine run at the same time, each
    with its own request port and its own AXI channels.

    Requests are streams of :class:`DmaRequest` (``rd``, ``wr``; ``write`` unused).  Reads: a
    request is taken (``rd.valid`` and ``rd.ready`` in one clock) with its ``tag`` (the warp);
    the read addresses of its rows go out back to back (one a clock while ``arready``), up to
    :attr:`MAX_READS` bursts in flight, while the data of earlier bursts arrives, in order (one
    ID).  The next request is taken as soon as every address
    of the current one has gone out, so the transfers of several warps follow each other on
    the bus without a gap: a queue of two transfers (the one whose data is arriving, the one
    whose addresses go out) routes each word to its warp (``sw`` with ``sw_tag``).
    ``rd_done`` pulses with ``rd_done_tag`` when a transfer's data is all in.  After a
    non-OKAY response (``rd_error``, kept until ``clear``) no further address is sent, the
    data of the bursts already asked for is taken and dropped, and every transfer ends with
    that error, later ones at once.

    Writes (``wr``): one transfer at a time; its bursts' addresses go out back to back, up
    to :attr:`MAX_WRITES` bursts in flight, the data one beat a clock (the scratch words read
    ahead), WLAST on each burst's last beat.  ``wr_done`` pulses when every burst is answered;
    after a non-OKAY response (``wr_error``, kept until ``clear``) no further address is sent,
    the bursts already asked for get their data, and later transfers end at once.

    The scratch ports, Amaranth's memory port signatures driven: ``sw`` writes a word (of warp
    ``sw_tag``), ``sr`` reads one (``data`` the clock after ``addr``; ``en`` left high).
    ``busy``: a transfer is under way on either side.
    """

    MAX_READS = 8
    MAX_WRITES = 4

    def __init__(self, *, addr_width: int = 32, data_width: int = 128):
        self._aw, self._dw = addr_width, data_width
        sbits = (SCRATCH_WORDS - 1).bit_length()
        super().__init__({
            "axi": Out(AxiSignature(addr_width, data_width)),
            "clear": In(1), "busy": Out(1), "rd_busy": Out(1), "wr_busy": Out(1),
            "rd": In(stream.Signature(DmaRequest)),
            "rd_done": Out(1), "rd_done_tag": Out(3), "rd_error": Out(2),
            "wr": In(stream.Signature(DmaRequest)),
            "wr_done": Out(1), "wr_error": Out(2),
            "sw": In(memory.WritePort.Signature(addr_width=sbits, shape=WORD_BITS)), "sw_tag": Out(3),
            "sr": In(memory.ReadPort.Signature(addr_width=sbits, shape=WORD_BITS)),
        })

    def elaborate(self, platform):
        m = Module()
        axi = self.axi
        dw = self._dw
        beat_bytes = dw // 8
        size = beat_bytes.bit_length() - 1
        m.d.comb += [
            axi.awburst.eq(1), axi.arburst.eq(1), axi.awsize.eq(size), axi.arsize.eq(size),
            axi.awcache.eq(0b0011), axi.arcache.eq(0b0011),     # normal, bufferable
            axi.wstrb.eq(C(-1, dw // 8)), axi.rready.eq(1), axi.bready.eq(1),
        ]
        rd_busy = self._reads(m, axi)
        wr_busy = self._writes(m, axi)
        m.d.comb += [self.busy.eq(rd_busy | wr_busy), self.rd_busy.eq(rd_busy),
                     self.wr_busy.eq(wr_busy)]
        return m

    def _addresses(self, m, prefix, valid, ready, limit_ok, failed, take):
        """One side's address generator: the rows of the transfer taken (``take``), split
        where a burst would cross 4 KiB, offered on ``valid`` (a register: it never falls
        before ``ready``) while ``limit_ok`` (room for one more burst in flight) and not
        ``failed``.  Returns (``open``: the transfer still has addresses to offer, the address,
        the burst's beats, fire, and the signal that closes the transfer this clock)."""
        aw, per_word = self._aw, WORD_BITS // self._dw
        beat_bytes = self._dw // 8
        req = getattr(self, prefix).payload
        rows, row_words, row, stride = Signal(5), Signal(3), Signal(5), Signal(32)
        row_addr, ptr = Signal(aw, name=f"{prefix}_row_addr"), Signal(aw, name=f"{prefix}_ptr")
        beats_left = Signal(5, name=f"{prefix}_beats_left")    # of the row, not yet asked for
        issuing = Signal(name=f"{prefix}_issuing")            # addresses left to send
        opened = Signal(name=f"{prefix}_open")                # the transfer not yet closed
        to_boundary = Signal(14, name=f"{prefix}_to_boundary")
        burst = Signal(5, name=f"{prefix}_burst")
        m.d.comb += [to_boundary.eq((4096 - ptr[:12]) >> (beat_bytes.bit_length() - 1)),
                     burst.eq(Mux(to_boundary < beats_left, to_boundary, beats_left))]
        fire = valid & ready
        last_burst = (beats_left == burst) & (row == rows - 1)
        with m.If(fire):
            with m.If(beats_left != burst):               # the row's next burst
                m.d.sync += [ptr.eq(ptr + burst * beat_bytes), beats_left.eq(beats_left - burst)]
            with m.Elif(~last_burst):                      # the next row
                m.d.sync += [row.eq(row + 1), ptr.eq(row_addr + stride),
                             row_addr.eq(row_addr + stride), beats_left.eq(row_words * per_word)]
            with m.Else():
                m.d.sync += issuing.eq(0)
        more = Mux(fire, ~last_burst, issuing)
        valid_next = Mux(~valid | fire, more & limit_ok & ~failed, 1)
        close = opened & ~valid_next & (~more | failed)
        m.d.sync += valid.eq(valid_next)
        with m.If(close):
            m.d.sync += [opened.eq(0), issuing.eq(0)]
        with m.If(take):
            m.d.sync += [rows.eq(req.rows), row_words.eq(req.row_words), row.eq(0),
                         stride.eq(req.stride), ptr.eq(req.addr), row_addr.eq(req.addr),
                         beats_left.eq(req.row_words * per_word),
                         issuing.eq(~failed), opened.eq(~failed), valid.eq(~failed & limit_ok)]
        return opened, ptr, burst, fire, close

    def _reads(self, m, axi):
        n = self.MAX_READS
        dw, per_word = self._dw, WORD_BITS // self._dw
        sbits = len(self.sw.addr)
        err = Signal(2, name="rd_err")
        arv = Signal(name="arv")
        inflight = Signal(range(n + 1), name="rd_inflight")
        # The transfer queue: entry 0 receives data (the oldest), entry 1 (if any) is newer;
        # only the newest may still have addresses to send (``opened``).
        v = [Signal(name=f"rq{i}_valid") for i in range(2)]
        tag = [Signal(3, name=f"rq{i}_tag") for i in range(2)]
        word = [Signal(sbits, name=f"rq{i}_word") for i in range(2)]
        pend = [Signal(range(n + 1), name=f"rq{i}_pend") for i in range(2)]   # bursts in flight
        r_end = axi.rvalid & axi.rlast
        r_err = axi.rvalid & (axi.rresp != RESP_OKAY)
        failed = (err != 0) | r_err
        ar_fire_c = arv & axi.arready
        flight_next = inflight + ar_fire_c - r_end
        take = Signal()
        opened, ptr, burst, ar_fire, close = self._addresses(
            m, "rd", arv, axi.arready, flight_next < n, failed, take)
        m.d.comb += [axi.arvalid.eq(arv), axi.araddr.eq(ptr), axi.arlen.eq(burst - 1)]
        m.d.sync += inflight.eq(flight_next)

        head_closed = v[1] | ~opened
        done = v[0] & (pend[0] == 0) & head_closed
        m.d.comb += [self.rd_done.eq(done), self.rd_done_tag.eq(tag[0]), self.rd_error.eq(err),
                     self.rd.ready.eq(~v[1] & ~opened), take.eq(self.rd.valid & self.rd.ready)]
        # Data arrives for entry 0 while it has bursts in flight, else for entry 1 (entry 0
        # is then done, or nothing is in flight).
        sel = pend[0] == 0
        sub = Signal(max(1, (per_word - 1).bit_length()), name="rd_sub")
        acc = Signal(WORD_BITS, name="rd_acc")
        full = C(1, 1) if per_word == 1 else (sub == per_word - 1)
        wrote = axi.rvalid & full
        with m.If(axi.rvalid):
            with m.If(r_err & (err == 0)):
                m.d.sync += err.eq(axi.rresp)
            if per_word == 1:
                m.d.comb += self.sw.data.eq(axi.rdata)
            else:
                m.d.comb += self.sw.data.eq(Cat(acc[dw:], axi.rdata))
                m.d.sync += [acc.eq(Cat(acc[dw:], axi.rdata)), sub.eq(sub + 1)]
        m.d.comb += [self.sw.addr.eq(Mux(sel, word[1], word[0])),
                     self.sw_tag.eq(Mux(sel, tag[1], tag[0])),
                     self.sw.en.eq(wrote & (err == 0))]
        # Each entry's next state: the newest gets the address fired, the data's entry loses
        # the burst that ended and moves on a word.
        p_next = [pend[i] + (ar_fire & (v[1] == i)) - (r_end & (sel == i)) for i in range(2)]
        w_next = [word[i] + (wrote & (sel == i)) for i in range(2)]
        with m.If(done & v[1]):                            # entry 1 moves up
            m.d.sync += [tag[0].eq(tag[1]), word[0].eq(w_next[1]), pend[0].eq(p_next[1]),
                         v[1].eq(0)]
        with m.Else():
            m.d.sync += [pend[0].eq(p_next[0]), pend[1].eq(p_next[1]),
                         word[0].eq(w_next[0]), word[1].eq(w_next[1])]
            with m.If(done):
                m.d.sync += v[0].eq(0)
        with m.If(take):                   # behind a live entry 0, or in its place
            slot = v[0] & ~done
            for i in range(2):
                with m.If(slot == i):
                    m.d.sync += [v[i].eq(1), tag[i].eq(self.rd.payload.tag),
                                 word[i].eq(self.rd.payload.word), pend[i].eq(0)]
        with m.If(self.clear):
            m.d.sync += err.eq(0)
        return v[0]

    def _writes(self, m, axi):
        nw = self.MAX_WRITES
        dw, per_word = self._dw, WORD_BITS // self._dw
        sbits = len(self.sr.addr)
        err = Signal(2, name="wr_err")
        awv = Signal(name="awv")
        active = Signal(name="wr_active")
        b_due = Signal(range(nw + 1), name="wr_b_due")          # bursts asked for, not answered
        b_fire = axi.bvalid
        b_err = b_fire & (axi.bresp != RESP_OKAY)
        failed = (err != 0) | b_err
        aw_fire_c = awv & axi.awready
        due_next = b_due + aw_fire_c - b_fire
        take = Signal()
        opened, ptr, burst, aw_fire, close = self._addresses(
            m, "wr", awv, axi.awready, due_next < nw, failed, take)
        m.d.comb += [axi.awvalid.eq(awv), axi.awaddr.eq(ptr), axi.awlen.eq(burst - 1)]
        m.d.sync += b_due.eq(due_next)
        with m.If(b_err & (err == 0)):
            m.d.sync += err.eq(axi.bresp)
        # The lengths of the bursts whose address went out and whose data has not all gone.
        lens = Array(Signal(5, name=f"wlen{i}") for i in range(nw))
        head, tail = Signal(range(nw)), Signal(range(nw))
        queued = Signal(range(nw + 1), name="wr_queued")
        beat = Signal(5, name="wr_beat")                        # beat of the head burst
        # The scratch words, read ahead into two registers (q0 is sent, narrow data a beat
        # at a time); a read's data comes a clock later (``fetched``).
        q = [Signal(WORD_BITS, name=f"wq{i}") for i in range(2)]
        qv = [Signal(name=f"wq{i}_valid") for i in range(2)]
        sub = Signal(max(1, (per_word - 1).bit_length()), name="wr_sub")
        fetched = Signal(name="wr_fetched")
        rd_word = Signal(sbits, name="wr_word")
        words_left = Signal(8, name="wr_words_left")
        wv = qv[0] & (queued != 0)
        last = beat == lens[head]
        w_fire = wv & axi.wready
        m.d.comb += [axi.wvalid.eq(wv), axi.wdata.eq(q[0][:dw]), axi.wlast.eq(last)]
        with m.If(aw_fire):
            m.d.sync += [lens[tail].eq(burst - 1), tail.eq(Mux(tail == nw - 1, 0, tail + 1))]
        pop_len = w_fire & last
        with m.If(w_fire):
            m.d.sync += beat.eq(Mux(last, 0, beat + 1))
        with m.If(pop_len):
            m.d.sync += head.eq(Mux(head == nw - 1, 0, head + 1))
        m.d.sync += queued.eq(queued + aw_fire - pop_len)
        word_sent = w_fire & (C(1, 1) if per_word == 1 else (sub == per_word - 1))
        if per_word > 1:
            with m.If(w_fire):
                m.d.sync += sub.eq(sub + 1)
        # Queue of words: pop the sent one, push the fetched one.
        n0v, n0 = Mux(word_sent, qv[1], qv[0]), Mux(word_sent, q[1], q[0] if per_word == 1 else
                                                    Mux(w_fire, q[0] >> dw, q[0]))
        n1v = Mux(word_sent, 0, qv[1])
        with m.If(fetched & ~n0v):
            m.d.sync += [q[0].eq(self.sr.data), qv[0].eq(1), qv[1].eq(0)]
        with m.Elif(fetched):
            m.d.sync += [q[0].eq(n0), qv[0].eq(n0v), q[1].eq(self.sr.data), qv[1].eq(1)]
        with m.Else():
            m.d.sync += [q[0].eq(n0), qv[0].eq(n0v), qv[1].eq(n1v)]
        done = active & ~opened & (b_due == 0) & ~fetched
        # Read the next word while it will fit (after an error, only the words still owed).
        fetch = (active & (words_left != 0) & ((n0v + n1v + fetched) < 2) &
                 ((err == 0) | (queued != 0)) & ~done)
        m.d.comb += self.sr.addr.eq(rd_word)
        m.d.sync += fetched.eq(fetch)
        with m.If(fetch):
            m.d.sync += [rd_word.eq(rd_word + 1), words_left.eq(words_left - 1)]
        m.d.comb += [self.wr_done.eq(done), self.wr_error.eq(err),
                     self.wr.ready.eq(~active), take.eq(self.wr.valid & ~active)]
        with m.If(done):
            m.d.sync += [active.eq(0), qv[0].eq(0), qv[1].eq(0), sub.eq(0)]
        with m.If(take):
            m.d.sync += [active.eq(1), rd_word.eq(self.wr.payload.word), sub.eq(0),
                         words_left.eq(self.wr.payload.rows * self.wr.payload.row_words)]
        with m.If(self.clear):
            m.d.sync += err.eq(0)
        return active


class RunConfig(data.Struct):
    """What every warp's tile walk needs of the configuration latched at ``start``.

    A K step is one WMMA m16n16 step of the kind (K 16 FP16/BF16, 8 TF32, 32 FP8/INT8): 32
    bytes of a row of A, and of a row of B^T where ``b_cols`` (TF32, FP8, INT8 take B
    column-major, as their fragments hold it)."""
    kind: InputKind
    a_alt: 1             # FP8: A is E5M2; INT8: A is U8
    b_alt: 1             # FP8: B is E5M2
    sat: 1               # INT8: satfinite
    esh: 2               # log2 of the bytes of an A/B element
    b_cols: 1            # B given as B^T (N x K row-major)
    acc_f16: 1
    c_given: 1
    steps: 12            # K / the kind's K step
    ld_a: 32             # leading dimensions in elements
    ld_b: 32
    ld_c: 32
    ld_d: 32


class TileClaim(data.Struct):
    """A 16x16 tile of D handed to a warp: the byte addresses its transfers start from."""
    none: 1              # no tile left
    a_row: 64            # A[16 ti][0]
    b_col: 64            # B[0][16 tj]
    c_ptr: 64            # C[16 ti][16 tj]
    d_ptr: 64            # D[16 ti][16 tj]


class TileWorker(wiring.Component):
    """One warp of the ``soc`` design and its walk over the D tiles it claims.

    After ``go``, the worker claims a tile (the ``claim`` stream's valid until its ready, from
    the tile dispenser; ``tile.none`` means the GEMM has no tile left and the worker goes
    idle), then for that tile: C into the accumulator (``dma_req`` a read of the C tile, then
    ``load_matrix_sync``) or ``fill_fragment(c, 0)``; per 16-wide step of K a read of the A tile and of the B tile,
    their ``load_matrix_sync`` and one ``mma_sync``; ``store_matrix_sync`` and a write of the D
    tile; then the next claim.  A transfer is asked with ``dma_req`` held until ``dma_done``.

    ``stop`` (an error anywhere, or a soft reset) ends the walk at the next step boundary: an
    operation under way finishes, none is started.  ``fail`` pulses with ``fail_code`` when one
    of this worker's transfers or WMMA operations failed.  ``mma_done`` pulses per ``mma_sync``
    (64 beats).  ``host_*`` is the warp's scratch memory (2 KiB), written and read by the DMA.
    ``index``: the warp's number, the ``tag`` of its transfers.
    """

    def __init__(self, *, lanes: int = 64, index: int = 0):
        self.warp = WarpTop(mem_words=SCRATCH_WORDS, lanes=lanes)
        self._index = index
        sbits = (SCRATCH_WORDS - 1).bit_length()
        super().__init__({
            "cfg": In(RunConfig), "go": In(1), "stop": In(1), "idle": Out(1),
            "claim": Out(stream.Signature(0)), "tile": In(TileClaim),
            "dma_req": Out(1), "dma": Out(DmaRequest), "dma_done": In(1), "dma_error": In(2),
            "fail": Out(1), "fail_code": Out(ErrorCode), "mma_done": Out(1),
            "host_addr": In(sbits), "host_wdata": In(WORD_BITS), "host_we": In(1),
            "host_rdata": Out(WORD_BITS),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.warp = warp = self.warp
        m.d.comb += [warp.host_addr.eq(self.host_addr), warp.host_wdata.eq(self.host_wdata),
                     warp.host_we.eq(self.host_we), self.host_rdata.eq(warp.host_rdata)]
        cfg = self.cfg
        kk = Signal(12)
        a_row, b_ptr, c_ptr, d_ptr = (Signal(64, name=f"{x}_ptr") for x in "abcd")
        es_shift = Mux(cfg.acc_f16, 1, 2)            # log2 of the C/D element bytes
        acc_words = Mux(cfg.acc_f16, 2, 4)
        ldm_ab = C(32, 6) >> cfg.esh                  # a 32-byte scratch line, in elements
        cmd = warp.cmd.payload
        # Row-major operands only; the tag numbers the K step (the responses come in order).
        m.d.comb += cmd.tag.eq(kk[:8])

        wmma = partial(self._wmma_state, m, warp, cmd)
        transfer = partial(self._transfer_state, m)

        def goto(state):
            def f():
                m.next = state
            return f

        def after_mma():
            with m.If(kk == cfg.steps - 1):
                m.next = "STORE"
            with m.Else():
                # the next K step of B: 16 rows down (B), or 32 bytes along its rows (B^T)
                m.d.sync += [kk.eq(kk + 1),
                             b_ptr.eq(b_ptr + Mux(cfg.b_cols, 32, cfg.ld_b.shift_left(5)))]
                m.next = "READ_A"

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += self.idle.eq(1)
                with m.If(self.go):
                    m.next = "CLAIM"
            with m.State("CLAIM"):
                granted = self.claim.valid & self.claim.ready
                m.d.comb += self.claim.valid.eq(~self.stop)
                with m.If(self.stop | (granted & self.tile.none)):
                    m.next = "IDLE"
                with m.Elif(granted):
                    m.d.sync += [kk.eq(0), a_row.eq(self.tile.a_row), b_ptr.eq(self.tile.b_col),
                                 c_ptr.eq(self.tile.c_ptr), d_ptr.eq(self.tile.d_ptr)]
                    with m.If(cfg.c_given):
                        m.next = "READ_C"
                    with m.Else():
                        m.next = "FILL"
            transfer("READ_C", goto("LOAD_C"), write=0, addr=c_ptr, stride_shift=es_shift,
                     ldx=cfg.ld_c, row_words=acc_words, word=C_WORD)
            wmma("LOAD_C", goto("READ_A"), op=Op.LOAD, kind=ACCUMULATOR, addr=C_WORD * 16)
            wmma("FILL", goto("READ_A"), op=Op.FILL, kind=ACCUMULATOR)
            transfer("READ_A", goto("READ_B"), write=0, addr=a_row + kk.shift_left(5),
                     stride_shift=cfg.esh, ldx=cfg.ld_a, row_words=2, word=A_WORD)
            transfer("READ_B", goto("LOAD_A"), write=0, addr=b_ptr, stride_shift=cfg.esh,
                     ldx=cfg.ld_b, row_words=2, word=B_WORD)
            wmma("LOAD_A", goto("LOAD_B"), op=Op.LOAD, kind=MATRIX_A, frag=0, addr=A_WORD * 16,
                 ldm=ldm_ab)
            wmma("LOAD_B", goto("MMA"), op=Op.LOAD, kind=MATRIX_B, frag=1, addr=B_WORD * 16,
                 ldm=ldm_ab, col_major=cfg.b_cols)
            wmma("MMA", after_mma, op=Op.MMA, frag=0, fa=0, fb=1, fc=0)
            wmma("STORE", goto("WRITE_D"), op=Op.STORE, kind=ACCUMULATOR, addr=C_WORD * 16)
            transfer("WRITE_D", goto("CLAIM"), write=1, addr=d_ptr, stride_shift=es_shift,
                     ldx=cfg.ld_d, row_words=acc_words, word=C_WORD)
        return m

    def _wmma_state(self, m, warp, cmd, name, nxt, *, op, kind=0, frag=0, addr=0, fa=0, fb=0, fc=0,
                ldm=16, col_major=0):
        """States ``name`` (issue the WMMA command) and ``name_W`` (its response), then
        ``nxt()``; a refused command fails the walk (``ErrorCode.ENGINE``)."""
        cfg = self.cfg
        with m.State(name):
            m.d.comb += [warp.cmd.valid.eq(1), cmd.op.eq(op), cmd.kind.eq(kind),
                         cmd.frag.eq(frag), cmd.addr.eq(addr), cmd.ldm.eq(ldm),
                         cmd.fa.eq(fa), cmd.fb.eq(fb), cmd.fc.eq(fc), cmd.fmt.eq(cfg.kind),
                         cmd.a_alt.eq(cfg.a_alt), cmd.b_alt.eq(cfg.b_alt), cmd.sat.eq(cfg.sat),
                         cmd.acc_f16.eq(cfg.acc_f16), cmd.value.eq(0), cmd.col_major.eq(col_major),
                         cmd.mnk.eq(0)]
            with m.If(warp.cmd.ready):
                m.next = f"{name}_W"
        with m.State(f"{name}_W"):
            m.d.comb += warp.resp.ready.eq(1)
            with m.If(warp.resp.valid):
                with m.If(warp.resp.payload.error):
                    m.d.comb += [self.fail.eq(1), self.fail_code.eq(ErrorCode.ENGINE)]
                    m.next = "IDLE"
                with m.Elif(self.stop):
                    m.next = "IDLE"
                with m.Else():
                    if op == Op.MMA:
                        m.d.comb += self.mma_done.eq(1)
                    nxt()

    def _transfer_state(self, m, name, nxt, *, write, addr, stride_shift, ldx, row_words, word):
        """State ``name``: ask the DMA for the transfer, wait for it (no new transfer once
        ``stop`` is up), then ``nxt()``."""
        with m.State(name):
            m.d.comb += [self.dma_req.eq(~self.stop), self.dma.write.eq(write),
                         self.dma.addr.eq(addr), self.dma.stride.eq(ldx << stride_shift),
                         self.dma.rows.eq(16), self.dma.row_words.eq(row_words),
                         self.dma.word.eq(word), self.dma.tag.eq(self._index)]
            with m.If(self.dma_done):
                with m.If(self.dma_error != 0):
                    slv = ErrorCode.WRITE_SLVERR if write else ErrorCode.READ_SLVERR
                    dec = ErrorCode.WRITE_DECERR if write else ErrorCode.READ_DECERR
                    m.d.comb += [self.fail.eq(1), self.fail_code.eq(
                        Mux(self.dma_error == RESP_DECERR, dec, slv))]
                    m.next = "IDLE"
                with m.Elif(self.stop):
                    m.next = "IDLE"
                with m.Else():
                    nxt()
            with m.Elif(self.stop):
                m.next = "IDLE"


def _round_robin(m: Module, requests, last, name: str):
    """The index of the request to grant (``Signal``) and whether any is up: the first one
    after ``last`` in index order, wrapping around; with ``last`` None, the lowest index."""
    n = len(requests)
    pick = Signal(range(max(2, n)), name=f"{name}_pick")
    # Later assignments win: the lowest index after ``last`` first, else the lowest of all.
    for i in reversed(range(n)):
        with m.If(requests[i]):
            m.d.comb += pick.eq(i)
    for i in reversed(range(1, n) if last is not None else ()):   # none is after ``last`` at 0
        with m.If(requests[i] & (i > last)):
            m.d.comb += pick.eq(i)
    return pick, Cat(*requests).any()


#: FORMAT.in_fmt -> the datapath kind, whether A is the kind's alternative (E5M2, U8), log2
#: of the element bytes and whether B is read column-major.
_IN_FORMATS = {code: (InputKind(f.code), int(f.alt), f.bytes.bit_length() - 1, int(f.b_cols))
               for code, f in ((c, INPUT_FORMATS[c.name.lower()]) for c in InFormat)}


def _format_bad(fmt, regs):
    """An unsupported FORMAT: an unknown input format, an FP16 accumulator but for FP16 and
    FP8 inputs, ``b_alt`` but for FP8, ``sat`` but for INT8."""
    fp8 = (fmt == InFormat.E4M3) | (fmt == InFormat.E5M2)
    int8 = (fmt == InFormat.S8) | (fmt == InFormat.U8)
    return ((fmt > max(InFormat)) | (regs.format_acc_f16 & ~((fmt == InFormat.FP16) | fp8)) |
            (regs.format_b_alt & ~fp8) | (regs.format_sat & ~int8))


def _latch_format(m, cfg, fmt, regs):
    """The run's kind fields from FORMAT (at start)."""
    with m.Switch(fmt):
        for code, (kind, alt, esh, b_cols) in _IN_FORMATS.items():
            with m.Case(code):
                m.d.sync += [cfg.kind.eq(kind), cfg.a_alt.eq(alt), cfg.esh.eq(esh),
                             cfg.b_cols.eq(b_cols)]
                if kind == InputKind.FP8:        # B: the same FP8 format as A, or the other one
                    m.d.sync += cfg.b_alt.eq(alt ^ regs.format_b_alt)
                else:
                    m.d.sync += cfg.b_alt.eq(0)
        with m.Default():                     # refused as BAD_FORMAT; sizes checked as FP16's
            m.d.sync += [cfg.kind.eq(InputKind.FP16), cfg.a_alt.eq(0), cfg.b_alt.eq(0),
                         cfg.esh.eq(1), cfg.b_cols.eq(0)]
    m.d.sync += cfg.sat.eq(regs.format_sat)


class GemmSoc(wiring.Component):
    """The ``soc`` design: :class:`tcore.rtl.axil.AxiLiteRegs` (``s_axil_*``), an AXI4 master
    (``m_axi_*``, :class:`TileDma`), ``irq`` (high while ``STATUS.done`` and ``CTRL.irq_en``),
    and ``warps`` WMMA warps (:class:`TileWorker`, each a :class:`tcore.rtl.wmma.WarpTop` with a 2 KiB
    scratch memory).  Clock ``clk``, synchronous active-high reset ``rst``.

    The warps share the AXI4 master: each claims the next D tile in row-major order when it is
    free, and asks for its transfers one at a time; the master's read and write engines each
    take them in round-robin order, reads back to back across warps and a write at the same
    time, so that the warps' arithmetic overlaps the other warps' memory traffic.  The first
    error (a bad response, or the engine) stops every warp at its next step
    boundary; the run ends when all are idle.

    Parameters
    ----------
    addr_width : int
        Bits of the AXI4 byte addresses (32 or 64).
    data_width : int
        AXI4 data bits: 32, 64 or 128 (the scratch memory's words are 128 bits; narrower data
        takes 2 or 4 beats a word).
    warps : int
        Warps, 1 to 8.
    lanes : 64, 32 or 16
        Each warp's core's multipliers (:class:`tcore.rtl.mma4.MMA4`): an mma_sync takes
        ``WmmaSequencer.mma_cycles_of(kind, lanes)``.
    """

    def __init__(self, *, addr_width: int = 32, data_width: int = 128, warps: int = 1,
                 lanes: int = 64):
        from .axil import flat_members
        if addr_width not in (32, 64):
            raise ValueError(f"Address width must be 32 or 64, not {addr_width!r}")
        if not 1 <= warps <= MAX_WARPS:
            raise ValueError(f"The soc design has 1 to {MAX_WARPS} warps, not {warps!r}")
        self._aw, self._dw, self._warps = addr_width, data_width, warps
        self.regs = AxiLiteRegs(constants={"CAPS": {
            "warps": warps, "data_bytes_log2": (data_width // 8).bit_length() - 1,
            "max_tiles_log2": MAX_TILES_LOG2}})
        self.dma = TileDma(addr_width=addr_width, data_width=data_width)
        self.workers = [TileWorker(lanes=lanes, index=i) for i in range(warps)]
        members = {}
        members.update(flat_members("s_axil", self.regs.signature.members["bus"]))
        members.update(flat_members("m_axi", self.dma.signature.members["axi"]))
        members["irq"] = Out(1)
        super().__init__(members)

    def elaborate(self, platform):
        from .axil import connect_flat
        m = Module()
        m.submodules.regs = regs = self.regs
        m.submodules.dma = dma = self.dma
        workers = self.workers
        for i, w in enumerate(workers):
            m.submodules[f"warp{i}"] = w
        connect_flat(m, self, "s_axil", regs.bus, regs.signature.members["bus"])
        connect_flat(m, self, "m_axi", dma.axi, dma.signature.members["axi"])
        m.d.comb += self.irq.eq(regs.status_done & regs.ctrl_irq_en)

        # ---- the configuration, latched at start -------------------------------------------
        fmt = regs.format_in_fmt
        cm, cn, ck = Signal(32), Signal(32), Signal(32)
        cfg = Signal(RunConfig)
        base = {x: Signal(64, name=f"base_{x}") for x in "abcd"}
        ld = {"a": cfg.ld_a, "b": cfg.ld_b, "c": cfg.ld_c, "d": cfg.ld_d}
        error, busy = Signal(4), Signal()
        m.d.comb += [regs.status_error.eq(error), regs.status_busy.eq(busy)]
        for w in workers:
            m.d.comb += w.cfg.eq(cfg)

        code, fmt_bad, eight = self._checks(m, cfg, cm, cn, ck, base, ld)
        refusal = Signal(4)

        disp, a_row, b_col, c_row, d_row = self._dispenser(m, cfg, base, ld, workers)

        pending = self._master(m, dma, workers)

        cycles, beats, abort, go, all_idle = self._status(m, workers, busy, error)

        with m.FSM():
            with m.State("IDLE"):
                m.d.comb += dma.clear.eq(regs.ctrl_start)
                with m.If(regs.ctrl_start):
                    m.d.sync += [cm.eq(regs.m), cn.eq(regs.n), ck.eq(regs.k),
                                 cfg.acc_f16.eq(regs.format_acc_f16), cfg.c_given.eq(regs.format_c_given),
                                 fmt_bad.eq(_format_bad(fmt, regs)),
                                 error.eq(0), busy.eq(1), cycles.eq(0), beats.eq(0), abort.eq(0)]
                    _latch_format(m, cfg, fmt, regs)
                    for x in "abcd":
                        lo, hi = getattr(regs, f"{x}_lo"), getattr(regs, f"{x}_hi")
                        m.d.sync += [base[x].eq(Cat(lo, hi)), ld[x].eq(getattr(regs, f"ld{x}"))]
                    m.next = "CHECK"
            with m.State("CHECK"):
                # The checks' compares are long carry chains: their code is registered here
                # and acted on a clock later, off the dispenser's start.
                m.d.sync += refusal.eq(code)
                m.next = "START"
            with m.State("START"):
                with m.If(refusal != 0):
                    m.d.sync += error.eq(refusal)
                    m.next = "FINISH"
                with m.Else():
                    m.d.comb += go.eq(1)
                    m.d.comb += [disp.start.eq(1), disp.tiles_m.eq(cm[4:15]),
                                 disp.tiles_n.eq(cn[4:15])]
                    m.d.sync += [cfg.steps.eq(Mux(cfg.kind == InputKind.TF32, ck[3:15],
                                                  Mux(eight, ck[5:15], ck[4:15]))),
                                 a_row.eq(base["a"]), b_col.eq(base["b"]), c_row.eq(base["c"]),
                                 d_row.eq(base["d"])]
                    m.next = "RUN"
            with m.State("RUN"):
                # A warp told to stop may leave while the transfer it asked for runs on.
                with m.If(all_idle & ~dma.busy & ~pending.any()):
                    with m.If(abort & (error == 0)):
                        m.next = "ABORT"
                    with m.Else():
                        m.next = "FINISH"
            with m.State("FINISH"):
                m.d.comb += regs.status_done_set.eq(1)
                m.d.sync += busy.eq(0)
                m.next = "IDLE"
            with m.State("ABORT"):                  # soft reset: no done, status cleared
                m.d.sync += [busy.eq(0), error.eq(0), abort.eq(0)]
                m.next = "IDLE"
        with m.If(regs.ctrl_soft_reset & ~busy):
            m.d.sync += [error.eq(0), cycles.eq(0), beats.eq(0)]
        return m

    def _status(self, m, workers, busy, error):
        """Counters, the first error, the stop every warp obeys; returns the counters, the
        pending soft reset, the warps' go and whether all are idle."""
        regs = self.regs
        cycles, beats = Signal(64), Signal(64)
        m.d.comb += [regs.cycles_lo.eq(cycles[:32]), regs.cycles_hi.eq(cycles[32:]),
                     regs.beats_lo.eq(beats[:32]), regs.beats_hi.eq(beats[32:])]
        with m.If(busy):
            m.d.sync += cycles.eq(cycles + 1)
        # The warps' mma_done counted a clock later (a register between the warps' state and
        # the 64-bit add: first error -> abort -> mma_done -> beats was a routed critical path);
        # the last mma_sync of a run ends long before its D tile is stored and STATUS.done set.
        done_now = Signal(range(len(workers) + 1), name="mma_done_count")
        m.d.sync += [done_now.eq(sum(w.mma_done for w in workers)),
                     beats.eq(beats + done_now.shift_left(6))]
        abort = Signal()                             # a soft reset waits for a clean point
        with m.If(regs.ctrl_soft_reset):
            m.d.sync += abort.eq(busy)
        with m.If(error == 0):                       # the first failure is the one reported
            for w in reversed(workers):
                with m.If(w.fail):
                    m.d.sync += error.eq(w.fail_code)
        stop = Signal()
        m.d.comb += stop.eq(abort | (error != 0))    # the other warps stop a clock after a failure
        go = Signal()
        all_idle = Cat(*(w.idle for w in workers)).all()
        for w in workers:
            m.d.comb += [w.go.eq(go), w.stop.eq(stop)]
        return cycles, beats, abort, go, all_idle

    def _checks(self, m, cfg, cm, cn, ck, base, ld):
        """The refusal code of the run latched at start (0: none; a bad configuration is
        refused before any memory access), the format's own flag, and 'K steps of 32'."""
        aw = self._aw
        code = Signal(4)
        limit = 16 << MAX_TILES_LOG2
        eight = (cfg.kind == InputKind.FP8) | (cfg.kind == InputKind.INT8)      # K steps of 32
        # M, N multiples of 16; K of the kind's K step (8 TF32, 16 FP16/BF16, 32 FP8/INT8)
        k_bad = Mux(cfg.kind == InputKind.TF32, ck[:3] != 0, (ck[:4] != 0) | (eight & ck[4]))
        size_bad = (Cat(*((v == 0) | (v[:4] != 0) | (v > limit) for v in (cm, cn))).any() |
                    (ck == 0) | (ck > limit) | k_bad)
        used = {"a": 1, "b": 1, "c": cfg.c_given, "d": 1}
        misaligned = Cat(*(used[x] & (base[x][:4] != 0) for x in "abcd")).any()
        out_of_range = Cat(*(used[x] & (base[x][aw:] != 0) for x in "abcd")).any() if aw < 64 \
            else C(0, 1)
        row_len = {"a": ck, "b": Mux(cfg.b_cols, ck, cn), "c": cn, "d": cn}
        # Rows 16-byte aligned: a multiple of 8 16-bit, 4 32-bit or 16 8-bit elements.
        def unaligned(v, esh):
            return Mux(esh == 0, v[:4] != 0, Mux(esh == 1, v[:3] != 0, v[:2] != 0))
        cd_esh = Mux(cfg.acc_f16, 1, 2)
        esh = {"a": cfg.esh, "b": cfg.esh, "c": cd_esh, "d": cd_esh}
        ld_bad = Cat(*(used[x] & ((ld[x] < row_len[x]) | unaligned(ld[x], esh[x]))
                       for x in "abcd")).any()
        fmt_bad = Signal()
        with m.If(size_bad):
            m.d.comb += code.eq(ErrorCode.BAD_SIZE)
        with m.Elif(misaligned):
            m.d.comb += code.eq(ErrorCode.MISALIGNED)
        with m.Elif(out_of_range):
            m.d.comb += code.eq(ErrorCode.ADDR_RANGE)
        with m.Elif(ld_bad):
            m.d.comb += code.eq(ErrorCode.BAD_LD)
        with m.Elif(fmt_bad):
            m.d.comb += code.eq(ErrorCode.BAD_FORMAT)
        return code, fmt_bad, eight

    def _dispenser(self, m, cfg, base, ld, workers):
        """The tile dispenser (:class:`tcore.rtl.dispenser.TileDispenser`: the next D tile in
        row-major order to the warp that claims it, one a clock) and the byte addresses of
        the tile's operands, stepped with each tile handed out."""
        m.submodules.dispenser = disp = TileDispenser(ports=len(workers), tile_bits=11)
        a_row, c_row, d_row = (Signal(64, name=f"{x}_tile_row") for x in "acd")
        acc_f16 = cfg.acc_f16
        tj = disp.tile.tj
        col_bytes = Mux(acc_f16, tj.shift_left(5), tj.shift_left(6))     # 16 tj C/D elements
        tile = Signal(TileClaim)
        # B's tile column: 16 tj elements along a row of B, or 16 tj rows of B^T
        b_col = Signal(64)
        m.d.comb += [tile.none.eq(disp.tile.none), tile.a_row.eq(a_row), tile.b_col.eq(b_col),
                     tile.c_ptr.eq(c_row + col_bytes), tile.d_ptr.eq(d_row + col_bytes)]
        for i, w in enumerate(workers):
            wiring.connect(m, w.claim, disp.claims[i])
            m.d.comb += w.tile.eq(tile)
        # The pointers' steps are constant for a run: registered (the configuration is latched
        # two clocks before the first claim), so that a grant moves each pointer by one add.
        a_step, b_step, c_step, d_step = (Signal(64, name=f"{x}_step") for x in "abcd")
        m.d.sync += [a_step.eq((ld["a"] << cfg.esh).shift_left(4)),
                     b_step.eq(Mux(cfg.b_cols, (ld["b"] << cfg.esh).shift_left(4), 32)),
                     c_step.eq(Mux(acc_f16, ld["c"].shift_left(5), ld["c"].shift_left(6))),
                     d_step.eq(Mux(acc_f16, ld["d"].shift_left(5), ld["d"].shift_left(6)))]
        with m.If(disp.advance):
            with m.If(disp.tile.row_end):
                m.d.sync += [b_col.eq(base["b"]), a_row.eq(a_row + a_step),
                             c_row.eq(c_row + c_step), d_row.eq(d_row + d_step)]
            with m.Else():
                m.d.sync += b_col.eq(b_col + b_step)
        return disp, a_row, b_col, c_row, d_row

    def _master(self, m, dma, workers):
        """The AXI4 master shared by the warps: reads and writes at once, each side round
        robin.  Returns the mask of warps whose transfer was taken and is not done."""
        # A warp's transfer is asked for until done; ``pending`` marks the ones taken.
        pending = Signal(len(workers))
        wants = [(w.dma_req & ~pending[i], w.dma.write) for i, w in enumerate(workers)]
        reqs = Array(w.dma for w in workers)
        rd_last, wr_last = Signal(4), Signal(4)
        rd_pick, rd_any = _round_robin(m, [r & ~wr for r, wr in wants], rd_last, "rd")
        wr_pick, wr_any = _round_robin(m, [r & wr for r, wr in wants], wr_last, "wr")
        wr_owner = Signal(range(max(2, len(workers))))
        rd_take, wr_take = rd_any & dma.rd.ready, wr_any & dma.wr.ready
        for port, pick, any_ in ((dma.rd, rd_pick, rd_any), (dma.wr, wr_pick, wr_any)):
            r = reqs[pick]
            m.d.comb += [port.valid.eq(any_), port.payload.eq(r)]
        with m.If(rd_take):
            m.d.sync += rd_last.eq(rd_pick)
        with m.If(wr_take):
            m.d.sync += [wr_last.eq(wr_pick), wr_owner.eq(wr_pick)]
        for i, w in enumerate(workers):
            rd_mine, wr_mine = dma.rd_done & (dma.rd_done_tag == i), dma.wr_done & (wr_owner == i)
            writing_me = dma.sw.en & (dma.sw_tag == i)
            m.d.comb += [w.dma_done.eq(rd_mine | wr_mine),
                         w.dma_error.eq(Mux(wr_mine, dma.wr_error, dma.rd_error)),
                         w.host_addr.eq(Mux(writing_me, dma.sw.addr, dma.sr.addr)),
                         w.host_wdata.eq(dma.sw.data), w.host_we.eq(writing_me)]
            with m.If((rd_take & (rd_pick == i)) | (wr_take & (wr_pick == i))):
                m.d.sync += pending[i].eq(1)
            with m.Elif(rd_mine | wr_mine):
                m.d.sync += pending[i].eq(0)
        m.d.comb += dma.sr.data.eq(Array(w.host_rdata for w in workers)[wr_owner])
        return pending