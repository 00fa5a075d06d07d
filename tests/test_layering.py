"""The package layering of DESIGN.md §2: nothing imports upward or sideways.

cluster ← binder ← {sharding, batch_scheduler, agent_scheduler} ← caldera.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ALLOWED = {
    "cluster": {"cluster"},
    "binder": {"cluster", "binder"},
    "sharding": {"cluster", "binder", "sharding"},
    "batch_scheduler": {"cluster", "binder", "batch_scheduler"},
    "agent_scheduler": {"cluster", "binder", "agent_scheduler"},
    "caldera": set(ALL := {"cluster", "binder", "sharding", "batch_scheduler", "agent_scheduler", "caldera"}),
}


def imported_packages(path: Path) -> set[tuple[str, int]]:
    out = set()
    for n in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(n, ast.Import):
            out |= {(a.name.split(".")[0], n.lineno) for a in n.names}
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            out.add((n.module.split(".")[0], n.lineno))
    return out


def violations() -> list[str]:
    found = []
    for package, allowed in ALLOWED.items():
        for path in sorted((ROOT / package).rglob("*.py")):
            for name, line in imported_packages(path):
                if name in ALL and name not in allowed:
                    found.append(f"{path.relative_to(ROOT)}:{line} imports {name}")
    return found


def test_no_package_imports_above_or_beside_itself() -> None:
    assert violations() == []


def test_the_check_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import binder.commit\nfrom caldera.cli import main\n")
    assert imported_packages(bad) == {("binder", 1), ("caldera", 2)}
