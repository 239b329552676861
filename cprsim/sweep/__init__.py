"""What-if sweeps: a factorial grid over scenario keys x strategies x replications (``spec``),
run on local processes or a Dask cluster with a resumable journal (``runner``: it sequences
``points``, which runs them on ``backends``, ``files``, which writes the folder, and ``planning``),
and the result files read back for plots (``results``)."""

from cprsim.sweep.results import SweepResults, load_results
from cprsim.sweep.runner import Outcome, run_sweep
from cprsim.sweep.spec import Point, Sweep, SweepError, load_sweep

__all__ = [
    "Outcome",
    "Point",
    "Sweep",
    "SweepError",
    "SweepResults",
    "load_results",
    "load_sweep",
    "run_sweep",
]
