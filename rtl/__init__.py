"""RTL in Amaranth HDL: formats -> datapath -> MMA4 core -> fragment bank -> sequencer -> top.

Every component has a golden twin of the same name in ``golden/``.
"""
