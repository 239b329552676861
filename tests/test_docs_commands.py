"""The commands that the README and the docs show work, and the outputs pasted beside them are current.

``docs/gen_outputs.py`` reads the documents (``gen_outputs.DOCS``: the README, the how-tos,
concepts.md, calibration.md): every ```` ```sh ```` block is a list of commands, and a
```` ```text ```` block under an ``<!-- output -->`` marker is what the command before it (or its own
``$`` lines) prints. Each document's steps run in order in a scratch folder (the repository's
top-level folders linked in), exactly as ``python docs/gen_outputs.py --check`` runs them:

* a command must exit 0, or 2 when the doc shows its ``Error:`` line;
* a marked output must match what the command prints now (numbers within the block's relative
  tolerance, 1e-6 unless the marker says otherwise); a stale one fails, naming the file, the line
  and the first line that differs. ``python docs/gen_outputs.py --write`` regenerates them.

Steps the doc marks ``long=`` (too slow for the suite), ``skip=`` (a remote cluster, a process
killed mid-run) or ``needs=`` (the public traces of ``../shared``, torch, Dask) where this machine
lacks it are skipped with the doc's reason. The fast tests below check the markers themselves.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _load_generator():
    spec = importlib.util.spec_from_file_location(
        "_cprsim_gen_outputs", ROOT / "docs" / "gen_outputs.py"
    )
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


gen = _load_generator()
DOCS = [ROOT / d for d in gen.DOCS]


def _steps(doc: Path) -> list:
    try:
        return gen.parse(doc)
    except gen.MarkerError:
        return []  # test_markers_parse says why


def _params() -> list:
    params = []
    for doc in DOCS:
        for i, step in enumerate(_steps(doc)):
            if step.kind == "file":
                continue
            needs = set(filter(None, step.options.get("needs", "").split(",")))
            marks = [pytest.mark.slow]
            if "shared" in needs:
                marks.append(pytest.mark.shared)
            if "torch" in needs:
                marks.append(pytest.mark.dlrm)
            params.append(pytest.param(doc, i, id=step.where, marks=marks))
    return params


#: documents run two at a time (each one's steps in order, in its own scratch folder)
WORKERS = 2


@cache
def _pool() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="docs")


@cache
def _results(doc: Path) -> Future:
    """Every step of one document, run once for all its tests (a future: the run starts now)."""
    return _pool().submit(lambda: tuple(gen.run_doc(doc)))


@pytest.fixture(scope="session")
def _prefetch(request: pytest.FixtureRequest) -> Iterator[None]:
    """Start the selected documents' runs at once, in the order the tests will ask for them."""
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "doc" in callspec.params and "index" in callspec.params:
            _results(callspec.params["doc"])
    yield
    _pool().shutdown(wait=True, cancel_futures=True)


@pytest.mark.parametrize(("doc", "index"), _params())
def test_doc_step(doc: Path, index: int, _prefetch: None) -> None:
    result = _results(doc).result()[index]
    if result.status == "skipped":
        pytest.skip(f"{result.step.where}: {result.message}")
    assert result.status == "ok", (
        f"{result.step.where}: {result.status}: {result.step.label}\n{result.message}\n"
        f"(`python docs/gen_outputs.py --write {gen._rel(doc)}` regenerates the outputs; a failed "
        "command is a bug in the doc or in the code)"
    )


# ---- the markers themselves (fast) ----


@pytest.mark.parametrize("doc", DOCS, ids=[gen._rel(d) for d in DOCS])
def test_markers_parse(doc: Path) -> None:
    steps = gen.parse(doc)  # raises MarkerError naming the file and the line
    assert any(s.kind != "file" for s in steps) or doc.name in {"concepts.md", "calibration.md"}


@pytest.mark.parametrize("doc", DOCS, ids=[gen._rel(d) for d in DOCS])
def test_every_transcript_is_marked(doc: Path) -> None:
    """A pasted ``$ command`` with its output is either checked or says why it is not."""
    unmarked = [
        f"{gen._rel(doc)}:{f.start + 1}"
        for f in gen.fences(doc)
        if f.lang == "text" and f.body and f.body[0].startswith("$ ") and f.kind != "output"
    ]
    assert not unmarked, f"transcripts without an <!-- output --> marker: {unmarked}"


def test_commands_need_nothing_beside_the_repository_unless_marked() -> None:
    problems = []
    for doc in DOCS:
        for step in _steps(doc):
            text = step.text + "".join(c.code for c in step.commands)
            needs = step.options.get("needs", "")
            if re.search(r"/work/|/home/|/Users/", text):
                problems.append(f"{step.where}: an absolute developer path: {step.label}")
            if "shared" in text.replace("CPRSIM_SHARED", "") and "shared" not in needs:
                if "traces/public" in text:
                    problems.append(f"{step.where}: reads the public traces without needs=shared")
    assert not problems, "\n".join(problems)


def test_readme_says_where_the_public_traces_come_from() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "not in this repository" in text and "CPRSIM_SHARED" in text
    shared = [
        s for s in _steps(ROOT / "README.md") if any("traces/public" in c.code for c in s.commands)
    ]
    assert shared and all("shared" in s.options.get("needs", "") for s in shared)


def test_numbers_compare_within_the_relative_tolerance() -> None:
    same = gen.same_line
    assert same("overhead 1.26% ±0.23", "overhead 1.26% ±0.23", 0.0)
    assert same("x 0.05088916561534223", "x 0.05088916692177529", 1e-6)
    assert not same("x 0.05088916561534223", "x 0.0509", 1e-6)
    assert not same("PLS 0.118 / 0.235", "PLS 0.118 / 0.236", 1e-6)
    assert same("│  1.01% │", "│ 1.010% │", 1e-6)  # widths and padding may move
    assert same("took 20.1 s", "took 25.3 s", 0.5)
    assert not same("took 20.1 s", "took 20.1 min", 0.5)
    assert not same("3 points", "3 points done", 1e-6)
    assert gen.first_difference(["a 1", "b"], ["a 1"], 1e-6) == 1
    assert (
        gen.first_difference(["fitted 2026-11-23"], ["fitted 2026-12-01"], 0, r"\d+-\d+-\d+")
        is None
    )


def test_keep_elides_and_follows_wrapped_paragraphs() -> None:
    lines = [
        "title",
        "│ a │",
        "│ b │",
        "note: one",
        "  goes on",
        "note: two",
        "Recommendation: x",
        "y",
    ]
    assert gen.shape(lines, {"keep": "^│ b"}) == ["…", "│ b │", "…"]
    assert gen.shape(lines, {"keep": "^note: one", "paragraphs": "1"}) == [
        "…",
        "note: one",
        "  goes on",
        "…",
    ]
    assert gen.shape(lines, {"keep": "^Recommendation", "paragraphs": "1"})[-2:] == [
        "Recommendation: x",
        "y",
    ]
    assert gen.shape(lines, {"head": "2"}) == ["title", "│ a │", "…"]


def test_shell_blocks_split_into_commands() -> None:
    body = [
        "# a comment",
        "cprsim plan toy \\",
        "    -n 40   # trailing comment",
        'python -c "import json',
        'print(1)"',
        "",
        "cprsim scenarios",
    ]
    assert gen.split_commands(body) == [
        "cprsim plan toy \\\n    -n 40   # trailing comment",
        'python -c "import json\nprint(1)"',
        "cprsim scenarios",
    ]
