"""Where a sweep's tasks run: in this process (``--jobs 1``), on local worker processes kept for
the whole sweep (:class:`LocalWorkers`, ``--jobs N``) or on a Dask cluster.

**No orphans.** Local workers die with the sweep: on Linux each sets ``PR_SET_PDEATHSIG``
(SIGKILL when its parent dies), and everywhere a watcher thread in each worker exits it when the
sweep process is gone. They ignore SIGINT (a terminal's Ctrl-C reaches the whole process group:
the sweep decides). An exception in the sweep kills the workers instead of waiting for their
running chunks.
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor
from concurrent.futures import wait as futures_wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from cprsim.errors import InputError, ParameterError
from cprsim.io import short
from cprsim.sweep.spec import SweepError
from cprsim.version import __version__
from cprsim.workers import die_with_parent


def _version() -> str:
    from cprsim.version import __version__

    return __version__


def _worker_init() -> None:
    """A local worker's initializer: default SIGTERM, ignore SIGINT, die with the sweep."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # not a handler a forked worker inherited
    signal.signal(
        signal.SIGINT, signal.SIG_IGN
    )  # Ctrl-C reaches the process group: the sweep stops us
    die_with_parent()


class WorkerDied(SweepError):
    """A worker process died (killed, out of memory): the completed points are kept for a resume."""


def _warm() -> str:
    """Import what a worker runs (the engine, every strategy) before its first chunk arrives."""
    from cprsim.sim import engine, strategies  # noqa: F401

    strategies.ensure_loaded()
    return _version()


class Backend:
    """Where tasks run: ``slots`` of them at once; :meth:`submit` hands one out, :meth:`wait`
    returns those done, :meth:`close` releases the workers."""

    slots = 1

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)``; returns a handle for :meth:`wait`."""
        raise NotImplementedError

    def wait(self, handles: list[Any]) -> list[tuple[Any, Any]]:
        """At least one of ``handles`` done, with its result."""
        raise NotImplementedError

    def close(self, abort: bool = False) -> None:
        """Release the workers (``abort``: at once, their running tasks lost)."""


class Inline(Backend):
    """``--jobs 1``: every task runs in this process as it is handed out."""

    def __init__(self) -> None:
        self.done: dict[int, Any] = {}
        self.n = 0

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` now; returns a handle to its result."""
        self.n += 1
        self.done[self.n] = fn(*args)
        return self.n

    def wait(self, handles: list[Any]) -> list[tuple[Any, Any]]:
        """Every handle with its result (all ran at submit)."""
        return [(h, self.done.pop(h)) for h in handles]


class LocalWorkers(Backend):
    """``--jobs N``: N worker processes, started at once and kept for the whole sweep.

    The workers are forked from this process when it runs no other thread (they start in
    milliseconds with everything imported: warm), else from a ``forkserver`` that imports the
    simulator once (they then inherit no threads or locks, e.g. a progress bar's). Create them
    before starting threads (``cprsim sweep`` does, before its progress bar).

    The workers die with this process (:func:`cprsim.workers.die_with_parent`). :meth:`close` waits for the
    running chunks; ``close(abort=True)`` (and leaving the ``with`` block on an exception, e.g. a
    signal) kills the workers at once. A forkserver exits by itself once its workers are gone and
    this process exits (CPython closes its pipe)."""

    def __init__(self, jobs: int) -> None:
        import multiprocessing as mp

        self.slots = jobs
        ctx: mp.context.BaseContext
        if "fork" in mp.get_all_start_methods() and threading.active_count() == 1:
            ctx = mp.get_context("fork")
        else:
            ctx = mp.get_context("forkserver")
            ctx.set_forkserver_preload(["cprsim.sweep.runner"])
        self.method = ctx.get_start_method()
        self.ex = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_worker_init)
        try:
            for _ in range(
                jobs
            ):  # start every worker now (fork: all at the first submit) and import
                self.ex.submit(_warm)
        except BaseException:
            self.close(abort=True)
            raise

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn(*args)`` in a worker; returns its future (a dead worker raises
        :class:`SweepError`)."""
        try:
            return self.ex.submit(fn, *args)
        except BrokenProcessPool:
            raise self._broken() from None

    def wait(self, handles: list[Any]) -> list[tuple[Any, Any]]:
        """Wait until at least one of ``handles`` is done (in one-second slices); returns the done
        ones with their results."""
        while True:  # in slices: a signal is handled within a second whatever thread receives it
            done, _ = futures_wait(handles, timeout=1.0, return_when=FIRST_COMPLETED)
            if done:
                break
        try:
            return [(f, f.result()) for f in done]
        except BrokenProcessPool:
            raise self._broken() from None

    @staticmethod
    def _broken() -> SweepError:
        return WorkerDied(
            "a worker process died (killed, or out of memory?); the completed points are kept: "
            "resume the sweep to run the others"
        )

    def close(self, abort: bool = False) -> None:
        """Cancel the chunks not started and wait for the running ones (``abort``: kill the workers
        first)."""
        if abort:
            self._kill()
        self.ex.shutdown(wait=True, cancel_futures=True)

    def _kill(self) -> None:
        """SIGKILL every worker now (their running chunks are lost; a resume reruns those points)."""
        kill = getattr(self.ex, "kill_workers", None)  # Python >= 3.14
        if kill is not None:
            try:
                kill()
                return
            except Exception:  # pragma: no cover - fall back to the processes themselves
                pass
        for p in list((getattr(self.ex, "_processes", None) or {}).values()):
            try:
                p.kill()
            except (OSError, ValueError, AttributeError):  # already gone or not started
                pass

    def __enter__(self) -> LocalWorkers:
        return self

    def __exit__(self, exc_type: Any, *exc: Any) -> None:
        self.close(abort=exc_type is not None)


class DaskBackend(Backend):
    """``--scheduler`` or ``--dask-local``: tasks on a Dask cluster's workers."""

    def __init__(self, client: Any, cluster: Any) -> None:
        from distributed import as_completed as dask_completed

        self.client, self.cluster = client, cluster
        self.slots = max(1, sum(client.nthreads().values()))
        self.ac = dask_completed()

    def submit(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Submit ``fn(*args)`` to the cluster; returns its future."""
        f = self.client.submit(fn, *args, pure=False)
        self.ac.add(f)
        return f

    def wait(self, handles: list[Any]) -> list[tuple[Any, Any]]:
        """The next future done, with its result."""
        f = next(self.ac)
        return [(f, f.result())]

    def close(self, abort: bool = False) -> None:
        """Close the client, then a LocalCluster started for the sweep."""
        self.client.close()  # releases its futures: the scheduler drops their chunks
        if self.cluster is not None:
            self.cluster.close()


def dask_connect(
    scheduler: str | None, local_workers: int | None, timeout: float = 10.0
) -> tuple[Any, Any]:
    """A connected Dask client (and its LocalCluster, if one was started), checked before the
    sweep writes anything: a missing extra, an unreachable scheduler or workers running another
    cprsim version are one-line errors and leave no output folder behind. The workers import the
    simulator now (warm), not at their first chunk. ``timeout``: seconds to reach ``scheduler``."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise InputError(
            "a Dask scheduler needs the distributed extra: pip install 'cprsim[distributed]'"
        ) from None
    quiet = max(logging.WARNING, logging.getLogger().getEffectiveLevel())
    for name in (
        "distributed",
        "distributed.scheduler",
        "distributed.nanny",
        "distributed.worker",
        "distributed.core",
        "distributed.http.proxy",
    ):
        logging.getLogger(name).setLevel(quiet)  # dask logs every worker start at INFO
    cluster = client = None
    try:
        if local_workers is not None:
            cluster = LocalCluster(
                n_workers=local_workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address="127.0.0.1:0",
                silence_logs=logging.CRITICAL,
            )
            client = Client(cluster)
        else:
            try:
                client = Client(scheduler, timeout=f"{timeout:g}s")
            except (OSError, ValueError, TypeError) as e:
                raise ParameterError(
                    "scheduler", f"cannot connect ({short(e, 120)})", key=short(scheduler)
                ) from None
        versions = {str(v) for v in client.run(_warm).values()}
        if versions != {__version__}:
            raise InputError(
                f"Dask workers run cprsim {', '.join(sorted(versions)) or '(none)'}, this client "
                f"{__version__}: install the same version on every worker"
            )
        return client, cluster
    except BaseException:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
        raise
