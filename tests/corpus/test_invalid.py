"""The invalid corpus: manifests Kubernetes or Volcano would refuse, each refused by `caldera dry-run` by name.

Each file of ``invalid/`` says on its first line what it stands for (a file of Volcano's
``example/invalid_jobs/`` at release-1.14, or a case of caldera's own), then one
``# refused: TEXT`` line per refusal it must get: the dry-run exits 2, prints no placement,
and prints exactly one error line per refusal, each naming the file and containing its TEXT.
The Volcano Job cases are refused by cluster.model.volcano_admission, the rest by cluster.model.manifests'
checks (schema, admission, queue admission, references across the files).
"""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
from pathlib import Path

import pytest

from caldera.cli import main

INVALID = Path(__file__).with_name("invalid")
FILES = sorted(INVALID.glob("*.yaml"))
VOLCANO_INVALID_JOBS = (
    "duplicatedPolicyEvent-webhook-deny.yaml",
    "duplicatedTaskName-webhook-deny.yaml",
    "minAvailable-webhook-deny.yaml",
)
Run = subprocess.CompletedProcess[str]


def header(path: Path, key: str) -> list[str]:
    prefix = f"# {key}: "
    return [line[len(prefix) :].strip() for line in path.read_text().splitlines() if line.startswith(prefix)]


def dry_run(path: Path) -> Run:
    """``caldera dry-run -f PATH -o json`` in this process (the command's own entry point; one file runs
    as a subprocess too, below): a subprocess per file spent most of its second importing."""
    argv = ["dry-run", "-f", str(path), "-o", "json"]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


@pytest.fixture(scope="module")
def runs() -> dict[Path, Run]:
    return {path: dry_run(path) for path in FILES}


def test_a_refusal_is_the_same_from_the_command_line() -> None:
    path = FILES[0]
    r = subprocess.run(
        [sys.executable, "-m", "caldera", "dry-run", "-f", str(path), "-o", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    inside = dry_run(path)
    assert (r.returncode, r.stdout, r.stderr) == (inside.returncode, inside.stdout, inside.stderr) and r.returncode == 2


def test_the_corpus_stands_for_every_invalid_job_of_volcano() -> None:
    firsts = [path.read_text().splitlines()[0] for path in FILES]
    assert all(f.startswith(("# Stands for Volcano's example/", "# caldera's own")) for f in firsts)
    for name in VOLCANO_INVALID_JOBS:
        assert any(f"example/invalid_jobs/{name}" in f for f in firsts), name
    assert all(header(path, "refused") for path in FILES)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_refused_by_name_with_exit_2_and_nothing_placed(path: Path, runs: dict[Path, Run]) -> None:
    r = runs[path]
    expected = header(path, "refused")
    lines = r.stderr.splitlines()
    prefix = f"caldera dry-run: error: {path}: "
    matched = (
        r.returncode == 2
        and r.stdout == ""
        and len(lines) == len(expected)
        and all(line.startswith(prefix) for line in lines)
        and all(any(text in line for line in lines) for text in expected)
    )
    assert matched, f"exit {r.returncode}, stdout {r.stdout[:200]!r}\nexpected {expected}\ngot {lines}"
