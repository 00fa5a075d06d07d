"""batch_scheduler's modules import one another without a cycle, imports under ``TYPE_CHECKING`` counted.

A cycle hidden behind ``TYPE_CHECKING`` is still a cycle of concepts (the framework knowing
the session that knows the registry that knows the plugins that know the session); the
read-only session view and the registry as a value are what keep it open.
"""

from __future__ import annotations

from pathlib import Path

from tests.test_layering import ROOT, existing, imports, module_name

PACKAGE = "batch_scheduler"


def import_graph(root: Path = ROOT, package: str = PACKAGE) -> dict[str, set[str]]:
    """Each module of ``package`` -> the modules of ``package`` it imports (at run time or for typing)."""
    modules = {module_name(p, root): p for p in sorted((root / package).rglob("*.py"))}
    graph: dict[str, set[str]] = {}
    for mod, path in modules.items():
        targets = {existing(name, modules) for name, _ in imports(path)}
        graph[mod] = {t for t in targets if t is not None and t != mod and t != package}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle as a list of modules (its first module repeated at the end), or []."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(mod: str) -> list[str]:
        state[mod] = 1
        path.append(mod)
        for target in sorted(graph.get(mod, ())):
            if state.get(target) == 1:
                return path[path.index(target) :] + [target]
            if target not in state:
                found = visit(target)
                if found:
                    return found
        path.pop()
        state[mod] = 2
        return []

    for mod in sorted(graph):
        if mod not in state:
            found = visit(mod)
            if found:
                return found
    return []


def test_batch_scheduler_has_no_import_cycle() -> None:
    graph = import_graph()
    assert len(graph) > 30 and "batch_scheduler.session" in graph
    assert find_cycle(graph) == []


def test_a_cycle_behind_type_checking_is_found(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("from pkg.b import B\n")
    (tmp_path / "pkg" / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import c\n"
    )
    (tmp_path / "pkg" / "c.py").write_text("import pkg.a\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph == {"pkg": set(), "pkg.a": {"pkg.b"}, "pkg.b": {"pkg.c"}, "pkg.c": {"pkg.a"}}
    assert find_cycle(graph) == ["pkg.a", "pkg.b", "pkg.c", "pkg.a"]
    (tmp_path / "pkg" / "c.py").write_text("")
    assert find_cycle(import_graph(tmp_path, "pkg")) == []
