"""Emulated embedding servers around the calibration DLRM: sharding, checkpoints, failures, PLS.

**Sharding.** Global embedding row ``g`` (tables concatenated) lives on virtual embedding server
``(g * 2654435761 mod 2^32) mod N_e`` (Knuth's multiplicative hash): rows of every table are
spread over all servers, as row-wise sharding does, so each server holds about ``1/N_e`` of the
rows and, with hot rows scattered, about ``1/N_e`` of the accesses.

**Checkpoints.** The emulator keeps a saved copy of every row (weights *and* row-wise Adagrad
accumulator). A *full* save copies all rows; a *partial* save (MFU/SSU/lookahead) copies the top
``r`` fraction of all rows ranked by

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
  ``weight = (its rows' unsaved accesses / tables per sample) / (iterations since the column's
  marker)``, so ``ledger.lost`` is exactly the number of lost sample-updates (in samples: one
  sample updates one row per table) and PLS = lost / training samples. For MFU/SSU this weights the loss by
  the access share of the rows that were and were not saved; with uniform access it reduces to
  the nominal ``1/N_e``.

**When and how old** (:attr:`Emulator.timing`): the ledger's loss-weighted failure position and
restored-state age, as fractions of the run (:meth:`cprsim.pls.ShardLedger.timing`): the
covariates of the accuracy model beside PLS.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from cprsim.calibrate.model import DLRM
from cprsim.names import EMULATED, FAIL, LOOKAHEAD, MFU, PARTIAL, SAVE_FULL, SAVE_PARTIAL, SSU
from cprsim.pls import ShardLedger

STRATEGIES = EMULATED  #: the strategies the emulator runs

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


class Emulator:
    """Emulated embedding servers around one training run of the DLRM (module docstring): its saves
    and failures, and the PLS they cause, driven by the training loop's hooks (:meth:`before`,
    :meth:`count_batch`)."""

    def __init__(
        self,
        model: DLRM,
        n_shards: int,
        setting: Setting,
        n_iters: int,
        mode: str = "measured",
        seed: int = 0,
        future_rows: torch.Tensor | None = None,
        batch: int = 1,
    ) -> None:
        if setting.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {setting.strategy!r}; one of {STRATEGIES}")
        self.m, self.s, self.mode = model, setting, mode
        self.n_shards, self.n_iters, self.batch = n_shards, n_iters, batch
        n = model.n_rows
        self.shard = shard_of_rows(n, n_shards)
        self.rows_of = [torch.nonzero(self.shard == j).squeeze(1) for j in range(n_shards)]
        self.saved_emb = model.emb.clone()
        self.saved_state = model.emb_state.clone()
        self.count = torch.zeros(n, dtype=torch.int64)  # ranking counter since the last save
        self.unsaved = torch.zeros(n, dtype=torch.int64)  # accesses since last saved/restored
        self.hot = torch.zeros(n, dtype=torch.bool)
        self.future = future_rows  # (n_iters, B*26) global rows, for lookahead
        self.rng = (
            np.random.default_rng(np.random.SeedSequence([seed, 0x55]))
            if setting.strategy == SSU
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
        """Count a trained batch's accesses (``grows``: global rows, ``(B, n_cat)``): every access
        for the loss bookkeeping, and the ranking counters (``mfu``: every sample; ``ssu``: a
        Bernoulli sub-sample of the samples)."""
        flat = grows.reshape(-1)
        ones = torch.ones_like(flat)
        self.unsaved.index_add_(0, flat, ones)
        st = self.s.strategy
        if st == MFU:
            self.count.index_add_(0, flat, ones)
        elif st == SSU:
            assert self.rng is not None, "__init__ made the sampling stream for ssu"
            keep = torch.from_numpy(self.rng.random(grows.shape[0]) < self.s.sample_rate)
            sub = grows[keep].reshape(-1)
            self.count.index_add_(0, sub, torch.ones_like(sub))

    # -- actions -------------------------------------------------------------------------------
    def save(self, kind: str, k: int) -> None:
        """Save at iteration ``k``: every row (a full save, or any save of vanilla ``partial``),
        else the top ``top_fraction`` of the rows by the strategy's ranking; the ranking counters
        start over."""
        m = self.m
        if kind == SAVE_FULL or self.s.strategy == PARTIAL:
            self.saved_emb.copy_(m.emb)
            self.saved_state.copy_(m.emb_state)
            self.unsaved.zero_()
            self.hot.zero_()
            self.ledger.saved(float(k))
            self.saves[SAVE_FULL] += 1
        else:
            n_top = max(1, int(round(self.s.top_fraction * m.n_rows)))
            if self.s.strategy == LOOKAHEAD:
                assert self.future is not None
                horizon = self.future[k : k + max(1, self.s.interval)].reshape(-1)
                score = torch.bincount(horizon, minlength=m.n_rows)
            else:
                score = self.count
            rows = torch.topk(score, n_top, sorted=False).indices
            self.saved_emb[rows] = m.emb[rows]
            self.saved_state[rows] = m.emb_state[rows]
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
        """Shard ``j`` fails at iteration ``k``: its rows (and their Adagrad state) revert to their
        saved copies, and the updates lost are booked in the ledger (``nominal`` or ``measured``:
        module docstring)."""
        m = self.m
        rows = self.rows_of[j]
        if self.mode == "nominal":
            self.ledger.fail(j, float(k))
        else:
            per_iter = float(len(m.tables) * self.batch)  # one row per table per sample
            for col, mask in ((2 * j, self.hot[rows]), (2 * j + 1, ~self.hot[rows])):
                lost = float(self.unsaved[rows[mask]].sum()) / per_iter  # in iterations
                age = float(k) - float(self.ledger.markers[0, col])
                self.ledger.fail(col, float(k), weight=lost / age if age > 0 else 0.0)
        m.emb[rows] = self.saved_emb[rows]
        m.emb_state[rows] = self.saved_state[rows]
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
