"""One replication's timeline (cprsim.timeline: the Perfetto trace and the Gantt chart): job-level
interruptions on their own track, and each failed node's real down span."""

from __future__ import annotations

import json

import pytest

from cprsim import scenario as sc
from cprsim.plots.gantt import plot_timeline
from cprsim.sim.engine import simulate_one
from cprsim.timeline import spans

#: the track of job-level interruptions
JOB_LEVEL = "job-level"


def test_job_level_interruptions_have_their_own_track_never_a_phantom_server(tmp_path, cli):
    """cpr-production (20 trainers, 18 servers) with job-level interruptions: each is a down span on
    track ``job-level`` (from the failure to the restart), in the event log as node -1; no track is
    named after a node that does not exist (before: ``embedding 18``, the job's pseudo node)."""
    jobbed = {"failures.job": {"family": "exponential", "mtbf_h": 10.0}}
    s = sc.load("cpr-production", jobbed)
    res, ev = simulate_one(s, 0, record=True)
    assert res.failures_job >= 2
    fails = [e for e in ev if e.kind == "fail" and e.node == -1]
    assert len(fails) == res.failures_job
    sp, _ = spans(ev, s.cluster.trainers)
    nodes = {f"trainer {i}" for i in range(20)} | {f"embedding {j}" for j in range(18)}
    assert {x.track for x in sp} <= {"job", JOB_LEVEL} | nodes
    restart = pytest.approx(300.0)  # the [reschedule] draw: 300 s
    assert [(x.start_s, x.end_s - x.start_s) for x in sp if x.track == JOB_LEVEL] == [
        (e.time_s, restart) for e in fails
    ]
    # the Perfetto trace of `cprsim simulate --timeline`, and the Gantt chart
    out = tmp_path / "t.json"
    job = 'failures.job={family="exponential", mtbf_h=10.0}'
    r = cli("simulate", "cpr-production", "-n", "1", "--timeline", out, "--set", job)
    assert r.exit_code == 0, r.output
    trace = json.loads(out.read_text())["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in trace if e.get("name") == "thread_name"}
    assert JOB_LEVEL in threads.values() and set(threads.values()) <= {"job", JOB_LEVEL} | nodes
    assert len(threads) == len(set(threads.values()))  # a thread per track
    down = [e for e in trace if e.get("ph") == "X" and threads[e["tid"]] == JOB_LEVEL]
    assert len(down) == res.failures_job
    fig = plot_timeline(ev, s.cluster.trainers)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()][::-1]  # top down
    assert labels[:2] == ["job", JOB_LEVEL] and set(labels) <= {"job", JOB_LEVEL} | nodes


def test_with_a_lifecycle_the_down_spans_are_the_nodes_real_ones():
    """The hand-computed lifecycle of tests/test_lifecycle.py (detection 60 s, one standby swapped
    in in 100 s, one spare selected in 500 s): node 2 fails at 1,000 s and is back at 1,160 s, node
    3 fails at 1,100 s and is back at 1,660 s; a job-level interruption at 20,000 s is detected
    after 60 s and restarts in 100 s. The down spans are those, not the [reschedule] draws (0 s
    here); the results are not changed by recording."""
    s = sc.validate(
        {
            "name": "t",
            "seed": 3,
            "cluster": {"trainers": 2, "embedding_servers": 4, "embedding_gb": 30.0},
            "job": {"duration_h": 10.0},
            "storage": {"write_gbps": 1.0, "read_gbps": 2.0, "latency_s": 3.0},
            "reschedule": {"family": "constant", "mean_s": 100.0},
            "checkpoint": {"interval_h": 1.0},
            "costs": {"save_s": 10.0, "load_s": 20.0},
            "lifecycle": {
                "detection": {"mean_s": 60.0},
                "standbys": 1,
                "swap": {"mean_s": 100.0},
                "spares": 1,
                "select": {"mean_s": 500.0},
                "repair": {"auto": {"mean_s": 1000.0}},
            },
        },
        "test",
    )
    job = 2 + 4  # the job's pseudo node
    sched = [(1000.0, (2,), (0.0,)), (1100.0, (3,), (0.0,)), (20000.0, (job,), (100.0,))]
    res, ev = simulate_one(s, 0, record=True, schedule=sched)
    assert res == simulate_one(s, 0, schedule=sched)[0]
    assert res.reschedule_s == pytest.approx(660.0 + 160.0)
    sp, _ = spans(ev, 2)
    down = sorted((x.track, x.start_s, x.end_s) for x in sp if x.name == "down")
    assert down == [
        ("embedding 0", 1000.0, pytest.approx(1160.0)),
        ("embedding 1", 1100.0, pytest.approx(1660.0)),
        (JOB_LEVEL, 20000.0, pytest.approx(20160.0)),
    ]
    assert [(e.node, e.value) for e in ev if e.kind == "back"] == [
        (2, pytest.approx(1160.0)),
        (3, pytest.approx(1660.0)),
    ]


def test_a_node_not_back_by_the_end_is_down_until_the_end_of_the_log():
    """Partial recovery trains on while a failed trainer waits for its machine; the job ends
    before the repair does: its down span ends with the log, never at infinity."""
    s = sc.validate(
        {
            "name": "t",
            "seed": 3,
            "cluster": {"trainers": 2, "embedding_servers": 4, "embedding_gb": 30.0},
            "job": {"duration_h": 10.0},
            "storage": {"write_gbps": 1.0, "read_gbps": 2.0, "latency_s": 3.0},
            "reschedule": {"family": "constant", "mean_s": 100.0},
            "checkpoint": {"interval_h": 1.0},
            "costs": {"save_s": 10.0, "load_s": 20.0},
            "strategy": {"name": "partial"},
            "lifecycle": {"select": {"mean_s": 200.0}, "repair": {"auto": {"mean_s": 1e6}}},
        },
        "test",
    )
    _, ev = simulate_one(s, 0, record=True, schedule=[(1000.0, (0,), (0.0,))])
    assert not any(e.kind == "back" for e in ev)
    sp, _ = spans(ev, 2)
    assert [(x.track, x.start_s, x.end_s) for x in sp if x.name == "down"] == [
        ("trainer 0", 1000.0, ev[-1].time_s)
    ]
    assert ev[-1].kind == "done"
