"""manifests/: Pod Security "restricted" for every karpy workload and NetworkPolicies limiting who
reaches the extender and the webhook (issue 13, Found 2 and 8: before, the webhook pod had no seccomp
profile and there was no NetworkPolicy; both tests failed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"


def _docs() -> list[dict[str, Any]]:
    return [d for p in sorted(MANIFESTS.rglob("*.yaml")) for d in yaml.safe_load_all(p.read_text()) if d]


def _named(kind: str, name: str) -> dict[str, Any]:
    return next(d for d in _docs() if d["kind"] == kind and d["metadata"]["name"] == name)


def test_every_workload_meets_pod_security_restricted() -> None:
    for deployment in (d for d in _docs() if d["kind"] == "Deployment"):
        pod = deployment["spec"]["template"]["spec"]
        for container in pod["containers"]:
            seccomp = (container.get("securityContext") or {}).get("seccompProfile") or pod[
                "securityContext"
            ].get("seccompProfile")
            assert seccomp == {"type": "RuntimeDefault"}, deployment["metadata"]["name"]
            assert container["securityContext"]["capabilities"]["drop"] == ["ALL"]
            assert container["securityContext"]["allowPrivilegeEscalation"] is False
        assert pod["securityContext"]["runAsNonRoot"] is True


def test_extender_port_only_from_kube_scheduler_and_metrics_port_only_metrics() -> None:
    policy = _named("NetworkPolicy", "karpy-controller")
    assert policy["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "karpy-controller"}
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    by_port = {rule["ports"][0]["port"]: rule["from"] for rule in policy["spec"]["ingress"]}
    assert by_port[8088] == [{"podSelector": {"matchLabels": {"app.kubernetes.io/name": "karpy-scheduler"}}}]
    assert set(by_port) == {8088, 8089}
    scheduler = _named("Deployment", "karpy-scheduler")["spec"]["template"]["metadata"]["labels"]
    assert scheduler["app.kubernetes.io/name"] == "karpy-scheduler"


def test_webhook_policy_admits_only_its_https_port() -> None:
    policy = _named("NetworkPolicy", "karpy-webhook")
    assert policy["spec"]["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "karpy-webhook"}
    (rule,) = policy["spec"]["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 8443}]
