"""``cprsim calibrate --device``: where the training runs (tests run on the CPU; the GPU test runs
only where torch sees one)."""

from __future__ import annotations

import dataclasses
import os

import pytest

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
torch = pytest.importorskip("torch")

from cprsim.calibrate import pipeline as P  # noqa: E402
from cprsim.calibrate import runner as R  # noqa: E402
from cprsim.calibrate.calibration import load_calibration  # noqa: E402
from cprsim.errors import InputError  # noqa: E402

pytestmark = pytest.mark.dlrm
GPU = torch.cuda.is_available()
TINY = dataclasses.replace(
    R.PRESETS["quick"],
    name="tiny",
    train_samples=6_000,
    test_samples=2_000,
    batch=256,
    seeds=(0,),
    budgets=(0.25,),
    strategies=("partial", "mfu"),
)


def test_auto_takes_a_gpu_only_where_torch_sees_one():
    assert R.resolve_device("auto") == ("cuda" if GPU else "cpu")
    assert R.resolve_device(" CPU ") == "cpu"
    for bad in ("tpu", "cuda:x", ""):
        with pytest.raises(InputError, match="device"):
            R.resolve_device(bad)


@pytest.mark.skipif(GPU, reason="this machine has a GPU: cuda is accepted")
def test_cuda_without_a_gpu_is_a_one_line_error(cli, one_line_error):
    with pytest.raises(InputError, match="no CUDA GPU"):
        R.resolve_device("cuda")
    line = one_line_error(cli("calibrate", "--device", "cuda", "--out", "/nonexistent/x"))
    assert "--device" in line and "no CUDA GPU" in line
    one_line_error(cli("calibrate", "--device", "tpu"))


def test_the_cpu_keeps_the_fingerprints_of_before_the_device_option():
    """A CPU calibration's fingerprint has no device key: the shipped file (written before the
    option existed, or with it) is still what this code computes for its preset."""
    runs = R.plan_runs(TINY)
    cpu = P.configuration(TINY, runs, 1, None)
    assert "device" not in cpu["preset"]
    gpu = P.configuration(dataclasses.replace(TINY, device="cuda"), runs, 1, None)
    assert gpu["preset"]["device"] == "cuda" and P.fingerprint(gpu) != P.fingerprint(cpu)
    prov = load_calibration().provenance
    if prov.get("torch_version") != torch.__version__ or prov.get("preset") not in R.PRESETS:
        pytest.skip("the shipped calibration was made with another torch or preset")
    # the preset with the file's own seeds (the shipped file extends the preset's 8 to 24)
    p = dataclasses.replace(R.PRESETS[prov["preset"]], seeds=tuple(int(x) for x in prov["seeds"]))
    shipped = P.configuration(p, R.plan_runs(p), int(prov["torch_threads_per_run"]), None)
    assert P.fingerprint(shipped) == prov["fingerprint"]


@pytest.mark.slow
@pytest.mark.skipif(not GPU, reason="torch sees no CUDA GPU here")
def test_a_gpu_run_measures_the_same_pls_and_about_the_same_auc():
    runs = R.plan_runs(TINY)
    for run in runs:
        cpu, _, _ = R.run_one(TINY, run)
        gpu, _, _ = R.run_one(dataclasses.replace(TINY, device="cuda"), run)
        assert gpu.pls == cpu.pls  # the bookkeeping stays on the CPU: exact
        assert gpu.auc == pytest.approx(cpu.auc, abs=2e-3)
