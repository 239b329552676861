"""The notebooks in notebooks/: stored without outputs, and each one runs top to bottom.

The execution test starts a Jupyter kernel on *this* interpreter (``sys.executable``, the venv's
python) through a ``python3`` kernelspec in a temporary ``JUPYTER_PATH`` (searched first), so a
``python3`` kernelspec elsewhere (user or system) cannot make the notebooks run on another python.
The kernel's working directory is ``notebooks/``, as in Jupyter.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")

NB_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOKS = sorted(NB_DIR.glob("*.ipynb"))
EXPECTED = {"quickstart.ipynb", "operator_whatif.ipynb", "calibration.ipynb"}
CELL_TIMEOUT_S = 300


def test_the_notebooks_are_there() -> None:
    assert {p.name for p in NOTEBOOKS} >= EXPECTED


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_without_outputs(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    assert nb.nbformat == 4
    assert nb.metadata.get("kernelspec", {}).get("name") == "python3"
    assert nb.cells and nb.cells[0].cell_type == "markdown" and nb.cells[0].source.startswith("# ")
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        where = f"{path.name}: cell {i}"
        assert cell.outputs == [], f"{where} has stored outputs (clear them before committing)"
        assert cell.execution_count is None, f"{where} has an execution count"
        assert "execution" not in cell.metadata, f"{where} has execution timing metadata"


@pytest.fixture(scope="module")
def kernel_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A JUPYTER_PATH whose ``python3`` kernel is this interpreter."""
    root = tmp_path_factory.mktemp("jupyter")
    spec = root / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "Python 3 (cprsim tests)",
                "language": "python",
            }
        )
    )
    return root


@pytest.mark.slow
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path: Path, kernel_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    monkeypatch.setenv("JUPYTER_PATH", str(kernel_dir))
    monkeypatch.delenv("MPLBACKEND", raising=False)
    nb = nbformat.read(path, as_version=4)
    # first, in memory only: check that the kernel is this interpreter
    probe = nbformat.v4.new_code_cell(
        f"import sys\nassert sys.prefix == {sys.prefix!r}, (sys.executable, sys.prefix)"
    )
    nb.cells.insert(0, probe)
    before = sorted(p.name for p in NB_DIR.iterdir())
    client = nbclient.NotebookClient(
        nb,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NB_DIR)}},
    )
    client.execute()  # raises CellExecutionError, naming the cell, on any error
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            assert out.output_type != "error", f"{path.name}: cell {i - 1}: {out.get('ename')}"
    # the notebooks write only to temporary directories
    assert sorted(p.name for p in NB_DIR.iterdir()) == before
