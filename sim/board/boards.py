"""The boards: their platforms (``amaranth-boards``), pins, parts and what fits each, and
:class:`BoardBuild`, one board build (a board, the core's lanes, the clock, the baud rate;
for a board or for its simulation), from which every derived figure comes.

The parts' block RAM decides the memories: an ECP5-85F has 208 DP16KD (18 kbit each), of
which the SoC block with a 16-lane core takes 54 and the UART's receive FIFO one; the firmware
RAM (64 KiB) takes 32 and the AXI memory up to the board's size (192 KiB: 96), in steps of
16 KiB (:attr:`BoardBuild.mem_bytes`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field, replace

__all__ = ["Board", "BOARDS", "BoardBuild", "board_of", "SIM_DIVISOR", "SIM_TIMEOUT_CYCLES",
           "BoardError"]

#: UART clocks a bit in simulation (the same RTL as on a board, a faster line).
SIM_DIVISOR = 8
#: How long the simulated firmware waits inside a frame (0.4 s of a Verilator run).
SIM_TIMEOUT_CYCLES = 100_000
#: Bytes of the firmware RAM (code, the self-test's expected D, the stack).
FW_BYTES = 64 * 1024
#: DP16KD block RAMs: each part's, the SoC block's by its core's lanes (as placed, docs/fpga.md:
#: 54 with 16 lanes, 81 with 64; 32 lanes counted as 64), the firmware RAM's (64 KiB of 32-bit
#: words with byte enables: 32) and the UART receive FIFO's.  Each 16 KiB of the AXI memory (128-bit
#: words with byte enables, 2,048-word blocks nine bits wide) takes 8.
PART_BLOCK_RAMS = {"LFE5U-85F": 208, "LFE5UM5G-85F": 208, "LFE5U-45F": 108, "LFE5U-25F": 56}
SOC_BLOCK_RAMS = {16: 54, 32: 81, 64: 81}
FW_BLOCK_RAMS, UART_BLOCK_RAMS = 32, 1


class BoardError(ValueError):
    """A board or build option that cannot be had; the message says why in one line."""


@dataclass(frozen=True)
class Board:
    """One board: its Amaranth platform (``module:Class`` in ``amaranth_boards``), the part,
    the oscillator, the reset button, the UART and LEDs, and its defaults.

    ``uart``: ``(resource, number)`` of the UART the PC reaches (a USB serial bridge on the
    ULX3S and ECPIX-5; the OrangeCrab has none: its UART is added on two header pins, for a
    USB serial cable).  ``leds``: ``(resource, number, subsignal or None)`` for alive, busy,
    pass, fail (None: not shown).  ``mem_kib``: the AXI memory's size.  ``clock_mhz``: the clock this board's
    build closes timing at (routed, ``docs/fpga.md``)."""
    name: str
    platform: str
    part: str
    clock: str
    reset: tuple
    uart: tuple
    leds: tuple
    mem_kib: int
    clock_mhz: float
    programmer: tuple
    extra_uart: dict | None = None
    fits: str = ""

    def make_platform(self):
        module, cls = self.platform.split(":")
        try:
            mod = importlib.import_module(f"amaranth_boards.{module}")
        except ImportError:
            raise BoardError("amaranth-boards is not installed: pip install -e '.[board]'") from None
        platform = getattr(mod, cls)()
        if self.extra_uart:
            from amaranth.build import Attrs
            from amaranth_boards.resources import UARTResource
            platform.add_resources([UARTResource(
                self.uart[1], rx=self.extra_uart["rx"], tx=self.extra_uart["tx"],
                conn=self.extra_uart["conn"], attrs=Attrs(IO_TYPE="LVCMOS33", PULLMODE="UP"))])
        return platform

    def led_ports(self, platform) -> list:
        """The I/O ports of the four LEDs (alive, busy, pass, fail), None for one the board
        lacks (the OrangeCrab's one RGB LED shows alive, busy and fail)."""
        ports, seen = [], {}
        for led in self.leds:
            if led is None:
                ports.append(None)
                continue
            name, number, sub = led
            key = (name, number)
            if key not in seen:
                seen[key] = platform.request(name, number, dir="-")
            res = seen[key]
            ports.append(getattr(res, sub) if sub else res)
        return ports

    @property
    def device_flag(self) -> str:
        return {"LFE5U-85F": "--85k", "LFE5UM5G-85F": "--um5g-85k", "LFE5U-25F": "--25k",
                "LFE5U-45F": "--45k"}[self.part]


BOARDS = {b.name: b for b in (
    Board("ulx3s-85f", "ulx3s:ULX3S_85F_Platform", "LFE5U-85F", "clk25", ("button_fire", 0),
          ("uart", 0), (("led", 0, None), ("led", 1, None), ("led", 2, None), ("led", 3, None)),
          mem_kib=192, clock_mhz=70.0, programmer=("-b", "ulx3s"),
          fits="16-lane core, 192 KiB AXI memory"),
    Board("ecpix5-85f", "ecpix5:ECPIX585Platform", "LFE5UM5G-85F", "clk100", ("rst", 0),
          ("uart", 0), (("rgb_led", 0, "g"), ("rgb_led", 1, "b"), ("rgb_led", 2, "g"),
                        ("rgb_led", 3, "r")),
          mem_kib=192, clock_mhz=62.5, programmer=("-b", "ecpix5"),
          fits="16-lane core, 192 KiB AXI memory"),
    Board("orangecrab-85f", "orangecrab_r0_2:OrangeCrabR0_2_85FPlatform", "LFE5U-85F", "clk",
          ("button", 0), ("uart", 1), (("rgb_led", 0, "g"), ("rgb_led", 0, "b"), None,
                                       ("rgb_led", 0, "r")),
          mem_kib=192, clock_mhz=60.0, programmer=("-b", "orangeCrab"),
          extra_uart={"rx": "1", "tx": "0", "conn": ("io", 0)},
          fits="16-lane core, 192 KiB AXI memory; UART on header pins 0 (TX) and 1 (RX)"),
)}


def board_of(name: str) -> Board:
    try:
        return BOARDS[name]
    except KeyError:
        raise BoardError(f"unknown board {name!r}; boards: {', '.join(BOARDS)}") from None


@dataclass(frozen=True)
class BoardBuild:
    """One build of the board top: ``board``, the core's ``lanes``, the clock (MHz; the
    board's default when None), ``baud``, and ``sim`` (the simulation's build: the same RTL
    with a :data:`SIM_DIVISOR`-clock bit and a :data:`SIM_TIMEOUT_CYCLES` frame timeout).
    ``selftest``: the reset self-test's cases (:class:`tcore.sim.board.firmware.SelfTestCase`;
    None: one per kind, :data:`tcore.sim.board.firmware.SELFTEST_CASES`), fewer for a slow
    simulator."""
    board: Board
    lanes: int = 16
    clock_mhz: float | None = None
    baud: int = 115200
    sim: bool = False
    selftest: tuple = field(default=None, compare=True)

    def __post_init__(self):
        from tcore.rtl.sizes import LANES
        if self.lanes not in LANES:
            raise BoardError(f"--lanes must be one of {', '.join(map(str, LANES))}, not {self.lanes}")
        if not 300 <= self.baud <= 3_000_000:
            raise BoardError(f"--baud must be 300 to 3,000,000, not {self.baud}")
        if self.clock_mhz is not None and not 10 <= self.clock_mhz <= 200:
            raise BoardError(f"--clock must be 10 to 200 MHz, not {self.clock_mhz:g}")
        if not self.sim:
            from tcore.rtl.uart import divisor_of
            try:
                divisor_of(self.clk_hz, self.baud)
            except ValueError as e:
                raise BoardError(str(e)) from None

    @property
    def clk_hz(self) -> int:
        return int(round((self.clock_mhz or self.board.clock_mhz) * 1e6))

    @property
    def divisor(self) -> int:
        from tcore.rtl.uart import divisor_of
        return SIM_DIVISOR if self.sim else divisor_of(self.clk_hz, self.baud)

    @property
    def timeout_cycles(self) -> int:
        # a quarter of a second on a board: USB serial bridges deliver in bursts a few
        # milliseconds apart (an FTDI's latency timer: 16 ms by default)
        return SIM_TIMEOUT_CYCLES if self.sim else self.clk_hz // 4

    @property
    def mem_bytes(self) -> int:
        """The board's AXI memory, less what the part's block RAM cannot hold beside a larger
        core's SoC block (:data:`SOC_BLOCK_RAMS`)."""
        soc = SOC_BLOCK_RAMS[self.lanes]
        room = (PART_BLOCK_RAMS[self.board.part] - soc - FW_BLOCK_RAMS - UART_BLOCK_RAMS) // 8
        return min(self.board.mem_kib, 16 * room) * 1024

    @property
    def fw_bytes(self) -> int:
        return FW_BYTES

    def cases(self):
        from .firmware import SELFTEST_CASES
        return SELFTEST_CASES if self.selftest is None else self.selftest

    #: The design it builds (:func:`tcore.sim.run.run` tells a board's build by it).
    design = "board"

    @property
    def soc(self):
        """The SoC block inside the board top, as a :class:`tcore.rtl.designs.Build`: one warp
        whose core has ``lanes`` multipliers, a 128-bit AXI memory port."""
        from tcore.rtl.board import SOC_DATA_WIDTH
        from tcore.rtl.designs import Build
        return Build("soc", lanes=self.lanes, data_width=SOC_DATA_WIDTH)

    def refusal(self, op) -> str | None:
        """Why the board does not compute ``op`` (its SoC block's refusal), or None."""
        return self.soc.refusal(op)

    def supports(self, op) -> bool:
        return self.refusal(op) is None

    def beat_clocks(self, op=None) -> int:
        """Clocks a beat of ``op`` takes through the board's core (the SoC block's)."""
        return self.soc.beat_clocks(op)

    def top_params(self) -> dict:
        """:class:`tcore.rtl.board.BoardTop`'s arguments, less the firmware."""
        return {"lanes": self.lanes, "clk_hz": self.clk_hz, "divisor": self.divisor,
                "mem_bytes": self.mem_bytes, "fw_bytes": self.fw_bytes,
                "timeout_cycles": self.timeout_cycles}

    @property
    def folder(self) -> str:
        """The build folder's name: the board and every field not at its default."""
        parts = [self.board.name]
        if self.lanes != 16:
            parts.append(f"lanes{self.lanes}")
        if self.clock_mhz is not None:
            parts.append(f"{self.clock_mhz:g}mhz")
        if self.baud != 115200 and not self.sim:
            parts.append(f"{self.baud}baud")
        if self.selftest is not None:
            parts.append("selftest" + "-".join(c.name.replace(">", "").replace(".", "") for c in self.selftest))
        return ("sim-" if self.sim else "") + "-".join(parts)

    def for_sim(self) -> "BoardBuild":
        return replace(self, sim=True)
