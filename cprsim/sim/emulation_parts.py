"""A strategy's calibration emulation part: how the DLRM calibration saves and restores its rows.

The calibration (:mod:`cprsim.calibrate.emulation`) trains a real model with emulated embedding
servers and checkpoints; what differs between strategies is *which rows a save copies*. A strategy
that the calibration measures says so with an :class:`Emulation` (``Strategy.emulation``; ``None``:
the calibration does not run it), and the emulator asks it, never the strategy's name:

* :meth:`Emulation.schedule`: its save interval and full-save period at a checkpoint budget;
* :meth:`Emulation.count`: what it counts of each trained batch (its ranking since the last save);
* :attr:`Emulation.partial_saves` and :meth:`TopRows.score`: a save copies every row, or (a partial
  save) the top ``top_fraction`` of the rows by its score.

A restore always brings back a failed shard's saved rows (the emulator's, one code path for every
strategy); a strategy changes what it loses only through what its saves wrote. The parts here are
the built-ins' (vanilla CPR, MFU, SSU, lookahead); a plugin subclasses :class:`Emulation` or
:class:`TopRows`. Methods receive the emulator (``em``: its ``count``, ``unsaved`` and ``future``
tensors, its ``rng`` and its setting ``s``) and torch tensors; this module imports torch only in the
methods that need it, so importing a strategy never loads torch.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar


class Emulation(ABC):
    """How the calibration emulates one strategy's saves (module docstring)."""

    #: a save between two full saves copies only some rows (:class:`TopRows`); False: every save
    #: copies every row
    partial_saves: ClassVar[bool]
    #: its ranking needs the rows the *next* batches use (a user's training loop does not hand
    #: them over: a user-model calibration cannot run it)
    needs_future: ClassVar[bool] = False
    #: it draws from a sampling stream while counting (the emulator makes ``em.rng`` for it)
    samples: ClassVar[bool] = False

    @abstractmethod
    def schedule(self, interval: int, full_every: int, top_fraction: float) -> tuple[int, int]:
        """``(iterations between saves, saves per full save)`` at the checkpoint budget that has
        vanilla CPR save every ``interval`` iterations; ``full_every`` and ``top_fraction``: the
        preset's."""

    @abstractmethod
    def count(self, em: Any, rows: Any, n_samples: int, sample: Any) -> None:
        """Count a trained batch's accesses into ``em.count`` (the ranking counters since the last
        save): ``rows``, global rows of the batch's accesses (int64, flat); ``n_samples`` its
        samples; ``sample`` each access's sample (``None``: sample-major, the same number each)."""


class EveryRow(Emulation):
    """Every save copies every row (vanilla CPR): no ranking, a save at vanilla's interval."""

    partial_saves = False

    def schedule(self, interval: int, full_every: int, top_fraction: float) -> tuple[int, int]:
        """Vanilla's interval; every save is a full one."""
        return interval, 1

    def count(self, em: Any, rows: Any, n_samples: int, sample: Any) -> None:
        """Nothing to rank."""


class TopRows(Emulation):
    """Partial saves of the top ``top_fraction`` of the rows by :meth:`score`, a full save every
    ``full_every``; saves come at the interval that writes as many rows as vanilla's at the same
    budget (``interval x (1 + (K - 1) r) / K``)."""

    partial_saves = True

    def schedule(self, interval: int, full_every: int, top_fraction: float) -> tuple[int, int]:
        """The interval that writes vanilla's rows per iteration; a full save every ``full_every``."""
        K, r = full_every, top_fraction
        return max(1, int(round(interval * (1 + (K - 1) * r) / K))), K

    @abstractmethod
    def score(self, em: Any, k: int) -> Any:
        """Each row's score at a partial save at iteration ``k`` (a tensor of ``n_rows``): the save
        copies the top ``top_fraction`` of them."""


class CountedTopRows(TopRows):
    """CPR-MFU: rows ranked by their exact access counts since the last save."""

    def count(self, em: Any, rows: Any, n_samples: int, sample: Any) -> None:
        """Every access counts."""
        import torch

        em.count.index_add_(0, rows, torch.ones_like(rows))

    def score(self, em: Any, k: int) -> Any:
        """The access counts."""
        return em.count


class SubsampledTopRows(CountedTopRows):
    """CPR-SSU: rows ranked by access counts over a Bernoulli sub-sample of the samples (the
    setting's ``sample_rate``), drawn from the emulator's sampling stream."""

    samples = True

    def count(self, em: Any, rows: Any, n_samples: int, sample: Any) -> None:
        """The accesses of the samples kept (each with probability ``sample_rate``) count."""
        import torch

        assert em.rng is not None, "the emulator makes the sampling stream for a sampling part"
        keep = torch.from_numpy(em.rng.random(n_samples) < em.s.sample_rate)
        if sample is None:
            kept = keep.repeat_interleave(rows.shape[0] // max(1, n_samples))
        else:
            kept = keep[sample]
        sub = rows[kept]
        em.count.index_add_(0, sub, torch.ones_like(sub))


class LookaheadTopRows(TopRows):
    """Lookahead (BagPipe-style): rows ranked by their accesses in the *next* interval's batches
    (the training data is known ahead): no counters."""

    needs_future = True

    def count(self, em: Any, rows: Any, n_samples: int, sample: Any) -> None:
        """Nothing to count: the ranking looks ahead."""

    def score(self, em: Any, k: int) -> Any:
        """Accesses of the batches from ``k`` to the next save."""
        import torch

        assert em.future is not None, "a lookahead emulation needs the future batches' rows"
        horizon = em.future[k : k + max(1, em.s.interval)].reshape(-1)
        return torch.bincount(horizon, minlength=em.store.n_rows)
