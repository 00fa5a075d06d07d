"""The layering of DESIGN.md §2, checked on the import statements of every product module.

Between top-level packages: cluster ← binder ← {sharding, batch_scheduler, agent_scheduler}
← caldera. Inside ``cluster``: model ← store ← nodeview; runtime, kube and sim above them.
Third-party boundaries: only ``agent_scheduler/actors.py`` imports ray, only
``cluster/kube/`` imports kubernetes, only ``cluster/store/`` and ``binder/`` import redis;
and ``cluster/nodeview`` does not reach redis even through another module of ours.
Imports under ``TYPE_CHECKING`` count: a cycle hidden there is still a cycle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OURS = ("cluster", "binder", "sharding", "batch_scheduler", "agent_scheduler", "caldera")
PACKAGES = {
    "cluster": {"cluster"},
    "binder": {"cluster", "binder"},
    "sharding": {"cluster", "binder", "sharding"},
    "batch_scheduler": {"cluster", "binder", "batch_scheduler"},
    "agent_scheduler": {"cluster", "binder", "agent_scheduler"},
    "caldera": set(OURS),
}
# Inside cluster: what each sub-package may import of cluster (prefixes of module names).
CLUSTER = {
    "cluster.model": ("cluster.model",),
    "cluster.store": ("cluster.model", "cluster.store"),
    "cluster.nodeview": ("cluster.model", "cluster.store.records", "cluster.store.keys", "cluster.nodeview"),
    "cluster.runtime": ("cluster.model", "cluster.store", "cluster.runtime"),
    "cluster.kube": ("cluster.model", "cluster.store", "cluster.runtime", "cluster.kube"),
    "cluster.sim": ("cluster.model", "cluster.store", "cluster.nodeview", "cluster.sim"),
}
# Third-party libraries and the only modules (prefixes) that may import them.
LIBRARIES = {
    "ray": ("agent_scheduler.actors",),
    "kubernetes": ("cluster.kube",),
    "redis": ("cluster.store", "binder"),
}
IO_LIBRARIES = ("redis", "kubernetes", "ray", "aiohttp", "uvloop", "prometheus_client", "asyncio", "socket")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> Iterator[tuple[str, int]]:
    """(imported module, line) for every absolute import in the file."""
    for n in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(n, ast.Import):
            for a in n.names:
                yield a.name, n.lineno
        elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
            yield n.module, n.lineno
            # ``from cluster.model import labels`` imports the module cluster.model.labels
            for a in n.names:
                yield f"{n.module}.{a.name}", n.lineno


def within(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


def product_modules(root: Path = ROOT) -> dict[str, Path]:
    return {module_name(p, root): p for package in OURS for p in sorted((root / package).rglob("*.py"))}


def existing(name: str, modules: dict[str, Path]) -> str | None:
    """The module of ours that an imported dotted name refers to (a name may end in an attribute)."""
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def violations(root: Path = ROOT) -> list[str]:
    modules = product_modules(root)
    found = []
    for mod, path in modules.items():
        where = f"{path.relative_to(root)}"
        top = mod.split(".")[0]
        sub = ".".join(mod.split(".")[:2]) if top == "cluster" else None
        # ``from cluster.runtime import heartbeat`` names the package and the module: judge the module
        targets = [(existing(name, modules), line) for name, line in imports(path)]
        shadowed = {(t.rpartition(".")[0], line) for t, line in targets if t is not None}
        for name, line in imports(path):
            first = name.split(".")[0]
            if first in OURS:
                target = existing(name, modules)
                if target is None or (target, line) in shadowed:
                    continue
                if first not in PACKAGES[top]:
                    found.append(f"{where}:{line} imports {target} ({top} may not import {first})")
                elif sub in CLUSTER and first == "cluster" and target != "cluster" and not within(target, CLUSTER[sub]):
                    found.append(f"{where}:{line} imports {target} ({sub} may import only {', '.join(CLUSTER[sub])})")
            elif first in LIBRARIES and not within(mod, LIBRARIES[first]):
                found.append(f"{where}:{line} imports {first} (only {', '.join(LIBRARIES[first])} may)")
            elif sub == "cluster.model" and first in IO_LIBRARIES:
                found.append(f"{where}:{line} imports {first} (cluster.model does no I/O)")
    return sorted(set(found))


def reaches(start: str, library: str, root: Path = ROOT) -> list[str]:
    """An import chain from module ``start`` to ``library``, or [] when there is none."""
    modules = product_modules(root)
    seen: dict[str, str | None] = {start: None}
    todo = [start]
    while todo:
        mod = todo.pop()
        for name, _ in imports(modules[mod]):
            if name.split(".")[0] == library:
                chain = [library, mod]
                while (parent := seen[chain[-1]]) is not None:
                    chain.append(parent)
                return chain[::-1]
            target = existing(name, modules)
            if target is not None and target not in seen:
                seen[target] = mod
                todo.append(target)
    return []


def test_no_module_imports_above_or_beside_its_layer() -> None:
    assert violations() == []


def test_the_node_view_never_reaches_redis_even_indirectly() -> None:
    for mod in product_modules():
        if within(mod, ("cluster.nodeview",)):
            assert reaches(mod, "redis") == [], mod


def test_the_checks_see_a_violation(tmp_path: Path) -> None:
    """Break the contracts on purpose in a copy of the tree: each break is named."""
    for package in OURS:
        for p in (ROOT / package).rglob("*.py"):
            dest = tmp_path / p.relative_to(ROOT)
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(p.read_text())
    assert violations(tmp_path) == []
    (tmp_path / "cluster/nodeview/bad.py").write_text("import redis\nfrom cluster.store.store import Store\n")
    (tmp_path / "cluster/model/bad.py").write_text("from cluster.runtime import heartbeat\nimport asyncio\n")
    (tmp_path / "binder/bad.py").write_text("import ray\nfrom kubernetes import client\nfrom caldera.cli import main\n")
    (tmp_path / "cluster/nodeview/sneaky.py").write_text("from cluster.nodeview import bad\n")
    assert violations(tmp_path) == [
        "binder/bad.py:1 imports ray (only agent_scheduler.actors may)",
        "binder/bad.py:2 imports kubernetes (only cluster.kube may)",
        "binder/bad.py:3 imports caldera.cli (binder may not import caldera)",
        "cluster/model/bad.py:1 imports cluster.runtime.heartbeat (cluster.model may import only cluster.model)",
        "cluster/model/bad.py:2 imports asyncio (cluster.model does no I/O)",
        "cluster/nodeview/bad.py:1 imports redis (only cluster.store, binder may)",
        "cluster/nodeview/bad.py:2 imports cluster.store.store (cluster.nodeview may import only cluster.model, "
        "cluster.store.records, cluster.store.keys, cluster.nodeview)",
    ]
    assert reaches("cluster.nodeview.sneaky", "redis", tmp_path) == [
        "cluster.nodeview.sneaky",
        "cluster.nodeview.bad",
        "redis",
    ]
