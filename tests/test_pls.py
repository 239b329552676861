"""The PLS ledger: the one definition of lost updates."""

from __future__ import annotations

import numpy as np
import pytest

from cprsim.pls import ShardLedger


def test_updates_lost_once_are_not_lost_again():
    led = ShardLedger(4)
    led.saved(10.0)
    assert led.fail(1, 30.0) == pytest.approx(20.0 / 4)
    assert led.fail(1, 35.0) == pytest.approx(5.0 / 4)  # only what came after the restore
    assert led.pls(100.0) == pytest.approx(25.0 / 4 / 100)


def test_tiers_weight_losses_by_their_share_of_updates():
    led = ShardLedger(2, tiers=(0.9, 0.1))
    led.saved(50.0, tier=0)  # hot rows saved at 50, cold rows only at 0
    assert led.fail(0, 60.0) == pytest.approx(0.5 * (0.9 * 10 + 0.1 * 60))


def test_a_late_commit_never_moves_a_restored_shard_back():
    led = ShardLedger(2)
    led.fail(0, 40.0)  # restored at 40
    led.saved(30.0)  # a snapshot taken at 30 becomes durable later
    np.testing.assert_array_equal(led.markers[0], [40.0, 30.0])


def test_pending_saves_give_the_markers_an_eager_ledger_would():
    """Saves of every shard (all tiers, or one tier) are held as pending floors; interleaved with
    per-shard saves, failures and rollbacks they give the same losses and markers as applying each
    save at once."""
    rng = np.random.default_rng(5)
    tiers = np.array([0.7, 0.2, 0.1])
    led = ShardLedger(5, tiers=tuple(tiers))
    eager = np.zeros((3, 5))
    lost = 0.0
    p = 0.0
    for _ in range(400):
        p += float(rng.uniform(0.0, 3.0))
        op = rng.integers(5)
        if op == 0:
            led.saved(p)
            eager = np.maximum(eager, p)
        elif op == 1:
            t = int(rng.integers(3))
            led.saved(p, tier=t)
            eager[t] = np.maximum(eager[t], p)
        elif op == 2:
            sh = int(rng.integers(5))
            led.saved(p, shards=sh)
            eager[:, sh] = np.maximum(eager[:, sh], p)
        elif op == 3:
            sh = int(rng.integers(5))
            want = 0.2 * float(np.dot(tiers, np.maximum(0.0, p - eager[:, sh])))
            assert led.fail(sh, p) == pytest.approx(want, rel=1e-12, abs=1e-12)
            lost += want
            eager[:, sh] = p
        elif rng.uniform() < 0.1:
            led.rollback(p)
            eager[:] = p
            lost = led.lost  # a rollback forgives what comes after it (tested above)
        if rng.uniform() < 0.2:
            np.testing.assert_array_equal(led.markers, eager)
    assert led.lost == pytest.approx(lost)


@pytest.mark.parametrize(
    "bad",
    [
        dict(n_shards=0),
        dict(n_shards=2, weights=np.array([0.8, 0.8])),
        dict(n_shards=2, tiers=(0.5, 0.6)),
    ],
)
def test_bad_ledgers_are_refused(bad):
    with pytest.raises(ValueError):
        ShardLedger(**bad)
