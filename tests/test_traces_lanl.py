"""Failure logs read right: never-failed nodes counted, filters on any column, failure-to-failure times.

The small logs here are written by the tests, with answers worked out by hand: the exponential
MLE under right-censoring is (total time at risk) / (failures), so a reader that drops the
nodes that never failed (or mis-sizes their windows) gives a different, checkable number.
"""

from __future__ import annotations

import csv
import io
import json

import numpy as np
import pytest

from cprsim.errors import InputError
from cprsim.failures.fit import fit_family
from cprsim.failures.traces import OTHER, column_key, read_trace

LANL_HEADER = [
    "System",
    "machine type",
    "nodes",
    "procstot",
    "procsinnode",
    "nodenum",
    "nodenumz",
    "node install",
    "node prod",
    "node decom",
    "fru type",
    "mem",
    "cputype",
    "memtype",
    "num intercon",
    "purpose",
    "Prob Started (mm/dd/yy hh:mm)",
    "Prob Fixed (mm/dd/yy hh:mm)",
    "Down Time",
    "Facilities",
    "Hardware",
    "Human Error",
    "Network",
    "Undetermined",
    "Software",
    "Same Event",
]
CAUSES = ("Facilities", "Hardware", "Human Error", "Network", "Undetermined", "Software")


def lanl_row(
    system,
    nodes,
    nodenum,
    started,
    fixed,
    cause="Hardware",
    detail="Memory Dimm",
    *,
    prod="1-Jan",
    decom="current",
    purpose="compute",
    machine="cluster",
):
    row = dict.fromkeys(LANL_HEADER, "")
    row.update(
        {
            "System": system,
            "machine type": machine,
            "nodes": str(nodes),
            "procstot": str(2 * nodes),
            "procsinnode": "2",
            "nodenum": str(nodenum),
            "nodenumz": str(nodenum),
            "node install": prod,
            "node prod": prod,
            "node decom": decom,
            "fru type": "part",
            "mem": "4",
            "cputype": "1",
            "memtype": "1",
            "num intercon": "1",
            "purpose": purpose,
            "Prob Started (mm/dd/yy hh:mm)": started,
            "Prob Fixed (mm/dd/yy hh:mm)": fixed,
            "Down Time": "0",
            cause: detail,
            "Same Event": "No",
        }
    )
    return row


def write_lanl(path, rows):
    buf = io.StringIO()
    w = csv.DictWriter(buf, LANL_HEADER, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    path.write_text(buf.getvalue())
    return path


# The small log: everything starts in production in January 2001 (hour 0 = 1/1/2001 00:00) and the
# log ends at its last repair, 1/11/2001 00:00 = 240 h. System 1 has 4 nodes of which 2 fail;
# system 2 has 2 nodes of which 1 fails: 3 nodes never fail.
SMALL = [
    lanl_row("1", 4, 0, "1/2/2001 0:00", "1/2/2001 2:00"),  # 24 h .. 26 h
    lanl_row("1", 4, 0, "1/5/2001 0:00", "1/5/2001 6:00", "Software", "Kernel"),  # 96 h .. 102 h
    lanl_row("1", 4, 1, "1/3/2001 12:00", "1/3/2001 13:00"),  # 60 h .. 61 h
    lanl_row("2", 2, 0, "1/10/2001 0:00", "1/11/2001 0:00", "Network", "Switch"),  # 216 h .. 240 h
]
END_H = 240.0
DOWN_H = 2 + 6 + 1 + 24
NODES = 4 + 2


@pytest.fixture()
def small(tmp_path):
    return write_lanl(tmp_path / "lanl.csv", SMALL)


def test_never_failed_nodes_enter_censored_and_the_exponential_mle_is_exposure_over_failures(small):
    tr = read_trace(small, "lanl")
    assert (
        tr.counts["never_failed_nodes"] == 3
        and tr.counts["failed_nodes"] == 3
        and len(tr.nodes) == NODES
    )
    t, obs = tr.lifetimes()
    # every node is at risk for its whole window except while down: 6 nodes x 240 h - 33 h down
    exposure = NODES * END_H - DOWN_H
    assert t.sum() == pytest.approx(exposure, rel=1e-12) and obs.sum() == 4
    f = fit_family("exponential", t, obs)
    assert f.scale_ == pytest.approx(
        exposure / 4, rel=1e-12
    )  # 351.75 h; leaving them out gives 171.75 h
    # the never-failed nodes are whole windows, censored
    never = [h for name, h in tr.nodes.items() if "never-failed" in name]
    assert len(never) == 3 and all(
        h.start == 0.0 and h.end == END_H and not h.events for h in never
    )
    assert sorted(t[~obs].tolist()) == sorted([240 - 102, 240 - 61, 240.0, 240.0, 240.0])


def test_cli_fit_counts_them_as_censored(small, tmp_path, cli):
    rep = tmp_path / "rep.json"
    r = cli("fit", small, "--format", "lanl", "--bootstrap", "0", "--json", "--report", rep)
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["n"] == 9 and d["events"] == 4 and d["censored"] == 5
    assert d["counts"]["never_failed_nodes"] == 3
    expo = next(f for f in d["fits"] if f["family"] == "exponential")
    assert expo["scale"] == pytest.approx((NODES * END_H - DOWN_H) / 4, rel=1e-12)
    assert json.loads(rep.read_text())["censored"] == 5
    table = cli("fit", small, "--format", "lanl", "--bootstrap", "0")
    assert table.exit_code == 0 and "9 lifetimes, 4 failures, 5 censored" in table.output
    assert "3 never failed" in table.output


def test_system_window_month_precision_and_the_end_of_the_log(tmp_path):
    """Never-failed nodes take the system's window: its earliest production month to its latest
    decommission month (whole months), never past the end of the log."""
    p = write_lanl(
        tmp_path / "w.csv",
        [
            # system 5: node 0 in production Dec 2000 .. Jan 2001 (decommissioned during January)
            lanl_row("5", 3, 0, "12/15/2000 0:00", "12/15/2000 1:00", prod="Dec-00", decom="1-Jan"),
            lanl_row("5", 3, 1, "1/10/2001 0:00", "1/10/2001 1:00", prod="1-Jan", decom="1-Jan"),
            # system 7: decommissioned after the log ends: the end of the log
            lanl_row("7", 2, 0, "2/1/2001 0:00", "2/1/2001 1:00", prod="1-Jan", decom="1-Dec"),
            # system 6 makes the log end on 3/1/2001 01:00
            lanl_row("6", 1, 0, "2/28/2001 0:00", "3/1/2001 1:00", prod="1-Jan"),
        ],
    )
    tr = read_trace(p, "lanl")
    dec1, jan1, feb1, mar1_1am = 0.0, 31 * 24.0, 62 * 24.0, (62 + 28) * 24.0 + 1
    assert (tr.nodes["5/0"].start, tr.nodes["5/0"].end) == (dec1, feb1)
    assert (tr.nodes["5/1"].start, tr.nodes["5/1"].end) == (jan1, feb1)
    n5 = tr.nodes["5/never-failed-0000"]
    assert (n5.start, n5.end) == (dec1, feb1)
    n7 = tr.nodes["7/never-failed-0000"]
    assert (n7.start, n7.end) == (jan1, mar1_1am)
    assert tr.counts["never_failed_nodes"] == 2 and tr.counts["end_of_log"] == "2001-03-01 01:00"


def test_node_filters_apply_to_never_failed_nodes_only_where_the_log_says(tmp_path):
    p = write_lanl(
        tmp_path / "f.csv",
        [
            *SMALL,
            # system 3: 5 nodes, its logged nodes differ in purpose, so the 3 that never failed have no known purpose
            lanl_row("3", 5, 0, "1/4/2001 0:00", "1/4/2001 1:00", purpose="compute"),
            lanl_row("3", 5, 1, "1/6/2001 0:00", "1/6/2001 1:00", purpose="graphics.fe"),
        ],
    )
    all_ = read_trace(p, "lanl")
    assert all_.counts["never_failed_nodes"] == 6
    comp = read_trace(p, "lanl", {"purpose": "compute"})
    # systems 1 and 2 are all compute (their never-failed nodes too); system 3's never-failed are unknown
    assert sorted(comp.nodes) == [
        "1/0",
        "1/1",
        "1/never-failed-0000",
        "1/never-failed-0001",
        "2/0",
        "2/never-failed-0000",
        "3/0",
    ]
    assert comp.counts["never_failed_unknown"] == 3
    one = read_trace(p, "lanl", {"System": "1", "nodenum": "0"})
    assert list(one.nodes) == ["1/0"]  # a node number picks a node, never the anonymous ones
    sys1 = read_trace(p, "lanl", {"system": "1"})
    assert sorted(sys1.nodes) == ["1/0", "1/1", "1/never-failed-0000", "1/never-failed-0001"]
    by_name = read_trace(p, "lanl", {"Machine Type": "cluster", "node_prod": "1-jan"})
    assert len(by_name.nodes) == len(all_.nodes)  # normalised column names, values ignore case
    assert read_trace(p, "lanl", {"node": "3/1"}).nodes.keys() == {"3/1"}


def test_failure_filters_are_competing_risks_and_keep_every_node(small):
    """cause=hardware: the software and network failures end up-times censored and their repairs
    bring the node back; system 2 (only a network failure) stays, with its never-failed node."""
    tr = read_trace(small, "lanl", {"cause": "hardware"})
    assert len(tr.nodes) == NODES
    t, obs = tr.lifetimes()
    assert sorted(zip(t.tolist(), obs.tolist())) == sorted(
        [
            (24.0, True),
            (70.0, False),
            (138.0, False),  # 1/0: the software failure at 96 h is censored
            (60.0, True),
            (179.0, False),  # 1/1
            (240.0, False),
            (240.0, False),  # 1/never-failed-*
            (216.0, False),  # 2/0: network failure, censored; down to the end
            (240.0, False),  # 2/never-failed-0000
        ]
    )
    assert [e for _, e, _ in tr.nodes["2/0"].events] == [OTHER, "repair"]
    # a raw cause column: an exact (case-insensitive) match on the record's text
    kern = read_trace(small, "lanl", {"software": "KERNEL"})
    assert kern.n_failures() == 1


def test_unknown_columns_are_one_line_errors_listing_the_columns(
    small, tmp_path, one_line_error, cli
):
    line = one_line_error(cli("fit", small, "--format", "lanl", "--filter", "sistem=1"))
    assert "sistem" in line and "system" in line and "nodenum" in line and "purpose" in line
    csvf = tmp_path / "t.csv"
    csvf.write_text("node,node_type,event,time_h,cause\na,node,fail,5,disk\n")
    line = one_line_error(cli("fit", csvf, "--filter", "level=hardware"))
    assert "Error: --filter level: not a column of --format csv (columns: " in line
    assert "node_type" in line and "cause" in line
    # the library names its parameters (the command line, its options)
    with pytest.raises(InputError, match=r"^filters system: not a column of `format` titan"):
        read_trace(csvf, "titan", {"system": "1"})
    # a documented column the file lacks is refused too, not ignored
    short = tmp_path / "short.csv"
    rows = [{k: v for k, v in r.items() if k != "purpose"} for r in SMALL]
    buf = io.StringIO()
    w = csv.DictWriter(buf, [h for h in LANL_HEADER if h != "purpose"], lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    short.write_text(buf.getvalue())
    assert "purpose" in one_line_error(
        cli("fit", short, "--format", "lanl", "--filter", "purpose=compute")
    )
    assert column_key("Prob Started (mm/dd/yy hh:mm)") == "prob_started"


def test_generic_filters_on_the_other_formats(tmp_path):
    csvf = tmp_path / "t.csv"
    csvf.write_text(
        "node,node_type,event,time_h,cause\na,node,fail,5,disk\nb,node,fail,7,psu\nb,node,repair,8,\n"
    )
    assert list(read_trace(csvf, "csv", {"node": "B"}).nodes) == ["b"]
    titan = tmp_path / "titan.csv"
    head = "SN,time,nlife,nloc,last,col,row,cage,slot,node,max_loc_events,time_max_loc,dbe,dbe_loc,otb,otb_loc,out,batch,days,years,dead,dead_otb,dead_dbe\n"
    rows = [
        ("g1", 3600 * 10, 1, 2, "old", "TRUE", "FALSE", "TRUE"),
        ("g2", 3600 * 20, 1, 3, "new", "FALSE", "FALSE", "FALSE"),
        ("g3", 3600 * 30, 2, 3, "old", "TRUE", "TRUE", "FALSE"),
    ]
    titan.write_text(
        head
        + "".join(
            f"{sn},{t},1,1,x,{col},{row},0,1,0,0,1,0,,0,,FALSE,{b},1,1,{d},{otb},{dbe}\n"
            for sn, t, col, row, b, d, otb, dbe in rows
        )
    )
    old = read_trace(titan, "titan", {"batch": "old"})
    assert len(old.nodes) == 2 and old.n_failures() == 2
    loc = read_trace(titan, "titan", {"location": "c1-3c0s1n0"})
    assert [h.node for h in loc.nodes.values()] == ["g2"]
    dbe = read_trace(titan, "titan", {"cause": "dbe", "batch": "old"})
    assert dbe.n_failures() == 1
    with pytest.raises(InputError, match="dbe and otb"):
        read_trace(titan, "titan", {"cause": "fire"})
    philly = tmp_path / "jobs.json"
    att = lambda *s: [
        {"start_time": f"2017-10-01 0{a}:00:00", "end_time": f"2017-10-01 0{b}:00:00"} for a, b in s
    ]
    philly.write_text(
        json.dumps(
            [
                {"id": "j1", "num_gpus": 8, "attempts": att((0, 1), (2, 3))},
                {"id": "j2", "num_gpus": 4, "attempts": att((0, 5))},
            ]
        )
    )
    assert list(read_trace(philly, "philly", {"num_gpus": "4"}).nodes) == ["j2"]
    assert list(read_trace(philly, "philly", {"min_gpus": "5"}).nodes) == ["j1"]
    with pytest.raises(InputError, match="min_gpus"):
        read_trace(philly, "philly", {"min_gpus": "many"})
    ihbd = tmp_path / "fault_trace.json"
    ev = lambda n, t, k: {
        "node_id": n,
        "event_time": t,
        "event_type": k,
        "fault_type": {"Level": "Hardware Failure", "Class": "GPU", "Desc": "x"},
    }
    ihbd.write_text(
        json.dumps(
            [ev("n1", 1, "fault_start"), ev("n2", 2, "fault_start"), ev("n1", 3, "fault_end")]
        )
    )
    both = read_trace(ihbd, "infinitehbd", None, 5)
    assert len(both.nodes) == 5 and both.counts["never_failed_nodes"] == 3
    assert list(read_trace(ihbd, "infinitehbd", {"node": "n2"}, 5).nodes) == ["n2"]


def test_failure_to_failure_times_on_a_hand_made_log(tmp_path, cli):
    f = tmp_path / "t.csv"
    f.write_text(
        "node,node_type,event,time_h,cause\n"
        "a,node,start,10,\n"
        "a,node,fail,20,disk\n"
        "a,node,fail,22,disk\n"  # strikes while a is down: a failure start all the same
        "a,node,repair,25,\n"
        "a,node,fail,40,psu\n"  # another cause (filtered out below)
        "a,node,repair,41,\n"
        "a,node,fail,60,disk\n"
        "a,node,repair,70,\n"
        "a,node,end,100,\n"
        "b,node,start,0,\n"
        "b,node,end,100,\n"
    )  # never fails
    tr = read_trace(f, "csv")
    t, obs = tr.failure_intervals()
    assert sorted(zip(t.tolist(), obs.tolist())) == sorted(
        [
            (10.0, True),
            (2.0, True),
            (18.0, True),
            (20.0, True),
            (40.0, False),  # a: from 10 h; last censored
            (100.0, False),
        ]
    )  # b: its whole window
    r2f, r2f_obs = tr.lifetimes()
    assert sorted(zip(r2f.tolist(), r2f_obs.tolist())) == sorted(
        [(10.0, True), (15.0, True), (19.0, True), (30.0, False), (100.0, False)]
    )
    disk = read_trace(f, "csv", {"cause": "disk"})
    t2, obs2 = disk.failure_intervals()
    assert sorted(zip(t2.tolist(), obs2.tolist())) == sorted(
        [(10.0, True), (2.0, True), (18.0, False), (20.0, True), (40.0, False), (100.0, False)]
    )
    r = cli("fit", f, "--interarrival", "failure-to-failure", "--bootstrap", "0", "--json")
    assert r.exit_code == 0, r.output
    d = json.loads(r.output)
    assert d["interarrival"] == "failure-to-failure" and d["n"] == 6 and d["events"] == 4
    expo = next(x for x in d["fits"] if x["family"] == "exponential")
    assert expo["scale"] == pytest.approx(190.0 / 4, rel=1e-12)
    default = json.loads(cli("fit", f, "--bootstrap", "0", "--json").output)
    assert default["interarrival"] == "repair-to-failure" and default["n"] == 5


def test_repairs_get_the_full_ranking_printed_and_in_the_report(small, tmp_path, cli):
    rep = tmp_path / "r.json"
    r = cli("fit", small, "--format", "lanl", "--bootstrap", "0", "--report", rep)
    assert r.exit_code == 0, r.output
    d = json.loads(rep.read_text())
    fams = [f["family"] for f in d["repairs"]["fits"]]
    assert len(fams) >= 4 and len(set(fams)) == len(fams)
    aics = [f["aic"] for f in d["repairs"]["fits"]]
    assert aics == sorted(aics) and d["repairs"]["n"] == 4 and d["repairs"]["events"] == 4
    expo = next(f for f in d["repairs"]["fits"] if f["family"] == "exponential")
    assert expo["scale"] == pytest.approx(DOWN_H / 4, rel=1e-12)
    out = r.output
    assert "repairs: 4" in out and all(
        out.count(f) >= 2 for f in fams
    )  # each family in both tables


# -- the public LANL log ------------------------------------------------------------------------------------
@pytest.mark.slow
@pytest.mark.shared
def test_the_public_lanl_log_counts_each_systems_nodes(public_traces):
    tr = read_trace(public_traces / "SimEDC" / "trace.csv", "lanl", {"system": "20"})
    assert tr.counts["per_system"]["20"] == {"in_log": 400, "nodes": 512}
    assert tr.counts["never_failed_nodes"] == 112 and len(tr.nodes) == 512
    t, obs = tr.lifetimes()
    assert (~obs).sum() == 512 and obs.sum() == 2463
    with_them = fit_family("weibull", t, obs)
    failed_only = {k: h for k, h in tr.nodes.items() if "never-failed" not in k}
    t0, obs0 = type(tr)(failed_only, tr.source).lifetimes()
    without = fit_family("weibull", t0, obs0)
    # leaving the 112 out shortens the mean (the issue saw 8,392 h against 12,640 h); the exponential
    # MLE with censoring is exposure / failures, so the never-failed windows enter it exactly
    assert without.mean_ < with_them.mean_
    for tt, oo in ((t, obs), (t0, obs0)):
        assert fit_family("exponential", tt, oo).mean_ == pytest.approx(
            tt.sum() / oo.sum(), rel=1e-6
        )
    assert t.sum() - t0.sum() > 0 and obs.sum() == obs0.sum()  # more exposure, the same failures
    whole = read_trace(public_traces / "SimEDC" / "trace.csv", "lanl")
    assert whole.counts["systems_without_node_count"] == ["17"]
    assert whole.counts["never_failed_nodes"] == sum(
        v["nodes"] - v["in_log"]
        for v in whole.counts["per_system"].values()
        if v["nodes"] is not None
    )
    assert np.isclose(
        sum(h.end - h.start for h in whole.nodes.values()),
        whole.lifetimes()[0].sum() + whole.repairs()[0].sum(),
        rtol=0.02,
    )
