"""The engine's shortcuts through SimPy, in one place: the only module that touches SimPy's private
state (``tests/test_simpy_adapter.py`` checks that, and each shortcut against SimPy's own
behaviour, on the pinned range :data:`SUPPORTED`, which ``pyproject.toml`` requires).

Why they exist (the engine's hot path; ``benchmarks/engine.py``):

* :meth:`Env.urgent` / :meth:`Env.urgent_at`: a timeout with SimPy's ``URGENT`` priority, so
  that at a tie a failure or repair comes before the job's own ``NORMAL`` timeout (SimPy's public
  ``Timeout`` is always ``NORMAL``); ``urgent_at`` fires at exactly ``t`` where
  ``now + (t - now)`` would round to a neighbouring float.
* :meth:`Env.fire` triggers an event now with ``URGENT`` priority (``Event.succeed`` is
  ``NORMAL``): the compute clock's wake-ups (:mod:`cprsim.sim.clock`).
* :meth:`Env.skip_to`: a phase that ends before the next scheduled event cannot be interrupted,
  so the clock moves to its end at once instead of through a timeout event: the same clock, the
  same order of events, one event fewer per phase.
* :meth:`Env.abandon_wait`: the timeout an interrupted job was waiting for stays in SimPy's queue
  (SimPy cannot cancel a timeout) and would be processed, for nobody, at its time; abandoned, it
  does not stop :meth:`Env.skip_to` (which drops it from the queue), so the phases after a failure
  stay quiet instead of going through SimPy until the old phase's end has passed.

SimPy's ``Environment`` keeps its clock in ``_now``, its queue in ``_queue`` (a heap of ``(time,
priority, event id, event)``) and its event ids in ``_eid``; an event is triggered when ``_value``
is set and ``_ok`` says whether it succeeded; a process waits for ``_target``, which an interrupt
leaves set while the process handles it (the public ``Process.target`` says ``None`` then).
These have been stable since SimPy 4.0.
"""

from __future__ import annotations

from heapq import heappop, heappush

import simpy
from simpy.core import URGENT

#: the SimPy versions the adapter is tested with (``pyproject.toml``: ``simpy>=4.1,<4.2``)
SUPPORTED = ((4, 1), (4, 2))

#: abandoned events kept before those SimPy processed meanwhile are forgotten
#: (:meth:`Env.abandon_wait`)
ABANDONED_PURGE = 64


class Env(simpy.Environment):
    """A SimPy environment with the engine's shortcuts (module doc)."""

    def __init__(self, initial_time: float = 0) -> None:
        super().__init__(initial_time)
        #: scheduled events nobody waits for any more (:meth:`abandon_wait`)
        self._abandoned: set[simpy.Event] = set()

    def urgent(self, delay: float) -> simpy.Event:
        """A triggered event processed ``delay`` from now, before ``NORMAL`` events of that time."""
        ev = simpy.Event(self)
        ev._ok = True
        ev._value = None
        self.schedule(ev, URGENT, delay)
        return ev

    def urgent_at(self, t: float) -> simpy.Event:
        """:meth:`urgent` at exactly the time ``t`` (not ``now + (t - now)``), ``t >= now``."""
        ev = simpy.Event(self)
        ev._ok = True
        ev._value = None
        heappush(self._queue, (t, URGENT, next(self._eid), ev))
        return ev

    def fire(self, ev: simpy.Event, delay: float = 0.0) -> None:
        """Trigger the pending event ``ev`` (value ``None``), processed ``delay`` from now with
        ``URGENT`` priority."""
        ev._ok = True
        ev._value = None
        self.schedule(ev, URGENT, delay)

    def abandon_wait(self, process: simpy.Process) -> None:
        """``process`` is handling an interrupt (call it from its ``except simpy.Interrupt``): the
        timeout it was waiting for is abandoned. SimPy has taken the process off that event's
        callbacks and keeps it queued; processed, it would only move the clock to its time, so
        :meth:`skip_to` passes over it. An event that is not scheduled (an untriggered
        ``env.event()``) or that something else still waits for is left alone."""
        ev = process._target  # until the process yields again: the event the interrupt cut short
        if ev.triggered and ev.callbacks == []:  # scheduled, not processed, nobody waiting
            abandoned = self._abandoned
            if len(abandoned) >= ABANDONED_PURGE:  # forget those SimPy has processed since
                abandoned.difference_update([e for e in abandoned if e.callbacks is None])
            abandoned.add(ev)

    def skip_to(self, t: float) -> bool:
        """Move the clock to ``t`` when no event is scheduled before it (at a tie, no: the event
        first), and say whether it moved. Abandoned events (:meth:`abandon`) due by ``t`` are
        dropped from the queue on the way: processed, they would do nothing."""
        queue = self._queue
        abandoned = self._abandoned
        if abandoned:
            while queue and queue[0][0] <= t and queue[0][3] in abandoned:
                abandoned.discard(heappop(queue)[3])
        if not queue or t < queue[0][0]:
            self._now = t
            return True
        return False
