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
