"""A two-tower recommender on MovieLens-100k, written as a user would, calibrated with cprsim.

Unlike cprsim's built-in DLRM (one id per table, dot interactions, row-wise Adagrad on a fused
table), this model has

* a **user tower**: the user's id embedding and one embedding per side feature (age group,
  gender, occupation, ZIP area) with the user's dense features, through an MLP;
* an **item tower**: the movie's id embedding, a **multi-hot** ``EmbeddingBag`` (mean) over its up
  to three genres (``padding_idx=0`` marks "no genre": those ids train nothing and are not counted)
  and its release-period embedding, with the movie's dense features, through an MLP;
* a dot product of the towers plus a bias, binary cross-entropy on "rating >= 4";
* **sparse** embedding gradients trained by ``torch.optim.SparseAdam`` (per-row ``exp_avg`` and
  ``exp_avg_sq``, created at the first step) and the MLPs by ``torch.optim.Adam``: two optimizers.

:class:`MovieLensTwoTower` holds the data and the hyper-parameters, and its methods are the five
callables :func:`cprsim.calibrate.user.calibrate_model` takes (``build``, ``batches``, ``step``,
``lookups``, ``evaluate``)::

    from two_tower import MovieLensTwoTower
    from cprsim.calibrate.user import calibrate_model

    ex = MovieLensTwoTower(train_samples=20_000, test_samples=5_000)
    result = calibrate_model(ex.build, ex.batches, ex.step, ex.lookups, ex.evaluate,
                             batch=ex.batch, out="out/two-tower")

The data: :func:`cprsim.calibrate.datasets.read_movielens_100k` (the GroupLens files that recbole's
wheel ships: ``pip install --no-deps recbole==1.2.1``), its per-user time split; a fixed random
subset of ``train_samples`` training and ``test_samples`` held-out ratings (the same for every
seed); a seed sets the initialisation and the order of the training batches.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from cprsim.calibrate import data as D
from cprsim.calibrate.datasets import read_movielens_100k

#: the data's categorical columns the towers use (column index in the MovieLens split)
USER_COLUMNS = {"user": 0, "age_group": 2, "gender": 3, "occupation": 4, "zip_area": 5}
ITEM_COLUMNS = {"movie": 1, "release_5y": 9}
GENRE_COLUMNS = (6, 7, 8)  #: genre1..genre3, one vocabulary (row 0: none)
#: the dense columns: the user's (ratings in training, hour, weekday) and the movie's (ratings in
#: training, age in years)
USER_DENSE, ITEM_DENSE = (0, 3, 4), (1, 2)
#: every embedding table, by the module name the model gives it (the lookups' keys)
TABLES = (*USER_COLUMNS, *ITEM_COLUMNS, "genres")


@lru_cache(maxsize=4)
def load(train_samples: int, test_samples: int) -> dict[str, dict[str, torch.Tensor]]:
    """``{"train": ..., "test": ...}``: each a dict of CPU tensors (``cat`` int64 ``(n, 10)``,
    ``dense`` float32 ``(n, 5)``, ``label`` float32 ``(n,)``), a fixed random subset of the
    MovieLens-100k split (cached), and ``"tables"``: rows per categorical column."""
    split = read_movielens_100k()
    rng = np.random.default_rng(12345)  # the subset, not the seed: every seed sees the same data
    out: dict[str, dict[str, torch.Tensor]] = {}
    for name, part, n in (
        ("train", split.train, train_samples),
        ("test", split.test, test_samples),
    ):
        if n > len(part):
            raise ValueError(f"{name}_samples = {n}: MovieLens-100k's {name} split has {len(part)}")
        idx = np.sort(rng.choice(len(part), n, replace=False))
        out[name] = {
            "cat": torch.from_numpy(part.cat[idx]),
            "dense": torch.from_numpy(part.dense[idx]),
            "label": torch.from_numpy(part.label[idx]),
        }
    out["tables"] = {"rows": torch.tensor(split.tables)}
    return out


def features(
    cat: torch.Tensor, dense: torch.Tensor, label: torch.Tensor
) -> dict[str, torch.Tensor]:
    """A batch as the model reads it: one tensor per table (``genres``: ``(B, 3)``, 0 = none), the
    towers' dense features and the label."""
    b = {name: cat[:, c] for name, c in {**USER_COLUMNS, **ITEM_COLUMNS}.items()}
    b["genres"] = cat[:, list(GENRE_COLUMNS)]
    b["user_dense"] = dense[:, list(USER_DENSE)]
    b["item_dense"] = dense[:, list(ITEM_DENSE)]
    b["label"] = label
    return b


def _mlp(n_in: int, hidden: int, n_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(n_in, hidden), nn.ReLU(), nn.Linear(hidden, n_out))


class TwoTower(nn.Module):
    """The two-tower model (module docstring); ``rows``: rows per MovieLens categorical column."""

    def __init__(self, rows: list[int], dim: int = 16, hidden: int = 32) -> None:
        super().__init__()
        self.user = nn.Embedding(rows[0], dim, sparse=True)
        self.age_group = nn.Embedding(rows[2], dim, sparse=True)
        self.gender = nn.Embedding(rows[3], dim, sparse=True)
        self.occupation = nn.Embedding(rows[4], dim, sparse=True)
        self.zip_area = nn.Embedding(rows[5], dim, sparse=True)
        self.movie = nn.Embedding(rows[1], dim, sparse=True)
        self.release_5y = nn.Embedding(rows[9], dim, sparse=True)
        self.genres = nn.EmbeddingBag(
            max(rows[c] for c in GENRE_COLUMNS), dim, mode="mean", sparse=True, padding_idx=0
        )
        self.user_tower = _mlp(5 * dim + len(USER_DENSE), hidden, dim)
        self.item_tower = _mlp(3 * dim + len(ITEM_DENSE), hidden, dim)
        self.bias = nn.Parameter(torch.zeros(()))
        with torch.no_grad():  # TorchRec's default: uniform(-1/sqrt(rows), 1/sqrt(rows)) per table
            for m in self.modules():
                if isinstance(m, (nn.Embedding, nn.EmbeddingBag)):
                    bound = 1.0 / m.num_embeddings**0.5
                    m.weight.uniform_(-bound, bound)
                    if m.padding_idx is not None:
                        m.weight[m.padding_idx].zero_()

    def forward(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        """Logits of a batch (:func:`features`)."""
        u = torch.cat(
            [getattr(self, name)(b[name]) for name in USER_COLUMNS] + [b["user_dense"]], dim=1
        )
        i = torch.cat(
            [self.movie(b["movie"]), self.genres(b["genres"]), self.release_5y(b["release_5y"])]
            + [b["item_dense"]],
            dim=1,
        )
        return (self.user_tower(u) * self.item_tower(i)).sum(dim=1) + self.bias

    def sparse_parameters(self) -> list[nn.Parameter]:
        """The embedding tables' weights (sparse gradients)."""
        return [
            p
            for m in self.modules()
            if isinstance(m, (nn.Embedding, nn.EmbeddingBag))
            for p in m.parameters()
        ]

    def dense_parameters(self) -> list[nn.Parameter]:
        """Every other parameter (the towers' MLPs, the bias)."""
        sparse = {id(p) for p in self.sparse_parameters()}
        return [p for p in self.parameters() if id(p) not in sparse]


@dataclass(frozen=True)
class MovieLensTwoTower:
    """The training recipe: data sizes, batch, epochs, sizes and learning rates; its methods are
    :func:`cprsim.calibrate.user.calibrate_model`'s callables."""

    train_samples: int = 80_367  #: all of MovieLens-100k's training split
    test_samples: int = 19_633  #: all of its held-out split
    batch: int = 256
    epochs: int = 1
    dim: int = 16
    hidden: int = 32
    emb_lr: float = 0.01
    dense_lr: float = 0.003

    def build(
        self, seed: int, device: torch.device
    ) -> tuple[TwoTower, list[torch.optim.Optimizer]]:
        """A fresh model on ``device`` (initialised from ``seed``) and its two optimizers."""
        torch.manual_seed(seed)
        rows = [int(r) for r in load(self.train_samples, self.test_samples)["tables"]["rows"]]
        model = TwoTower(rows, self.dim, self.hidden).to(device)
        opts: list[torch.optim.Optimizer] = [
            torch.optim.SparseAdam(model.sparse_parameters(), lr=self.emb_lr),
            torch.optim.Adam(model.dense_parameters(), lr=self.dense_lr),
        ]
        return model, opts

    def batches(self, seed: int, device: torch.device) -> list[dict[str, torch.Tensor]]:
        """The training batches of ``seed``: each epoch a seeded shuffle of the training samples,
        whole batches only (the last, short one dropped)."""
        d = load(self.train_samples, self.test_samples)["train"]
        rng = np.random.default_rng(seed)
        out = []
        n = len(d["label"]) // self.batch * self.batch
        for _ in range(self.epochs):
            order = torch.from_numpy(rng.permutation(len(d["label"]))[:n])
            for a in range(0, n, self.batch):
                idx = order[a : a + self.batch]
                b = features(d["cat"][idx], d["dense"][idx], d["label"][idx])
                out.append({k: v.to(device) for k, v in b.items()})
        return out

    def step(
        self, model: TwoTower, opts: list[torch.optim.Optimizer], b: dict[str, torch.Tensor]
    ) -> float:
        """One training step; returns the batch's loss."""
        model.train()
        loss = F.binary_cross_entropy_with_logits(model(b), b["label"])
        for o in opts:
            o.zero_grad()
        loss.backward()
        for o in opts:
            o.step()
        return float(loss.detach())

    def lookups(self, b: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        """The ids each embedding table looks up in the batch, by table (module) name."""
        return {name: b[name] for name in TABLES}

    @torch.no_grad()
    def evaluate(self, model: TwoTower, seed: int, device: torch.device) -> dict[str, float]:
        """Held-out AUC and log-loss."""
        model.eval()
        d = load(self.train_samples, self.test_samples)["test"]
        b = {k: v.to(device) for k, v in features(d["cat"], d["dense"], d["label"]).items()}
        p = torch.sigmoid(model(b)).double().cpu().numpy()
        y = d["label"].numpy()
        return {"auc": D.auc(y, p), "logloss": D.logloss(y, p)}
