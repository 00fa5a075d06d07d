"""Which fields a Kubernetes object may have: unknown ones refused by name, as ``kubectl apply --validate=strict`` does.

Schemas are OpenAPI v3 as CRDs and Kubernetes' own API publish them. Kubernetes' kinds
(Node, Pod, PriorityClass, Deployment, batch Job, ...) use the API's schemas as the
``kubernetes-validate`` package ships them, read from its data files, offline. Volcano's
and Kubeflow's kinds use caldera's own, ``cluster/schemas/*.yaml`` (see their header).

:meth:`Schemas.check` walks an object beside its schema once and returns :class:`Findings`:
unknown fields (each with the nearest known name), values of the wrong type or out of
range, and what caldera reads beyond the types: the pod templates inside (to check their
pods as pods), the fields that name other objects (a PriorityClass, a Queue), and the
fields placement ignores. Null values must be dropped first (``cluster.model.manifests``).

The mirror does not come here: what the API server sends was already admitted.
"""

from __future__ import annotations

import difflib
import functools
import importlib.util
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import msgspec
import msgspec.inspect
import yaml

Node = Mapping[str, Any]
"""A schema node (parsed JSON/YAML): the edge where untyped data is read."""

_SCHEMAS = Path(__file__).with_name("schemas")
_OWN_FILES = ("volcano.yaml", "kubeflow.yaml")
_KUBERNETES_PACKAGE = "kubernetes_validate"
_REF_PREFIX = "#/$defs/"

# caldera's readings of Kubernetes' definitions, added to them when they are loaded.
_KUBERNETES_TAGS: dict[str, dict[str, object]] = {
    "io.k8s.api.core.v1.PodTemplateSpec": {"x-caldera-pod-template": True},
}
_KUBERNETES_FIELD_TAGS: dict[tuple[str, str], dict[str, object]] = {
    ("io.k8s.api.core.v1.PodSpec", "priorityClassName"): {"x-caldera-refers-to": "PriorityClass"},
}
_TAGS = ("x-caldera-pod-template", "x-caldera-refers-to", "x-caldera-unhonoured")
_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
}


class SchemaError(RuntimeError):
    """The schemas themselves cannot be read (a broken install): not the user's input."""


class Problem(msgspec.Struct, frozen=True):
    """One refusal: the field's path in the object and what is wrong, ``path: problem`` as a line."""

    path: str
    problem: str

    def __str__(self) -> str:
        return f"{self.path}: {self.problem}" if self.path else self.problem


class Reference(msgspec.Struct, frozen=True):
    """A field naming another object: ``kind`` is PriorityClass or Queue."""

    path: str
    kind: str
    name: str


class Template(msgspec.Struct, frozen=True):
    """A pod template inside the object, as written: its pods are checked as pods."""

    path: str
    data: dict[str, Any]


class Findings(msgspec.Struct):
    unknown: list[Problem] = msgspec.field(default_factory=list)
    """Fields the kind does not have: refused before anything else is read."""
    invalid: list[Problem] = msgspec.field(default_factory=list)
    """Values of the wrong type, out of range or not among those allowed."""
    templates: list[Template] = msgspec.field(default_factory=list)
    references: list[Reference] = msgspec.field(default_factory=list)
    unhonoured: list[str] = msgspec.field(default_factory=list)
    """Paths of set fields that caldera's placement ignores (see also cluster.model.unhonoured)."""


def nearest(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name`` (a likely misspelling of it), or None."""
    by_fold = {k.lower(): k for k in known}
    if name.lower() in by_fold:  # only the case differs
        return by_fold[name.lower()]
    close = difflib.get_close_matches(name.lower(), list(by_fold), n=1, cutoff=0.6)
    return by_fold[close[0]] if close else None


def unknown_field(path: str, name: str, known: Iterable[str]) -> Problem:
    """The refusal of an unknown field ``name`` at ``path``, naming the nearest known field."""
    names = sorted(known)
    guess = nearest(name, names)
    if guess is not None:
        return Problem(path, f"unknown field (did you mean {guess}?)")
    if len(names) <= 12:
        return Problem(path, f"unknown field (expected one of: {', '.join(names)})")
    return Problem(path, "unknown field")


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


class Schemas:
    """Schemas by kind, over one set of definitions that ``$ref`` names."""

    def __init__(self, definitions: Mapping[str, Node], kinds: Mapping[str, Node]) -> None:
        self.definitions = definitions
        self.kinds = kinds  # "group/version/Kind" or "group/Kind" (any version); the core group is ""

    @staticmethod
    @functools.cache
    def bundled() -> Schemas:
        """Kubernetes' schemas (the newest kubernetes-validate ships) and caldera's own; read once per process."""
        definitions = dict(_kubernetes_definitions())
        kinds: dict[str, Node] = {}
        for definition_name, node in definitions.items():
            for gvk in node.get("x-kubernetes-group-version-kind", ()):
                kinds[f"{gvk['group']}/{gvk['version']}/{gvk['kind']}"] = {"$ref": definition_name}
                kinds.setdefault(f"{gvk['group']}/{gvk['kind']}", {"$ref": definition_name})
        for name in _OWN_FILES:
            own = yaml.safe_load((_SCHEMAS / name).read_text(encoding="utf-8"))
            definitions.update(own["definitions"])
            kinds.update(own["kinds"])
        return Schemas(definitions, kinds)

    def schema(self, api_version: str, kind: str) -> Node | None:
        """The schema of ``kind`` in ``api_version``; of another version of its group when this one has none."""
        group, _, version = api_version.rpartition("/")
        return self.kinds.get(f"{group}/{version}/{kind}") or self.kinds.get(f"{group}/{kind}")

    def check(self, data: Mapping[str, Any], schema: Node) -> Findings:
        """Walk ``data`` (nulls dropped) beside ``schema``; apiVersion and kind are the caller's."""
        findings = Findings()
        rest = {k: v for k, v in data.items() if k not in ("apiVersion", "kind")}
        self._walk(rest, schema, "", findings)
        return findings

    # -- the walk -------------------------------------------------------------------------

    def _resolve(self, node: Node) -> tuple[Node, dict[str, object]]:
        """Follow ``$ref``s; the target, and caldera's tags met on the way."""
        tags = {k: node[k] for k in _TAGS if k in node}
        seen = 0
        while "$ref" in node:
            name = str(node["$ref"]).removeprefix(_REF_PREFIX)
            target = self.definitions.get(name)
            seen += 1
            if target is None or seen > 64:
                raise SchemaError(f"schema reference {name!r} names no definition")
            node = target
            tags.update({k: node[k] for k in _TAGS if k in node})
        return node, tags

    def _walk(self, value: Any, node: Node, path: str, out: Findings) -> None:
        node, tags = self._resolve(node)
        if tags.get("x-caldera-pod-template") and isinstance(value, dict):
            out.templates.append(Template(path, value))
        if (kind := tags.get("x-caldera-refers-to")) and isinstance(value, str) and value:
            out.references.append(Reference(path, str(kind), value))
        if tags.get("x-caldera-unhonoured") and value not in ({}, [], "", False):
            out.unhonoured.append(path)
        problem = _value_problem(value, node)
        if problem is not None:
            out.invalid.append(Problem(path, problem))
            return
        if isinstance(value, dict):
            self._walk_object(value, node, path, out)
        elif isinstance(value, list) and "items" in node:
            for i, item in enumerate(value):
                self._walk(item, node["items"], f"{path}[{i}]", out)

    def _walk_object(self, value: dict[str, Any], node: Node, path: str, out: Findings) -> None:
        properties: Node = node.get("properties") or {}
        extra = node.get("additionalProperties")
        # An object that declares its properties is closed, unless it says it keeps unknown
        # fields; one that declares none (``type: object`` alone, RawExtension) takes anything.
        closed = bool(properties) and extra in (None, False) and not node.get("x-kubernetes-preserve-unknown-fields")
        for key, item in value.items():
            where = join(path, str(key))
            if key in properties:
                self._walk(item, properties[key], where, out)
            elif isinstance(extra, Mapping):
                self._walk(item, extra, where, out)
            elif closed:
                out.unknown.append(unknown_field(where, str(key), properties))


def _json_type(value: object) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _types(node: Node) -> set[str] | None:
    """The JSON types ``node`` allows, or None for any."""
    if node.get("x-kubernetes-int-or-string"):
        return {"integer", "string"}
    branches = node.get("oneOf") or node.get("anyOf")
    if branches:
        found = [_types(b) for b in branches]
        return None if any(t is None for t in found) else set().union(*(t for t in found if t is not None))
    declared = node.get("type")
    if declared is None:
        return None
    names = {declared} if isinstance(declared, str) else set(declared)
    return names - {"null"} or None


def _value_problem(value: object, node: Node) -> str | None:
    allowed = _types(node)
    actual = _json_type(value)
    if allowed is not None and actual not in allowed and not (actual == "integer" and "number" in allowed):
        words = " or ".join(_TYPE_WORDS.get(t, t) for t in sorted(allowed))
        return f"expected {words}, got {_show(value)}"
    if "enum" in node and value not in node["enum"]:
        return f"{_show(value)} is not allowed (expected one of: {', '.join(map(str, node['enum']))})"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        low, high = node.get("minimum"), node.get("maximum")
        if (low is not None and value < low) or (high is not None and value > high):
            expected = (
                f"{low} to {high}"
                if low is not None and high is not None
                else (f"{low} or more" if low is not None else f"at most {high}")
            )
            return f"{value} is out of range (expected {expected})"
    return None


def _show(value: object) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return repr(value)


# -- caldera's own formats: msgspec Structs -------------------------------------------------


def struct_unknown_fields(data: object, type_: Any) -> list[Problem]:
    """The keys of ``data`` that ``type_`` (Structs, in lists, dicts, tuples) does not have, by path.

    For formats caldera defines as Structs (the demo's workload): every unknown key is found,
    with the nearest known field, whether or not a Struct forbids unknown fields.
    """
    out: list[Problem] = []
    _walk_struct(data, msgspec.inspect.type_info(type_), "", out)
    return out


def _walk_struct(value: object, info: msgspec.inspect.Type, path: str, out: list[Problem]) -> None:
    inspect = msgspec.inspect
    if isinstance(info, inspect.UnionType):
        for member in info.types:  # the member a value of this shape decodes as
            if (isinstance(value, dict) and isinstance(member, (inspect.StructType, inspect.DictType))) or (
                isinstance(value, list) and isinstance(member, (inspect.ListType, inspect.TupleType))
            ):
                _walk_struct(value, member, path, out)
                return
    elif isinstance(info, inspect.StructType) and isinstance(value, dict):
        fields = {f.encode_name: f for f in info.fields}
        for key, item in value.items():
            where = join(path, str(key))
            if key in fields:
                _walk_struct(item, fields[key].type, where, out)
            else:
                out.append(unknown_field(where, str(key), fields))
    elif isinstance(info, inspect.DictType) and isinstance(value, dict):
        for key, item in value.items():
            _walk_struct(item, info.value_type, join(path, str(key)), out)
    elif isinstance(info, (inspect.ListType, inspect.VarTupleType)) and isinstance(value, list):
        for i, item in enumerate(value):
            _walk_struct(item, info.item_type, f"{path}[{i}]", out)
    elif isinstance(info, inspect.TupleType) and isinstance(value, list):
        for i, (item, item_type) in enumerate(zip(value, info.item_types)):
            _walk_struct(item, item_type, f"{path}[{i}]", out)


# -- Kubernetes' definitions ---------------------------------------------------------------


def _version_key(directory: Path) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", directory.name.split("-")[0]))


def _kubernetes_definitions() -> dict[str, Node]:
    """Every definition of the newest strict schemas kubernetes-validate ships, with caldera's tags."""
    # Found without importing the package, which would import jsonschema for nothing.
    spec = importlib.util.find_spec(_KUBERNETES_PACKAGE)
    if spec is None or spec.origin is None:
        raise SchemaError(f"the {_KUBERNETES_PACKAGE} package is not installed (pip install kubernetes-validate)")
    root = Path(spec.origin).parent / "kubernetes-json-schema"
    versions = sorted(
        (d for d in root.glob("v*-local-strict") if (d / "_definitions.json").is_file()), key=_version_key
    )
    if not versions:
        raise SchemaError(f"no Kubernetes schemas under {root}")
    with open(versions[-1] / "_definitions.json", encoding="utf-8") as f:
        definitions: dict[str, dict[str, Any]] = json.load(f)["$defs"]
    for name, tags in _KUBERNETES_TAGS.items():
        definitions[name].update(tags)
    for (name, field), tags in _KUBERNETES_FIELD_TAGS.items():
        definitions[name]["properties"][field].update(tags)
    return dict(definitions)
