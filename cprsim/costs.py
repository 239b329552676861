"""Checkpoint cost models: bytes to seconds.

All nodes write their part of a checkpoint in parallel. The embedding bytes move through the
embedding servers only (each its shard, ``N_e`` node links) and the dense part through the
trainers; both share the storage's aggregate bandwidth, so a transfer takes the longest of the
three bottlenecks, plus a fixed latency:

* save      ``delta = latency + max((E + D) m / write, E m / (N_e node), D m / node)``
  (one trainer writes the dense part)
* full load ``L = latency + max((E + N_t D) m / read, E m / (N_e node), D m / node)``
  (every trainer reads its own copy of the dense part)
* a sharded dense model (``cluster.dense = "sharded"``): each trainer saves and loads its
  ``D m / N_t``, which is read once: ``D m / node`` becomes ``D m / (N_t node)`` and ``N_t D`` is ``D``
  (no embedding servers: ``E = 0``)
* shard load (k servers at once) ``latency + k * E * m / N_e / min(read, k * node)``
* trainer restore: the dense parameters copied from a peer trainer, ``D * m / node``
* measured costs in the scenario's ``[costs]`` table replace the derived ones;
  a save of a fraction of the embedding rows costs ``latency + (delta - latency) x bytes share``
* two-phase: a snapshot stall ``(E * m / N_e) / snapshot`` (largest per-node state into memory),
  then a background persist that takes ``delta``.

``E`` embedding bytes, ``D`` dense bytes, ``m`` optimizer-state multiplier.
"""

from __future__ import annotations

from dataclasses import dataclass

from cprsim.scenario import GB, Scenario


@dataclass(frozen=True, slots=True)
class Costs:
    """A scenario's checkpoint costs (:func:`checkpoint_costs`): ``save_s`` (a blocking full
    save, or a two-phase persist), ``snapshot_s`` (a two-phase stall), ``load_s`` (every node
    reloads), ``dense_copy_s`` (seconds); ``shard_load_s(k)`` (k embedding shards restored at once,
    seconds); bytes (``embedding_bytes``, ``dense_bytes``, ``shard_bytes``, ``trainer_bytes``) and
    bandwidths (``read_bps``, ``node_bps``: bytes/s)."""

    save_s: float  #: blocking full checkpoint (or background persist in two-phase mode)
    snapshot_s: float  #: two-phase stall
    load_s: float  #: every node reloads the last checkpoint
    shard_bytes: float
    embedding_bytes: float
    dense_bytes: float
    latency_s: float
    read_bps: float
    node_bps: float
    dense_copy_s: float  #: a replaced trainer copies the dense part from a peer
    shard_load_fixed: float | None = None  #: a measured shard load (then k shards load in parallel)
    #: what one trainer saves and restores (the dense part, or its shard of it)
    trainer_bytes: float = 0.0

    def shard_load_s(self, k: int = 1) -> float:
        """k embedding shards restored at once from storage."""
        if self.shard_load_fixed is not None:
            return self.shard_load_fixed
        return self.latency_s + k * self.shard_bytes / min(self.read_bps, k * self.node_bps)

    def save_fraction_s(self, fraction: float, dense: bool = True) -> float:
        """A save of ``fraction`` of the embedding bytes (plus the dense part): latency + bytes/bw."""
        b = fraction * self.embedding_bytes + (self.dense_bytes if dense else 0.0)
        return self.latency_s + (self.save_s - self.latency_s) * b / self.bytes_total

    @property
    def bytes_total(self) -> float:
        """Bytes of a full checkpoint: embedding and dense parts, optimizer state included."""
        return self.embedding_bytes + self.dense_bytes


def costs_of(s: Scenario) -> Costs:
    """The scenario's checkpoint costs from its sizes and bandwidths (module docstring), the
    measured ones of its ``[costs]`` table replacing the derived ones."""
    c, st = s.cluster, s.storage
    m = c.optimizer_multiplier
    emb = c.embedding_gb * GB * m
    dense = c.dense_gb * GB * m
    node = st.node_gbps * GB
    ne, nt = c.embedding_servers, c.trainers
    shard = emb / ne if ne else 0.0
    if (
        c.dense == "sharded"
    ):  # each trainer holds (saves, loads) its 1/N_t of the dense part; no copy
        per_trainer, dense_read = dense / nt, dense
    else:  # one trainer writes the dense part; every trainer reads its own copy
        per_trainer, dense_read = dense, nt * dense
    per_server = emb / (ne * node) if ne else 0.0  # seconds for one server's shard over its link
    save = st.latency_s + max((emb + dense) / (st.write_gbps * GB), per_server, per_trainer / node)
    load = st.latency_s + max(
        (emb + dense_read) / (st.read_gbps * GB), per_server, per_trainer / node
    )
    snap = max(shard, per_trainer) / (s.checkpoint.snapshot_gbps * GB)
    o = s.costs
    return Costs(
        save_s=o.save_s if o.save_s is not None else save,
        snapshot_s=o.snapshot_s if o.snapshot_s is not None else snap,
        load_s=o.load_s if o.load_s is not None else load,
        shard_bytes=shard,
        embedding_bytes=emb,
        dense_bytes=dense,
        latency_s=st.latency_s,
        read_bps=st.read_gbps * GB,
        node_bps=node,
        dense_copy_s=dense / node,
        trainer_bytes=per_trainer,
        shard_load_fixed=o.shard_load_s,
    )
