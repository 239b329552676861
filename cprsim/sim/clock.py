"""The job's compute clock: failure times that run only while the job computes
(``failures.clock = "computing"``, :class:`cprsim.scenario.FailureClock`).

A failure process whose clock is the compute clock waits for a *compute time* (seconds of the
job's computing since it started: ``Run.compute_s`` plus the compute phase under way) instead of
a wall time: :meth:`ComputeClock.at` gives an event that fires when the compute clock reaches a
value. While the job computes, the clock keeps one wake-up scheduled at the wall time the
earliest waiter is due (``now + (due - clock now)``, if the job is still computing then); when the
job stops computing the wake-up is stale (each compute phase has its own generation) and waiters
wait for the next compute phase. Every in-service node shares this clock: a synchronous job's
machines compute together or not at all.

Waiters fire as URGENT events, like the wall-clock failure processes' timeouts, so a failure due
at the very instant a compute phase would end comes first, as it does in wall time.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import simpy

from cprsim.sim.simpy_adapter import Env

INF = float("inf")


class ComputeClock:
    """Events at compute times (module doc). ``computing()``: whether the job computes now;
    ``elapsed()``: the compute clock now (s)."""

    def __init__(
        self,
        env: Env,
        computing: Callable[[], bool],
        elapsed: Callable[[], float],
    ) -> None:
        self.env = env
        self.computing = computing
        self.elapsed = elapsed
        self._heap: list[tuple[float, int, simpy.Event]] = []
        self._seq = 0
        self._gen = 0  #: bumped when a compute phase starts or an earlier waiter arrives in one
        self._due = INF  #: the compute time the live wake-up is for (INF: none)

    def at(self, due: float) -> simpy.Event:
        """An event that fires once the compute clock reaches ``due`` (s of compute)."""
        ev = simpy.Event(self.env)
        heapq.heappush(self._heap, (due, self._seq, ev))
        self._seq += 1
        if self.computing() and due < self._due:
            self._gen += 1
            self._schedule()
        return ev

    def after(self, dt: float) -> simpy.Event:
        """An event that fires ``dt`` seconds of compute from now."""
        return self.at(self.elapsed() + dt)

    def resume(self) -> None:
        """The job starts a compute phase now: wake the earliest waiter when it is due."""
        self._gen += 1
        self._due = INF
        self._schedule()

    def _schedule(self) -> None:
        if not self._heap:
            self._due = INF
            return
        due = self._heap[0][0]
        self._due = due
        gen = self._gen
        ev = self.env.urgent(max(0.0, due - self.elapsed()))
        ev.callbacks.append(lambda _e: self._wake(gen))

    def _wake(self, gen: int) -> None:
        if gen != self._gen or not self.computing():
            return  # a stale wake-up: the compute phase it was for has ended
        now = self.elapsed()
        heap = self._heap
        while heap and heap[0][0] <= now + 1e-9 * max(1.0, now):
            _, _, ev = heapq.heappop(heap)
            self.env.fire(ev)
        self._schedule()
