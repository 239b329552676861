"""A strategy's planning part: what ``cprsim plan`` needs to know to plan it, apart from its hooks.

A strategy names its part class in ``Planning`` (as it names its parameters in ``Params``); each
strategy class gets its own instance, ``planning``, bound to it (``planning.strategy``), so a part
inherited by a subclass (SSU from MFU) calls the subclass's model. The planner calls the part's
methods and never asks what kind of strategy it plans:

* :class:`RollbackPlanning`: a strategy that loses no update (every failure that loses state rolls
  back): its interval is the one that minimises the simulated overhead;
* :class:`PartialPlanning`: a strategy that loses updates (PLS): its interval is the largest whose
  PLS keeps the accuracy bound, confirmed on fresh replications.

Each kind's :meth:`Planning.search` hands the planner's search for its kind the strategy
(``searches``: the planner's :class:`Searches`; this module imports no planner code). The members a
strategy must define are abstract here: a part that lacks one cannot be registered (a one-line
:class:`~cprsim.errors.InputError` naming the strategy and the members, from
:func:`cprsim.registry.register`); none is given a default that could be wrong for a strategy
(e.g. a full checkpoint every ``tau`` for one whose full saves come every 4th). Mixins make the
common answers explicit: :class:`EverySaveFull`, :class:`OneVariant`, :class:`RollbackOverhead`.

Arguments: ``s`` a :class:`~cprsim.scenario.Scenario`, ``params`` the strategy's parameters (a dict
of its ``[strategy]`` table), ``tau`` the checkpoint interval (s of progress), ``rates`` the
failure rates (:class:`cprsim.planner.rates.Rates`), ``costs`` a :class:`~cprsim.costs.Costs`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, ClassVar, Literal, Protocol

if TYPE_CHECKING:  # pragma: no cover
    from cprsim.sim.strategies import Strategy


class Searches(Protocol):
    """The planner's searches, one per kind of part (implemented by :mod:`cprsim.planner`)."""

    def rollback_option(self, ctx: Any, cls: type[Strategy], cap: float) -> Any:
        """The simulated-optimum option of a strategy that loses no update (intervals up to ``cap``)."""
        ...

    def pls_option(self, ctx: Any, cls: type[Strategy], T_F: float, best_full: Any) -> Any:
        """The largest-interval option of a strategy whose PLS must keep the bound."""
        ...

    def tiered_pls_option(self, ctx: Any, cls: type[Strategy], T_F: float, best_full: Any) -> Any:
        """The same on tiered checkpoints (peers' memory, then storage)."""
        ...


class Planning(ABC):
    """How the planner plans one strategy (module docstring); ``strategy``: the class it plans."""

    #: the feasibility preflight's model (:mod:`cprsim.planner.feasibility`): ``"rollback"``
    #: (every failure rolls back) or ``"pls"`` (node failures are recovered partially)
    kind: ClassVar[Literal["rollback", "pls"]]
    #: its options promise a PLS bound: the confirmation judges every run against it (and the
    #: accuracy model's loss), steps the interval down while it fails, and reports the loss
    bounds_pls: ClassVar[bool]
    #: simplicity: options tied within their CIs go to the lowest (full recovery 0, vanilla 1)
    rank: ClassVar[int]
    #: it knows the future: labelled in a plan, never recommended
    oracle: ClassVar[bool] = False

    def __init__(self, strategy: type[Strategy]) -> None:
        self.strategy = strategy

    @abstractmethod
    def search(self, searches: Searches, ctx: Any, T_F: float, best_full: Any, cap: float) -> Any:
        """The planner's option for the strategy (``None``: none), by its kind's search."""

    def search_tiered(self, searches: Searches, ctx: Any, T_F: float, best_full: Any) -> Any:
        """Its option on tiered checkpoints besides (``None``: none; the planner asks only a
        strategy that ``supports_tiers``)."""
        return None

    @abstractmethod
    def variants(self, s) -> list[dict[str, Any]]:
        """The parameter sets the planner tries (each validated against the scenario)."""

    @abstractmethod
    def full_interval(self, params: dict[str, Any], tau: float) -> float:
        """Progress between two full (consistent) checkpoints when saving every ``tau`` (s)."""

    @abstractmethod
    def with_full_interval(
        self, params: dict[str, Any], tau: float, full_interval: float
    ) -> dict[str, Any]:
        """The parameters that keep a full checkpoint at least every ``full_interval`` when saving
        every ``tau``."""

    @abstractmethod
    def expected_overhead(self, s, params: dict[str, Any], tau: float, rates, costs) -> float:
        """First-order E[wall]/W - 1 (the feasibility preflight and the PLS search's ranking)."""

    @abstractmethod
    def expected_pls(self, s, params: dict[str, Any], tau: float, rates) -> float:
        """First-order E[PLS] (the PLS search's first guess)."""

    def note(self, s, costs) -> str:
        """What the plan says about the strategy at the scenario's interval and parameters (``""``:
        nothing)."""
        return ""

    def extra_memory(self, s, params: dict[str, Any]) -> float:
        """Memory the strategy adds to the embedding tables, a fraction of them, with these
        parameters (:func:`cprsim.registry.extra_memory`; 0: its checkpoints live in storage)."""
        return 0.0


class RollbackPlanning(Planning):
    """A strategy that loses no update: its interval minimises the simulated overhead over
    ``interval_range`` x Daly's interval (and its variants)."""

    kind = "rollback"
    bounds_pls = False
    #: the intervals searched, as multiples of Daly's
    interval_range: ClassVar[tuple[float, float]] = (0.5, 3.0)

    def search(self, searches: Searches, ctx: Any, T_F: float, best_full: Any, cap: float) -> Any:
        """The simulated optimum (:meth:`Searches.rollback_option`)."""
        return searches.rollback_option(ctx, self.strategy, cap)

    def expected_pls(self, s, params: dict[str, Any], tau: float, rates) -> float:
        """0: it loses no update."""
        return 0.0


class PartialPlanning(Planning):
    """A strategy that loses updates: its interval is the largest whose PLS keeps the bound."""

    kind = "pls"
    bounds_pls = True

    def search(self, searches: Searches, ctx: Any, T_F: float, best_full: Any, cap: float) -> Any:
        """The largest interval within the bound (:meth:`Searches.pls_option`)."""
        return searches.pls_option(ctx, self.strategy, T_F, best_full)

    def search_tiered(self, searches: Searches, ctx: Any, T_F: float, best_full: Any) -> Any:
        """The same search on tiered checkpoints (:meth:`Searches.tiered_pls_option`)."""
        return searches.tiered_pls_option(ctx, self.strategy, T_F, best_full)


# -- the common answers, each taken explicitly ----------------------------------------------------------
class EverySaveFull:
    """Every save is a full (consistent) checkpoint: the full interval is the interval."""

    def full_interval(self, params: dict[str, Any], tau: float) -> float:
        """``tau``."""
        return tau

    def with_full_interval(
        self, params: dict[str, Any], tau: float, full_interval: float
    ) -> dict[str, Any]:
        """The parameters as they are (every save is full)."""
        return dict(params)


class OneVariant:
    """The planner tries the strategy with its default parameters only."""

    def variants(self, s) -> list[dict[str, Any]]:
        """``[{}]``."""
        return [{}]


class RollbackOverhead:
    """First order, every failure rolls back: :func:`cprsim.analytic.full_overhead` at the
    scenario's save and load times."""

    def expected_overhead(self, s, params: dict[str, Any], tau: float, rates, costs) -> float:
        """E[wall]/W - 1 of full recovery."""
        from cprsim import analytic

        return analytic.full_overhead(
            analytic.Job(work_s=s.duration_s, save_s=costs.save_s),
            tau,
            analytic.Failures(rate=rates.total, recovery_s=s.reschedule.dist.mean() + costs.load_s),
        )


def missing_members(part: type) -> list[str]:
    """The required members a planning part class lacks: its abstract methods, and ``kind``,
    ``bounds_pls`` or ``rank`` unset."""
    out = sorted(getattr(part, "__abstractmethods__", ()))
    for name, kind in (("kind", str), ("bounds_pls", bool), ("rank", int)):
        if not isinstance(getattr(part, name, None), kind):
            out.append(name)
    return out
