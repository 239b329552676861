"""Tiered (Gemini-style) checkpoints: costs, tiers of a restore, and a brute-force reference.

The base spec: 4 nodes of one type, bytes (400, 200, 200, 200), r = 1, stride 1 (peers
0->1->2->3->0). snapshot_s = 1 + 400/100 = 5, replicate_s = 400/100 = 4 (memory-ready 9 s after
the snapshot starts), persist_s = 10 + max(1000/50, 4) = 30, storage_restore_s = 10 +
max(1000/100, 4) = 20, memory_restore_s([1]) = 1 + 200/100 = 3, shard storage [1]: 10 + 2 = 12.
"""

from __future__ import annotations

import heapq
import random

import numpy as np
import pytest

from cprsim.sim.tiers import Restore, TierSpec, TierState


def spec(bytes_=(400, 200, 200, 200), groups=None, replicas=1, stride=1, k=1, **kw) -> TierSpec:
    a = dict(
        snapshot_bps=100.0,
        memory_latency_s=1.0,
        node_bps=100.0,
        write_bps=50.0,
        read_bps=100.0,
        storage_latency_s=10.0,
    )
    a.update(kw)
    return TierSpec(
        np.array(bytes_, float),
        groups or ((0, len(bytes_)),),
        replicas,
        stride,
        persist_every=k,
        **a,
    )


def snaps(st: TierState, times, step=100.0) -> None:
    """Snapshots at ``times`` of progress 100, 200, ... (training s)."""
    for j, t in enumerate(times, 1):
        assert st.snapshot(t, step * j) == st.spec.snapshot_s


# -- costs ---------------------------------------------------------------------------------------
def test_cost_formulas_by_hand():
    s = spec()
    assert (s.snapshot_s, s.replicate_s, s.persist_s, s.storage_restore_s) == (5.0, 4.0, 30.0, 20.0)
    assert s.memory_restore_s([]) == 0.0 and s.memory_restore_s([1]) == 3.0
    assert s.memory_restore_s([0, 1]) == 5.0
    assert s.shard_storage_restore_s([1]) == 12.0
    assert s.shard_storage_restore_s([0, 1]) == 10.0 + 600 / 100  # min(read 100, 2 x node 100)
    assert spec(replicas=3).replicate_s == 12.0
    fast = spec(write_bps=1000.0, read_bps=1000.0)  # one node's link is the bottleneck
    assert fast.persist_s == 10.0 + 4.0 and fast.storage_restore_s == 14.0
    assert fast.shard_storage_restore_s([1, 2]) == 10.0 + 400 / 200


def test_peers_stay_in_their_group():
    s = spec((1,) * 8, groups=((0, 1), (1, 7)), replicas=2, stride=3)
    assert s.peers(0) == ()  # alone in its type
    assert s.peers(1) == (4, 7) and s.peers(6) == (2, 5)  # 1 + (5 + 3) % 7 = 2, 1 + (5 + 6) % 7 = 5
    assert spec(replicas=5).peers(0) == (1, 2, 3)  # no repeats, never itself
    assert spec((1, 1), stride=2, replicas=2).peers(0) == ()  # stride x m = 0 (mod 2): itself


@pytest.mark.parametrize(
    "bad",
    [
        dict(groups=((0, 3),)),
        dict(groups=((1, 4),)),
        dict(replicas=-1),
        dict(stride=0),
        dict(k=0),
        dict(node_bps=0.0),
        dict(bytes_=(1, -1, 1, 1)),
    ],
)
def test_bad_specs_are_refused(bad):
    with pytest.raises(ValueError):
        spec(**bad)


def test_time_cannot_go_back():
    st = TierState(spec())
    st.snapshot(10.0, 1.0)
    with pytest.raises(ValueError):
        st.lost(0, 5.0)


# -- memory tier -----------------------------------------------------------------------------------
def test_a_node_failing_while_its_peer_is_up_restores_from_memory():
    st = TierState(spec())
    snaps(st, [0.0, 20.0])  # memory-ready at 9 and 29
    st.lost(1, 40.0)
    assert st.restore(45.0, [1]) == Restore("memory", 200.0, 3.0)
    assert st.restore(45.0) == Restore("memory", 200.0, 3.0)  # lost() is enough
    assert st.memory_progress(45.0) == 200.0


def test_no_loss_rolls_back_locally_for_free():
    st = TierState(spec())
    snaps(st, [0.0])
    assert st.restore(9.0) == Restore("memory", 100.0, 0.0)  # memory-ready at 9 exactly: usable


def test_a_failure_before_replication_ends_uses_the_previous_snapshot():
    st = TierState(spec())
    snaps(st, [0.0, 20.0])
    st.lost(1, 25.0)  # snapshot 2 in flight until 29: aborted
    assert st.restore(30.0) == Restore("memory", 100.0, 3.0)
    assert st.memory_progress(40.0) == 100.0  # it never becomes memory-ready


def test_a_failure_at_the_instant_of_memory_ready_comes_first():
    st = TierState(spec())
    snaps(st, [0.0, 20.0])
    st.lost(2, 29.0)
    assert st.restore(29.0) == Restore("memory", 100.0, 3.0)


def test_a_replaced_node_no_longer_serves_as_a_peer():
    st = TierState(spec())
    snaps(st, [0.0])  # ready 9, persisted 9 -> 39
    st.lost(1, 50.0)
    r = st.restore(50.0, [1])
    assert r == Restore("memory", 100.0, 3.0)
    st.rolled_back(r.progress, r.tier)
    st.lost(0, 60.0)  # its only peer, 1, lost the copy at 50
    assert st.restore(60.0, [0]) == Restore("storage", 100.0, 20.0)
    assert st.shard_restore(60.0, 0).tier == "storage"


def test_zero_byte_nodes_need_nothing():
    st = TierState(spec((0, 200), replicas=0))
    snaps(st, [0.0])
    st.lost(0, 20.0)
    assert st.restore(20.0) == Restore("memory", 100.0, 1.0)  # memory_latency + 0 bytes


# -- storage tier --------------------------------------------------------------------------------
def test_a_domain_failure_reads_the_newest_durable_checkpoint():
    st = TierState(spec(k=3))
    snaps(st, [0.0, 20.0, 40.0, 60.0])  # 3rd ready 49, durable 79
    assert st.durable_progress(78.0) is None and st.durable_progress(79.0) == 300.0
    st.snapshot(80.0, 500.0)
    st.snapshot(100.0, 600.0)  # 6th: ready 109, durable 139
    assert st.durable_progress(138.0) == 300.0 and st.durable_progress(139.0) == 600.0
    st.lost(1, 150.0)
    st.lost(2, 150.0)  # node 1 and its only peer
    assert st.restore(150.0) == Restore("storage", 600.0, 20.0)


def test_a_persist_running_at_the_failure_does_not_count():
    st = TierState(spec(k=3))
    snaps(st, [0.0, 20.0, 40.0, 60.0, 80.0, 100.0])
    st.lost(1, 130.0)  # the 6th persist runs 109 -> 139: cancelled
    st.lost(2, 130.0)
    assert st.restore(200.0) == Restore("storage", 300.0, 20.0)
    assert st.durable_progress(300.0) == 300.0


def test_a_persist_ending_at_the_instant_of_a_failure_does_not_count():
    st = TierState(spec())
    snaps(st, [0.0])  # durable at 39
    st.lost(0, 39.0)
    st.lost(1, 39.0)
    assert st.restore(39.0) == Restore("none", 0.0, 0.0)


def test_persists_queue_behind_each_other():
    st = TierState(spec())
    snaps(st, [0.0, 1.0])  # ready 9 and 10: persists 9 -> 39, then 39 -> 69
    assert st.durable_progress(38.0) is None and st.durable_progress(39.0) == 100.0
    assert st.durable_progress(68.0) == 100.0 and st.durable_progress(69.0) == 200.0


def test_a_newer_persist_replaces_a_queued_one():
    st = TierState(spec())
    snaps(st, [0.0, 1.0, 2.0])  # the 2nd persist (queued behind 9 -> 39) gives way to the 3rd
    assert st.durable_progress(50.0) == 100.0 and st.durable_progress(69.0) == 300.0


def test_no_snapshot_yet_starts_over():
    st = TierState(spec())
    assert st.restore(5.0) == Restore("none", 0.0, 0.0)
    snaps(st, [10.0])
    assert st.restore(18.0, [0]) == Restore("none", 0.0, 0.0)  # not memory-ready before 19
    assert st.shard_restore(18.0, 0) == Restore("none", 0.0, 0.0)
    assert st.durable_progress(18.0) is None and st.memory_progress(18.0) is None


# -- rollbacks -----------------------------------------------------------------------------------
def test_rolled_back_cancels_newer_persists_and_empties_memory():
    st = TierState(spec())
    snaps(st, [0.0, 20.0])  # persists 9 -> 39 (100), 39 -> 69 (200)
    r = st.restore(45.0, [1, 2])  # a domain failure the caller reports here only
    assert r == Restore("storage", 100.0, 20.0)
    st.rolled_back(r.progress, r.tier)
    assert st.durable_progress(100.0) == 100.0  # the persist of 200 never ends
    assert st.memory_progress(100.0) is None
    assert st.restore(100.0) == Restore("storage", 100.0, 20.0)
    st.snapshot(110.0, 150.0)  # ready 119, durable 149
    assert st.memory_progress(119.0) == 150.0 and st.durable_progress(149.0) == 150.0


def test_rolled_back_discards_a_snapshot_in_flight():
    st = TierState(spec())
    snaps(st, [0.0, 20.0])
    r = st.restore(25.0)
    assert r == Restore("memory", 100.0, 0.0)
    st.rolled_back(r.progress, r.tier)
    assert st.memory_progress(40.0) == 100.0 and st.durable_progress(100.0) == 100.0


def test_ordinals_continue_from_the_restored_state():
    st = TierState(spec(k=3))
    snaps(st, [0.0, 20.0, 40.0, 60.0, 80.0])  # 3rd durable at 79
    r = st.restore(90.0)
    assert r == Restore("memory", 500.0, 0.0)
    st.rolled_back(r.progress, r.tier)  # at ordinal 5: the next snapshot is the 6th
    st.snapshot(100.0, 600.0)  # ready 109, durable 139
    assert st.durable_progress(139.0) == 600.0
    st.lost(0, 140.0)
    st.lost(1, 140.0)
    r = st.restore(140.0)
    assert r == Restore("storage", 600.0, 20.0)
    st.rolled_back(r.progress, r.tier)
    snaps(st, [150.0, 170.0, 190.0])  # ordinals 7, 8, 9: only the last persisted, 199 -> 229
    assert st.durable_progress(228.0) == 600.0 and st.durable_progress(229.0) == 300.0


def test_an_aborted_snapshot_takes_no_ordinal():
    st = TierState(spec(k=2))
    snaps(st, [0.0, 20.0])  # 2nd persisted 29 -> 59
    st.snapshot(65.0, 300.0)  # ordinal 3, ready 74
    st.lost(3, 70.0)  # aborted
    st.snapshot(80.0, 400.0)  # ordinal 3 again: not persisted
    st.snapshot(100.0, 500.0)  # ordinal 4: ready 109, durable 139
    assert st.durable_progress(138.0) == 200.0 and st.durable_progress(139.0) == 500.0


# -- partial recovery ----------------------------------------------------------------------------
def test_shard_restore_from_a_peer_or_from_storage():
    st = TierState(spec())
    snaps(st, [0.0])  # durable 39
    st.lost(1, 50.0)
    assert st.shard_restore(50.0, 1) == Restore("memory", 100.0, 3.0)
    st.lost(2, 60.0)  # 1's peer: a second failure of node 1 now reads storage
    st.lost(1, 70.0)
    assert st.shard_restore(70.0, 1) == Restore("storage", 100.0, 12.0)
    assert st.shard_restore(70.0, 3) == Restore("memory", 100.0, 3.0)  # its peer 0 is up


# -- replicas and placement ----------------------------------------------------------------------
def test_no_replicas_means_storage_for_every_failure():
    st = TierState(spec(replicas=0))
    snaps(st, [0.0])  # ready 5, durable 35
    st.lost(3, 40.0)
    assert st.restore(40.0) == Restore("storage", 100.0, 20.0)
    assert st.shard_restore(40.0, 3) == Restore("storage", 100.0, 12.0)


@pytest.mark.parametrize("stride,tier", [(4, "memory"), (1, "storage")])
def test_a_stride_puts_peers_in_another_rack(stride, tier):
    # stall 1 + 1 = 2, memory-ready 3 s after, persist 10 + 800/100 = 18, restore 10 + 8 = 18
    st = TierState(spec((100,) * 8, stride=stride, write_bps=100.0))
    snaps(st, [0.0])
    for i in range(4):  # rack 0..3 fails; with stride 4 their peers are 4..7
        st.lost(i, 30.0)
    r = st.restore(30.0)
    assert r.tier == tier and r.progress == 100.0
    assert r.load_s == (2.0 if tier == "memory" else 10.0 + 8.0)


# -- a brute-force reference ---------------------------------------------------------------------
class Reference:
    """The rules replayed from the full history at every query, every snapshot, persist and loss
    kept: the calls in order, and before each the memory-ready and durable events due (at its
    instant too, except before a loss: a loss comes first)."""

    def __init__(self, s: TierSpec) -> None:
        self.s, self.log = s, []

    def call(self, kind, t, *data):
        self.log.append((kind, t, data))

    def peers(self, i):
        for f, c in self.s.groups:
            if f <= i < f + c:
                r, k = self.s.replicas, self.s.stride
                return {f + (i - f + k * m) % c for m in range(1, r + 1)} - {i}

    def replay(self, now):
        self.log.append(("query", now, ()))  # it fixes what is due at its instant (a loss after it)
        s, heap, seq = self.s, [], 0  # heap: the derived events (memory-ready, durable)

        def events():  # the calls in order; before each, the derived events due (strictly: a loss)
            for kind, t, data in self.log:
                while heap and (heap[0][0] < t or (kind != "lost" and heap[0][0] <= t)):
                    yield heapq.heappop(heap)[::2]
                yield t, kind, data

        snaps, persists, losses = [], [], []  # dicts; (step, node)
        mem = durable = None
        ordinal = 0
        for step, (t, kind, data) in enumerate(events()):
            if kind == "query":
                continue
            if kind == "snap":
                sn = dict(p=data[0], ready=t + s.snapshot_s + s.replicate_s, alive=True, done=False)
                snaps.append(sn)
                seq += 1
                heapq.heappush(heap, (sn["ready"], seq, "ready", 0, (sn,)))
            elif kind == "lost":
                losses.append((step, data[0]))
                for sn in snaps:
                    if not sn["done"]:
                        sn["alive"] = False
                for pe in persists:
                    if not pe["done"]:
                        pe["alive"] = False
            elif kind == "ready":
                sn = data[0]
                if not sn["alive"]:
                    continue
                sn["done"] = True
                ordinal += 1
                mem = dict(p=sn["p"], ord=ordinal, step=step)
                if ordinal % s.persist_every == 0:
                    live = [pe for pe in persists if pe["alive"] and not pe["done"]]
                    if live and live[-1]["start"] > t:
                        live.pop()["alive"] = False
                    start = max(t, live[-1]["end"]) if live else t
                    pe = dict(
                        p=sn["p"],
                        ord=ordinal,
                        start=start,
                        end=start + s.persist_s,
                        alive=True,
                        done=False,
                    )
                    persists.append(pe)
                    seq += 1
                    heapq.heappush(heap, (pe["end"], seq, "durable", 0, (pe,)))
            elif kind == "durable":
                pe = data[0]
                if pe["alive"]:
                    pe["done"] = True
                    durable = dict(p=pe["p"], ord=pe["ord"])
            elif kind == "roll":
                p, tier = data
                for sn in snaps:
                    if not sn["done"] and sn["p"] > p:
                        sn["alive"] = False
                for pe in persists:
                    if not pe["done"] and pe["p"] > p:
                        pe["alive"] = False
                if durable is not None and durable["p"] > p:
                    durable = None
                if tier != "memory" or (mem is not None and mem["p"] > p):
                    mem = None
                base = [x for x in (mem, durable) if x is not None]
                ordinal = max(base, key=lambda x: (x["p"], x["ord"]))["ord"] if base else 0
        return mem, durable, losses

    def restore(self, now, failed):
        s = self.s
        mem, durable, losses = self.replay(now)
        if mem is not None:
            lost = {n for st, n in losses if st > mem["step"]} | set(failed)
            b = s.bytes_per_node
            if all(b[i] == 0 or i not in lost or (self.peers(i) - lost) for i in range(s.n)):
                load = s.memory_latency_s + max(b[i] / s.node_bps for i in lost) if lost else 0.0
                return Restore("memory", mem["p"], load)
        if durable is not None:
            return Restore("storage", durable["p"], s.storage_restore_s)
        return Restore("none", 0.0, 0.0)

    def shard_restore(self, now, node):
        s = self.s
        mem, durable, losses = self.replay(now)
        if mem is not None:
            lost = {n for st, n in losses if st > mem["step"]} | {node}
            if s.bytes_per_node[node] == 0 or self.peers(node) - lost:
                load = s.memory_latency_s + s.bytes_per_node[node] / s.node_bps
                return Restore("memory", mem["p"], load)
        if durable is not None:
            return Restore("storage", durable["p"], s.shard_storage_restore_s([node]))
        return Restore("none", 0.0, 0.0)

    def progress(self, now):
        mem, durable, _ = self.replay(now)
        return (None if durable is None else durable["p"]), (None if mem is None else mem["p"])


def same(a: Restore, b: Restore) -> bool:
    return a.tier == b.tier and a.progress == b.progress and a.load_s == pytest.approx(b.load_s)


def test_random_histories_match_the_brute_force_reference():
    rng = random.Random(20231023)
    kinds = ["memory", "storage", "none"]
    for case in range(300):
        groups = rng.choice([((0, 6),), ((0, 2), (2, 4)), ((0, 3), (3, 3)), ((0, 1), (1, 5))])
        s = spec(
            [rng.choice([0, 100, 200, 200, 300]) for _ in range(6)],
            groups=groups,
            replicas=rng.randint(0, 3),
            stride=rng.randint(1, 3),
            k=rng.randint(1, 3),
        )
        st, ref = TierState(s), Reference(s)
        t = progress = 0.0
        seen = set()
        for _ in range(40):
            t += rng.choice([0, 0, 1, 2, 3, 5, 8, 13, 21])
            u = rng.random()
            if u < 0.35:
                progress += rng.choice([1.0, 5.0, 10.0])
                st.snapshot(t, progress)
                ref.call("snap", t, progress)
            elif u < 0.55:
                node = rng.randrange(6)
                st.lost(node, t)
                ref.call("lost", t, node)
            elif u < 0.72:
                failed = rng.sample(range(6), rng.choice([0, 0, 1, 2]))
                got, want = st.restore(t, failed), ref.restore(t, failed)
                assert same(got, want), (case, got, want)
                seen.add(got.tier)
                if rng.random() < 0.7:
                    st.rolled_back(got.progress, got.tier)
                    ref.call("roll", t, got.progress, got.tier)
                    progress = got.progress
            elif u < 0.86:
                node = rng.randrange(6)
                got, want = st.shard_restore(t, node), ref.shard_restore(t, node)
                assert same(got, want), (case, got, want)
            else:
                assert (st.durable_progress(t), st.memory_progress(t)) == ref.progress(t), case
        kinds = [k for k in kinds if k not in seen]
    assert not kinds  # every tier was exercised
