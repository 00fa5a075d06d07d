"""matchLabelKeys and mismatchLabelKeys merged into the selectors, as Kubernetes does."""

from __future__ import annotations

from typing import Any

import msgspec

from cluster.model.core import Pod
from cluster.model.label_keys import with_label_keys


def pod(labels: dict[str, str], **spec: Any) -> Pod:
    body = {"containers": [{"name": "c"}], **spec}
    return msgspec.convert({"metadata": {"name": "p", "labels": labels}, "spec": body}, Pod)


TERM = {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "zone"}


def test_keys_the_pod_has_become_requirements_and_merging_twice_changes_nothing() -> None:
    p = pod(
        {"app": "web", "rev": "7", "tenant": "a"},
        affinity={
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    {**TERM, "matchLabelKeys": ["rev", "absent"], "mismatchLabelKeys": ["tenant"]}
                ]
            }
        },
        topologySpreadConstraints=[
            {
                "maxSkew": 1,
                "topologyKey": "zone",
                "labelSelector": {"matchLabels": {"app": "web"}},
                "matchLabelKeys": ["rev"],
            }
        ],
    )
    merged = with_label_keys(p)
    assert merged.spec.affinity is not None and merged.spec.affinity.pod_anti_affinity is not None
    [term] = merged.spec.affinity.pod_anti_affinity.required_during_scheduling_ignored_during_execution
    assert term.label_selector is not None
    assert [(r.key, r.operator, r.values) for r in term.label_selector.match_expressions] == [
        ("rev", "In", ["7"]),
        ("tenant", "NotIn", ["a"]),
    ]
    assert term.label_selector.matches({"app": "web", "rev": "7", "tenant": "b"})
    assert not term.label_selector.matches({"app": "web", "rev": "6", "tenant": "b"})  # another revision
    assert not term.label_selector.matches({"app": "web", "rev": "7", "tenant": "a"})  # the same tenant
    [spread] = merged.spec.topology_spread_constraints
    assert spread.label_selector is not None and spread.label_selector.matches({"app": "web", "rev": "7"})
    assert not spread.label_selector.matches({"app": "web", "rev": "8"})
    assert with_label_keys(merged) == merged  # the API server's merge, then caldera's: the same


def test_a_pod_without_keys_is_itself() -> None:
    p = pod({"app": "web"}, affinity={"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [TERM]}})
    assert with_label_keys(p) is p
