"""The board top (design ``board``): a PicoRV32 CPU with its firmware in block RAM, a UART, the
SoC block (:class:`tcore.rtl.soc.GemmSoc`) and its AXI4 memory in block RAM, LEDs.

Golden twin: the SoC block's (:func:`tcore.golden.mma.mma`); the firmware (``sw/board``) checks the
block against D bits computed by the golden model at build time, and the host
(``tcore board run``) checks every D it reads back.

CPU memory map (PicoRV32's native memory bus, one access at a time):

=================  ===========================================================================
0x0000_0000        firmware RAM (``fw_bytes``, initialised with the firmware image; the stack
                   at its top)
0x1000_0000        the SoC block's registers (``sw/include/tcore_regs.h``) over AXI4-Lite
0x2000_0000        board registers (:data:`IO_REGS`): UART, LEDs, what the build is
0x4000_0000        the AXI memory (``mem_bytes``) that the SoC block's AXI4 master reads
                   and writes at address 0 on
=================  ===========================================================================

The AXI memory is one block RAM of 128-bit words with two ports: port A serves the AXI4
reads (bursts back to back, the next address taken while the current burst's reads go out),
port B the AXI4 writes and the CPU, which waits while a write burst is under way (and holds
off the next write address while it is served).  Reads and writes of the block thus overlap,
as on the SoC bench's memory.

:class:`BoardTop` is the same RTL in simulation and on a board: its clock and reset come from
outside.  :class:`BoardChip` wraps it for an Amaranth platform (``amaranth-boards``): the
board's oscillator through an ECP5 PLL (``EHXPLLL``, :func:`pll_config`), reset from the
PLL's lock and a button, the UART and LED pins.
"""

from amaranth import *
from amaranth.lib import io, memory, wiring
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.fifo import SyncFIFO
from amaranth.lib.wiring import In, Out

from .soc import AxiSignature, GemmSoc
from .uart import Uart

__all__ = ["BoardTop", "SOC_DATA_WIDTH", "BoardChip", "AxiRam", "RamPortSignature", "IO_REGS", "BOARD_MAGIC",
           "REGION", "pll_config"]

#: The CPU's address regions (address bits 31:28).
REGION = {"fw": 0x0, "soc": 0x1, "io": 0x2, "mem": 0x4}

#: The board registers at 0x2000_0000 (byte offsets): UART_DATA reads the next received byte
#: (0..255, and takes it) or -1 when none waits, and sends a written byte (the write waits for
#: room); UART_STATUS: bit 0 sending, bit 1 receive overflow, bit 2 framing error (write 1s to
#: clear them), bits 31:16 bytes waiting; LEDS: bit 0 self-test passed, bit 1 failed (the
#: firmware's); the rest read what the build is.
IO_REGS = {"UART_DATA": 0x00, "UART_STATUS": 0x04, "LEDS": 0x08, "CLK_HZ": 0x0C,
           "UART_DIVISOR": 0x10, "MEM_BYTES": 0x14, "LANES": 0x18, "TIMEOUT_CYCLES": 0x1C,
           "FW_BYTES": 0x20, "MAGIC": 0x24}
BOARD_MAGIC = 0x74636264          # "tcbd"

#: The AXI memory's word and the SoC block's data width.
SOC_DATA_WIDTH = 128
_WORD = SOC_DATA_WIDTH


class RamPortSignature(wiring.Signature):
    """A requester's port into :class:`AxiRam` (``Out``: driven by the requester): ``en`` held
    with ``addr`` (a 128-bit word), ``we`` (byte enables; 0 for a read) and ``wdata`` until
    ``ack``, a one-clock pulse; ``rdata`` holds the word read then."""

    def __init__(self, addr_width: int):
        super().__init__({"en": Out(1), "addr": Out(addr_width), "we": Out(_WORD // 8),
                          "wdata": Out(_WORD), "ack": In(1), "rdata": In(_WORD)})


class AxiRam(wiring.Component):
    """An AXI4 slave memory (design ``axiram``) of ``words`` 128-bit words in block RAM (INCR
    bursts of full-width beats, each answered with its ID, in order; OKAY responses; addresses
    wrap at the memory's size), with a second requester ``cpu``
    (:class:`RamPortSignature`).  See the module docstring for how the ports are shared."""

    READ_FIFO = 4

    def __init__(self, words: int = 1024, *, addr_width: int = 32, init=()):
        self._words, self._aw = words, addr_width
        self._abits = (words - 1).bit_length()
        self._init = list(init)
        super().__init__({"axi": In(AxiSignature(addr_width, _WORD)),
                          "cpu": In(RamPortSignature(self._abits))})

    def elaborate(self, platform):
        m = Module()
        axi, cpu = self.axi, self.cpu
        m.submodules.mem = mem = memory.Memory(shape=_WORD, depth=self._words, init=self._init)
        wr_b = mem.write_port(granularity=8)            # port B
        rd_b = mem.read_port(transparent_for=(wr_b,))   # one port: read and write (TDP)
        # Port A reads what port B writes the same clock: a non-transparent read across the
        # ports is an "old data" collision the block RAM does not have, which Yosys meets
        # by a second copy of the whole memory; a transparent one costs a compare and a mux.
        rd = mem.read_port(transparent_for=(wr_b,))     # port A
        abits, shift = self._abits, (_WORD // 8).bit_length() - 1

        # ---- reads: an address queue of one, then the burst's reads, one a clock ------------
        q_valid, q_addr, q_len, q_id = Signal(), Signal(abits), Signal(8), Signal(1)
        active, raddr, left, rid = Signal(), Signal(abits), Signal(9), Signal(1)
        m.submodules.rfifo = rfifo = SyncFIFO(width=_WORD + 2, depth=self.READ_FIFO)
        issued, issued_last = Signal(), Signal()
        issued2, data2, last2, id2 = Signal(), Signal(_WORD), Signal(), Signal(1)
        issue = active & (rfifo.level + issued + issued2 < self.READ_FIFO)
        last_issue = issue & (left == 1)
        m.d.comb += [axi.arready.eq(~q_valid), rd.addr.eq(raddr), rd.en.eq(1)]
        with m.If(axi.arvalid & axi.arready):
            m.d.sync += [q_valid.eq(1), q_addr.eq(axi.araddr >> shift), q_len.eq(axi.arlen),
                         q_id.eq(axi.arid)]
        with m.If(issue):
            m.d.sync += [raddr.eq(raddr + 1), left.eq(left - 1)]
        with m.If((~active | last_issue) & q_valid):
            m.d.sync += [active.eq(1), raddr.eq(q_addr), left.eq(q_len + 1), q_valid.eq(0),
                         rid.eq(q_id)]
        with m.Elif(last_issue):
            m.d.sync += active.eq(0)
        issued_id = Signal(1)
        m.d.sync += [issued.eq(issue), issued_last.eq(last_issue), issued_id.eq(rid)]
        # The word read into a register before the FIFO: the block RAMs' clock-to-out, the
        # mux across the memory's depth and the transparency mux fill a clock by themselves
        # (the routed board's critical path at 75 MHz: 13.7 ns into the FIFO's LUT RAM).
        m.d.sync += [issued2.eq(issued), data2.eq(rd.data), last2.eq(issued_last),
                     id2.eq(issued_id)]
        m.d.comb += [rfifo.w_en.eq(issued2), rfifo.w_data.eq(Cat(data2, last2, id2)),
                     axi.rvalid.eq(rfifo.r_rdy), axi.rdata.eq(rfifo.r_data[:_WORD]),
                     axi.rlast.eq(rfifo.r_data[_WORD]), axi.rid.eq(rfifo.r_data[_WORD + 1]),
                     axi.rresp.eq(0), rfifo.r_en.eq(axi.rready)]

        # ---- writes and the CPU on port B ----------------------------------------------------
        wr_active, waddr, bvalid, bid = Signal(), Signal(abits), Signal(), Signal(1)
        cstate = Signal(2)                  # the CPU's access: 0 none, 1 granted, 2 answered
        cdata = Signal(_WORD)
        grant = cpu.en & ~wr_active & (cstate == 0)
        m.d.comb += [axi.awready.eq(~wr_active & ~bvalid & ~cpu.en & (cstate == 0)),
                     axi.wready.eq(wr_active), axi.bvalid.eq(bvalid), axi.bresp.eq(0),
                     axi.bid.eq(bid)]
        with m.If(axi.awvalid & axi.awready):
            m.d.sync += [wr_active.eq(1), waddr.eq(axi.awaddr >> shift), bid.eq(axi.awid)]
        w_fire = axi.wvalid & wr_active
        with m.If(w_fire):
            m.d.sync += waddr.eq(waddr + 1)
            with m.If(axi.wlast):
                m.d.sync += [wr_active.eq(0), bvalid.eq(1)]
        with m.If(bvalid & axi.bready):
            m.d.sync += bvalid.eq(0)
        # one address for port B's read and write: a true dual-port block RAM
        b_addr = Signal(abits)
        m.d.comb += [b_addr.eq(Mux(wr_active, waddr, cpu.addr)), wr_b.addr.eq(b_addr),
                     rd_b.addr.eq(b_addr), rd_b.en.eq(1),
                     wr_b.data.eq(Mux(wr_active, axi.wdata, cpu.wdata)),
                     wr_b.en.eq(Mux(wr_active, Mux(w_fire, axi.wstrb, 0),
                                    Mux(grant, cpu.we, 0)))]
        with m.If(cstate == 0):
            m.d.sync += cstate.eq(grant)
        with m.Elif(cstate == 1):
            m.d.sync += [cdata.eq(rd_b.data), cstate.eq(2)]
        with m.Else():
            m.d.sync += cstate.eq(0)
        m.d.comb += [cpu.ack.eq(cstate == 2), cpu.rdata.eq(cdata)]
        return m


class BoardTop(wiring.Component):
    """The board's logic, clocked by ``clk`` with a synchronous reset ``rst``: pins
    ``uart_rx``, ``uart_tx``, ``leds`` (bit 0 alive: blinks at about 1 Hz; bit 1 the SoC
    block busy; bit 2 the last self-test passed; bit 3 it failed), ``trap`` (the CPU halted
    on an illegal instruction or bus fault).

    Parameters
    ----------
    firmware : bytes
        The firmware image (RV32IM, linked at 0), loaded into the firmware RAM.
    lanes : 64, 32 or 16
        The SoC block's core multipliers.
    clk_hz : int
        The clock's frequency (the firmware reads it, the alive LED blinks from it).
    divisor : int
        UART clocks a bit (:func:`tcore.rtl.uart.divisor_of`).
    mem_bytes, fw_bytes : int
        The AXI memory and the firmware RAM (multiples of 16 and 4 bytes).
    timeout_cycles : int
        How long the firmware waits for the rest of a frame before it calls it truncated.
    """

    def __init__(self, *, firmware: bytes = b"", lanes: int = 16, clk_hz: int = 50_000_000,
                 divisor: int = 434, mem_bytes: int = 1 << 17, fw_bytes: int = 1 << 16,
                 timeout_cycles: int = 10_000_000):
        if len(firmware) > fw_bytes:
            raise ValueError(f"the firmware ({len(firmware)} bytes) does not fit the "
                             f"{fw_bytes}-byte firmware RAM")
        if mem_bytes % 16 or fw_bytes % 4:
            raise ValueError("mem_bytes must be a multiple of 16 and fw_bytes of 4")
        self._fw = firmware + bytes(-len(firmware) % 4)
        self._lanes, self._clk_hz, self._div = lanes, clk_hz, divisor
        self._mem_bytes, self._fw_bytes, self._timeout = mem_bytes, fw_bytes, timeout_cycles
        super().__init__({"uart_rx": In(1, init=1), "uart_tx": Out(1, init=1),
                          "leds": Out(4), "trap": Out(1)})

    def elaborate(self, platform):
        m = Module()
        fw_words = self._fw_bytes // 4
        init = [int.from_bytes(self._fw[i:i + 4], "little") for i in range(0, len(self._fw), 4)]
        m.submodules.fw = fw = memory.Memory(shape=32, depth=fw_words, init=init)
        fw_wr = fw.write_port(granularity=8)
        fw_rd = fw.read_port(transparent_for=(fw_wr,))
        m.submodules.ram = ram = AxiRam(self._mem_bytes // 16)
        m.submodules.soc = soc = GemmSoc(addr_width=32, data_width=_WORD, warps=1,
                                         lanes=self._lanes)
        m.submodules.uart = uart = Uart(self._div)
        for name, member in AxiSignature(32, _WORD).members.items():
            o, i = getattr(soc, f"m_axi_{name}"), getattr(ram.axi, name)
            m.d.comb += (i.eq(o) if member.flow == Out else o.eq(i))
        m.d.comb += [uart.rx.eq(self.uart_rx), self.uart_tx.eq(uart.tx)]

        # ---- the CPU ---------------------------------------------------------------------------
        valid, addr = Signal(name="cpu_valid"), Signal(32, name="cpu_addr")
        wdata, wstrb = Signal(32, name="cpu_wdata"), Signal(4, name="cpu_wstrb")
        ready, rdata = Signal(name="cpu_ready"), Signal(32, name="cpu_rdata")
        trap = Signal(name="cpu_trap")
        m.submodules.cpu = Instance(
            "picorv32",
            p_ENABLE_COUNTERS=C(1, 1), p_ENABLE_COUNTERS64=C(1, 1), p_ENABLE_MUL=C(1, 1),
            p_ENABLE_FAST_MUL=C(0, 1), p_ENABLE_DIV=C(1, 1), p_BARREL_SHIFTER=C(1, 1),
            p_COMPRESSED_ISA=C(0, 1), p_ENABLE_IRQ=C(0, 1), p_CATCH_MISALIGN=C(1, 1),
            p_CATCH_ILLINSN=C(1, 1), p_PROGADDR_RESET=C(0, 32),
            p_STACKADDR=C(self._fw_bytes, 32),
            i_clk=ClockSignal(), i_resetn=~ResetSignal(), o_trap=trap,
            o_mem_valid=valid, i_mem_ready=ready, o_mem_addr=addr, o_mem_wdata=wdata,
            o_mem_wstrb=wstrb, i_mem_rdata=rdata,
            i_pcpi_wr=C(0, 1), i_pcpi_rd=C(0, 32), i_pcpi_wait=C(0, 1), i_pcpi_ready=C(0, 1),
            i_irq=C(0, 32),
            # the look-ahead interface, the co-processor port, IRQs and the trace: not used
            o_mem_instr=Signal(), o_mem_la_read=Signal(), o_mem_la_write=Signal(),
            o_mem_la_addr=Signal(32), o_mem_la_wdata=Signal(32), o_mem_la_wstrb=Signal(4),
            o_pcpi_valid=Signal(), o_pcpi_insn=Signal(32), o_pcpi_rs1=Signal(32),
            o_pcpi_rs2=Signal(32), o_eoi=Signal(32), o_trace_valid=Signal(),
            o_trace_data=Signal(36))
        m.d.comb += self.trap.eq(trap)

        # ---- the bus: one access at a time, each answered from registers --------------------
        region = addr[28:]
        fw_q = Signal(32, name="fw_q")
        start = valid & ~ready
        leds = Signal(2)
        lane = addr[2:4]
        fw_addr = Signal(len(fw_rd.addr))
        m.d.comb += [fw_addr.eq(addr[2:]), fw_rd.addr.eq(fw_addr), fw_rd.en.eq(1),
                     fw_wr.addr.eq(fw_addr), fw_wr.data.eq(wdata),
                     ram.cpu.addr.eq(addr[4:]), ram.cpu.wdata.eq(wdata.replicate(4)),
                     ram.cpu.we.eq(wstrb << (lane * 4))]
        # the SoC block's registers: a small AXI4-Lite master
        awv, wv, arv = Signal(), Signal(), Signal()
        m.d.comb += [soc.s_axil_awaddr.eq(addr[:10]), soc.s_axil_araddr.eq(addr[:10]),
                     soc.s_axil_wdata.eq(wdata), soc.s_axil_wstrb.eq(wstrb),
                     soc.s_axil_awvalid.eq(awv), soc.s_axil_wvalid.eq(wv),
                     soc.s_axil_arvalid.eq(arv), soc.s_axil_bready.eq(1),
                     soc.s_axil_rready.eq(1)]
        io_off = addr[:8]
        info = {IO_REGS["CLK_HZ"]: self._clk_hz, IO_REGS["UART_DIVISOR"]: self._div,
                IO_REGS["MEM_BYTES"]: self._mem_bytes, IO_REGS["LANES"]: self._lanes,
                IO_REGS["TIMEOUT_CYCLES"]: self._timeout, IO_REGS["FW_BYTES"]: self._fw_bytes,
                IO_REGS["MAGIC"]: BOARD_MAGIC}
        m.d.sync += ready.eq(0)
        with m.FSM():
            with m.State("IDLE"):
                with m.If(start):
                    with m.Switch(region):
                        with m.Case(REGION["fw"]):
                            m.d.comb += fw_wr.en.eq(wstrb)
                            m.next = "FW"
                        with m.Case(REGION["mem"]):
                            m.next = "MEM"
                        with m.Case(REGION["soc"]):
                            with m.If(wstrb.any()):
                                m.d.sync += [awv.eq(1), wv.eq(1)]
                                m.next = "SOC_W"
                            with m.Else():
                                m.d.sync += arv.eq(1)
                                m.next = "SOC_R"
                        with m.Case(REGION["io"]):
                            m.next = "IO"
                        with m.Default():
                            m.d.sync += [rdata.eq(0xBADADD00), ready.eq(1)]
            with m.State("FW"):
                # the block RAM's word into a register of its own first: its clock-to-out
                # (5.6 ns without the output register) and the bus's answer mux do not fit
                # one clock (the first routed board's critical path, 13.5 ns)
                m.d.sync += fw_q.eq(fw_rd.data)
                m.next = "FW_ANSWER"
            with m.State("FW_ANSWER"):
                m.d.sync += [rdata.eq(fw_q), ready.eq(1)]
                m.next = "IDLE"
            with m.State("MEM"):
                m.d.comb += ram.cpu.en.eq(1)
                with m.If(ram.cpu.ack):
                    m.d.sync += [rdata.eq(ram.cpu.rdata.word_select(lane, 32)), ready.eq(1)]
                    m.next = "IDLE"
            with m.State("SOC_W"):
                with m.If(soc.s_axil_awready):
                    m.d.sync += awv.eq(0)
                with m.If(soc.s_axil_wready):
                    m.d.sync += wv.eq(0)
                with m.If(soc.s_axil_bvalid):
                    m.d.sync += ready.eq(1)
                    m.next = "IDLE"
            with m.State("SOC_R"):
                with m.If(soc.s_axil_arready):
                    m.d.sync += arv.eq(0)
                with m.If(soc.s_axil_rvalid):
                    m.d.sync += [rdata.eq(soc.s_axil_rdata), ready.eq(1)]
                    m.next = "IDLE"
            with m.State("IO"):
                self._io(m, io_off, wdata, wstrb, rdata, ready, uart, leds, info)
        # ---- LEDs: alive, busy, the firmware's pass and fail -------------------------------
        blink = Signal(max(1, self._clk_hz.bit_length()))
        m.d.sync += blink.eq(blink + 1)
        m.d.comb += self.leds.eq(Cat(blink[-1], soc.regs.status_busy, leds))
        return m

    @staticmethod
    def _io(m, off, wdata, wstrb, rdata, ready, uart, leds, info):
        """One access of the board registers: answered in this clock (a UART write when the
        transmit FIFO has room)."""
        write = wstrb.any()
        with m.Switch(off):
            with m.Case(IO_REGS["UART_DATA"]):
                with m.If(write):
                    m.d.comb += [uart.tx_data.valid.eq(1), uart.tx_data.payload.eq(wdata[:8])]
                    with m.If(uart.tx_data.ready):
                        m.d.sync += ready.eq(1)
                        m.next = "IDLE"
                with m.Else():
                    m.d.comb += uart.rx_data.ready.eq(1)
                    m.d.sync += [rdata.eq(Mux(uart.rx_data.valid, uart.rx_data.payload,
                                              0xFFFFFFFF)), ready.eq(1)]
                    m.next = "IDLE"
            with m.Case(IO_REGS["UART_STATUS"]):
                m.d.comb += uart.clear.eq(write & (wdata[1:3] != 0))
                m.d.sync += [rdata.eq(Cat(uart.tx_busy, uart.rx_overflow, uart.rx_frame_error,
                                          C(0, 13), uart.rx_level)), ready.eq(1)]
                m.next = "IDLE"
            with m.Case(IO_REGS["LEDS"]):
                with m.If(write):
                    m.d.sync += leds.eq(wdata[:2])
                m.d.sync += [rdata.eq(leds), ready.eq(1)]
                m.next = "IDLE"
            for off_, value in info.items():
                with m.Case(off_):
                    m.d.sync += [rdata.eq(value), ready.eq(1)]
                    m.next = "IDLE"
            with m.Default():
                m.d.sync += [rdata.eq(0), ready.eq(1)]
                m.next = "IDLE"


def pll_config(f_in: float, f_out: float) -> dict:
    """ECP5 ``EHXPLLL`` dividers for ``f_out`` from ``f_in`` with CLKOP fed back:
    ``f_out = f_in * CLKFB_DIV / CLKI_DIV``, the VCO at ``f_out * CLKOP_DIV``.  The ranges
    are the ECP5 family data sheet's (FPGA-DS-02012, PLL timing): input 8-400 MHz, phase
    detector 3.125-400 MHz, VCO 400-800 MHz, output 3.125-400 MHz; dividers 1-128.  Returns
    the dividers and the frequency they give (the closest; ValueError if none is within
    0.5 %)."""
    best = None
    for clki in range(1, 129):
        pfd = f_in / clki
        if not 3.125e6 <= pfd <= 400e6:
            continue
        for fb in range(1, 129):
            out = pfd * fb
            if not 3.125e6 <= out <= 400e6:
                continue
            for op in range(1, 129):
                vco = out * op
                if 400e6 <= vco <= 800e6:
                    err = abs(out - f_out)
                    if best is None or err < best[0]:
                        best = (err, clki, fb, op, out)
                    break
    if best is None or best[0] > 0.005 * f_out:
        raise ValueError(f"no ECP5 PLL setting makes {f_out / 1e6:g} MHz from {f_in / 1e6:g} MHz")
    _, clki, fb, op, out = best
    return {"CLKI_DIV": clki, "CLKFB_DIV": fb, "CLKOP_DIV": op, "f_out": out}


class BoardChip(Elaboratable):
    """:class:`BoardTop` on an Amaranth platform: the PLL, the reset, the pins.

    ``board``: a :class:`tcore.sim.board.boards.Board`-like object with ``clock`` (the oscillator's
    resource name), ``reset`` (a button's ``(name, number)``), ``uart`` and ``leds`` (how to
    reach the pins: see :meth:`elaborate`); ``f_out``: the clock wanted; ``top``: the
    :class:`BoardTop` (built for that clock)."""

    def __init__(self, board, top: BoardTop, f_out: float):
        self._board, self._top, self._f_out = board, top, f_out

    def elaborate(self, platform):
        m = Module()
        board = self._board
        clk_in = platform.request(board.clock, 0, dir="-")      # straight into the PLL
        f_in = platform.lookup(board.clock, 0).clock.frequency
        cfg = pll_config(f_in, self._f_out)
        pll_clk, locked = Signal(name="clk_core"), Signal(name="pll_locked")
        m.submodules.pll = Instance(
            "EHXPLLL",
            a_FREQUENCY_PIN_CLKI=f"{f_in / 1e6:g}", a_FREQUENCY_PIN_CLKOP=f"{cfg['f_out'] / 1e6:g}",
            p_PLLRST_ENA="DISABLED", p_INTFB_WAKE="DISABLED", p_STDBY_ENABLE="DISABLED",
            p_DPHASE_SOURCE="DISABLED", p_OUTDIVIDER_MUXA="DIVA", p_OUTDIVIDER_MUXB="DIVB",
            p_OUTDIVIDER_MUXC="DIVC", p_OUTDIVIDER_MUXD="DIVD",
            p_CLKI_DIV=cfg["CLKI_DIV"], p_CLKOP_ENABLE="ENABLED", p_CLKOP_DIV=cfg["CLKOP_DIV"],
            p_CLKOP_CPHASE=cfg["CLKOP_DIV"] - 1, p_CLKOP_FPHASE=0, p_FEEDBK_PATH="CLKOP",
            p_CLKFB_DIV=cfg["CLKFB_DIV"],
            i_RST=C(0, 1), i_STDBY=C(0, 1), i_CLKI=clk_in.io, o_CLKOP=pll_clk, i_CLKFB=pll_clk,
            i_PHASESEL0=C(0, 1), i_PHASESEL1=C(0, 1), i_PHASEDIR=C(1, 1), i_PHASESTEP=C(1, 1),
            i_PHASELOADREG=C(1, 1), i_PLLWAKESYNC=C(0, 1), i_ENCLKOP=C(0, 1), o_LOCK=locked)
        m.domains.sync = cd = ClockDomain("sync")
        m.d.comb += cd.clk.eq(pll_clk)
        platform.add_clock_constraint(pll_clk, cfg["f_out"])
        m.submodules.button = button = io.Buffer("i", platform.request(*board.reset, dir="-"))
        m.submodules.rst = ResetSynchronizer(~locked | button.i, domain="sync")
        m.submodules.top = top = self._top
        uart = platform.request(*board.uart, dir="-")
        m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
        m.d.comb += [top.uart_rx.eq(rx.i), tx.o.eq(top.uart_tx)]
        for i, port in enumerate(board.led_ports(platform)):
            if port is None:
                continue
            m.submodules[f"led{i}"] = led = io.Buffer("o", port)
            m.d.comb += led.o.eq(top.leds[i])
        return m
