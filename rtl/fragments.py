"""The warp register file: a warp's WMMA fragments in block RAM, laid out as on an H200.

Golden twin: :mod:`tcore.golden.wmma` (``load_matrix_sync``, ``store_matrix_sync``; the lane/slot
map is :mod:`tcore.numerics.fragments`, which both import).

Organisation
------------
With the H200's fragment layout every 4x4 block of a 16x16 fragment is held by 8 lanes (the
block's lane group q), two elements each (:mod:`tcore.numerics.fragments`).  The register file of
each fragment kind therefore has

* one *entry* per 4x4 block: 16 entries per fragment, ``entry = 4 * block row + block column``
  (for B the block row is the k block);
* one *column* per lane position l = 0..7 of the group: 8 columns, each its own
  ``lib.memory.Memory`` (its own address), of two elements: 2 x 16 bits for A and B, 2 x 32
  bits for the accumulator (FP32, or FP16 in the low half).

So an entry is 256 bits (A, B) or 512 bits (C/D) and a core beat (one 4x4 block of A, B or C)
is ONE read of one entry, all columns at one address.  The columns of an entry are *skewed*:
logical column l sits in physical column l XOR skew(entry), skew = q with its two bits
swapped (:func:`tcore.numerics.fragments.skew`); a 4:1 mux per column undoes it on a beat read.
With the skew the (at most two) entries that one 128-bit memory word touches use disjoint
physical columns, so every load writes one word per clock and every store reads one word per
clock, row- and column-major, FP16 and FP32 alike:

=====================  ===========================  ===============================
access (128-bit word)  entries / columns touched    clocks per word
=====================  ===========================  ===============================
A, B row/col-major     2 entries x 4 half-columns   1 (16-bit write granularity)
                       (A row, B col: 2 x 2 whole)
C/D FP32 row/col       1 entry x 2 columns (row) or 1 (32-bit write granularity)
                       4 half-columns (col)
C/D FP16 row/col       2 entries, disjoint columns  1 (FP16 in a 32-bit element slot)
mma beat read          1 entry, 8 columns           1 (no mux but the skew's 4:1)
D block write          1 entry, 8 columns           1
fill_fragment          16 entries                   16 (one entry per clock)
=====================  ===========================  ===============================

Reads are synchronous (block-RAM read ports): data comes one clock after an enabled address
and is held while the port is not enabled.  The storage has no reset.  Each column has one
write port (fill, loads and the D write-back share it, in that priority: the users never write
the same kind in the same clock) and one read port for the core's beats, plus one read port
for stores on the accumulator columns.
"""

from __future__ import annotations

import itertools
import types

from amaranth import *
from amaranth.lib import data, enum, memory, wiring
from amaranth.lib.wiring import In, Out

from tcore.numerics import fragments as fl

from .replica import replica

__all__ = ["FragKind", "Shape", "FragmentBank", "LoadSignature", "FillSignature", "MmaReadSignature",
           "MmaWriteSignature", "StoreSignature", "THREADS", "SLOTS", "MATRIX_A", "MATRIX_B",
           "ACCUMULATOR", "METADATA", "WORD_BITS", "host_port"]

THREADS, SLOTS = fl.THREADS, fl.SLOTS
WORD_BITS = 128                     # memory port: 8 half or 4 float elements
ENTRIES, COLUMNS = fl.BLOCKS, fl.COLUMNS


def host_port(mem_words: int) -> dict:
    """The host port of a top with a working memory of ``mem_words`` 128-bit words (``WarpTop``,
    ``GemmTop``, ``Fp4GemmTop``), declared once: flat members, so that the Verilog ports are
    ``host_addr``, ``host_wdata``, ``host_we`` (write the word when high) and ``host_rdata``
    (the word at ``host_addr`` one clock later; two on the GEMM tops, whose read data leaves
    through a register)."""
    abits = (mem_words - 1).bit_length()
    return {"host_addr": In(abits), "host_wdata": In(WORD_BITS), "host_we": In(1),
            "host_rdata": Out(WORD_BITS)}


class FragKind(enum.Enum, shape=2):
    """Fragment kinds (the WMMA command's ``kind`` codes).  ``METADATA``: a 2:4 sparse A
    fragment's metadata (PTX's ``e`` operand), in a bank built with ``sparse``."""
    MATRIX_A = 0
    MATRIX_B = 1
    ACCUMULATOR = 2
    METADATA = 3


MATRIX_A, MATRIX_B, ACCUMULATOR = FragKind.MATRIX_A, FragKind.MATRIX_B, FragKind.ACCUMULATOR
METADATA = FragKind.METADATA
_NAMES = {MATRIX_A: "matrix_a", MATRIX_B: "matrix_b", ACCUMULATOR: "accumulator"}


class Shape(enum.Enum, shape=2):
    """WMMA shapes (the command's ``shape`` codes).  The other two shapes live in the same
    16x16 entries (:func:`tcore.numerics.fragments.shape_place`): an m32n8k16 A is a *pair* of A
    fragments (f and f + 1), its B the left half of a B fragment, its accumulator one
    accumulator fragment; m8n32k16 is m32n8k16 transposed (its A in a B fragment, its B in an
    A pair)."""
    M16N16K16 = 0
    M32N8K16 = 1
    M8N32K16 = 2


def storage_kind(shape, kind):
    """The kind code of the register-file fragment that holds a ``kind`` fragment of
    ``shape`` (plain Amaranth values of the codes): m8n32k16 keeps A in a B fragment and B
    in an A fragment."""
    swap = (shape == Shape.M8N32K16.value) & (kind != ACCUMULATOR.value)
    return Mux(swap, Mux(kind == MATRIX_A.value, MATRIX_B.value, MATRIX_A.value), kind)


def is_pair(shape, kind):
    """The fragment takes two A fragments, f and f + 1 (m32n8k16's A, m8n32k16's B); plain
    values of the codes."""
    return (((shape == Shape.M32N8K16.value) & (kind == MATRIX_A.value)) |
            ((shape == Shape.M8N32K16.value) & (kind == MATRIX_B.value)))


# ---- port signatures (members as the bank's user drives them) --------------------------------

class LoadSignature(wiring.Signature):
    """load_matrix_sync, one memory word per clock: word ``word`` of line ``line`` (a row when
    row-major, a column when ``col``) of fragment ``frag`` of ``kind`` and shape ``mnk``; ``f16``
    marks 16-bit accumulator elements (8 per word, else 4 FP32).  Written at the clock edge.
    A line has 16 elements in m16n16k16; the other shapes have 8 to 32 lines of 8 to 32.
    ``METADATA`` (m16n16k16, a ``sparse`` bank): row ``line`` (0..15) of A fragment ``frag``'s
    metadata := the 32-bit element ``word`` (0..3) of ``data``, the row's PTX metadata word of
    the k32 (nibble q: group q's ``i0 | i1 << 2``)."""

    def __init__(self):
        super().__init__({"en": Out(1), "kind": Out(FragKind), "mnk": Out(Shape), "col": Out(1),
                          "f16": Out(1), "frag": Out(3), "line": Out(5), "word": Out(3),
                          "data": Out(WORD_BITS)})


class FillSignature(wiring.Signature):
    """fill_fragment, one entry (4x4 block) per clock: every element of entry ``entry`` of
    fragment ``frag`` of ``kind`` := ``value`` (the low 16 bits for A and B)."""

    def __init__(self):
        super().__init__({"en": Out(1), "kind": Out(FragKind), "frag": Out(3), "entry": Out(4),
                          "value": Out(32)})


class MmaReadSignature(wiring.Signature):
    """The core's beat for output block (``i``, ``j``) and k slice ``s`` of fragments ``a``,
    ``b`` (matrix) and ``c`` (accumulator): A[4i+r][4s+k] at 4r+k, B[4s+k][4jb+c] at 4k+c,
    C[4i+r][4j+c] at 4r+c (``jb`` = ``j`` but in the other shapes, whose B is 8 wide).
    ``en`` takes the address; the beat comes one clock later and is held until the next
    ``en``.

    ``sparse`` (a bank built with ``sparse``): a 2:4 sparse beat of an ``mma.sp`` k32.  ``a``
    holds the stored values (16 x 16 of a logical 16 x 32) and its metadata; B is the pair of
    fragments ``b`` (K rows 0..15) and ``b + 1`` (16..31); slice ``s`` takes stored A
    columns 4s.., B rows 8s..8s+7 (``beat_b``: rows 8s..8s+3, ``beat_b_hi``: 8s+4..8s+7,
    as ``beat_b``) and byte ``s`` of each of A rows 4i..4i+3's metadata words
    (``beat_meta`` byte r: row 4i+r), as :class:`tcore.rtl.mma4.Beat` takes them."""

    def __init__(self):
        super().__init__({"en": Out(1), "a": Out(3), "b": Out(3), "c": Out(3),
                          "i": Out(2), "j": Out(2), "jb": Out(2), "s": Out(2), "sparse": Out(1),
                          "beat_a": In(data.ArrayLayout(16, 16)),
                          "beat_b": In(data.ArrayLayout(16, 16)),
                          "beat_c": In(data.ArrayLayout(32, 16)),
                          "beat_b_hi": In(data.ArrayLayout(16, 16)),
                          "beat_meta": In(32)})


class MmaWriteSignature(wiring.Signature):
    """mma_sync write-back of the D block (``i``, ``j``) (D[4i+r][4j+c] at 4r+c) into
    accumulator ``frag``, at the clock edge."""

    def __init__(self):
        super().__init__({"en": Out(1), "frag": Out(3), "i": Out(2), "j": Out(2),
                          "data": Out(data.ArrayLayout(32, 16))})


class StoreSignature(wiring.Signature):
    """store_matrix_sync: ``en`` asks for word ``word`` of line ``line`` of accumulator
    ``frag`` of shape ``mnk`` (``col``-major, ``f16`` elements); ``data`` comes two clocks
    later (the first registers each column's read address), held until two clocks after the
    next ``en``.  One word a clock."""

    def __init__(self):
        super().__init__({"en": Out(1), "frag": Out(3), "mnk": Out(Shape), "col": Out(1),
                          "f16": Out(1), "line": Out(5), "word": Out(3), "data": In(WORD_BITS)})


# ---- tables: a mux made from the shared map, keyed only by the bits it depends on ------------

def _lookup(m, parts, fn, assign, default=None):
    """Drive ``assign(result)`` for ``result = fn(*key)``, ``key`` the values of ``parts``
    (a list of ``(value, width)``; ``fn`` returns None where it does not care).

    The result is tabulated over every key, the key bits it does not depend on are dropped,
    and a ``Switch`` on the remaining bits selects the case: the muxes are as small as the
    map allows.  ``default``: statements where no case applies (else nothing is driven).
    """
    bits = [(pi, b) for pi, (_, w) in enumerate(parts) for b in range(w)]
    table = {}
    for key in itertools.product(*(range(1 << w) for _, w in parts)):
        r = fn(*key)
        if r is not None:
            table[key] = r
    keep = list(range(len(bits)))

    def project(key, sel):
        return tuple((key[bits[i][0]] >> bits[i][1]) & 1 for i in sel)

    for i in list(keep):
        trial = [k for k in keep if k != i]
        groups = {}
        ok = True
        for key, r in table.items():
            g = project(key, trial)
            if groups.setdefault(g, r) != r:
                ok = False
                break
        if ok:
            keep = trial
    cases = {}
    for key, r in table.items():
        cases[project(key, keep)] = r
    if not cases:
        if default is not None:
            m.d.comb += default
        return
    if not keep:
        m.d.comb += assign(next(iter(cases.values())))
        return
    sel = Cat(*(parts[bits[i][0]][0][bits[i][1]] for i in keep))
    with m.Switch(sel):
        for g, r in sorted(cases.items()):
            with m.Case(sum(bit << n for n, bit in enumerate(g))):
                m.d.comb += assign(r)
        if default is not None:
            with m.Default():
                m.d.comb += default


def _elem_bits(kind):
    return 16 if kind != ACCUMULATOR else 32


def _word_elements(kind, col, f16, line, word):
    """The elements of a 128-bit word: a list of ((row, col), bit offset, width), or None
    where the word does not exist."""
    esize = 16 if (kind != ACCUMULATOR or f16) else 32
    per = WORD_BITS // esize
    if word >= 16 // per:
        return None
    out = []
    for e in range(per):
        pos = word * per + e
        rc = (line, pos) if not col else (pos, line)
        out.append((rc, esize * e, esize))
    return out


def _square_word(m, name, shape, kind, col, f16, line, word):
    """Where word ``word`` of line ``line`` of a ``shape`` fragment lives in the 16x16 entries
    (:func:`tcore.numerics.fragments.shape_place`, done on the word's coordinates): ``(kind,
    fragment offset, col, line, word)`` of the 16x16 fragment that the bank's tables take.

    m8n32k16 is m32n8k16 transposed: its matrix kinds swap and its layout flips.  Then, for
    m32n8k16: A row r of 32 goes to fragment r[4] of the pair, a column's words 2, 3 (rows
    16..31) to the second fragment; B (16x8) is the left half of a B fragment, word for word;
    the accumulator's rows 16..31 are columns 8..15 of its 16x16 fragment.  ``kind`` and
    ``shape`` are plain values (``FragKind``, ``Shape`` codes).
    """
    skind, off = Signal(FragKind, name=f"{name}_skind"), Signal(name=f"{name}_off")
    scol, sline, sword = Signal(name=f"{name}_scol"), Signal(4, name=f"{name}_sline"), \
        Signal(2, name=f"{name}_sword")
    flip = shape == Shape.M8N32K16.value
    swap = flip & (kind != ACCUMULATOR.value)
    m.d.comb += [skind.eq(Mux(swap, Mux(kind == MATRIX_A.value, MATRIX_B, MATRIX_A), kind)),
                 scol.eq(col ^ flip), off.eq(0), sline.eq(line[:4]), sword.eq(word[:2])]
    with m.If(shape != Shape.M16N16K16.value):
        with m.Switch(skind):
            with m.Case(MATRIX_A):              # 32x16: a pair of fragments
                with m.If(scol):
                    m.d.comb += [off.eq(word[1]), sword.eq(word[0])]
                with m.Else():
                    m.d.comb += off.eq(line[4])
            with m.Case(ACCUMULATOR):           # 32x8: rows 16..31 at columns 8..15
                with m.If(~scol & f16):
                    m.d.comb += sword.eq(line[4])
                with m.Elif(~scol):
                    m.d.comb += sword.eq(Cat(word[0], line[4]))
                with m.Elif(f16):
                    m.d.comb += [sline.eq(Cat(line[:3], word[1])), sword.eq(word[0])]
                with m.Else():
                    m.d.comb += [sline.eq(Cat(line[:3], word[2])), sword.eq(word[:2])]
    return skind, off, scol, sline, sword


def _column_map(kind, p, modes):
    """What physical column ``p`` of ``kind`` takes of a loaded word, as a function of the
    word's place in the 16x16 entries ``(col, f16, line, word)``: None where the word does not
    exist (or its mode is not built), else ``(entry, (half 0, half 1))``, each half the word's
    ``(bit offset, width)`` written there or None (that half not written)."""
    def fn(col, f16, line, word):
        if kind != ACCUMULATOR:
            f16 = 0             # 16-bit elements whatever the flag says
        if (col, f16) not in modes:
            return None
        elems = _word_elements(kind, col, f16, line, word)
        if elems is None:
            return None
        out = [None, None]
        entry = None
        for rc, off, w in elems:
            e, pc, half = _place(kind, rc)
            if pc == p:
                out[half] = (off, w)
                entry = e
        return entry, tuple(out)
    return fn


def _entry_of(fn):
    """The entry a column writes, of a :func:`_column_map` function (None: no such entry)."""
    return lambda *k: None if fn(*k) is None or fn(*k)[0] is None else fn(*k)[0]


def _half_of(fn, half):
    """What ``half`` of a column takes, of a :func:`_column_map` function: None (no such word),
    ``"off"`` (not written) or the word's ``(bit offset, width)``."""
    def src(*k):
        r = fn(*k)
        return None if r is None else (r[1][half] or "off")
    return src


def _place(kind, rc):
    """(entry, physical column, half) of element rc."""
    entry, lcol, half = fl.block_place(_NAMES[kind], *rc)
    return entry, lcol ^ fl.skew(_NAMES[kind], entry), half


class FragmentBank(wiring.Component):
    """The warp register file (see the module doc): fragments of A, B and C/D in block RAM.

    Parameters
    ----------
    a_frags, b_frags, acc_frags : int, 1..8
        Fragments of each kind.
    load_ports : int, 1 or 2
        Load ports (2: A and B load at once); each may load any kind.
    col_major : bool
        Support column-major loads and stores (the GEMM top, row-major only, leaves them out).
    f16 : bool
        Support FP16 accumulator loads and stores.
    sparse : bool
        2:4 sparse A: a metadata word per row of each A fragment (loads of ``METADATA``), a
        second read port on B's columns and ``mma_rd.sparse`` beats (see
        :class:`MmaReadSignature`).
    load_stage : bool
        Register each load port's word (once per kind) and each column's write controls
        (looked up from the word's translation into the 16x16 entries, once per column)
        before the columns' write ports: a loaded word is then written a clock later
        (readable from the second clock after the load port carried it), and the path from
        the load port to a column's write data is cut in two (the WMMA sequencer's load into
        the accumulator columns was the SoC block's routed critical path).  Fills, the D
        write-back and metadata loads are written at the edge as without it; a user must
        not fill or write back into a kind the clock after loading it.

    Members
    -------
    fill : In(FillSignature)
    load : In(LoadSignature) x load_ports
    mma_rd : In(MmaReadSignature)
    mma_wr : In(MmaWriteSignature)
    store : In(StoreSignature)

    Users write one kind from one port per clock (fill, then the load ports, then the D
    write-back, take a kind's columns in that priority).
    """

    def __init__(self, *, a_frags: int = 4, b_frags: int = 4, acc_frags: int = 2,
                 load_ports: int = 1, col_major: bool = True, f16: bool = True,
                 sparse: bool = False, load_stage: bool = False):
        for name, n in (("a_frags", a_frags), ("b_frags", b_frags), ("acc_frags", acc_frags)):
            if not 1 <= n <= 8:
                raise ValueError(f"{name} must be 1..8, not {n!r}")
        if load_ports not in (1, 2):
            raise ValueError(f"Load ports must be 1 or 2, not {load_ports!r}")
        self._frags = {MATRIX_A: a_frags, MATRIX_B: b_frags, ACCUMULATOR: acc_frags}
        self._ports, self._col, self._f16, self._sparse = load_ports, col_major, f16, sparse
        self._load_stage = load_stage
        super().__init__({
            "fill": In(FillSignature()),
            "load": In(LoadSignature()).array(load_ports),
            "mma_rd": In(MmaReadSignature()),
            "mma_wr": In(MmaWriteSignature()),
            "store": In(StoreSignature()),
        })
        # columns[kind][p]: the memory of physical column p.
        self.columns = {
            kind: [memory.Memory(shape=2 * _elem_bits(kind), depth=ENTRIES * n, init=[])
                   for _ in range(COLUMNS)]
            for kind, n in self._frags.items()}
        # meta[r]: the metadata words of rows 4i + r of every A fragment (address frag, i).
        self.meta = [memory.Memory(shape=32, depth=4 * a_frags, init=[]) for _ in range(4)] \
            if sparse else []

    def frags(self, kind) -> int:
        return self._frags[FragKind(kind)]

    # The lane/slot map, as the storage holds it: what ``tcore layout`` reads out.
    def locate(self, kind, frag: int, lane: int, slot: int,
               shape: str = "m16n16k16") -> tuple[memory.Memory, int, int, int]:
        """(column memory, row address, bit offset, width) of ``slot`` of ``lane`` of fragment
        ``frag`` of ``shape`` (slots 0..num_elements - 1; matrix slots repeat past the
        distinct ones)."""
        name = _NAMES[FragKind(kind)]
        rc = fl.element_map(name, shape)
        if not (0 <= lane < THREADS and 0 <= slot < (8 if name == "accumulator" else 16)):
            raise ValueError(f"no slot {slot} in lane {lane}")
        sname, off, r, c = fl.shape_place(shape, name, *map(int, rc[lane, slot % rc.shape[1]]))
        skind = {v: k for k, v in _NAMES.items()}[sname]
        entry, lcol, half = fl.block_place(sname, r, c)
        p = lcol ^ fl.skew(sname, entry)
        w = _elem_bits(skind)
        return self.columns[skind][p], ENTRIES * (frag + off) + entry, w * half, w

    def elaborate(self, platform):
        m = Module()
        modes = [(c, f) for c in ((0, 1) if self._col else (0,))
                 for f in ((0, 1) if self._f16 else (0,))]
        # Each load port's word in the 16x16 entries (the other shapes' translation).
        loads = [(port, _square_word(m, f"ld{n}", port.mnk.as_value(), port.kind.as_value(),
                                     port.col, port.f16, port.line, port.word))
                 for n, port in enumerate(self.load)]
        for kind, cols in self.columns.items():
            for p, mem in enumerate(cols):
                m.submodules[f"{_NAMES[kind]}_col{p}"] = mem
            self._write_side(m, kind, cols, modes, loads)
        self._beat_reads(m)
        self._store_read(m, modes)
        if self._sparse:
            self._metadata(m)
        return m

    def _metadata(self, m):
        """Metadata loads (one row's word per clock) and the beat's four bytes: rows 4i..4i+3
        of fragment ``a`` read at once, byte ``s`` of each."""
        rd = self.mma_rd
        s_held = Signal(2)
        with m.If(rd.en):
            m.d.sync += s_held.eq(rd.s)
        for r, mem in enumerate(self.meta):
            m.submodules[f"meta{r}"] = mem
            wp, rp = mem.write_port(), mem.read_port(transparent_for=())
            for port in reversed(self.load):        # port 0 last: it wins
                with m.If(port.en & (port.kind == METADATA) & (port.line[:2] == r)):
                    m.d.comb += [wp.en.eq(1), wp.addr.eq(self._meta_addr(port.frag, port.line[2:4])),
                                 wp.data.eq(port.data.word_select(port.word[:2], 32))]
            m.d.comb += [rp.en.eq(rd.en), rp.addr.eq(self._meta_addr(rd.a, rd.i)),
                         rd.beat_meta[8 * r:8 * r + 8].eq(rp.data.word_select(s_held, 8))]

    def _meta_addr(self, frag, i):
        n = self._frags[MATRIX_A]
        return i if n == 1 else Cat(i, frag[:(n - 1).bit_length()])

    def _addr(self, kind, frag, entry):
        n = self._frags[kind]
        if n == 1:
            return entry
        return Cat(entry, frag[:(n - 1).bit_length()])

    def _column_loads(self, m, kind, loads, modes):
        """Per load port, what the write selects of ``kind``'s columns read: whether the port
        writes this kind, its fragment (with the translation's offset), the word's place in
        the 16x16 entries (``col, f16, line, word``) and the word.  With ``load_stage``, each
        column's share of it (:meth:`_staged_column`) is registered instead, and the word once
        for the kind."""
        out, fbits = [], (self._frags[kind] - 1).bit_length()
        for n, (port, (skind, off, scol, sline, sword)) in enumerate(loads):
            act, frag = port.en & (skind == kind), (port.frag + off)[:max(fbits, 1)]
            # The key of the columns' tables (_lookup); f16 only where elements are 32 bits.
            key = [scol, port.f16, sline, sword] if kind == ACCUMULATOR else [scol, C(0, 1), sline, sword]
            if not self._load_stage:
                out.append(([(act, frag, key)] * COLUMNS, port.data))
                continue
            tag = f"{_NAMES[kind][:3]}_ld{n}"
            cols = [self._staged_column(m, f"{tag}_c{p}", _column_map(kind, p, modes), act,
                                        frag if fbits else None, list(zip(key, (1, 1, 4, 2))))
                    for p in range(COLUMNS)]
            out.append((cols, replica(m, port.data, f"{tag}_data")))
        return out

    @staticmethod
    def _staged_column(m, tag, fn, act, frag, key):
        """One column's write controls for a staged load, looked up (``fn``,
        :func:`_column_map`) from the word's place before the stage and registered there, one
        copy per column (:func:`tcore.rtl.replica.replica`: one register's fan-out to every column,
        then the lookups, was the routed critical path): whether it writes, its fragment, its
        entry, and per half the write enable and which of the word's slices it takes (an
        index into ``offs``)."""
        entry = Signal(4, name=f"{tag}_entry_d")
        _lookup(m, key, _entry_of(fn), lambda e: entry.eq(e))
        halves = []
        for half in (0, 1):
            offs = sorted({r[1][half] for k in itertools.product(*(range(1 << w) for _, w in key))
                           if (r := fn(*k)) is not None and r[1][half] is not None})
            en = Signal(name=f"{tag}_en{half}_d")
            sel = Signal(range(max(len(offs), 2)), name=f"{tag}_sel{half}_d")
            _lookup(m, key, _half_of(fn, half), lambda s, en=en, sel=sel, offs=offs: [en.eq(0), sel.eq(0)]
                    if s == "off" else [en.eq(1), sel.eq(offs.index(s))], default=[en.eq(0), sel.eq(0)])
            halves.append((replica(m, en, f"{tag}_en{half}") if offs else C(0, 1),
                           replica(m, sel, f"{tag}_sel{half}") if len(offs) > 1 else C(0, 1), offs))
        return types.SimpleNamespace(
            act=replica(m, act, f"{tag}_act", reset_less=False),
            frag=replica(m, frag, f"{tag}_frag") if frag is not None else C(0, 1),
            entry=replica(m, entry, f"{tag}_entry"), halves=halves)

    def _staged_write(self, m, kind, wp, col, ldata):
        """A column's write port from its registered controls (:meth:`_staged_column`)."""
        eb = _elem_bits(kind)
        with m.If(col.act):
            m.d.comb += wp.addr.eq(self._addr(kind, col.frag, col.entry))
            for half, (en, sel, offs) in enumerate(col.halves):
                m.d.comb += wp.en[half].eq(en)
                with m.Switch(sel):
                    for i, (off, w) in enumerate(offs):
                        with m.Case(i):
                            m.d.comb += wp.data[eb * half:eb * (half + 1)].eq(ldata[off:off + w])

    def _write_side(self, m, kind, cols, modes, loads):
        eb = _elem_bits(kind)
        name = _NAMES[kind]
        wports = [mem.write_port(granularity=eb) for mem in cols]
        fill = self.fill
        # D write-back (accumulator): one entry, all columns.
        if kind == ACCUMULATOR:
            wr = self.mma_wr
            entry = Cat(wr.j, wr.i)
            for p, wp in enumerate(wports):
                def wb(sk, p=p):
                    lcol = p ^ sk
                    out = []
                    for half in (0, 1):
                        r, c = fl.element_of(name, 0, lcol, half)     # in the block
                        out.append(wp.data[eb * half:eb * (half + 1)].eq(wr.data[4 * r + c]))
                    return out
                with m.If(wr.en):
                    m.d.comb += [wp.addr.eq(self._addr(kind, wr.frag, entry)), wp.en.eq(0b11)]
                    # skew of block (i, j): from the low bits of i and j
                    _lookup(m, [(wr.i, 2), (wr.j, 2)],
                            lambda i, j: fl.skew(name, 4 * i + j), wb)
        # Loads.
        for cols, ldata in reversed(self._column_loads(m, kind, loads, modes)):   # port 0 last: it wins
            for p, wp in enumerate(wports):
                if self._load_stage:
                    self._staged_write(m, kind, wp, cols[p], ldata)
                    continue
                act, frag, key = cols[p]
                with m.If(act):
                    fn = _column_map(kind, p, modes)
                    key = list(zip(key, (1, 1, 4, 2)))
                    # Whole-signal assignments only: Icarus never evaluates a partial
                    # "always @*" whose inputs do not change after time 0.
                    entry = Signal(4, name=f"{name}_ld{p}_entry")
                    _lookup(m, key, _entry_of(fn), lambda e, entry=entry: entry.eq(e))
                    m.d.comb += wp.addr.eq(self._addr(kind, frag, entry))
                    for half in (0, 1):
                        _lookup(m, key, _half_of(fn, half),
                                lambda s, wp=wp, half=half, ldata=ldata: [wp.en[half].eq(0)]
                                if s == "off" else [
                                    wp.data[eb * half:eb * (half + 1)].eq(ldata[s[0]:s[0] + s[1]]),
                                    wp.en[half].eq(1)],
                                default=[wp.en[half].eq(0)])
        # Fill: one entry.
        with m.If(fill.en & (fill.kind == kind)):
            for wp in wports:
                v = fill.value[:eb]
                m.d.comb += [wp.addr.eq(self._addr(kind, fill.frag, fill.entry)),
                             wp.data.eq(Cat(v, v)), wp.en.eq(0b11)]

    def _beat_reads(self, m):
        rd = self.mma_rd
        reads = [(MATRIX_A, rd.beat_a, rd.a, Cat(rd.s, rd.i), ""),
                 (MATRIX_B, rd.beat_b, rd.b, Cat(rd.jb, rd.s), ""),
                 (ACCUMULATOR, rd.beat_c, rd.c, Cat(rd.j, rd.i), "")]
        if self._sparse:
            # A sparse slice s reads k blocks 2(s % 2) and 2(s % 2) + 1 of B fragment
            # b + s // 2: two entries at once, through a second read port.
            sp = rd.sparse
            frag_b = (rd.b + (sp & rd.s[1]))[:3]
            reads[1] = (MATRIX_B, rd.beat_b, frag_b, Cat(rd.jb, Mux(sp, Cat(C(0, 1), rd.s[0]), rd.s)), "")
            reads.append((MATRIX_B, rd.beat_b_hi, frag_b, Cat(rd.jb, C(1, 1), rd.s[0]), "_hi"))
        for kind, beat, frag, entry, tag in reads:
            name = _NAMES[kind]
            eb = _elem_bits(kind)
            ports = [mem.read_port(transparent_for=()) for mem in self.columns[kind]]
            for rp in ports:
                m.d.comb += [rp.addr.eq(self._addr(kind, frag, entry)), rp.en.eq(rd.en)]
            # The entry whose data the ports hold, for the skew.
            held = Signal(4, name=f"{name}{tag}_held")
            with m.If(rd.en):
                m.d.sync += held.eq(entry)

            def unskew(sk, name=name, ports=ports, beat=beat, eb=eb):
                out = []
                for e in range(16):
                    r, c = divmod(e, 4)
                    # beat element e is element (r, c) of the block; for B, (k, col) = (r, c)
                    _, lcol, half = fl.block_place(name, r, c)
                    p = lcol ^ sk
                    out.append(beat[e].eq(ports[p].data[eb * half:eb * (half + 1)]))
                return out
            _lookup(m, [(held, 4)], lambda e, name=name: fl.skew(name, e), unskew)

    def _store_read(self, m, modes):
        st = self.store
        kind, name = ACCUMULATOR, "accumulator"
        ports = [mem.read_port(transparent_for=()) for mem in self.columns[kind]]
        _, _, scol, sline, sword = _square_word(m, "st", st.mnk.as_value(),
                                                C(ACCUMULATOR.value, 2), st.col, st.f16,
                                                st.line, st.word)
        key = [(scol, 1), (st.f16, 1), (sline, 4), (sword, 2)]

        def entry_of(p):
            def fn(col, f16, line, word):
                if (col, f16) not in modes:
                    return None
                elems = _word_elements(kind, col, f16, line, word)
                for rc, _, _ in elems or ():
                    e, pc, _ = _place(kind, rc)
                    if pc == p:
                        return e
                return None
            return fn

        # Each column's read address is registered a clock before the read: the entry select,
        # from the caller's word through the shape translation, and its fan-out to the
        # column's LUT RAM are then two clocks' paths, not one.
        rd_en = Signal(name="st_rd_en")
        m.d.sync += rd_en.eq(st.en)
        for p, rp in enumerate(ports):
            entry = Signal(4, name=f"st_col{p}_entry")
            _lookup(m, key, entry_of(p), lambda e, entry=entry: entry.eq(e))
            addr = Signal.like(rp.addr, name=f"st_col{p}_addr")
            with m.If(st.en):
                m.d.sync += addr.eq(self._addr(kind, st.frag, entry))
            m.d.comb += [rp.en.eq(rd_en), rp.addr.eq(addr)]
        # The word assembled from the held column data: 16-bit chunks, picked by the key of
        # the read (registered with the address, then with the data).
        hkey = key
        for stage, en in (("req", st.en), ("held", rd_en)):
            held = [Signal(w, name=f"st_{stage}_{n}")
                    for (_, w), n in zip(key, ("col", "f16", "line", "word"))]
            with m.If(en):
                m.d.sync += [h.eq(v) for h, (v, _) in zip(held, hkey)]
            hkey = [(h, w) for h, (_, w) in zip(held, key)]
        for chunk in range(WORD_BITS // 16):
            def src(col, f16, line, word, chunk=chunk):
                if (col, f16) not in modes:
                    return None
                elems = _word_elements(kind, col, f16, line, word)
                if elems is None:
                    return None
                for rc, off, w in elems:
                    if off <= 16 * chunk < off + w:
                        _, pc, half = _place(kind, rc)
                        return pc, 32 * half + (16 * chunk - off)
                return None
            _lookup(m, hkey, src,
                    lambda s, chunk=chunk: st.data[16 * chunk:16 * chunk + 16].eq(
                        ports[s[0]].data[s[1]:s[1] + 16]))
