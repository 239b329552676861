"""Running a sweep's points: the rows a point's replications make, chunks of replications
batched into tasks, and the scheduler that hands them to a backend (:mod:`cprsim.sweep.backends`)
and yields each point when it is complete.

Pure work: a point's scenario in, its rows out (as tuples, and as CSV text for the journal);
nothing here reads or writes a file (:mod:`cprsim.sweep.files` does, called by
:mod:`cprsim.sweep.runner`). A point's numbers depend only on its scenario (seed included), never
on the worker that ran it.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from cprsim import scenario as sc
from cprsim.errors import InputError
from cprsim.io import csv_text
from cprsim.sim.records import ReplicationResult
from cprsim.sim.replicate import Precision, run_replications
from cprsim.sweep.backends import Backend
from cprsim.sweep.spec import Point, Sweep, SweepError

RESULT_METRICS = [c for c in ReplicationResult.columns() if c != "replication"]


def cell(v: Any) -> Any:
    """A grid value as a CSV cell: a number or a string as it is, anything else as JSON."""
    return v if isinstance(v, (int, float, str)) and not isinstance(v, bool) else json.dumps(v)


def header(sweep: Sweep) -> list[str]:
    """results.csv's columns: point, strategy, the grid keys, interval_h, replication, and every
    metric of a replication."""
    return ["point", "strategy", *sweep.keys, "interval_h", "replication", *RESULT_METRICS]


def prefix(p: Point) -> tuple[Any, ...]:
    """The cells that open every row of a point."""
    return (
        p.index,
        p.strategy,
        *(cell(v) for _, v in p.values),
        p.raw["checkpoint"]["interval_h"],
    )


# -- work: chunks of a point's replications, batched into tasks ------------------------------------
#: a chunk: (point index, the point's raw scenario, first replication, count)
Item = tuple[int, dict[str, Any], int, int]

#: per worker process: each point's scenario, validated once however many chunks of it the worker runs
_SCENARIOS: dict[tuple[str, int], sc.Scenario] = {}


def _scenario(key: str, index: int, raw: dict[str, Any]) -> sc.Scenario:
    s = _SCENARIOS.get((key, index))
    if s is None:
        if len(_SCENARIOS) >= 512:
            _SCENARIOS.clear()
        s = _SCENARIOS[(key, index)] = sc.validate(dict(raw), f"point {index}")
    return s


class PointFailed(InputError):
    """A replication of point ``index`` that cannot run (it would never finish: :class:`Runaway`, a
    fleet out of machines); raised in a worker, named with the point's settings by the sweep."""

    def __init__(self, index: int, message: str) -> None:
        super().__init__(index, message)  # both in args: it crosses process boundaries (pickle)
        self.index, self.message = index, message

    def __str__(self) -> str:
        return f"point {self.index}: {self.message}"


def run_items(key: str, items: Sequence[Item]) -> tuple[list[list[tuple[Any, ...]]], float]:
    """Runs in a worker: each chunk's replications as ``(replication, *RESULT_METRICS)`` tuples,
    and the seconds the task's replications took (the scheduler sizes the next tasks with it).
    ``key`` (the sweep's fingerprint) names the scenarios a long-lived worker keeps."""
    out = []
    t0 = time.perf_counter()
    for index, raw, first, count in items:
        try:
            res, _ = run_replications(_scenario(key, index, raw), count, first=first)
        except InputError as e:
            raise PointFailed(index, str(e)) from None
        out.append([(r.replication, *(getattr(r, c) for c in RESULT_METRICS)) for r in res])
    return out, time.perf_counter() - t0


def _point_failed(e: PointFailed, runs: list[PointRun]) -> InputError:
    """One line: which point (its strategy and grid values), which replication, why; what to do."""
    p = next((r.point for r in runs if r.point.index == e.index), None)
    where = (
        ""
        if p is None
        else " (" + ", ".join([p.strategy, *(f"{k}={cell(v)}" for k, v in p.values)]) + ")"
    )
    return InputError(
        f"point {e.index}{where}: {e.message}; the sweep stops at the first replication that "
        "cannot run: take the point out of the grid or change its settings"
    )


# -- the size of a task ----------------------------------------------------------------------------
# A task's size is chosen in seconds of work, by two rules (:class:`TaskSizer`):
#
# * **floor**: ``OVERHEAD_FACTOR`` times the backend's per-task overhead, and at least
#   ``MIN_TASK_S``: a task's start-up then costs at most 1/OVERHEAD_FACTOR of its work. The
#   overhead (pickling, a pipe or the Dask scheduler: about a millisecond on local processes,
#   several on Dask) is measured on the sweep's own tasks, no extra round trip: the fastest
#   task's time from hand-out to result less the seconds its replications took in the worker
#   (``PRIOR_OVERHEAD_S`` until the first task is back);
# * **guided**: the work not yet handed out divided by ``GUIDE`` times the workers (guided
#   self-scheduling): large tasks first, ever smaller ones towards the end, so that the workers
#   finish close together; a worker is never left waiting on a sweep's last, longest task;
# * **cap**: no task above the sweep's expected work over ``TASKS_PER_WORKER`` times the workers
#   (the first three quarters of the work go in tasks of that size), so that points complete, and
#   are journaled, steadily: a kill loses at most the running tasks' share.
#
# The work of a replication of a point is its weight (``BASE_EVENTS`` plus its first-order events,
# ``feasibility.events_per_replication``: a replication costs a fixed set-up and then its events)
# times the seconds per weight unit, measured from every task that comes back (its replications'
# seconds over their weight; ``PRIOR_S_PER_UNIT`` before the first one). One process runs a chunk
# per point (no task overhead to amortise, each point's rows out at once).
#: a task's work is at least this many times the backend's per-task overhead
OVERHEAD_FACTOR = 50.0
#: no task below this many seconds of work, however cheap the backend's round trip
MIN_TASK_S = 0.01
#: the work left is cut into about this many tasks per worker (then fewer as it shrinks)
GUIDE = 4
#: a task is at most the sweep's expected work over this many times the workers
TASKS_PER_WORKER = 16
#: the per-task overhead assumed until the first task is back (local processes' round trip)
PRIOR_OVERHEAD_S = 0.001
#: a replication's fixed cost, in first-order events (measured on the toy scenario: a replication
#: takes about 5 ms whether it has 14 or 110 first-order events)
BASE_EVENTS = 200.0
#: seconds per weight unit before any task has come back (the toy scenario on the development
#: machine: 5 ms per replication of about 250 units)
PRIOR_S_PER_UNIT = 2e-5


@dataclass
class PointRun:
    """One point being run: its replications as they come back, and when it may stop."""

    point: Point
    cap: int
    rule: Precision | None
    _cost: float | None = None
    rows: dict[int, tuple[Any, ...]] = field(default_factory=dict)
    values: list[float] = field(
        default_factory=list
    )  #: the rule's metric, replications 0 .. ready-1
    ready: int = 0  #: replications 0 .. ready-1 are all back
    sent: int = 0  #: replications 0 .. sent-1 were handed out
    checked: int = 0  #: the rule was checked at every look up to here
    stop: int | None = None  #: the point's number of replications, once decided

    def add(self, rows: list[tuple[Any, ...]]) -> None:
        """Take replications' rows back from a worker and decide, in replication order, whether
        the point may stop (every replication back, or the rule met at a look)."""
        for r in rows:
            self.rows[r[0]] = r
        col = 1 + RESULT_METRICS.index(self.rule.metric) if self.rule is not None else 0
        while self.ready in self.rows:
            if self.rule is not None:
                self.values.append(float(self.rows[self.ready][col]))
            self.ready += 1
        if self.stop is not None:
            return
        if self.rule is None:
            if self.ready >= self.cap:
                self.stop = self.cap
            return
        while True:  # in replication order, each look on the replications before it
            look = self.rule.next_look(self.checked + 1)
            if look > self.ready:
                break
            self.checked = look
            if look >= self.cap or self.rule.met(self.values[:look]):
                self.stop = look
                break

    @property
    def cost(self) -> float:
        """The weight of one replication: ``BASE_EVENTS`` plus its first-order events (sizes the
        chunks; computed when first needed)."""
        if self._cost is None:
            self._cost = BASE_EVENTS + _cost(self.point)
        return self._cost

    def expected(self) -> int:
        """The replications the point is expected to run: all of them without a rule, else the
        cap or four first looks, whichever is fewer (most adaptive points stop early)."""
        return self.cap if self.rule is None else min(self.cap, 4 * self.rule.first_look)

    def due(self) -> int:
        """The replications the next decision needs (all of them without a rule)."""
        if self.rule is None:
            return self.cap
        return self.rule.next_look(self.checked + 1)

    def text(self) -> str:
        """The point's rows as CSV text (no header): its prefix cells, then each replication's."""
        head = prefix(self.point)
        assert self.stop is not None
        return csv_text(None, ([*head, *self.rows[i]] for i in range(self.stop)))


def task_units(left: float, slots: int, overhead_s: float, s_per_unit: float, cap: float) -> float:
    """A task's size in weight units by the rule above: the guided share of the ``left`` units
    (``left / (GUIDE * slots)``) at most ``cap``, never below the floor (``OVERHEAD_FACTOR``
    times the per-task overhead, ``MIN_TASK_S`` at least, in units at ``s_per_unit``); unbounded
    for one process."""
    if slots == 1:
        return math.inf
    floor_s = max(MIN_TASK_S, OVERHEAD_FACTOR * overhead_s)
    return max(floor_s / s_per_unit, min(cap, left / (GUIDE * slots)))


@dataclass
class TaskSizer:
    """Sizes a sweep's tasks (:func:`task_units`): it keeps the units not yet handed out and
    learns the seconds per unit and the per-task overhead from the tasks that come back."""

    slots: int
    left: float  #: weight units not yet handed out (expected: adaptive points may stop earlier)
    cap: float  #: the largest task (:data:`TASKS_PER_WORKER`)
    spent_s: float = 0.0  #: seconds the tasks back so far took in the workers
    done: float = 0.0  #: their weight units
    overhead: float | None = None  #: the least time a task spent outside its replications

    @property
    def s_per_unit(self) -> float:
        """Seconds per weight unit: measured once a task is back, ``PRIOR_S_PER_UNIT`` before."""
        return self.spent_s / self.done if self.done > 0 and self.spent_s > 0 else PRIOR_S_PER_UNIT

    @property
    def overhead_s(self) -> float:
        """The per-task overhead: measured once a task is back, ``PRIOR_OVERHEAD_S`` before."""
        return PRIOR_OVERHEAD_S if self.overhead is None else self.overhead

    def target(self) -> float:
        """The next task's size, in weight units."""
        return task_units(self.left, self.slots, self.overhead_s, self.s_per_unit, self.cap)

    def handed(self, units: float) -> None:
        """``units`` were handed out in a task."""
        self.left = max(0.0, self.left - units)

    def measured(self, units: float, seconds: float, round_trip: float) -> None:
        """A task of ``units`` came back ``round_trip`` seconds after it was handed out: its
        replications took ``seconds`` in the worker."""
        self.done += units
        self.spent_s += seconds
        extra = max(0.0, round_trip - seconds)
        self.overhead = extra if self.overhead is None else min(self.overhead, extra)


def sizer_for(runs: list[PointRun], slots: int) -> TaskSizer:
    """The task sizer of a sweep's ``runs`` on ``slots`` workers. The expected work comes from a
    sample of at most 64 points spread over the sweep (a point's weight needs its scenario
    validated: a large sweep's would all be, serially, before the first task)."""
    if slots == 1 or not runs:
        return TaskSizer(slots, 0.0, math.inf)
    sample = runs[:: max(1, len(runs) // 64)]
    work = len(runs) * sum(r.cost * r.expected() for r in sample) / len(sample)
    return TaskSizer(slots, work, work / (TASKS_PER_WORKER * slots))


def _next_work(
    active: list[PointRun], pending: list[PointRun], slots: int
) -> tuple[PointRun, int] | None:
    """The next point to run and the replication count to run it up to: owed work first, then a
    new point, then (several workers) speculation; None when nothing is left."""
    for r in active:  # owed: what the next decisions need
        if r.stop is None and r.sent < r.due():
            return r, r.due()
    if pending:
        r = pending.pop()
        active.append(r)
        return r, r.due()
    if slots == 1:
        return None
    ahead = [r for r in active if r.stop is None and r.sent < r.cap and r.rule is not None]
    if ahead:  # speculation, one look further for the point least ahead
        r = min(ahead, key=lambda r: (r.sent - r.due(), r.point.index))
        assert r.rule is not None  # `ahead` holds points with a rule only
        return r, r.rule.next_look(r.sent + 1)
    return None


def _next_task(
    active: list[PointRun], pending: list[PointRun], sizer: TaskSizer
) -> list[tuple[PointRun, int, int]]:
    """The next task's chunks (point, first replication, count), ``sizer.target()`` units in
    all: a point's replications split across tasks, or several small points in one."""
    items: list[tuple[PointRun, int, int]] = []
    target = sizer.target()
    units = 0.0
    while units < target:
        got = _next_work(active, pending, sizer.slots)
        if got is None:
            break
        r, upto = got
        room = target - units
        n = (
            upto - r.sent
            if math.isinf(room)
            else max(1, min(upto - r.sent, math.ceil(room / r.cost)))
        )
        items.append((r, r.sent, n))
        r.sent += n
        units += n * r.cost
        if math.isinf(target):  # one process: one chunk at a time, each point's rows out at once
            break
    sizer.handed(units)
    return items


def schedule(runs: list[PointRun], backend: Backend, key: str) -> Iterator[PointRun]:
    """Hand out the points' replications in chunks and yield each point when it is complete.

    Tasks are sized by :class:`TaskSizer` (the rule at ``OVERHEAD_FACTOR``): a point's
    replications split across workers when points are few or long, small points batched together.
    Work the next decisions need goes first (the replications up to each started point's next
    look, then new points in order); when nothing else is left, idle workers run ahead on
    undecided points (speculation: replications past the rule's stop are dropped). Chunks come
    back in any order and are merged by replication index; decisions read replications in index
    order only, so the result never depends on how the work was cut, which worker ran what, or
    when."""
    slots = max(1, backend.slots)
    sizer = sizer_for(runs, slots)
    pending = list(reversed(runs))  # popped from the end: index order
    active: list[PointRun] = []
    inflight: dict[Any, tuple[list[tuple[PointRun, int, int]], float]] = {}
    try:
        while True:
            while len(inflight) < (1 if slots == 1 else 2 * slots):
                items = _next_task(active, pending, sizer)
                if not items:
                    break
                h = backend.submit(
                    run_items,
                    key,
                    [(r.point.index, r.point.raw, first, n) for r, first, n in items],
                )
                inflight[h] = items, time.perf_counter()
            if not inflight:
                break
            for h, (result, seconds) in backend.wait(list(inflight)):
                items, sent = inflight.pop(h)
                units = sum(n * r.cost for r, _, n in items)
                sizer.measured(units, seconds, time.perf_counter() - sent)
                for (r, _, _), rows in zip(items, result):
                    if r.stop is not None and r.ready >= r.stop:
                        continue  # speculation past the point's stop
                    r.add(rows)
                    if r.stop is not None and r.ready >= r.stop:
                        active.remove(r)
                        yield r
    except PointFailed as e:  # a worker's (or, one process, this one's)
        raise _point_failed(e, runs) from None
    left = [r.point.index for r in runs if r.stop is None or r.ready < r.stop]
    if left:  # pragma: no cover - a scheduling bug
        raise SweepError(f"points {left[:5]} did not complete")


def _cost(p: Point) -> float:
    """First-order events of one replication of a point (sizes its chunks)."""
    from cprsim.planner.feasibility import events_per_replication

    try:
        return max(
            1.0, float(events_per_replication(sc.validate(dict(p.raw), f"point {p.index}"))[0])
        )
    except (InputError, ValueError, ZeroDivisionError):  # pragma: no cover - points were validated
        return 1.0
