"""experiments/: every ``run.sh`` works end to end, and its README's generated tables splice in.

Each experiment runs in quick mode (``QUICK=1``: every script, cprsim command and plot of the full
run, on tiny sizes) into ``tmp_path`` (``OUT``), with this interpreter (``PYTHON``) and 2 worker
processes (``JOBS``); it must exit 0, write every expected file (not empty), leave the committed
tree alone (its README included), and produce every file its README's ``<!-- begin generated:
... -->`` markers name, so that ``experiments/update_readmes.py`` splices a copy of the README.
The four quick runs take about 2-3 minutes on 2 cores (marked slow). The helpers
(``update_readmes.py``, ``quick_sweep.py``) are also tested on their own, quickly.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXPERIMENTS = ROOT / "experiments"

#: what each quick run must write under OUT (beyond the files its README's markers name)
EXPECTED = {
    "cpr_production": [
        "headline.csv",
        "headline.md",
        "headline.png",
        "validation.md",
        "sweep/summary.csv",
        "sweep/results.csv",
        "overhead_vs_interval.png",
        "ckpt_overhead_vs_interval.png",
        "pls_vs_interval.png",
        "breakdown_0.7h.png",
        "mfu_gap.csv",
        "run.md",
    ],
    "lifecycle": [
        *(f"{s}/summary.csv" for s in ("pools", "escalation", "detection", "health", "cures")),
        *(f"{s}/results.csv.gz" for s in ("llm-blocking", "llm-tiered", "llm-standbys")),
        "feasibility/summary.csv",
        "simulate-dlrm-spares/summary.json",
        "simulate-llm-16k-gpus/summary.json",
        "plan-llm-16k-gpus.json",
        "breakdown_detection_0.7h.png",
        "overhead_detection_30min.png",
        "breakdown_llm_tiered_0.04h.png",
        *(f"{f}.png" for f in ("pools", "escalation", "detection", "health", "llm_ettr")),
        "badput_dlrm.png",
        "badput_llm.png",
        "tables.md",
        "run.log",
        "run.md",
    ],
    "strategy_comparison": [
        "comparison.csv",
        "comparison.md",
        "overhead.png",
        "pls.png",
        "memory_recovery.png",
        "sweep/summary.csv",
        "sweep_overhead_vs_interval.png",
        "sweep_pls_vs_interval.png",
        "sweep_breakdown_1.2h.png",
        "ecrec.csv",
        "ecrec.md",
        "run.md",
    ],
    "what_if": [
        "sweep/summary.csv",
        "sweep-hosts/summary.csv",
        *(
            f"{kind}_mtbf{m}h_write{w}gbps.png"
            for kind in ("overhead", "pls")
            for m in (10, 5)
            for w in (10, 5)
        ),
        "breakdown_0.7h.png",
        "hosts_overhead_mtbf50h_write10gbps.png",
        "hosts_overhead_mtbf25h_write10gbps.png",
        "run.md",
    ],
}


def _load(name: str) -> ModuleType:
    """Import experiments/NAME.py (not a package) as a module."""
    spec = importlib.util.spec_from_file_location(f"experiments_{name}", EXPERIMENTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _tree(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under ``folder`` but caches and out/ (a full run's, maybe running now): its size
    and modification time."""
    return {
        str(rel): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in folder.rglob("*")
        if p.is_file()
        and "__pycache__" not in (rel := p.relative_to(folder)).parts
        and rel.parts[0] != "out"
    }


def test_every_experiment_is_covered() -> None:
    """A new experiment gets its expected files here (and so its quick run)."""
    found = {p.parent.name for p in EXPERIMENTS.glob("*/run.sh")}
    assert found == set(EXPECTED)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_quick_run(name: str, tmp_path: Path) -> None:
    """QUICK=1 run.sh into tmp_path: exit 0, every expected and every marked file written, the
    committed tree untouched, and the README's generated blocks splice from the outputs."""
    folder = EXPERIMENTS / name
    before = _tree(folder)
    out = tmp_path / "out"
    env = {**os.environ, "QUICK": "1", "OUT": str(out), "PYTHON": sys.executable, "JOBS": "2"}
    r = subprocess.run(
        ["bash", str(folder / "run.sh")],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert r.returncode == 0, f"stdout:\n{r.stdout[-4000:]}\nstderr:\n{r.stderr[-4000:]}"
    for f in EXPECTED[name]:
        p = out / f
        assert p.is_file() and p.stat().st_size > 0, f"{name}: {f} missing or empty"
    assert "QUICK=1" in (out / "run.md").read_text()
    assert _tree(folder) == before, f"{name}: the quick run wrote into {folder}"

    ur = _load("update_readmes")
    readme = tmp_path / "README.md"
    readme.write_text((folder / "README.md").read_text())
    blocks = ur.markers(readme.read_text())
    assert blocks, f"{name}: README.md has no generated block"
    assert ur.main(["--out-dir", str(out), str(readme)]) == 0
    text = readme.read_text()
    for _, _, path in blocks:
        assert (out / Path(path).relative_to("out")).read_text().strip() in text
    assert ur.splice(readme, out) == text  # a second splice changes nothing


def test_update_readmes_splices_between_markers(tmp_path: Path) -> None:
    """The text between the markers is replaced by the file's; the rest stays byte for byte."""
    ur = _load("update_readmes")
    (tmp_path / "out" / "tables").mkdir(parents=True)
    (tmp_path / "out" / "tables" / "a.md").write_text("| a |\n|---|\n| 1 |\n")
    readme = tmp_path / "README.md"
    readme.write_text(
        "# T\n\nbefore\n<!-- begin generated: out/tables/a.md (run.sh) -->\nold\n"
        "<!-- end generated -->\nafter\n"
    )
    assert ur.main([str(readme)]) == 0
    assert readme.read_text() == (
        "# T\n\nbefore\n<!-- begin generated: out/tables/a.md (run.sh) -->\n\n| a |\n|---|\n| 1 |\n"
        "\n<!-- end generated -->\nafter\n"
    )
    assert not list(tmp_path.glob(".README.md.*"))  # no temporary left
    assert ur.main([str(readme)]) == 0  # idempotent
    assert "| 1 |" in readme.read_text() and "old" not in readme.read_text()


@pytest.mark.parametrize(
    "text, error",
    [
        ("<!-- begin generated: out/missing.md (x) -->\n<!-- end generated -->\n", "missing"),
        ("<!-- begin generated: out/a.md (x) -->\n", "without an end"),
        ("<!-- end generated -->\n", "without a begin"),
        ("<!-- begin generated: ../a.md (x) -->\n<!-- end generated -->\n", "not under out/"),
        (
            "<!-- begin generated: out/a.md -->\n<!-- begin generated: out/a.md -->\n"
            "<!-- end generated -->\n",
            "inside",
        ),
    ],
)
def test_update_readmes_refuses_bad_markers(
    tmp_path: Path, text: str, error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A missing file or unbalanced markers: exit 1, a message naming it, the README unchanged."""
    ur = _load("update_readmes")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "a.md").write_text("x\n")
    readme = tmp_path / "README.md"
    readme.write_text(text)
    assert ur.main([str(readme)]) == 1
    assert error in capsys.readouterr().err
    assert readme.read_text() == text


def test_quick_sweep_rewrites_grid_replications_and_scenario(tmp_path: Path) -> None:
    """quick_sweep.py: the replications, grid values and [plan] keys given; a relative scenario
    path made absolute (or moved to --scenario-dir); a key the file lacks is an error."""
    qs = _load("quick_sweep")
    src = EXPERIMENTS / "lifecycle" / "pools.toml"
    dest = tmp_path / "q.toml"
    qs.main([str(src), str(dest), "replications=2", "lifecycle.spares=0,8"])
    doc = tomllib.loads(dest.read_text())
    assert doc["replications"] == 2
    assert doc["grid"]["lifecycle.spares"] == [0, 8]
    assert doc["grid"]["lifecycle.standbys"] == [0, 1, 2, 4, 8]
    assert (
        Path(doc["scenario"])
        == EXPERIMENTS / "lifecycle" / "scenarios" / "dlrm-spares-noretire.toml"
    )
    qs.main([str(src), str(dest), "--scenario-dir", str(tmp_path), "replications=2"])
    assert tomllib.loads(dest.read_text())["scenario"] == str(
        tmp_path / "dlrm-spares-noretire.toml"
    )
    cpr = EXPERIMENTS / "cpr_production" / "sweep.toml"
    qs.main([str(cpr), str(dest), "plan.replications=30", "checkpoint.interval_h=0.7"])
    doc = tomllib.loads(dest.read_text())
    assert doc["plan"]["replications"] == 30 and doc["scenario"] == "cpr-production"
    with pytest.raises(SystemExit, match="no grid key"):
        qs.main([str(src), str(dest), "lifecycle.nope=1"])
