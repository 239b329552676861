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

SimPy's ``Environment`` keeps its clock in ``_now``, its queue in ``_queue`` (a heap of ``(time,
priority, event id, event)``) and its event ids in ``_eid``; an event is triggered when ``_value``
is set and ``_ok`` says whether it succeeded. These have been stable since SimPy 4.0.
"""

from __future__ import annotations

from heapq import heappush

import simpy
from simpy.core import URGENT

#: the SimPy versions the adapter is tested with (``pyproject.toml``: ``simpy>=4.1,<4.2``)
SUPPORTED = ((4, 1), (4, 2))


class Env(simpy.Environment):
    """A SimPy environment with the engine's shortcuts (module doc)."""

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

    def skip_to(self, t: float) -> bool:
        """Move the clock to ``t`` when no event is scheduled before it (at a tie, no: the event
        first), and say whether it moved."""
        queue = self._queue
        if not queue or t < queue[0][0]:
            self._now = t
            return True
        return False
