"""One table of metric metadata (issue 17): every consumer reads it, and it matches the records."""

from __future__ import annotations

import json
from dataclasses import fields

from cprsim import metrics
from cprsim import scenario as sc
from cprsim.plots.style import COMPONENTS, LIFECYCLE_COMPONENTS
from cprsim.report import rows, summary_dict
from cprsim.sim.records import ReplicationResult
from cprsim.sim.replicate import METRICS, run_replications
from cprsim.sweep.results import OPTIONAL


def test_every_metric_is_a_field_of_the_replication_record_and_named_once():
    names = {f.name for f in fields(ReplicationResult)}
    assert set(metrics.NAMES) <= names, set(metrics.NAMES) - names
    assert len(set(metrics.NAMES)) == len(metrics.NAMES)
    assert set(metrics.COMPONENTS) <= set(metrics.NAMES)
    assert METRICS == metrics.NAMES and OPTIONAL == metrics.OPTIONAL


def test_the_terminal_table_shows_each_metric_once_and_only_where_it_applies():
    plain = sc.load("toy")
    full = sc.load("dlrm-spares")  # a node lifecycle, blocking checkpoints
    shown = [k for k, _, _ in rows(plain)]
    assert shown == [m.name for m in metrics.ALL if m.table == "core"]
    with_lifecycle = [k for k, _, _ in rows(full)]
    assert set(with_lifecycle) == {m.name for m in metrics.ALL if m.table in ("core", "lifecycle")}
    assert len(with_lifecycle) == len(set(with_lifecycle))
    # the lifecycle's rows follow rescheduling
    i = with_lifecycle.index("reschedule_s")
    assert with_lifecycle[i + 1 : i + 3] == ["detection_s", "wait_s"]


def test_summary_json_defines_what_the_table_says_needs_a_definition():
    s = sc.load("toy")
    res, _ = run_replications(s, 3)
    d = json.loads(json.dumps(summary_dict(s, res)))
    for m in metrics.ALL:
        assert m.name in d["metrics"]
        if m.definition:
            assert d["definitions"][m.name] == m.definition


def test_the_figures_take_their_labels_from_the_table():
    for key, label, _ in COMPONENTS:
        assert label == metrics.BY_NAME[key].label
    for key, label, _ in LIFECYCLE_COMPONENTS:
        assert key == "replacement_s" or label == metrics.BY_NAME[key].label
