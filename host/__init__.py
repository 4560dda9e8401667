"""Host-side data for the designs: what a host writes into them and reads back.

Plain Python and NumPy (no cocotb, no simulator), so that ``sim/``, the benches (``tb/``) and
the tests share one statement of each packing:

* :mod:`tcore.host.beats`: MMA4 beat payloads from operand tiles, outputs back to tiles, job files;
* :mod:`tcore.host.images`: memory images of the GEMM tops (layouts, config words, memh files);
* :mod:`tcore.host.wmma_model`: WMMA sequencer command and response words, memory words;
* :mod:`tcore.host.handover`: the typed hand-over from the runner to a cocotb bench.
"""
