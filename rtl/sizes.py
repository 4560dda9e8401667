"""The sizes a build may take, stated once: the core's multipliers (``lanes``) and the warps of
the GEMM top and the SoC block.  Plain Python (no Amaranth), so that the command line can offer
them as choices without elaborating anything."""

__all__ = ["LANES", "MAX_WARPS"]

#: The core's multipliers (products per clock): 64 (one pass a clock), 32 or 16 (a pass in
#: ``64 // lanes`` clocks, :meth:`tcore.rtl.mma4.MMA4.beat_clocks`).
LANES = (64, 32, 16)

#: Warps of the GEMM top and the SoC block, each with one core.
MAX_WARPS = 8
