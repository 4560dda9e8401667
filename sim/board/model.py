"""The board top of a :class:`tcore.sim.board.boards.BoardBuild`: its firmware built and the
:class:`tcore.rtl.board.BoardTop` made, for the simulated board (:mod:`tcore.sim.board.simulate`) and
the FPGA flow (:mod:`tcore.sim.board.build`)."""

from __future__ import annotations

from pathlib import Path

from .boards import BoardBuild
from .firmware import build_firmware

__all__ = ["board_top", "picorv32_verilog", "work_dir"]


def work_dir(build: BoardBuild) -> Path:
    from tcore.sim.runner import build_root
    return build_root() / "board" / build.folder


def picorv32_verilog() -> Path:
    """PicoRV32's Verilog (the PyPI package ``pythondata-cpu-picorv32``, as the CPU demo's)."""
    from tcore.sim.cpu_demo import DemoError, picorv32_verilog as demo_cpu
    from .boards import BoardError
    try:
        return demo_cpu()
    except DemoError as e:
        raise BoardError(str(e)) from None


def board_top(build: BoardBuild, log=None, firmware: bytes | None = None):
    """The :class:`tcore.rtl.board.BoardTop` of ``build`` with its firmware (``firmware``, or
    compiled if needed)."""
    from tcore.rtl.board import BoardTop
    fw = firmware if firmware is not None else build_firmware(
        work_dir(build) / "firmware", build.fw_bytes, build.cases(), log)
    return BoardTop(firmware=fw, **build.top_params())
