"""Runner glue: build a design, run a bench, on Verilator, Icarus or Amaranth's simulator.

Used by pytest, ``make sim`` and the ``tcore`` command line (:mod:`tcore.sim.cli`).
"""
