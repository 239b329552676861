"""What a plan says: its options, each confirmed on fresh replications, and its recommendation."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from cprsim.scenario import HOUR
from cprsim.sim.replicate import Estimate


# wide by design (issue 28 caps state objects at ~20 fields, not records): one field per column of
# the plan's JSON and table, which are public output formats; it holds no behaviour
@dataclass(frozen=True)
class Option:
    """One option of a :class:`Plan`: a strategy (``strategy``, ``params``) at a
    checkpoint interval (``interval_s``, seconds; ``full_interval_s`` between full checkpoints),
    confirmed on fresh replications: ``overhead``, ``ckpt_overhead``, ``pls``, ``ettr``
    (:class:`Estimate`, fractions; each with its bad tail: P90/P99, ETTR's P10/P1), ``pls_bound`` (inf: loses no update), ``accuracy_loss`` at the
    mean PLS, ``within`` (share of runs within the bound) and ``meets_bound``; ``extra_memory``:
    the memory it adds to the embedding tables, a fraction of them."""

    label: str
    strategy: str
    interval_s: float  #: checkpoint interval (for MFU/SSU: the partial-save interval)
    params: dict[str, Any]
    analytic_overhead: float
    expected_pls: float  #: first-order analytic E[PLS]
    overhead: Estimate  #: total overhead (wall - W) / W on the confirmation replications
    ckpt_overhead: Estimate
    pls: Estimate
    accuracy_loss: float  #: at the mean PLS, with the plan's slope for this strategy
    #: confirmed on fresh replications (per run at the plan's confidence, or on the mean)
    meets_bound: bool
    note: str = ""
    pls_bound: float = math.inf  #: this option's PLS bound; inf: loses no update
    full_interval_s: float = math.nan  #: progress between two full (consistent) checkpoints
    ettr: Estimate | None = None
    #: share of confirmation runs within the bound (a per-run promise: each run's training loss drawn
    #: from the predictive distribution; on the mean: the mean's upper 95% end), and PLS <= the cap
    within: float = 1.0
    within_lo: float = 1.0  #: its one-sided 95% Clopper-Pearson lower bound
    accuracy_loss_ci: tuple[float, float] = (0.0, 0.0)  #: the 95% CI of the mean loss
    #: the confidence-quantile of a single training run's loss (predictive draws of the confirmation
    #: runs); with a promise on the mean, the mean's upper 95% end
    accuracy_loss_tail: float = 0.0
    oracle: bool = False  #: knows the future: never recommended
    extrapolation: str = ""  #: "", "beyond the calibrated range", ...
    tied: bool = False  #: within the CI of the cheapest option
    stepped_down: int = 0  #: grid steps the confirmation took down from the search's interval
    rank: int = 50  #: simplicity (ties go to the lowest)
    #: order-statistic 95% CI of the P90
    overhead_p90_ci: tuple[float, float] = (math.nan, math.nan)
    #: the PLS no run may exceed to count as within (the extrapolation limit; inf: none)
    pls_cap: float = math.inf
    #: the checkpoint mode the option runs in (blocking, two-phase, tiered); "": the scenario's own
    checkpoint_mode: str = ""
    #: memory the option adds to the embedding tables, a fraction of them (ECRM's parity: m/k; 0
    #: for options whose checkpoints live in storage): :func:`cprsim.registry.extra_memory`
    extra_memory: float = 0.0

    def __post_init__(self) -> None:
        # ETTR's bad tail is its low one (P10, P1), whoever estimated it (cprsim.metrics)
        if self.ettr is not None and not self.ettr.higher_is_better:
            object.__setattr__(self, "ettr", self.ettr.oriented(True))

    def as_dict(self) -> dict[str, Any]:
        """Plain data: every field, the estimates as dicts, the intervals also in hours
        (``interval_h``, ``full_interval_h``); inf and NaN left as they are."""
        d = asdict(self)
        for k in ("overhead", "ckpt_overhead", "pls", "ettr"):
            e = getattr(self, k)
            d[k] = e.as_dict() if e is not None else None
        d["interval_h"] = self.interval_s / HOUR
        d["full_interval_h"] = self.full_interval_s / HOUR
        d["accuracy_loss_ci"] = list(self.accuracy_loss_ci)
        d["overhead_p90_ci"] = list(self.overhead_p90_ci)
        return d


# wide by design, like :class:`Option`: one field per key of the plan's JSON (a public format)
@dataclass(frozen=True)
class Plan:
    """A plan as the planner makes it: its options (each confirmed on fresh replications), the
    recommendation and why, and the settings it was made with (:class:`cprsim.api.Plan` adds
    conveniences)."""

    scenario: str
    metric: str
    accuracy_bound: float
    pls_bound: float  #: CPR-vanilla's PLS bound (each option carries its own)
    calibrated: bool
    calibration: dict
    failure_rate_per_h: float
    options: tuple[Option, ...]
    recommended: str
    saving: float  #: best full recovery's overhead minus the recommended option's (fraction of W)
    message: str
    replications: int  #: confirmation replications per option (fresh: never searched with)
    seed: int
    notes: tuple[str, ...] = field(default_factory=tuple)
    confidence: float | None = 0.9  #: P(a run's accuracy loss <= bound) promised; None: on the mean
    objective: str = "mean"
    search_replications: int = 0
    full_interval_s: float = math.nan  #: the full-checkpoint interval every partial option keeps
    accuracy_model: str = ""
    failure_start: str = "stationary"
    tied: tuple[str, ...] = ()
    #: adaptive replication: grids and no-loss confirmations to this relative precision of the mean
    #: overhead, per-run promises curtailed (None: every evaluation on all its replications)
    precision: float | None = None
    #: the plan again if the true loss per unit PLS were k times the one the plan assumes (the
    #: calibrated one times ``scale["factor"]``; ``factor`` is k):
    #: the recommendation and each partial-recovery option per factor (``make_plan(sensitivity=)``)
    sensitivity: tuple[dict[str, Any], ...] = ()
    #: the loss per unit PLS the plan assumes for the user's model, as a multiple (``factor``) of
    #: the calibration's, and why (:func:`cprsim.planner.accuracy.ladder_scale`: the rung it rests on,
    #: the model's rows, whether they lie outside what was measured)
    scale: dict[str, Any] = field(default_factory=dict)
    #: the plan made again with the accuracy model refitted without each calibration seed
    #: (:func:`cprsim.planner.stability.plan_stability`; ``make_plan(check_stability=True)``); empty
    #: when not checked
    stability: dict[str, Any] = field(default_factory=dict)
    #: the most extra memory (a fraction of the embedding tables) an option could take
    #: (``make_plan(max_extra_memory=)``); None: no limit
    max_extra_memory: float | None = None

    def option(self, label: str) -> Option:
        """The option labelled ``label`` (StopIteration when there is none)."""
        return next(o for o in self.options if o.label == label)

    def as_dict(self) -> dict[str, Any]:
        """Plain data (JSON): every field and option, the full-checkpoint interval also in hours,
        inf and NaN as None."""
        d = {k: v for k, v in asdict(self).items() if k != "options"}
        d["options"] = [o.as_dict() for o in self.options]
        d["notes"] = list(self.notes)
        d["tied"] = list(self.tied)
        d["sensitivity"] = [dict(r) for r in self.sensitivity]
        d["full_interval_h"] = self.full_interval_s / HOUR
        return finite(d)


def finite(x: Any) -> Any:
    """JSON has no inf/nan: an unbounded PLS or a missing analytic figure becomes null."""
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [finite(v) for v in x]
    return x
