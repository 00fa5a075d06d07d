"""Ported from Volcano release-1.14 ``pkg/scheduler/plugins/conformance/conformance_test.go``.

``TestConformancePlugin``: of two running pods, the one in ``kube-system`` is never a
victim; asked through the session's tiers (Volcano's ``ssn.Preemptable``).
"""

from __future__ import annotations

from tests.volcano.builders import PENDING, RUNNING, build_pod
from tests.volcano.builders import build_resource_list as rl
from tests.volcano.harness import Case, Plugin, open_session


def test_conformance_plugin() -> None:
    """conformance_test.go TestConformancePlugin "conformance plugin"."""
    case = Case(
        name="conformance plugin",
        pods=[
            build_pod("kube-system", "test-pod", "test-node", RUNNING, rl("1", "1Gi"), "pg1"),
            build_pod("test-namespace", "test-pod", "test-node", RUNNING, rl("1", "1Gi"), "pg1"),
            build_pod(
                "test-namespace", "preemptor", "", PENDING, rl("1", "1Gi"), "pg1"
            ),  # Volcano passes an empty TaskInfo
        ],
    )
    ssn = open_session(case, [[Plugin("conformance", ("enablePreemptable",))]], ["preempt"])
    preemptees = [ssn.tasks["kube-system-test-pod"], ssn.tasks["test-namespace-test-pod"]]
    victims = ssn.tiers.preemptable(ssn.tasks["test-namespace-preemptor"], preemptees)
    assert [t.uid for t in victims] == ["test-namespace-test-pod"]
