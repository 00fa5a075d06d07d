"""The product code type-checks under mypy --strict (configured in pyproject.toml), and pyflakes finds nothing."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_mypy_strict_is_clean() -> None:
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-m", "mypy"], cwd=root, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr


def test_no_unused_or_undefined_names() -> None:
    root = Path(__file__).resolve().parent.parent
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--select", "F", "--no-cache",
                        "cluster", "binder", "sharding", "batch_scheduler", "agent_scheduler", "caldera", "tests"],
                       cwd=root, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
