"""The one typed hand-over from ``sim/`` (or a test) to a cocotb bench.

:func:`tcore.sim.runner.run_bench` writes a :class:`Handover` as JSON next to the build and names it
in ``$TCORE_HANDOVER`` (the only variable it sets for a bench): the design and the build
parameters it was built with (so a bench reads the memory size or the warp count of the design
under test, never a copied default), the run's files, and the bench's options (seed, stall
probabilities, expected latency, ...).  Plain data: no cocotb, so ``sim/`` and the tests may
import it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field

__all__ = ["Handover", "handover", "ENV"]

ENV = "TCORE_HANDOVER"


@dataclass(frozen=True)
class Handover:
    #: The design under test and its build parameters (``tcore.rtl.designs``).
    design: str
    params: dict = field(default_factory=dict)
    #: Files of the run: a job to read, a result to write, a progress line to keep current,
    #: and the memory hooks' load and dump files (``tcore.tb.memh``).
    job: str | None = None
    result: str | None = None
    progress: str | None = None
    memh_load: str | None = None
    memh_out: str | None = None
    #: Bench options (``seed``, ``stall``, ``latency``, ...), each bench's own.
    options: dict = field(default_factory=dict)

    @property
    def build(self):
        """The design under test as a :class:`tcore.rtl.designs.Build`: a bench asks it for its
        fields (their defaults included) and for the core's rate (``beat_clocks``)."""
        from tcore.rtl.designs import Build
        return Build(self.design, **self.params)

    def param(self, name: str):
        """A build field of the design under test (its default where the build left it out);
        an error names the fields the design has."""
        try:
            return getattr(self.build, name)
        except AttributeError as e:
            raise KeyError(f"the hand-over for {self.design}: {e}") from None

    def option(self, name: str, default=None):
        return self.options.get(name, default)

    def save(self, path) -> None:
        with open(path, "w") as f:
            json.dump(asdict(self), f)

    @classmethod
    def load(cls, path) -> "Handover":
        with open(path) as f:
            return cls(**json.load(f))


_cached: dict = {}


def handover() -> Handover:
    """The running bench's hand-over (read once per simulator process)."""
    path = os.environ.get(ENV)
    if not path:
        raise RuntimeError(f"${ENV} is not set: run benches through sim.runner.run_bench")
    if path not in _cached:
        _cached[path] = Handover.load(path)
    return _cached[path]
