"""Emulated embedding servers around a training run: sharding, checkpoints, failures, PLS.

**Row stores.** The emulator sees the embedding rows through a :class:`RowStore`: something that
holds every row (its weights and its optimizer state) under one global row numbering, keeps a
saved copy, and copies any set of rows into that copy (a save) or back from it (a restore). The
calibration DLRM is one (:class:`DLRMRows`: its ``emb`` and row-wise Adagrad ``emb_state``); a
user's own ``torch.nn.Embedding``/``EmbeddingBag`` tables with their optimizer's per-row state are
another (:class:`cprsim.calibrate.user.TableRows`). The schedule, the counters, the ranking and
the PLS bookkeeping below are the emulator's, one code path for both: a user's model is
calibrated exactly as the DLRM is.

**Sharding.** Global embedding row ``g`` (tables concatenated) lives on virtual embedding server
``(g * 2654435761 mod 2^32) mod N_e`` (Knuth's multiplicative hash): rows of every table are
spread over all servers, as row-wise sharding does, so each server holds about ``1/N_e`` of the
rows and, with hot rows scattered, about ``1/N_e`` of the accesses.

**Checkpoints.** The row store keeps a saved copy of every row (weights *and* optimizer state,
e.g. the DLRM's row-wise Adagrad accumulator). A *full* save copies all rows; a *partial* save
copies the top ``r`` fraction of all rows ranked by the strategy's score. Which saves are partial,
what is counted and how rows are ranked is the strategy's **emulation part**
(``Strategy.emulation``, :mod:`cprsim.sim.emulation_parts`): the emulator asks it, never the
strategy's name, and runs every registered strategy that has one (:func:`emulated`). The
built-ins' parts rank by

* ``mfu``: exact per-row access counts since the last save;
* ``ssu``: counts over a Bernoulli sub-sample of the samples at rate ``s``;
* ``lookahead``: the accesses of the *next* interval's batches (the training data is known ahead,
  BagPipe-style): no counters, but the future ranks the past interval's updates only out of
  sample, so it protects less than ``mfu``, not more.

**Failures.** A failure of server ``j`` at iteration ``k`` (after any save at ``k``, before batch
``k`` trains) reverts every row of shard ``j`` to its saved copy; the dense MLPs (trainers) are
untouched.

**PLS** goes through :class:`cprsim.pls.ShardLedger`, in one of two modes:

* ``nominal``: the simulator's bookkeeping, exactly: ``ShardLedger(N_e)`` (weights ``1/N_e``),
  progress in iterations; partial saves move tier 0 of a two-tier ledger with the coverage ``c``
  given. Used to check that both halves of cprsim agree on the same schedule.
* ``measured`` (the calibration): what was really lost. Each shard has two ledger columns: its
  rows saved by the latest partial save ("hot") and the rest. Per row the emulator counts the
  accesses since the row was last saved or restored; at a failure each column is booked with
  ``weight = (its rows' unsaved accesses / accesses per sample) / (iterations since the column's
  marker)``, so ``ledger.lost`` is exactly the number of lost sample-updates (in samples: one
  DLRM sample updates one row per table; where samples look up different numbers of rows, each
  access counts ``1 / (its sample's accesses)`` of a sample, :meth:`Emulator.count_accesses`)
  and PLS = lost / training samples. For MFU/SSU this weights the loss by the access share of
  the rows that were and were not saved; with uniform access it reduces to the nominal
  ``1/N_e``.

**When and how old** (:attr:`Emulator.timing`): the ledger's loss-weighted failure position and
restored-state age, as fractions of the run (:meth:`cprsim.pls.ShardLedger.timing`): the
covariates of the accuracy model beside PLS.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import torch

from cprsim import registry
from cprsim.calibrate.model import DLRM
from cprsim.names import BUILTIN, FAIL, SAVE_FULL, SAVE_PARTIAL
from cprsim.pls import ShardLedger
from cprsim.sim.emulation_parts import Emulation, TopRows


def emulated() -> tuple[str, ...]:
    """The strategies the emulator runs: every registered one with an emulation part
    (``Strategy.emulation``): the built-ins in their order (:data:`cprsim.names.BUILTIN`), then
    the plugins' by name."""
    known = registry.names()  # loads the plugins
    order = [n for n in BUILTIN if n in known] + [n for n in known if n not in BUILTIN]
    return tuple(n for n in order if registry.get(n).emulation is not None)


def emulation_of(strategy: str) -> Emulation:
    """The emulation part of ``strategy``; a one-line error for a strategy without one."""
    part = registry.get(strategy).emulation
    if part is None:
        raise ValueError(
            f"strategy {strategy!r} has no calibration emulation; the emulator runs "
            f"{', '.join(emulated())}"
        )
    return part


#: an action at an iteration: (SAVE_FULL, -1), (SAVE_PARTIAL, -1) or (FAIL, shard) (the kinds are
#: cprsim.names' action kinds, spelt "full", "partial" and "fail": kinds of save, not strategies)
Action = tuple[str, int]


def shard_of_rows(n_rows: int, n_shards: int) -> torch.Tensor:
    """Each global embedding row's virtual server (0 .. ``n_shards`` - 1): Knuth's multiplicative
    hash (module docstring)."""
    g = torch.arange(n_rows, dtype=torch.int64)
    return ((g * 2654435761) % (1 << 32)) % n_shards


@dataclass(frozen=True)
class Setting:
    """One emulated run: a strategy and its ordered actions per iteration."""

    strategy: str
    label: str
    actions: dict[int, tuple[Action, ...]] = field(default_factory=dict)
    top_fraction: float = 1.0
    sample_rate: float = 1.0
    interval: int = 0  #: iterations between saves (for lookahead's horizon)
    coverage: float = 1.0  #: nominal mode: access share of the partially saved rows


def periodic_actions(
    n_iters: int, interval: int, full_every: int, failures: list[tuple[int, int]]
) -> dict[int, tuple[Action, ...]]:
    """Saves every ``interval`` iterations (every ``full_every``-th full), then the failures."""
    acts: dict[int, list[Action]] = {}
    n = 0
    for k in range(interval, n_iters, interval):
        n += 1
        acts.setdefault(k, []).append((SAVE_FULL if n % full_every == 0 else SAVE_PARTIAL, -1))
    for k, j in sorted(failures):
        acts.setdefault(k, []).append((FAIL, j))
    return {k: tuple(v) for k, v in acts.items()}


class RowStore(Protocol):
    """The embedding rows an :class:`Emulator` saves and restores (module docstring): ``n_rows``
    rows under one global numbering (tables concatenated), a saved copy of every row taken when the
    store is made, and copies between the live rows and that saved copy. ``rows`` are global row
    ids (an int64 CPU tensor); a store copies *every* per-row tensor it holds (weights and
    optimizer state) for those rows. ``units_per_sample``: what one sample's accesses add up to in
    the emulator's access counters (:meth:`Emulator.count_accesses`; the DLRM: one access per
    table)."""

    @property
    def n_rows(self) -> int:
        """Rows of every table."""
        ...

    @property
    def units_per_sample(self) -> int:
        """One sample's accesses, in the access counters' unit."""
        ...

    def save(self, rows: torch.Tensor | None) -> None:
        """Copy the live ``rows`` (``None``: every row) into the saved copy."""
        ...

    def restore(self, rows: torch.Tensor) -> None:
        """Copy the saved ``rows`` back into the live ones."""
        ...


class DLRMRows:
    """The calibration DLRM as a :class:`RowStore`: its ``emb`` rows and their row-wise Adagrad
    accumulators ``emb_state``, one row per table per sample."""

    def __init__(self, model: DLRM) -> None:
        self.m = model
        self.saved_emb = model.emb.clone()
        self.saved_state = model.emb_state.clone()

    @property
    def n_rows(self) -> int:
        """Rows of every table."""
        return self.m.n_rows

    @property
    def units_per_sample(self) -> int:
        """One access per table: a DLRM sample has one id per table."""
        return len(self.m.tables)

    def save(self, rows: torch.Tensor | None) -> None:
        """Copy the live ``rows`` (``None``: every row) and their accumulators into the saved copy."""
        m = self.m
        if rows is None:
            self.saved_emb.copy_(m.emb)
            self.saved_state.copy_(m.emb_state)
        else:
            self.saved_emb[rows] = m.emb[rows]
            self.saved_state[rows] = m.emb_state[rows]

    def restore(self, rows: torch.Tensor) -> None:
        """Copy the saved ``rows`` and their accumulators back into the model."""
        m = self.m
        m.emb[rows] = self.saved_emb[rows]
        m.emb_state[rows] = self.saved_state[rows]


class Emulator:
    """Emulated embedding servers around one training run (module docstring): its saves and
    failures, and the PLS they cause, driven by the training loop's hooks (:meth:`before`, and
    :meth:`count_batch` or :meth:`count_accesses`). ``model``: the calibration DLRM (its rows are
    wrapped in a :class:`DLRMRows`) or any :class:`RowStore`."""

    def __init__(
        self,
        model: DLRM | RowStore,
        n_shards: int,
        setting: Setting,
        n_iters: int,
        mode: str = "measured",
        seed: int = 0,
        future_rows: torch.Tensor | None = None,
        batch: int = 1,
    ) -> None:
        #: how the strategy's saves are emulated (its part: the emulator never asks its name)
        self.emulation = emulation_of(setting.strategy)
        self.store: RowStore = DLRMRows(model) if isinstance(model, DLRM) else model
        self.s, self.mode = setting, mode
        self.n_shards, self.n_iters, self.batch = n_shards, n_iters, batch
        n = self.store.n_rows
        self.shard = shard_of_rows(n, n_shards)
        self.rows_of = [torch.nonzero(self.shard == j).squeeze(1) for j in range(n_shards)]
        self.count = torch.zeros(n, dtype=torch.int64)  # ranking counter since the last save
        # accesses since last saved/restored, in units of 1/units_per_sample of a sample (float64:
        # integer counts stay exact up to 2^53; a multi-hot sample's accesses weigh less each)
        self.unsaved = torch.zeros(n, dtype=torch.float64)
        self.hot = torch.zeros(n, dtype=torch.bool)
        self.future = future_rows  # (n_iters, B*26) global rows, for a part that looks ahead
        self.rng = (  # a sampling part's stream (SSU's sub-sample)
            np.random.default_rng(np.random.SeedSequence([seed, 0x55]))
            if self.emulation.samples
            else None
        )
        if mode == "nominal":
            c = setting.coverage
            self.ledger = ShardLedger(n_shards, tiers=(c, 1.0 - c) if c < 1 else (1.0,))
        else:
            self.ledger = ShardLedger(2 * n_shards)
        self.failures = 0
        self.saves = {SAVE_FULL: 0, SAVE_PARTIAL: 0}

    # -- hooks called by the training loop -----------------------------------------------------
    def before(self, k: int) -> None:
        """Before batch ``k`` trains: the saves and failures the setting schedules at iteration
        ``k``, in order."""
        for kind, j in self.s.actions.get(k, ()):
            if kind == FAIL:
                self.fail(j, k)
            else:
                self.save(kind, k)

    def count_batch(self, grows: torch.Tensor) -> None:
        """Count a trained DLRM batch's accesses (``grows``: global rows, ``(B, n_cat)``, one row
        per table per sample): :meth:`count_accesses` with every access weighing one unit."""
        self.count_accesses(grows.reshape(-1), grows.shape[0])

    def count_accesses(
        self,
        rows: torch.Tensor,
        n_samples: int,
        sample: torch.Tensor | None = None,
        weight: torch.Tensor | None = None,
    ) -> None:
        """Count a trained batch's accesses: every access for the loss bookkeeping, and the
        ranking counters as the strategy's emulation part counts them (:meth:`Emulation.count`:
        ``mfu`` every sample, ``ssu`` a Bernoulli sub-sample of the samples, vanilla nothing).

        ``rows``: the batch's accesses as global rows (int64, CPU, flat); ``n_samples``: its
        samples; ``sample``: each access's sample (0 .. ``n_samples`` - 1; ``None``: the accesses
        are sample-major, the same number per sample, as a DLRM batch's ``(B, n_cat)`` flattened);
        ``weight``: each access's share of its sample in units of 1/``units_per_sample`` of a
        sample, float64 (``None``: one unit each, right when every sample makes
        ``units_per_sample`` accesses). The ranking counters count accesses, unweighted."""
        w = torch.ones(rows.shape, dtype=torch.float64) if weight is None else weight
        self.unsaved.index_add_(0, rows, w)
        self.emulation.count(self, rows, n_samples, sample)

    # -- actions -------------------------------------------------------------------------------
    def save(self, kind: str, k: int) -> None:
        """Save at iteration ``k``: every row (a full save, or any save of a strategy without
        partial saves, e.g. vanilla ``partial``), else the top ``top_fraction`` of the rows by the
        strategy's score (:meth:`TopRows.score`); the ranking counters start over."""
        n_rows = self.store.n_rows
        emu = self.emulation
        if kind == SAVE_FULL or not emu.partial_saves:
            self.store.save(None)
            self.unsaved.zero_()
            self.hot.zero_()
            self.ledger.saved(float(k))
            self.saves[SAVE_FULL] += 1
        else:
            n_top = max(1, int(round(self.s.top_fraction * n_rows)))
            assert isinstance(emu, TopRows), "a part with partial saves ranks rows (TopRows)"
            score = emu.score(self, k)
            rows = torch.topk(score, n_top, sorted=False).indices
            self.store.save(rows)
            self.unsaved[rows] = 0
            self.hot.zero_()
            self.hot[rows] = True
            if self.mode == "nominal":
                self.ledger.saved(float(k), tier=0)
            else:
                self.ledger.saved(float(k), shards=slice(0, None, 2))
            self.saves[SAVE_PARTIAL] += 1
        self.count.zero_()

    def fail(self, j: int, k: int) -> None:
        """Shard ``j`` fails at iteration ``k``: its rows (and their optimizer state) revert to
        their saved copies, and the updates lost are booked in the ledger (``nominal`` or
        ``measured``: module docstring)."""
        rows = self.rows_of[j]
        if self.mode == "nominal":
            self.ledger.fail(j, float(k))
        else:
            per_iter = float(self.store.units_per_sample * self.batch)  # a batch's access units
            for col, mask in ((2 * j, self.hot[rows]), (2 * j + 1, ~self.hot[rows])):
                lost = float(self.unsaved[rows[mask]].sum()) / per_iter  # in iterations
                age = float(k) - float(self.ledger.markers[0, col])
                self.ledger.fail(col, float(k), weight=lost / age if age > 0 else 0.0)
        self.store.restore(rows)
        self.unsaved[rows] = 0
        self.failures += 1

    @property
    def pls(self) -> float:
        """PLS so far: the ledger's lost updates over the run's ``n_iters`` iterations."""
        return self.ledger.pls(float(self.n_iters))

    @property
    def timing(self) -> tuple[float, float]:
        """``(position, age)`` of the lost updates, as fractions of the run."""
        return self.ledger.timing(float(self.n_iters))
