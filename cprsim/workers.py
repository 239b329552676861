"""Worker processes that never outlive the process that started them (``cprsim sweep``'s local
workers, ``cprsim calibrate``'s training runs)."""

from __future__ import annotations

import os
import signal
import sys
import threading


def die_with_parent() -> None:
    """In a worker process (call it from the pool's initializer): exit as soon as the process that
    started it is gone (``kill -9`` included), never outlive it as an orphan.

    * Linux: ``prctl(PR_SET_PDEATHSIG, SIGKILL)``: the kernel kills this process when its parent
      (the thread that forked it) exits. The parent is the main process (fork) or the forkserver.
    * everywhere: a daemon thread waits on the multiprocessing parent sentinel (a pipe the main
      process holds: it closes when that process dies, also under a forkserver, whose workers
      would otherwise keep the forkserver and the resource tracker alive) and checks that the
      parent pid has not changed."""
    import multiprocessing as mp
    from multiprocessing.connection import wait as mp_wait

    ppid = os.getppid()
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # 1 = PR_SET_PDEATHSIG
        except (
            OSError,
            AttributeError,
        ):  # pragma: no cover - no libc prctl: the thread below suffices
            pass
    parent = mp.parent_process()
    try:
        sentinel = parent.sentinel if parent is not None else None
    except ValueError:  # pragma: no cover
        sentinel = None

    def gone() -> bool:
        return os.getppid() != ppid or (
            sentinel is not None and bool(mp_wait([sentinel], timeout=0))
        )

    if gone():  # the parent died before the death signal was armed
        os._exit(1)

    def watch() -> None:
        while True:
            if sentinel is not None:
                mp_wait([sentinel], timeout=0.5)
            else:  # pragma: no cover
                threading.Event().wait(0.5)
            if gone():
                os._exit(1)

    threading.Thread(target=watch, name="cprsim-parent-watch", daemon=True).start()
