"""The calibration DLRM in plain PyTorch (imports torch: use only through the ``dlrm`` extra).

Architecture (Naumov et al. 2019): a bottom MLP on the ``n_dense`` dense features
(``n_dense``-64-``dim``), one embedding lookup per categorical table (the tables are concatenated
into one weight matrix with per-table row offsets, as fused-table implementations do; a sample
has one id per table, so a ``sum`` bag is a plain row gather), pairwise dot products of the
``n_cat + 1`` vectors (bottom output and one embedding per table), concatenated with the bottom
output into the top MLP (``top`` hidden units, one hidden layer) and a logit; binary
cross-entropy loss. The shapes come from the data (``n_cat = len(tables)``, ``n_dense``): on the
synthetic Criteo-like data 13 dense features and 26 tables (27 vectors, 351 upper-triangle
products), as before.

Speed (``benchmarks/dlrm.py`` compares this loop with a bare eager-torch DLRM step in the same
run): the lookup is an ``index_select`` of the batch's unique rows and the interaction keeps the
upper triangle with an ``index_select`` on the flattened 27x27 products, so the backward passes
are ``index_add_`` (no sort, unlike ``EmbeddingBag``'s and advanced indexing's backward); the
dense Adagrad updates one flat buffer (:class:`FlatAdagrad`); a batch's unique rows can be
computed once and reused by every run on the same data (:meth:`DLRM.train_step_unique`).

Optimizers: the dense MLPs use Adagrad (torch's formula, :class:`FlatAdagrad`); the embedding
rows use **row-wise Adagrad** (one accumulator per row: ``G_r += mean(g_r^2)``,
``w_r -= lr g_r / sqrt(G_r + eps)``, as in TorchRec/FBGEMM) or plain SGD, applied only to the
rows a batch touched. The embedding weights and their accumulators are plain tensors (``emb``,
``emb_state``) so the emulated embedding servers can snapshot and restore any subset of rows,
optimizer state included.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from cprsim.calibrate.data import N_DENSE


@dataclass(frozen=True)
class ModelConfig:
    """The calibration DLRM's sizes and optimizers: the embedding dimension, the hidden units of the
    bottom and top MLPs, the embedding rows' optimizer (``rowwise_adagrad`` or ``sgd``) and learning
    rate, the dense learning rate and the initial scale of the embedding rows."""

    dim: int = 16
    bottom_hidden: int = 64
    top_hidden: int = 64
    emb_optimizer: str = "rowwise_adagrad"  #: or "sgd"
    emb_lr: float = 0.05
    dense_lr: float = 0.01
    init_scale: float = 0.01


class FlatAdagrad:
    """``torch.optim.Adagrad`` (``lr``, ``eps`` 1e-10, no decay, zero initial accumulator) as one
    update of one flat buffer: the parameters and their gradients become views into flat tensors,
    so a step is three elementwise ops on one tensor instead of per-parameter calls (the dense MLPs
    have 8 small tensors: the per-tensor overhead was most of the optimizer's time). Same formula
    as torch's single-tensor Adagrad: ``sum += g²``; ``w -= lr · g / (sqrt(sum) + eps)``.
    """

    def __init__(self, params, lr: float, eps: float = 1e-10) -> None:
        self.params = [p for p in params]
        with torch.no_grad():
            self.flat = torch.cat([p.detach().reshape(-1) for p in self.params])
        self.grad = torch.zeros_like(self.flat)
        self.sum = torch.zeros_like(self.flat)
        self.views: list[torch.Tensor] = []
        o = 0
        for p in self.params:
            n = p.numel()
            p.data = self.flat[o : o + n].view_as(p)
            self.views.append(self.grad[o : o + n].view_as(p))
            o += n
        self.lr, self.eps = lr, eps
        self.zero_grad()

    def zero_grad(self, set_to_none: bool = False) -> None:
        """Zero the flat gradient and (re)attach its views: backward accumulates into them (never
        ``None``, whatever ``set_to_none``)."""
        self.grad.zero_()
        for p, g in zip(self.params, self.views):
            p.grad = g

    @torch.no_grad()
    def step(self) -> None:
        """One Adagrad update of every parameter from the flat gradient (``torch.no_grad``)."""
        if any(p.grad is not g for p, g in zip(self.params, self.views)):
            raise RuntimeError("FlatAdagrad: a gradient was replaced; call FlatAdagrad.zero_grad()")
        self.sum.addcmul_(self.grad, self.grad, value=1)
        self.flat.addcdiv_(self.grad, self.sum.sqrt().add_(self.eps), value=-self.lr)


class DLRM(nn.Module):
    """The calibration DLRM (module docstring): embedding rows and their row-wise Adagrad state as
    plain tensors (``emb``, ``emb_state``), the dense MLPs trained by :class:`FlatAdagrad`."""

    def __init__(
        self,
        tables: tuple[int, ...],
        cfg: ModelConfig,
        gen: torch.Generator,
        n_dense: int = N_DENSE,
        device: str | torch.device = "cpu",
    ) -> None:
        """``tables``: rows per categorical table (one table per categorical column);
        ``n_dense``: dense features per sample (13 is the synthetic and Criteo data's);
        ``device``: where the model trains (initialised on the CPU from ``gen`` whatever the
        device, so a seed starts from the same values everywhere, then moved)."""
        super().__init__()
        if cfg.emb_optimizer not in ("rowwise_adagrad", "sgd"):
            raise ValueError(
                f"emb_optimizer must be rowwise_adagrad or sgd, got {cfg.emb_optimizer!r}"
            )
        self.cfg = cfg
        self.tables = tables
        self.n_cat, self.n_dense = len(tables), n_dense
        self.offsets = torch.tensor(
            np.concatenate([[0], np.cumsum(tables)[:-1]]), dtype=torch.int64
        )
        n_rows = int(sum(tables))
        d = cfg.dim
        self.emb = (torch.rand(n_rows, d, generator=gen) * 2 - 1) * cfg.init_scale
        self.emb_state = torch.zeros(n_rows)
        self.bottom = nn.Sequential(
            nn.Linear(n_dense, cfg.bottom_hidden),
            nn.ReLU(),
            nn.Linear(cfg.bottom_hidden, d),
            nn.ReLU(),
        )
        n_vec = self.n_cat + 1
        self.tri = torch.triu_indices(n_vec, n_vec, offset=1)
        self.tri_flat = (self.tri[0] * n_vec + self.tri[1]).contiguous()  #: into the flat n_vec^2
        self.top = nn.Sequential(
            nn.Linear(d + self.tri.shape[1], cfg.top_hidden),
            nn.ReLU(),
            nn.Linear(cfg.top_hidden, 1),
        )
        with torch.no_grad():
            for m in self.modules():
                if isinstance(m, nn.Linear):
                    bound = (6.0 / (m.in_features + m.out_features)) ** 0.5
                    m.weight.copy_((torch.rand(m.weight.shape, generator=gen) * 2 - 1) * bound)
                    m.bias.zero_()
        dev = torch.device(device)
        if dev.type != "cpu":
            self.emb, self.emb_state = self.emb.to(dev), self.emb_state.to(dev)
            self.offsets, self.tri_flat = self.offsets.to(dev), self.tri_flat.to(dev)
            self.bottom.to(dev)
            self.top.to(dev)
        self.opt = FlatAdagrad(self.parameters(), lr=cfg.dense_lr)

    @property
    def n_rows(self) -> int:
        """Embedding rows of all the tables."""
        return self.emb.shape[0]

    def global_rows(self, cat: torch.Tensor) -> torch.Tensor:
        """(B, n_cat) per-table row ids -> global row ids of the concatenated tables."""
        return cat + self.offsets

    def _forward(self, dense: torch.Tensor, inv: torch.Tensor, sub: torch.Tensor) -> torch.Tensor:
        """Logits; ``inv`` (B, n_cat) indexes the rows ``sub`` (the batch's unique embedding rows)."""
        B = dense.shape[0]
        x = self.bottom(dense)
        e = sub.index_select(0, inv.reshape(-1)).view(B, self.n_cat, -1)
        z = torch.cat([x.unsqueeze(1), e], dim=1)
        inter = torch.bmm(z, z.transpose(1, 2)).flatten(1).index_select(1, self.tri_flat)
        return self.top(torch.cat([x, inter], dim=1)).squeeze(1)

    def train_step(self, dense: torch.Tensor, grows: torch.Tensor, label: torch.Tensor) -> float:
        """One step on a batch (``grows`` global row ids (B, n_cat)); returns the loss."""
        uniq, inv = torch.unique(grows, return_inverse=True)
        return self.train_step_unique(dense, uniq, inv, label)

    def train_step_unique(
        self, dense: torch.Tensor, uniq: torch.Tensor, inv: torch.Tensor, label: torch.Tensor
    ) -> float:
        """:meth:`train_step` given ``torch.unique(grows, return_inverse=True)`` of the batch."""
        sub = self.emb[uniq].requires_grad_(True)
        logit = self._forward(dense, inv, sub)
        loss = F.binary_cross_entropy_with_logits(logit, label)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        g = sub.grad
        assert g is not None, "backward() filled the gradient of sub (a leaf the loss depends on)"
        lr = self.cfg.emb_lr
        with torch.no_grad():
            if self.cfg.emb_optimizer == "rowwise_adagrad":
                st = self.emb_state[uniq] + g.pow(2).mean(dim=1)
                self.emb_state[uniq] = st
                self.emb[uniq] = sub.detach() - lr * g / (st.sqrt() + 1e-8).unsqueeze(1)
            else:
                self.emb[uniq] = sub.detach() - lr * g
        return float(loss.detach())

    @torch.no_grad()
    def predict(self, dense: torch.Tensor, grows: torch.Tensor, batch: int = 8192) -> np.ndarray:
        """Click probabilities (float64) of the samples, ``batch`` at a time, without gradients."""
        out = []
        dev = self.emb.device
        for a in range(0, dense.shape[0], batch):
            g = grows[a : a + batch].to(dev)
            uniq, inv = torch.unique(g, return_inverse=True)
            x = dense[a : a + batch].to(dev)
            out.append(torch.sigmoid(self._forward(x, inv, self.emb[uniq])))
        return torch.cat(out).cpu().numpy().astype(np.float64)

    def state_tensors(self) -> dict[str, torch.Tensor]:
        """Every trained value (for exact comparisons)."""
        d = {k: v.detach().clone() for k, v in self.state_dict().items()}
        d["emb"] = self.emb.clone()
        d["emb_state"] = self.emb_state.clone()
        return d
