"""The warp fragment register bank: 32 lanes, each with its fragment slots, laid out as on an H200.

Golden twin: :mod:`golden.wmma` (``element_map``).

Every lane holds 8 distinct slots of each fragment (a ``matrix_a``/``matrix_b`` fragment has
num_elements = 16 in CUDA, slots 8..15 repeating 0..7; an accumulator has 8).  The bank has
``matrix_frags`` fragments of 16-bit slots (for matrix_a and matrix_b) and ``acc_frags``
fragments of 32-bit slots (accumulators; FP16 values in the low half).  Which matrix element
(row, col) a lane holds in a slot is the measured H200 layout; the ports below route memory
words and core beats to and from those registers.
"""

from amaranth import *
from amaranth.lib import data, wiring
from amaranth.lib.wiring import In, Out

from golden.wmma import element_map

__all__ = ["FragmentBank", "LoadPort", "LANES", "SLOTS", "MATRIX_A", "MATRIX_B", "ACCUMULATOR"]

LANES, SLOTS = 32, 8
MATRIX_A, MATRIX_B, ACCUMULATOR = 0, 1, 2
WORD_BITS = 128                     # memory port: 8 half or 4 float elements


def _maps():
    return {k: element_map(n) for k, n in ((MATRIX_A, "matrix_a"), (MATRIX_B, "matrix_b"),
                                            (ACCUMULATOR, "accumulator"))}


def _index_bits(n):
    return max(1, (n - 1).bit_length())


def _by_frag(values, frag, bits):
    """``values[frag]``; a single fragment needs no mux.  Arrays are padded to a power of two
    so that every index value is covered."""
    if len(values) == 1:
        return values[0]
    pad = values + [values[-1]] * ((1 << bits) - len(values))
    return Array(pad)[frag[:bits]]


def _pick(per_frag, sel, frag, bits):
    return _by_frag([x[sel] for x in per_frag], frag, bits)


def _inverse(emap):
    """(row, col) -> (lane, slot)."""
    inv = {}
    for lane in range(LANES):
        for slot in range(SLOTS):
            r, c = emap[lane, slot]
            inv[int(r), int(c)] = (lane, slot)
    return inv


class LoadPort(data.Struct):
    """One memory word written into a fragment (see :class:`FragmentBank`)."""
    en: 1
    kind: 2
    col: 1
    f16: 1
    frag: 3
    line: 4
    word: 2
    data: WORD_BITS


class FragmentBank(wiring.Component):
    """Fragment registers with the ports of the WMMA operations.  All writes take one clock;
    all reads are combinational.

    Parameters
    ----------
    matrix_frags : int
        Fragments for matrix_a/matrix_b (16-bit slots).
    acc_frags : int
        Accumulator fragments (32-bit slots).

    load_ports : int
        Independent load write ports (2 lets A and B load at once).
    col_major : bool
        Support column-major loads and stores (the GEMM top, row-major only, leaves them out).

    Members
    -------
    fill_* : fill_fragment: every slot of fragment ``fill_frag`` (bank ``fill_acc``) := value.
    lw : load_matrix_sync, one memory word per clock per port (:class:`LoadPort`): word
        ``word`` of line ``line`` (a row when row-major, a column when col-major) of a fragment
        of kind ``kind``; ``f16`` marks 16-bit accumulator elements (8 per word, else 4 FP32).
    sr_* : store_matrix_sync: ``sr_data`` is word ``sr_word`` of line ``sr_line`` of
        accumulator ``sr_frag``.
    mr_* : mma_sync read: the core beat for output block (``mr_i``, ``mr_j``) and k slice
        ``mr_s``: A[4i+r][4s+k] at 4r+k, B[4s+k][4j+c] at 4k+c, C[4i+r][4j+c] at 4r+c.
    mw_* : mma_sync write-back of the D block (``mw_i``, ``mw_j``) into accumulator ``mw_frag``.
    """

    def __init__(self, *, matrix_frags: int = 4, acc_frags: int = 2, load_ports: int = 1,
                 col_major: bool = True):
        if not 1 <= matrix_frags <= 8 or not 1 <= acc_frags <= 8:
            raise ValueError(f"Fragment counts must be 1..8, not {matrix_frags!r}, {acc_frags!r}")
        if load_ports not in (1, 2):
            raise ValueError(f"Load ports must be 1 or 2, not {load_ports!r}")
        self._nm, self._nc = matrix_frags, acc_frags
        self._ports, self._col = load_ports, col_major
        super().__init__({
            "fill_en": In(1), "fill_acc": In(1), "fill_frag": In(3), "fill_value": In(32),
            "lw": In(LoadPort).array(load_ports),
            "sr_frag": In(3), "sr_col": In(1), "sr_f16": In(1), "sr_line": In(4), "sr_word": In(2),
            "sr_data": Out(WORD_BITS),
            "mr_a": In(3), "mr_b": In(3), "mr_c": In(3), "mr_i": In(2), "mr_j": In(2), "mr_s": In(2),
            "mr_beat_a": Out(data.ArrayLayout(16, 16)), "mr_beat_b": Out(data.ArrayLayout(16, 16)),
            "mr_beat_c": Out(data.ArrayLayout(32, 16)),
            "mw_en": In(1), "mw_frag": In(3), "mw_i": In(2), "mw_j": In(2),
            "mw_data": In(data.ArrayLayout(32, 16)),
        })
        self.matrix = [[[Signal(16, name=f"m{f}_l{l}_s{s}") for s in range(SLOTS)]
                        for l in range(LANES)] for f in range(matrix_frags)]
        self.acc = [[[Signal(32, name=f"c{f}_l{l}_s{s}") for s in range(SLOTS)]
                     for l in range(LANES)] for f in range(acc_frags)]

    @property
    def matrix_frags(self):
        return self._nm

    @property
    def acc_frags(self):
        return self._nc

    def elaborate(self, platform):
        m = Module()
        maps = _maps()
        layouts = (0, 1) if self._col else (0,)

        def port_hits(p, kind, r, c, elem_bits):
            """(hit, value) pairs: port p's word holds element (r, c) of a ``kind`` fragment."""
            per = 128 // elem_bits
            out = []
            for col, line, pos in ((0, r, c), (1, c, r)):
                if col not in layouts:
                    continue
                hit = (p.kind == kind) & (p.col == col) & (p.line == line) & (p.word == pos // per)
                out.append((hit, p.data[elem_bits * (pos % per):elem_bits * (pos % per + 1)]))
            return out

        # ---- fill and load into the matrix bank -------------------------------------------
        for lane in range(LANES):
            for slot in range(SLOTS):
                writes = []                     # (condition, frag, value) in priority order
                for pi, p in enumerate(self.lw):
                    pairs = []
                    for kind in (MATRIX_A, MATRIX_B):
                        r, c = (int(v) for v in maps[kind][lane, slot])
                        pairs += port_hits(p, kind, r, c, 16)
                    wdata = Signal(16, name=f"mw{pi}_l{lane}_s{slot}")
                    for h, v in pairs:
                        with m.If(h):
                            m.d.comb += wdata.eq(v)
                    writes.append((p.en & Cat(*(h for h, _ in pairs)).any(), p.frag, wdata))
                for f in range(self._nm):
                    reg = self.matrix[f][lane][slot]
                    with m.If(self.fill_en & ~self.fill_acc & (self.fill_frag == f)):
                        m.d.sync += reg.eq(self.fill_value[:16])
                    for cond, frag, wdata in writes:
                        with m.If(cond & (frag == f)):
                            m.d.sync += reg.eq(wdata)

        # ---- fill, load and mma write-back into the accumulator bank ----------------------
        for lane in range(LANES):
            for slot in range(SLOTS):
                r, c = (int(v) for v in maps[ACCUMULATOR][lane, slot])
                writes = []
                for pi, p in enumerate(self.lw):
                    pairs = [(h & p.f16, v) for h, v in port_hits(p, ACCUMULATOR, r, c, 16)]
                    pairs += [(h & ~p.f16, v) for h, v in port_hits(p, ACCUMULATOR, r, c, 32)]
                    wdata = Signal(32, name=f"cw{pi}_l{lane}_s{slot}")
                    for h, v in pairs:
                        with m.If(h):
                            m.d.comb += wdata.eq(v)
                    writes.append((p.en & Cat(*(h for h, _ in pairs)).any(), p.frag, wdata))
                in_block = (self.mw_i == r // 4) & (self.mw_j == c // 4)
                for f in range(self._nc):
                    reg = self.acc[f][lane][slot]
                    with m.If(self.fill_en & self.fill_acc & (self.fill_frag == f)):
                        m.d.sync += reg.eq(self.fill_value)
                    for cond, frag, wdata in writes:
                        with m.If(cond & (frag == f)):
                            m.d.sync += reg.eq(wdata)
                    with m.If(self.mw_en & (self.mw_frag == f) & in_block):
                        m.d.sync += reg.eq(self.mw_data[4 * (r % 4) + c % 4])

        # ---- mma_sync read: one core beat --------------------------------------------------
        inv = {k: _inverse(v) for k, v in maps.items()}

        def pick(bank, fsel, kind, coords_of):
            """For each of 16 beat elements: mux over (frag, 16 block/slice combinations)."""
            out = []
            for e in range(16):
                per_frag = []
                for f in range(len(bank)):
                    cands = []
                    for sel in range(16):
                        lane, slot = inv[kind][coords_of(sel, e)]
                        cands.append(bank[f][lane][slot])
                    per_frag.append(Array(cands))
                out.append(per_frag)
            return out

        # A: block row i, slice s; element (r, k): row 4i+r, col 4s+k.  sel = 4i + s.
        a_sel = Cat(self.mr_s, self.mr_i)
        b_sel = Cat(self.mr_j, self.mr_s)      # sel = 4s + j
        c_sel = Cat(self.mr_j, self.mr_i)      # sel = 4i + j
        a_c = pick(self.matrix, self.mr_a, MATRIX_A, lambda sel, e: (4 * (sel // 4) + e // 4, 4 * (sel % 4) + e % 4))
        b_c = pick(self.matrix, self.mr_b, MATRIX_B, lambda sel, e: (4 * (sel // 4) + e // 4, 4 * (sel % 4) + e % 4))
        c_c = pick(self.acc, self.mr_c, ACCUMULATOR, lambda sel, e: (4 * (sel // 4) + e // 4, 4 * (sel % 4) + e % 4))
        # Fragment ids are legal by the time they get here (the sequencer checks them), so only
        # the bits that can tell the fragments apart index the arrays.
        mbits, cbits = _index_bits(self._nm), _index_bits(self._nc)
        for e in range(16):
            m.d.comb += [
                self.mr_beat_a[e].eq(_pick(a_c[e], a_sel, self.mr_a, mbits)),
                self.mr_beat_b[e].eq(_pick(b_c[e], b_sel, self.mr_b, mbits)),
                self.mr_beat_c[e].eq(_pick(c_c[e], c_sel, self.mr_c, cbits)),
            ]

        # ---- store_matrix_sync read: one memory word ---------------------------------------
        # sel = (col, line, word): 16-bit elements use words 0..1, 32-bit words 0..3.
        sr_sel = Cat(self.sr_word, self.sr_line, self.sr_col) if self._col else \
            Cat(self.sr_word, self.sr_line)
        for e in range(8):
            per_frag16, per_frag32 = [], []
            for f in range(self._nc):
                c16, c32 = [], []
                for col in layouts:
                    for line in range(16):
                        for word in range(4):
                            pos16, pos32 = word * 8 + e, word * 4 + e
                            if pos16 < 16:
                                rc = (line, pos16) if not col else (pos16, line)
                                lane, slot = inv[ACCUMULATOR][rc]
                                c16.append(self.acc[f][lane][slot][:16])
                            else:
                                c16.append(C(0, 16))
                            if e < 4:
                                rc = (line, pos32) if not col else (pos32, line)
                                lane, slot = inv[ACCUMULATOR][rc]
                                c32.append(self.acc[f][lane][slot])
                per_frag16.append(Array(c16)[sr_sel])
                if e < 4:
                    per_frag32.append(Array(c32)[sr_sel])
            v16 = _by_frag(per_frag16, self.sr_frag, cbits)
            with m.If(self.sr_f16):
                m.d.comb += self.sr_data[16 * e:16 * e + 16].eq(v16)
            if e < 4:
                v32 = _by_frag(per_frag32, self.sr_frag, cbits)
                with m.If(~self.sr_f16):
                    m.d.comb += self.sr_data[32 * e:32 * e + 32].eq(v32)
        return m
