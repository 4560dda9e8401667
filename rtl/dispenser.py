"""The tile dispenser that the GEMM top (``tcore.rtl.gemm``) and the SoC block (``tcore.rtl.soc``) share:
D's 16x16 tiles in row-major order, one a clock, to the warps that claim them."""

from amaranth import *
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

__all__ = ["TileDispenser", "tile_layout"]


def tile_layout(tile_bits: int) -> data.StructLayout:
    """What a claim gets: the tile's row and column (``ti``, ``tj``), ``row_end`` when ``tj``
    is its row's last, ``none`` when every tile has been handed out."""
    return data.StructLayout({"ti": tile_bits, "tj": tile_bits, "row_end": 1, "none": 1})


class TileDispenser(wiring.Component):
    """Hands out the tiles of a ``tiles_m`` x ``tiles_n`` grid in row-major order.

    ``start`` (one clock) takes the grid's size and begins again at tile (0, 0).  Warp ``i``
    claims on ``claims[i]``, a stream without payload (``valid``: it wants a tile); each clock
    the lowest-numbered claim is taken (its ``ready``; ready depends on valid, never the
    other way round) and gets ``tile``, which every warp sees.  Once every tile has been
    handed out, claims are still taken, with ``tile.none`` set.  ``advance`` pulses with each
    tile handed out (not with a ``none``), so that a top can step its own pointers:
    ``tile.row_end`` then says the next tile starts the next row.

    Latency: a claim is taken in the clock it is made; throughput one tile a clock.

    Parameters: ``ports`` (warps), ``tile_bits`` (width of a tile index).
    """

    def __init__(self, *, ports: int, tile_bits: int):
        self._ports, self._bits = ports, tile_bits
        super().__init__({
            "start": In(1), "tiles_m": In(tile_bits), "tiles_n": In(tile_bits),
            "claims": In(stream.Signature(0)).array(ports),
            "tile": Out(tile_layout(tile_bits)), "advance": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        bits = self._bits
        ti, tj = Signal(bits), Signal(bits)
        last_i, last_j = Signal(bits), Signal(bits)      # tiles_m - 1, tiles_n - 1
        left = Signal()
        m.d.comb += [self.tile.ti.eq(ti), self.tile.tj.eq(tj), self.tile.none.eq(~left),
                     self.tile.row_end.eq(tj == last_j)]
        # The lowest-numbered claim is taken (later assignments win).
        for i in reversed(range(self._ports)):
            with m.If(self.claims[i].valid):
                m.d.comb += [c.ready.eq(j == i) for j, c in enumerate(self.claims)]
        taken = Cat(c.valid for c in self.claims).any()
        m.d.comb += self.advance.eq(taken & left)
        with m.If(self.advance):
            with m.If(tj == last_j):
                m.d.sync += [tj.eq(0), ti.eq(ti + 1)]
                with m.If(ti == last_i):
                    m.d.sync += left.eq(0)
            with m.Else():
                m.d.sync += tj.eq(tj + 1)
        with m.If(self.start):
            m.d.sync += [ti.eq(0), tj.eq(0), last_i.eq(self.tiles_m - 1),
                         last_j.eq(self.tiles_n - 1),
                         left.eq((self.tiles_m != 0) & (self.tiles_n != 0))]
        return m
