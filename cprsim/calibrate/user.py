"""Calibrate *your own* PyTorch model: failure injection inside your training loop.

``cprsim calibrate`` measures accuracy loss against PLS on cprsim's small DLRM. The loss per unit
PLS depends on the model and the data, so the planner's promise holds for your job only as far as
your model loses what that DLRM loses. This module runs the same experiment on your model, in your
training loop, and writes the same ``calibration.toml`` for ``cprsim plan --calibration``.

**What is emulated, exactly as for the DLRM** (:mod:`cprsim.calibrate.emulation`, one code path):
your embedding tables' rows are numbered globally (tables concatenated in order: global row =
table offset + index) and sharded over ``n_shards`` virtual embedding servers by the same Knuth
hash (:func:`~cprsim.calibrate.emulation.shard_of_rows`). A :class:`FailureInjector` keeps a saved
copy of every row, **weights and optimizer state**, and before each iteration applies the
:class:`~cprsim.calibrate.emulation.Setting`'s actions: full saves, partial saves of the top rows
(``mfu``: exact access counts; ``ssu``: counts of a Bernoulli sub-sample of the samples), and
failures that revert one shard's rows to their saved copy. It counts each batch's accesses from the
ids you look up and books the lost updates in a :class:`cprsim.pls.ShardLedger` ("measured" mode):
PLS = lost sample-updates / training samples. Dense layers (the trainers) are never touched.

**Tables** (:func:`embedding_tables`): every ``torch.nn.Embedding`` and ``torch.nn.EmbeddingBag``
in your model, in ``named_modules()`` order, named by their module path. TorchRec's unsharded
``EmbeddingBagCollection``/``EmbeddingCollection`` hold their tables as such modules
(``embedding_bags``/``embeddings``), so they are found the same way; :func:`kjt_lookups` turns a
``KeyedJaggedTensor`` into this module's lookups. **TorchRec is not installed where cprsim is
tested: that path is written against TorchRec's source and untested**; sharded TorchRec modules
(``DistributedModelParallel``, FBGEMM's fused tables and in-backward optimizers) are not supported.

**Optimizer state**: every tensor in ``optimizer.state[weight]`` whose first dimension is the
table's rows (Adagrad's ``sum``, Adam's and SparseAdam's ``exp_avg``/``exp_avg_sq``, SGD's
``momentum_buffer``; dense or sparse gradients alike) is saved and restored with its rows. Scalar
state (Adam's ``step``) is per tensor, not per row: it is not rolled back. State an optimizer
creates lazily (Adam's moments, at its first step) has a saved copy of zeros until the next save,
which is the value a fresh optimizer starts from. Per-row tensors kept outside ``optimizer.state``
can be given as ``row_state``.

**Counting** (:meth:`FailureInjector.count`): per batch, the ids each table looked up: a tensor
``(B,)`` (one id per sample), ``(B, L)`` (``L`` per sample: a fixed bag or a sequence), a
``(input, offsets)`` pair as ``EmbeddingBag`` takes it, or :class:`Jagged` ``(values, lengths)``.
Ids equal to the table's ``padding_idx`` are not counted (they train nothing). A sample's update
is spread evenly over its accesses: with one id per table per sample (the DLRM) every access is
one unit and the PLS is exactly the emulator's; where samples look up different numbers of rows,
each access counts ``1 / (its sample's accesses)`` of a sample.

**Progress** is in iterations of ``batch`` samples: every batch must hold exactly ``batch`` samples
(``drop_last=True``), and ``before(k)`` is called for ``k = 0, 1, ...`` in order.

**The driver** (:func:`calibrate_model`) runs, per seed, a failure-free baseline and one run per
(strategy, budget) from your callables, on the same batches (it checks that every run of a seed
looked up the same rows), with the failure schedules of ``cprsim calibrate``
(:func:`cprsim.calibrate.runner.settings_for`: common failures for every strategy at a budget, a
Latin square of failure windows), and writes ``points.csv`` and ``calibration.toml``
(:func:`cprsim.calibrate.pipeline.calibration_doc`).

**Metrics.** The planner reads two metrics by the names of the DLRM's: ``auc`` (a loss is a *drop*:
baseline minus failed run, for a metric where higher is better) and ``logloss`` (a loss is a
*rise*: failed run minus baseline, for one where lower is better). ``auc_metric`` and
``logloss_metric`` name the keys of your ``evaluate``'s result that fill them (e.g. a recall@10 in
the ``auc`` slot, an RMSE in the ``logloss`` slot); the file's ``[provenance] metrics`` says which.
``cprsim plan --metric auc --max-accuracy-loss X`` then bounds the drop of *your* metric by ``X``,
in its own unit.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

import torch
from torch import nn

from cprsim.calibrate import runner as R
from cprsim.calibrate.emulation import Emulator, Setting, emulated, emulation_of
from cprsim.calibrate.pipeline import POINTS_HEADER, calibration_doc
from cprsim.errors import InputError, ParameterError
from cprsim.names import CALIBRATION_DEFAULT, VANILLA
from cprsim.version import __version__


def user_strategies() -> tuple[str, ...]:
    """The strategies a user-model calibration can run: those the emulator runs whose emulation
    does not look ahead (lookahead needs the future batches' rows, which a user's loop does not
    hand over)."""
    return tuple(n for n in emulated() if not emulation_of(n).needs_future)


Batch = TypeVar("Batch")


@dataclass(frozen=True)
class Jagged:
    """A jagged lookup: ``values`` (every sample's ids, concatenated) and ``lengths`` (ids per
    sample, ``(B,)``), as TorchRec's ``JaggedTensor`` holds them."""

    values: torch.Tensor
    lengths: torch.Tensor


#: one lookup of one table in one batch: ids ``(B,)`` or ``(B, L)``, ``(input, offsets)`` as
#: ``EmbeddingBag`` takes them, or a :class:`Jagged`
Ids = torch.Tensor | tuple[torch.Tensor, torch.Tensor] | Jagged
#: a batch's lookups: by table name (a list for several lookups of one table) or one per table
#: in order (``None``: the table is not looked up)
Lookups = Mapping[str, Ids | list[Ids]] | Sequence[Ids | None]
#: what ``optimizer`` may be: one optimizer, several, or none (only ``row_state`` is restored)
Optimizers = torch.optim.Optimizer | Sequence[torch.optim.Optimizer] | None
#: what the tables may be given as: a model (its embedding modules are found), modules by name,
#: or modules in order
TablesLike = nn.Module | Mapping[str, nn.Module] | Sequence[nn.Module]


@dataclass(frozen=True)
class Table:
    """One embedding table as the injector sees it: its name, its module's weight, its first
    global row (``offset``), its rows, and how its module reads ids (``padding_idx``, and for an
    ``EmbeddingBag`` its ``include_last_offset``)."""

    name: str
    weight: torch.Tensor
    offset: int
    n_rows: int
    padding_idx: int | None = None
    bag: bool = False
    include_last_offset: bool = False


def _is_table(m: nn.Module) -> bool:
    return isinstance(m, (nn.Embedding, nn.EmbeddingBag))


def embedding_tables(tables: TablesLike) -> list[Table]:
    """The embedding tables of a model (every ``nn.Embedding``/``nn.EmbeddingBag`` in
    ``named_modules()`` order, named by module path; a weight shared by two modules counts once),
    of a mapping of names to such modules, or of a sequence of them (named ``"0"``, ``"1"``, ...),
    with their global row offsets (tables concatenated in that order)."""
    named: list[tuple[str, nn.Module]]
    if isinstance(tables, nn.Module):
        if _is_table(tables):
            named = [("", tables)]
        else:
            named = [(n, m) for n, m in tables.named_modules() if _is_table(m)]
    elif isinstance(tables, Mapping):
        named = list(tables.items())
    else:
        named = [(str(i), m) for i, m in enumerate(tables)]
    out: list[Table] = []
    seen: set[int] = set()
    offset = 0
    for name, m in named:
        if not _is_table(m):
            raise InputError(
                f"table {name!r}: expected a torch.nn.Embedding or EmbeddingBag, got "
                f"{type(m).__name__}"
            )
        w = m.weight
        assert isinstance(w, torch.Tensor), "an Embedding/EmbeddingBag's weight is a tensor"
        if id(w) in seen:
            continue
        seen.add(id(w))
        if w.dim() != 2:
            raise InputError(f"table {name!r}: its weight is {tuple(w.shape)}, not (rows, dim)")
        pad = getattr(m, "padding_idx", None)
        bag = isinstance(m, nn.EmbeddingBag)
        out.append(
            Table(
                name,
                w,
                offset,
                int(w.shape[0]),
                None if pad is None else int(pad),
                bag,
                bool(getattr(m, "include_last_offset", False)),
            )
        )
        offset += int(w.shape[0])
    if not out:
        raise InputError("no embedding table: the model holds no torch.nn.Embedding/EmbeddingBag")
    return out


def _optimizers(optimizer: Optimizers) -> list[Any]:
    if optimizer is None:
        return []
    if isinstance(optimizer, torch.optim.Optimizer) or hasattr(optimizer, "state"):
        return [optimizer]
    return list(optimizer)


class TableRows:
    """User tables and their per-row optimizer state as a
    :class:`~cprsim.calibrate.emulation.RowStore` (module docstring): the saved copy of every row
    lives beside the live tensors, on their device; ``rows`` arrive as global row ids on the CPU
    and are split per table."""

    def __init__(
        self,
        tables: Sequence[Table],
        optimizer: Optimizers = None,
        row_state: Mapping[str, Sequence[torch.Tensor]] | None = None,
    ) -> None:
        self.tables = list(tables)
        self.optimizers = _optimizers(optimizer)
        by_name = {t.name: t for t in self.tables}
        self.extra: dict[int, list[torch.Tensor]] = {}
        for name, tensors in (row_state or {}).items():
            if name not in by_name:
                raise InputError(f"row_state: no table named {name!r}; tables: {sorted(by_name)}")
            t = by_name[name]
            for x in tensors:
                if x.dim() < 1 or x.shape[0] != t.n_rows:
                    raise InputError(
                        f"row_state[{name!r}]: a tensor of shape {tuple(x.shape)} is not per row "
                        f"of the table's {t.n_rows} rows"
                    )
            self.extra[self.tables.index(t)] = list(tensors)
        with torch.no_grad():
            self.saved_w = [t.weight.detach().clone() for t in self.tables]
            self.saved_state: dict[tuple[int, str], torch.Tensor] = {}
            for i, key, live in self._states():
                self.saved_state[(i, key)] = live.detach().clone()

    @property
    def n_rows(self) -> int:
        """Rows of every table."""
        return sum(t.n_rows for t in self.tables)

    @property
    def units_per_sample(self) -> int:
        """The access counters' unit: 1/(number of tables) of a sample (so that one id per table
        per sample is one unit per access, as in the DLRM)."""
        return len(self.tables)

    def _states(self) -> list[tuple[int, str, torch.Tensor]]:
        """``(table, key, tensor)`` of every per-row state tensor now (optimizers create some
        lazily)."""
        out = []
        for i, t in enumerate(self.tables):
            for o, opt in enumerate(self.optimizers):
                st = opt.state.get(t.weight) if hasattr(opt.state, "get") else None
                for key, v in (st or {}).items():
                    if (
                        isinstance(v, torch.Tensor)
                        and not v.is_sparse
                        and v.dim() >= 1
                        and v.shape[0] == t.n_rows
                    ):
                        out.append((i, f"{o}:{key}", v))
            for e, x in enumerate(self.extra.get(i, ())):
                out.append((i, f"row_state:{e}", x))
        return out

    def _local(self, rows: torch.Tensor) -> list[torch.Tensor | None]:
        """Per table, the rows' local ids on the table's device (None: none of its rows)."""
        out: list[torch.Tensor | None] = []
        for t in self.tables:
            sel = rows[(rows >= t.offset) & (rows < t.offset + t.n_rows)] - t.offset
            out.append(sel.to(t.weight.device) if sel.numel() else None)
        return out

    def _saved(self, i: int, key: str, live: torch.Tensor) -> torch.Tensor:
        """The saved copy of a state tensor; zeros (a fresh optimizer's value) if it did not
        exist at the last save."""
        s = self.saved_state.get((i, key))
        if s is None:
            s = self.saved_state[(i, key)] = torch.zeros_like(live)
        return s

    @torch.no_grad()
    def save(self, rows: torch.Tensor | None) -> None:
        """Copy the live ``rows`` (``None``: every row) of every table, weights and per-row
        state, into the saved copy."""
        if rows is None:
            for t, s in zip(self.tables, self.saved_w):
                s.copy_(t.weight)
            for i, key, live in self._states():
                self._saved(i, key, live).copy_(live)
            return
        local = self._local(rows)
        for t, s, sel in zip(self.tables, self.saved_w, local):
            if sel is not None:
                s[sel] = t.weight[sel]
        for i, key, live in self._states():
            sel = local[i]
            if sel is not None:
                self._saved(i, key, live)[sel] = live[sel]

    @torch.no_grad()
    def restore(self, rows: torch.Tensor) -> None:
        """Copy the saved ``rows`` of every table, weights and per-row state, back into the live
        tensors."""
        local = self._local(rows)
        for t, s, sel in zip(self.tables, self.saved_w, local):
            if sel is not None:
                t.weight[sel] = s[sel]
        for i, key, live in self._states():
            sel = local[i]
            if sel is not None:
                live[sel] = self._saved(i, key, live)[sel]


_SAMPLE_IDS: dict[tuple[int, int], torch.Tensor] = {}  #: (samples, ids per sample) -> sample ids


def _uniform_samples(n: int, per: int) -> torch.Tensor:
    """``0 .. n-1``, each repeated ``per`` times (cached: every batch of a run has the same)."""
    key = (n, per)
    s = _SAMPLE_IDS.get(key)
    if s is None:
        if len(_SAMPLE_IDS) > 64:
            _SAMPLE_IDS.clear()
        s = _SAMPLE_IDS[key] = torch.arange(n, dtype=torch.int64).repeat_interleave(per)
    return s


def _flat(t: Table, ids: Ids) -> tuple[torch.Tensor, torch.Tensor, int]:
    """One lookup as ``(ids, sample, samples)``: the ids (int64, CPU, flat, sample-major), each
    id's sample, and the lookup's samples."""
    if isinstance(ids, torch.Tensor):
        if ids.dim() == 0:
            raise InputError(f"table {t.name!r}: ids must have a batch dimension, got a scalar")
        n = int(ids.shape[0])
        values = ids.reshape(-1).to("cpu", torch.int64)
        sample = _uniform_samples(n, values.numel() // max(1, n))
    elif isinstance(ids, (Jagged, tuple)):
        if isinstance(ids, Jagged):
            values = ids.values.reshape(-1).to("cpu", torch.int64)
            lengths = ids.lengths.reshape(-1).to("cpu", torch.int64)
        else:
            inp, offsets = ids
            if not t.bag:
                raise InputError(
                    f"table {t.name!r}: an (input, offsets) pair is EmbeddingBag's form; give "
                    "this torch.nn.Embedding table its ids, or a Jagged(values, lengths)"
                )
            values = inp.reshape(-1).to("cpu", torch.int64)
            off = offsets.reshape(-1).to("cpu", torch.int64)
            ends = (
                off[1:]
                if t.include_last_offset
                else torch.cat([off[1:], off.new_tensor([len(values)])])
            )
            lengths = ends - off[: len(ends)]
        if int(lengths.sum()) != values.numel() or bool((lengths < 0).any()):
            raise InputError(
                f"table {t.name!r}: the lengths (or offsets) describe {int(lengths.sum())} ids, "
                f"the lookup has {values.numel()}"
            )
        n = len(lengths)
        sample = torch.repeat_interleave(torch.arange(n, dtype=torch.int64), lengths)
    else:
        raise InputError(
            f"table {t.name!r}: ids must be a tensor, an (input, offsets) pair or a Jagged, got "
            f"{type(ids).__name__}"
        )
    if values.numel():
        lo, hi = (int(x) for x in torch.aminmax(values))
        if lo < 0 or hi >= t.n_rows:
            raise InputError(f"table {t.name!r}: ids must lie in [0, {t.n_rows}), got [{lo}, {hi}]")
    return values, sample, n


class FailureInjector:
    """Emulated embedding servers around *your* training run (module docstring): call
    :meth:`before` ``(k)`` before batch ``k`` trains (it applies the saves and failures the
    ``setting`` schedules there) and :meth:`count` once per batch with the ids it looked up.

    ``tables``: your model (its embedding modules are found), or the modules by name or in order
    (:func:`embedding_tables`); ``optimizer``: the optimizer(s) holding their per-row state;
    ``row_state``: per-row tensors kept elsewhere, by table name. ``n_iters`` iterations of
    ``batch`` samples each make the run (PLS's denominator). ``seed`` seeds SSU's sub-sample.
    Make it once the model is on its device (it copies the rows where they live), and before the
    first batch (its first copy is the state a failure before any save restores). Typical loop::

        inj = FailureInjector(model, opt, n_shards=4, setting=st, n_iters=n, batch=B)
        for k, batch in enumerate(loader):
            inj.before(k)
            train_step(model, opt, batch)
            inj.count({"user": batch["user"], "item": batch["item"]})
        inj.pls, inj.timing
    """

    def __init__(
        self,
        tables: TablesLike,
        optimizer: Optimizers,
        *,
        n_shards: int,
        setting: Setting,
        n_iters: int,
        batch: int,
        seed: int = 0,
        row_state: Mapping[str, Sequence[torch.Tensor]] | None = None,
        mode: str = "measured",
    ) -> None:
        if setting.strategy not in (ok := user_strategies()):
            raise ParameterError(
                "strategy",
                f"must be one of {', '.join(ok)} for a user model (lookahead needs "
                "the future batches' rows)",
                setting.strategy,
            )
        if n_shards < 1 or n_iters < 1 or batch < 1:
            raise InputError(
                f"n_shards, n_iters and batch must be >= 1, got {n_shards}, {n_iters}, {batch}"
            )
        self.tables = embedding_tables(tables)
        self.store = TableRows(self.tables, optimizer, row_state)
        self.emulator = Emulator(self.store, n_shards, setting, n_iters, mode, seed, batch=batch)
        self.batch, self.n_iters = batch, n_iters
        self._by_name = {t.name: t for t in self.tables}
        self._next = 0  # the iteration before() expects
        self._counted = True  # whether the current iteration's batch was counted
        self._digest = hashlib.sha256()

    @property
    def setting(self) -> Setting:
        """The strategy and its scheduled actions."""
        return self.emulator.s

    def before(self, iteration: int) -> None:
        """Before batch ``iteration`` trains: the saves and failures scheduled there, in order.
        Iterations come in order from 0, each batch counted once (:meth:`count`)."""
        if iteration != self._next:
            raise InputError(
                f"before({iteration}): expected iteration {self._next} (iterations come in order "
                "from 0, one before() per batch)"
            )
        if iteration > 0 and not self._counted:
            raise InputError(
                f"before({iteration}): batch {iteration - 1} was not counted (call count() once "
                "per batch)"
            )
        if iteration >= self.n_iters:
            raise InputError(f"before({iteration}): the run has only {self.n_iters} iterations")
        self.emulator.before(iteration)
        self._next, self._counted = iteration + 1, False

    def accesses(self, lookups: Lookups) -> tuple[torch.Tensor, torch.Tensor, int]:
        """A batch's lookups as ``(global rows, each access's sample, samples)`` (CPU, int64),
        without the ids equal to a table's ``padding_idx``."""
        pairs: list[tuple[Table, Ids]] = []
        if isinstance(lookups, Mapping):
            for name, v in lookups.items():
                t = self._by_name.get(name)
                if t is None:
                    raise InputError(
                        f"count: no table named {name!r}; tables: {', '.join(self._by_name)}"
                    )
                pairs += [(t, x) for x in (v if isinstance(v, list) else [v])]
        else:
            if len(lookups) != len(self.tables):
                raise InputError(
                    f"count: {len(lookups)} lookups for {len(self.tables)} tables (give one per "
                    "table in order, None for a table not looked up, or a mapping by name)"
                )
            pairs = [(t, x) for t, x in zip(self.tables, lookups) if x is not None]
        rows, samples = [], []
        n: int | None = None
        for t, ids in pairs:
            values, sample, m = _flat(t, ids)
            if n is None:
                n = m
            elif m != n:
                raise InputError(
                    f"count: table {t.name!r} was looked up for {m} samples, another table for "
                    f"{n}: one count() takes one batch"
                )
            if t.padding_idx is not None:
                keep = values != t.padding_idx
                values, sample = values[keep], sample[keep]
            rows.append(values + t.offset)
            samples.append(sample)
        if n is None:
            raise InputError("count: no lookup given")
        return torch.cat(rows), torch.cat(samples), n

    def count(self, lookups: Lookups) -> None:
        """Count one trained batch's accesses (module docstring: the forms of ``lookups``), once
        per iteration, between ``before(k)`` and ``before(k + 1)``."""
        if self._next == 0 or self._counted:
            raise InputError(
                "count(): call before(k) first, and count each batch once"
                if self._next
                else "count(): call before(0) before the first batch"
            )
        rows, sample, n = self.accesses(lookups)
        if n != self.batch:
            raise InputError(
                f"count(): a batch of {n} samples; the injector counts iterations of {self.batch} "
                "samples (drop the last, short batch: drop_last=True)"
            )
        per = torch.bincount(sample, minlength=n).to(torch.float64)
        weight = float(self.store.units_per_sample) / per[sample]
        self.emulator.count_accesses(rows, n, sample, weight)
        self._digest.update(rows.numpy().tobytes())
        self._counted = True

    @property
    def lookup_digest(self) -> str:
        """SHA-256 of every access counted so far (global rows, in order): runs on the same
        batches in the same order have the same digest."""
        return self._digest.hexdigest()

    @property
    def pls(self) -> float:
        """PLS so far: lost sample-updates over the run's ``n_iters * batch`` samples."""
        return self.emulator.pls

    @property
    def timing(self) -> tuple[float, float]:
        """``(position, age)`` of the lost updates, as fractions of the run."""
        return self.emulator.timing

    @property
    def failures(self) -> int:
        """Failures applied so far."""
        return self.emulator.failures

    @property
    def saves(self) -> dict[str, int]:
        """Saves made so far, by kind (``full``, ``partial``)."""
        return dict(self.emulator.saves)


def kjt_lookups(collection: Any, kjt: Any, prefix: str = "") -> dict[str, list[Ids]]:
    """A TorchRec ``KeyedJaggedTensor``'s lookups of an unsharded ``EmbeddingBagCollection`` or
    ``EmbeddingCollection`` (``collection``, at module path ``prefix`` in your model, e.g.
    ``"sparse.ebc"``), for :meth:`FailureInjector.count`: each table's features as
    :class:`Jagged` lookups, under the table's module name (``prefix.embedding_bags.NAME`` or
    ``prefix.embeddings.NAME``). Written against TorchRec's source (``embedding_bag_configs()`` /
    ``embedding_configs()``, ``feature_names``, ``KeyedJaggedTensor.to_dict()``); **untested here:
    TorchRec is not installed where cprsim is tested**."""
    if hasattr(collection, "embedding_bag_configs"):
        configs, attr = collection.embedding_bag_configs(), "embedding_bags"
    elif hasattr(collection, "embedding_configs"):
        configs, attr = collection.embedding_configs(), "embeddings"
    else:
        raise InputError(
            f"{type(collection).__name__} is not a TorchRec EmbeddingBagCollection or "
            "EmbeddingCollection (no embedding_bag_configs()/embedding_configs())"
        )
    features = kjt.to_dict()
    out: dict[str, list[Ids]] = {}
    head = f"{prefix}." if prefix else ""
    for cfg in configs:
        name = f"{head}{attr}.{cfg.name}"
        for f in cfg.feature_names or [cfg.name]:
            if f in features:
                jt = features[f]
                out.setdefault(name, []).append(Jagged(jt.values(), jt.lengths()))
    return out


# -- the driver --------------------------------------------------------------------------------------
def resolve_device(device: str | torch.device = "auto") -> torch.device:
    """``auto``: CUDA if available, else the CPU; ``cpu``, ``cuda`` (an error without CUDA), or
    any ``torch.device``."""
    if isinstance(device, torch.device):
        return device
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device not in ("cpu", "cuda") and not device.startswith("cuda:"):
        raise ParameterError("device", "must be auto, cpu or cuda", device)
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ParameterError("device", "CUDA is not available here (use auto or cpu)", device)
    return torch.device(device)


@dataclass(frozen=True)
class UserCalibration:
    """What :func:`calibrate_model` measured and wrote: the calibration document (``doc``: what
    ``calibration.toml`` holds), the points (one per failure run, against its seed's baseline),
    every run's result (baselines included), the files written (name -> path; empty without
    ``out``), the wall seconds, and ``refused``: why the planner would refuse this calibration
    (empty: it accepts it; e.g. a loss that is not positive, when the losses measured are mostly
    noise or negative: :func:`planner_refusal`)."""

    doc: dict[str, Any]
    points: list[R.Point]
    results: list[R.RunResult]
    files: dict[str, Path] = field(default_factory=dict)
    wall_s: float = 0.0
    refused: str = ""

    @property
    def baselines(self) -> dict[int, R.RunResult]:
        """Each seed's failure-free run."""
        return {r.seed: r for r in self.results if r.run == 0}


def _metric(scores: Mapping[str, float], name: str, which: str) -> float:
    if name not in scores:
        raise InputError(
            f"evaluate() returned {sorted(scores)}; it has no {name!r} (the {which}_metric)"
        )
    v = float(scores[name])
    if not math.isfinite(v):
        raise InputError(f"evaluate() returned {name} = {v}: not a finite number")
    return v


def calibrate_model(  # long: public API, 23 documented parameters; the body: check, run each seed, write
    build: Callable[[int, torch.device], tuple[nn.Module, Optimizers]],
    batches: Callable[[int, torch.device], Iterable[Batch]],
    step: Callable[[nn.Module, Any, Batch], object],
    lookups: Callable[[Batch], Lookups],
    evaluate: Callable[[nn.Module, int, torch.device], Mapping[str, float]],
    *,
    batch: int,
    out: str | Path | None = None,
    seeds: Sequence[int] = (0, 1),
    budgets: Sequence[float] = (0.5, 0.125),
    strategies: Sequence[str] = CALIBRATION_DEFAULT,
    n_shards: int = 4,
    failures_per_run: int = 4,
    top_fraction: float = 0.1,
    full_every: int = 4,
    sample_rate: float = 0.05,
    n_iters: int | None = None,
    auc_metric: str = "auc",
    logloss_metric: str = "logloss",
    tables: Callable[[nn.Module], TablesLike] | None = None,
    device: str | torch.device = "auto",
    model_description: str = "",
    data_description: str = "",
    progress: Callable[[str], None] | None = None,
) -> UserCalibration:
    """Calibrate accuracy loss against PLS on your model (module docstring); returns what it
    measured, and writes ``points.csv`` and ``calibration.toml`` into ``out`` (atomically, as a
    set) when given.

    Your callables, each called with the seed and the device where it matters:

    * ``build(seed, device) -> (model, optimizer)``: a fresh model on ``device`` and its
      optimizer(s) (``torch.manual_seed(seed)`` is set just before);
    * ``batches(seed, device)``: the training batches in order, the same every call for a seed
      (every run of a seed must see the same data: checked), each of ``batch`` samples;
      ``n_iters`` of them (default ``len(batches(...))``);
    * ``step(model, optimizer, batch)``: one training step (forward, backward, optimizer step);
    * ``lookups(batch)``: the ids the batch looks up per table (:meth:`FailureInjector.count`);
    * ``evaluate(model, seed, device) -> {name: value}``: held-out metrics; ``auc_metric``
      (higher is better; a loss is its drop) and ``logloss_metric`` (lower is better; a loss is
      its rise) name the two the calibration records (module docstring);
    * ``tables(model)``: the tables to shard (default: every embedding module of the model).

    The schedule is ``cprsim calibrate``'s (:func:`cprsim.calibrate.runner.settings_for`):
    ``budgets`` are vanilla checkpoint intervals as fractions of the run (2: no save in the run),
    MFU/SSU save the top ``top_fraction`` rows with a full save every ``full_every`` saves at the
    interval that writes the same bytes, ``failures_per_run`` failures per run on
    ``n_shards`` servers. ``progress(line)`` is told each finished run."""
    t0 = time.perf_counter()
    schedule = _Schedule(
        tuple(seeds),
        tuple(budgets),
        tuple(strategies),
        batch,
        n_shards,
        failures_per_run,
        top_fraction,
        full_every,
        sample_rate,
    )
    schedule.check()
    loop = _Loop(
        build,
        batches,
        step,
        lookups,
        evaluate,
        tables,
        auc_metric,
        logloss_metric,
        batch,
        n_shards,
        resolve_device(device),
    )
    dev = loop.device
    results: list[R.RunResult] = []
    info: dict[str, Any] = {}
    for seed in seeds:
        n = loop.iterations(seed, n_iters)
        runs = schedule.runs(seed, n)
        digest: str | None = None
        for run in runs:
            r0 = time.perf_counter()
            result, inj, model = loop.train(run, seed, n, digest)
            digest = digest or inj.lookup_digest
            results.append(result)
            if not info:
                info = _describe(inj, model)
            if progress is not None:
                progress(f"seed {seed} {run.label} ({time.perf_counter() - r0:.1f} s)")
            info.setdefault("iterations", {})[str(seed)] = n
    points, facts = R.points_from(results)
    doc = user_calibration_doc(
        points,
        facts,
        info,
        seeds=seeds,
        budgets=budgets,
        strategies=strategies,
        batch=batch,
        n_shards=n_shards,
        failures_per_run=failures_per_run,
        top_fraction=top_fraction,
        full_every=full_every,
        sample_rate=sample_rate,
        auc_metric=auc_metric,
        logloss_metric=logloss_metric,
        device=dev,
        model_description=model_description,
        data_description=data_description,
    )
    files: dict[str, Path] = {}
    if out is not None:
        files = write_calibration(Path(out), doc, results)
    return UserCalibration(
        doc, points, results, files, time.perf_counter() - t0, planner_refusal(doc)
    )


@dataclass(frozen=True)
class _Schedule:
    """What :func:`calibrate_model` runs for each seed: its strategies at each budget, scheduled as
    ``cprsim calibrate`` schedules them (:func:`cprsim.calibrate.runner.settings_for`)."""

    seeds: tuple[int, ...]
    budgets: tuple[Any, ...]
    strategies: tuple[str, ...]
    batch: int
    n_shards: int
    failures_per_run: int
    top_fraction: float
    full_every: int
    sample_rate: float

    def check(self) -> None:
        """One-line errors for strategies the emulator cannot run, no seed, budgets that are not
        positive, or counts below 1."""
        ok = user_strategies()
        bad = [s for s in self.strategies if s not in ok]
        if bad or not self.strategies:
            raise ParameterError(
                "strategies", f"must be among {', '.join(ok)}", ",".join(self.strategies)
            )
        if not self.seeds or not self.budgets or any(not (b > 0) for b in self.budgets):
            raise ParameterError(
                "budgets",
                "give at least one seed and budgets > 0",
                ",".join(map(str, self.budgets)),
            )
        if self.failures_per_run < 1 or self.n_shards < 1 or self.batch < 1:
            raise InputError(
                f"failures_per_run, n_shards and batch must be >= 1, got {self.failures_per_run}, "
                f"{self.n_shards}, {self.batch}"
            )

    def runs(self, seed: int, n: int) -> list[R.Run]:
        """Seed ``seed``'s runs of ``n`` iterations: its baseline, then each strategy and budget."""
        preset = R.Preset(
            "user-model",
            n * self.batch,
            0,
            self.seeds,
            tuple(float(b) for b in self.budgets),
            self.strategies,
            batch=self.batch,
            n_shards=self.n_shards,
            failures_per_run=self.failures_per_run,
            top_fraction=self.top_fraction,
            full_every=self.full_every,
            sample_rate=self.sample_rate,
        )
        return [R.Run(seed, 0, 0.0)] + [
            R.Run(seed, i, b, st)
            for i, (b, st) in enumerate(R.settings_for(preset, n, seed), start=1)
        ]


@dataclass(frozen=True)
class _Loop(Generic[Batch]):
    """The user's training loop as :func:`calibrate_model` got it (its callables and settings),
    and the device it runs on: how many iterations a seed's run has, and one training run."""

    build: Callable[[int, torch.device], tuple[nn.Module, Optimizers]]
    batches: Callable[[int, torch.device], Iterable[Batch]]
    step: Callable[[nn.Module, Any, Batch], object]
    lookups: Callable[[Batch], Lookups]
    evaluate: Callable[[nn.Module, int, torch.device], Mapping[str, float]]
    tables: Callable[[nn.Module], TablesLike] | None
    auc_metric: str
    logloss_metric: str
    batch: int
    n_shards: int
    device: torch.device

    def iterations(self, seed: int, n_iters: int | None) -> int:
        """The iterations of seed ``seed``'s runs: ``n_iters``, else ``len(batches(...))``."""
        n = n_iters
        if n is None:
            data = self.batches(seed, self.device)
            if not isinstance(data, Sized):
                raise InputError(
                    "batches() returned an iterable without len(): give n_iters (the batches of "
                    "a run)"
                )
            n = len(data)
        if n < 2:
            raise InputError(f"seed {seed}: a run of {n} iterations is too short to calibrate")
        return n

    def train(
        self, run: R.Run, seed: int, n: int, first: str | None
    ) -> tuple[R.RunResult, FailureInjector, Any]:
        """Train ``run`` (``n`` iterations, failures injected on its schedule) from a fresh model,
        check it looked up the rows of the seed's first run (digest ``first``; None: this is that
        run), evaluate it, and return its result, its injector and the model."""
        torch.manual_seed(seed)
        model, opt = self.build(seed, self.device)
        setting = run.setting or Setting(VANILLA, R.BASELINE)  # no action: the baseline
        inj = FailureInjector(
            self.tables(model) if self.tables is not None else model,
            opt,
            n_shards=self.n_shards,
            setting=setting,
            n_iters=n,
            batch=self.batch,
            seed=seed,
        )
        k = -1
        for k, b in enumerate(self.batches(seed, self.device)):
            if k >= n:
                raise InputError(f"seed {seed}: batches() gave more than n_iters = {n}")
            inj.before(k)
            self.step(model, opt, b)
            inj.count(self.lookups(b))
        if k + 1 != n:
            raise InputError(f"seed {seed}: batches() gave {k + 1} batches, expected {n}")
        _same_rows(seed, run, inj.lookup_digest, first)
        scores = self.evaluate(model, seed, self.device)
        position, age = inj.timing
        result = R.RunResult(
            seed,
            run.run,
            run.strategy,
            run.label,
            run.budget,
            float(inj.pls),
            _metric(scores, self.auc_metric, "auc"),
            _metric(scores, self.logloss_metric, "logloss"),
            float(position),
            float(age),
        )
        return result, inj, model


def _same_rows(seed: int, run: R.Run, digest: str, first: str | None) -> None:
    """A one-line error if ``run`` looked up other rows (``digest``) than the seed's first run
    (``first``; None: ``run`` is that run)."""
    if first is not None and digest != first:
        raise InputError(
            f"seed {seed}: run {run.label} looked up other rows than the seed's baseline: "
            "batches(seed, device) must give the same batches in the same order every call"
        )


def _describe(inj: FailureInjector, model: Any) -> dict[str, Any]:
    """What the calibration file records about the model: its tables, rows and optimizers."""
    return {
        "tables": [[t.name, t.n_rows] for t in inj.tables],
        "rows": inj.store.n_rows,
        "model": type(model).__name__,
        "optimizer": ", ".join(type(o).__name__ for o in inj.store.optimizers) or "none",
    }


def planner_refusal(doc: Mapping[str, Any]) -> str:
    """Why :func:`cprsim.calibrate.load_calibration` (and so ``cprsim plan --calibration``) would
    refuse this calibration document, or ``""`` when it reads it: the document goes through the
    same TOML text and the same loader, in a temporary folder."""
    import tempfile

    from cprsim.calibrate.calibration import load_calibration, to_toml

    with tempfile.TemporaryDirectory(prefix="cprsim-user-cal-") as d:
        path = Path(d) / "calibration.toml"
        path.write_text(to_toml(dict(doc)), encoding="utf-8")
        try:
            load_calibration(path)
        except InputError as e:
            return str(e).replace(str(path), "calibration.toml")
    return ""


def user_calibration_doc(
    points: list[R.Point],
    facts: Mapping[str, Any],
    info: Mapping[str, Any],
    *,
    seeds: Sequence[int],
    budgets: Sequence[float],
    strategies: Sequence[str],
    batch: int,
    n_shards: int,
    failures_per_run: int,
    top_fraction: float,
    full_every: int,
    sample_rate: float,
    auc_metric: str,
    logloss_metric: str,
    device: torch.device,
    model_description: str = "",
    data_description: str = "",
) -> dict[str, Any]:
    """The calibration document of a user-model calibration: ``[provenance]`` saying what was
    calibrated (the model, its tables, the optimizer, the metrics in the ``auc``/``logloss``
    slots, the schedule), then :func:`cprsim.calibrate.pipeline.calibration_doc`'s fits, points
    and model."""
    n_iters = info.get("iterations", {})
    prov: dict[str, Any] = {
        "calibrated": True,
        "preset": "user-model",
        "source": "cprsim.calibrate.user.calibrate_model (your model, your training loop)",
        "cprsim_version": __version__,
        "torch_version": torch.__version__,
        "model": model_description
        or (
            f"user model {info.get('model', '?')}: {len(info.get('tables', []))} embedding "
            f"tables, {info.get('rows', 0)} rows; optimizer {info.get('optimizer', '?')}"
        ),
        "data": data_description or "the user's batches (not described)",
        "tables": [list(t) for t in info.get("tables", [])],
        "embedding_rows": int(info.get("rows", 0)),
        "optimizer": info.get("optimizer", "?"),
        "metrics": {
            "auc": f"{auc_metric} (higher is better): d_auc = baseline - failed run",
            "logloss": f"{logloss_metric} (lower is better): d_logloss = failed run - baseline",
        },
        "seeds": list(seeds),
        "budgets": [float(b) for b in budgets],
        "strategies": list(strategies),
        "batch": batch,
        "iterations": sorted(set(n_iters.values())) if n_iters else [],
        "embedding_servers": n_shards,
        "sharding": "row hash (Knuth multiplicative) over all tables",
        "failures_per_run": failures_per_run,
        "mfu_ssu": (
            f"top_fraction {top_fraction}, full save every {full_every}, ssu sample rate "
            f"{sample_rate}; same bytes written as vanilla at each budget"
        ),
        "pls": "measured: lost sample-updates through cprsim.pls.ShardLedger (docs/calibration.md)",
        "fit": (
            "[fit]: loss = slope x PLS per strategy, least squares through the origin, 95% CI "
            "(Student t); [model]: the model the planner uses, chosen by leave-one-seed-out "
            "cross-validation (cprsim.calibrate.accuracy)"
        ),
        "baseline_auc": list(facts["baseline_auc"]),
        "baseline_logloss": list(facts["baseline_logloss"]),
        "device": device.type,
    }
    return calibration_doc(points, prov)


def write_calibration(
    out: Path, doc: Mapping[str, Any], results: Sequence[R.RunResult]
) -> dict[str, Path]:
    """Write ``points.csv`` (one row per run, baselines included, sorted by seed and run, with
    the deltas) and ``calibration.toml`` into ``out`` as one atomic set; returns their paths."""
    from cprsim.calibrate.calibration import to_toml
    from cprsim.calibrate.pipeline import journal_rows
    from cprsim.io import atomic_write_set, csv_text

    rows = journal_rows(results)
    metrics = doc.get("provenance", {}).get("metrics", {})
    header = (
        "cprsim calibration: accuracy loss vs PLS of a user's model (written by "
        "cprsim.calibrate.user.calibrate_model); "
        f"auc slot: {metrics.get('auc', 'auc')}; logloss slot: {metrics.get('logloss', 'logloss')}"
    )
    atomic_write_set(
        out,
        {
            "points.csv": csv_text(POINTS_HEADER, rows),
            "calibration.toml": to_toml(dict(doc), header),
        },
    )
    return {"points.csv": out / "points.csv", "calibration.toml": out / "calibration.toml"}


__all__ = [
    "user_strategies",
    "Jagged",
    "Ids",
    "Lookups",
    "Table",
    "embedding_tables",
    "TableRows",
    "FailureInjector",
    "kjt_lookups",
    "resolve_device",
    "UserCalibration",
    "calibrate_model",
    "user_calibration_doc",
    "write_calibration",
    "planner_refusal",
]
