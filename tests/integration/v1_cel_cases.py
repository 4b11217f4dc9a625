"""Karpenter's CEL/validation cases for the v1 CRDs, ported as data (test_v1_crd_validation.py runs them).

Sources, each case named by its `It`/`Entry` text:
- NP = kubernetes-sigs/karpenter v1.14.0 pkg/apis/v1/nodepool_validation_cel_test.go
- NC = aws/karpenter-provider-aws v1.14.1 pkg/apis/v1/ec2nodeclass_validation_cel_test.go
Only what the API server decides is ported (Create/Update outcomes); the Go tests' extra
`RuntimeValidate` calls are Karpenter's in-process checks, not the CRD's. A Go test that loops over
several values is one case per value here. Each case edits a copy of the source's base object.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Edit = Callable[[dict[str, Any]], None]

#: An empty `tags` map as Go's typed client sends it: dropped (`omitempty`), leaving an empty term.
GO_EMPTY_TAGS: dict[str, Any] = {}
#: NP's BeforeEach object (a test node class reference; requirement capacity-type Exists).
NODEPOOL_BASE: dict[str, Any] = {
    "apiVersion": "karpenter.sh/v1",
    "kind": "NodePool",
    "metadata": {"name": "base"},
    "spec": {
        "template": {
            "spec": {
                "nodeClassRef": {"group": "karpenter.test.sh", "kind": "TestNodeClass", "name": "default"},
                "requirements": [{"key": "karpenter.sh/capacity-type", "operator": "Exists"}],
            }
        },
        # Go's typed client always sends it: NillableDuration's zero value marshals as "Never".
        "disruption": {"consolidateAfter": "Never"},
    },
}
#: NC's BeforeEach object.
NODECLASS_BASE: dict[str, Any] = {
    "apiVersion": "karpenter.k8s.aws/v1",
    "kind": "EC2NodeClass",
    "metadata": {"name": "base"},
    "spec": {
        "amiFamily": "AL2023",
        "amiSelectorTerms": [{"alias": "al2023@latest"}],
        "role": "role-1",
        "securityGroupSelectorTerms": [{"tags": {"*": "*"}}],
        "subnetSelectorTerms": [{"tags": {"*": "*"}}],
    },
}


@dataclass(frozen=True)
class Case:
    source: str  # "NP" or "NC"
    name: str  # the Go test's description (It / DescribeTable + Entry)
    edits: tuple[Edit, ...]
    stored: bool
    #: Update cases: edits applied to the stored object, then updated (transition rules).
    update: tuple[Edit, ...] = field(default=())

    def manifest(self) -> dict[str, Any]:
        obj = copy.deepcopy(NODEPOOL_BASE if self.source == "NP" else NODECLASS_BASE)
        for edit in self.edits:
            edit(obj)
        return obj


def at(path: str, value: Any) -> Edit:
    """Set `path` (dotted, from the object's root) to `value`; None deletes it."""
    keys = path.split(".")

    def edit(obj: dict[str, Any]) -> None:
        node = obj
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        if value is None:
            node.pop(keys[-1], None)
        else:
            node[keys[-1]] = copy.deepcopy(value)

    return edit


def np(name: str, stored: bool, *edits: Edit, update: Sequence[Edit] = ()) -> Case:
    return Case("NP", name, tuple(edits), stored, tuple(update))


def nc(name: str, stored: bool, *edits: Edit, update: Sequence[Edit] = ()) -> Case:
    return Case("NC", name, tuple(edits), stored, tuple(update))


TPL = "spec.template.spec"
REQ = f"{TPL}.requirements"
ZONE = "topology.kubernetes.io/zone"
ITYPE = "node.kubernetes.io/instance-type"


def req(
    key: str, op: str, values: Sequence[str] | None = None, min_values: int | None = None
) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values is not None:
        out["values"] = list(values)
    if min_values is not None:
        out["minValues"] = min_values
    return out


def budget(
    nodes: str, schedule: str | None = None, duration: str | None = None, reasons: Sequence[str] = ()
) -> dict[str, Any]:
    out: dict[str, Any] = {"nodes": nodes}
    if schedule is not None:
        out["schedule"] = schedule
    if duration is not None:
        out["duration"] = duration
    if reasons:
        out["reasons"] = list(reasons)
    return out


def budgets(*items: dict[str, Any]) -> Edit:
    return at("spec.disruption.budgets", list(items))


def taints(*items: dict[str, Any]) -> Edit:
    return at(f"{TPL}.taints", list(items))


def labels(values: dict[str, str]) -> Edit:
    return at("spec.template.metadata.labels", values)


LONG = "a" * 250
SILLY = "Sillyname"
# Go's time.Duration String() forms the typed client sends.
D20M = "20m0s"

NODEPOOL_CASES: list[Case] = [
    np("should succeed on a disabled expireAfter", True, at(f"{TPL}.expireAfter", "Never")),
    *[
        np(f"should succeed on a valid expireAfter / {n}", True, at(f"{TPL}.expireAfter", v))
        for n, v in (("single unit", "30s"), ("multiple units", "1h30m5s"), ("never", "Never"))
    ],
    *[
        np(f"should fail on an invalid expireAfter / {n}", False, at(f"{TPL}.expireAfter", v))
        for n, v in (("negative", "-1s"), ("invalid unit", "1hr"), ("partial match", "FooNever"))
    ],
    np(
        "should succeed on a disabled consolidateAfter", True, at("spec.disruption.consolidateAfter", "Never")
    ),
    *[
        np(
            f"should succeed on a valid consolidateAfter / {n}",
            True,
            at("spec.disruption.consolidateAfter", v),
        )
        for n, v in (("single unit", "30s"), ("multiple units", "1h30m5s"), ("never", "Never"))
    ],
    *[
        np(
            f"should fail on an invalid consolidateAfter / {n}",
            False,
            at("spec.disruption.consolidateAfter", v),
        )
        for n, v in (("negative", "-1s"), ("invalid unit", "1hr"), ("partial match", "FooNever"))
    ],
    np(
        "should succeed when setting consolidateAfter with consolidationPolicy=WhenEmpty",
        True,
        at("spec.disruption", {"consolidateAfter": "30s", "consolidationPolicy": "WhenEmpty"}),
    ),
    np(
        "should succeed when setting consolidateAfter with consolidationPolicy=WhenUnderutilized",
        True,
        at("spec.disruption", {"consolidateAfter": "30s", "consolidationPolicy": "WhenEmptyOrUnderutilized"}),
    ),
    np(
        "should succeed when setting consolidateAfter to 'Never' with consolidationPolicy=WhenUnderutilized",
        True,
        at(
            "spec.disruption",
            {"consolidateAfter": "Never", "consolidationPolicy": "WhenEmptyOrUnderutilized"},
        ),
    ),
    np(
        "should succeed when setting consolidateAfter to 'Never' with consolidationPolicy=WhenEmpty",
        True,
        at("spec.disruption", {"consolidateAfter": "Never", "consolidationPolicy": "WhenEmpty"}),
    ),
    *[
        np(
            f"should succeed on a valid consolidationPolicy / {v}",
            True,
            at("spec.disruption.consolidationPolicy", v),
        )
        for v in ("WhenEmpty", "WhenEmptyOrUnderutilized", "Balanced")
    ],
    *[
        np(
            f"should fail on an invalid consolidationPolicy / {n}",
            False,
            at("spec.disruption.consolidationPolicy", v),
        )
        for n, v in (
            ("quoted 1", "1"),
            ("quoted 2", "2"),
            ("quoted 3", "3"),
            ("level 0", "0"),
            ("level 4", "4"),
            ("level 10", "10"),
            ("lowercase balanced", "balanced"),
            ("lowercase whenempty", "whenempty"),
            ("empty string", ""),
            ("WhenUnderutilized", "WhenUnderutilized"),
            ("arbitrary string", "foo"),
        )
    ],
    np("should fail when creating a budget with an invalid cron", False, budgets(budget("10", "*", D20M))),
    np(
        "should fail when creating a schedule with less than 5 entries",
        False,
        budgets(budget("10", "* * * * ", D20M)),
    ),
    np(
        "should fail when creating a budget with a negative duration",
        False,
        budgets(budget("10", "* * * * *", "-20m0s")),
    ),
    np(
        "should fail when creating a budget with a seconds duration",
        False,
        budgets(budget("10", "* * * * *", "30s")),
    ),
    np("should fail when creating a budget with a negative value int", False, budgets(budget("-10"))),
    np("should fail when creating a budget with a negative value percent", False, budgets(budget("-10%"))),
    np(
        "should fail when creating a budget with a value percent with more than 3 digits",
        False,
        budgets(budget("1000%")),
    ),
    np(
        "should fail when creating a budget with a cron but no duration",
        False,
        budgets(budget("10", "* * * * *")),
    ),
    np(
        "should fail when creating a budget with a duration but no cron",
        False,
        budgets(budget("10", None, D20M)),
    ),
    np(
        "should succeed when creating a budget with both duration and cron",
        True,
        budgets(budget("10", "* * * * *", D20M)),
    ),
    np(
        "should succeed when creating a budget with hours and minutes in duration",
        True,
        budgets(budget("10", "* * * * *", "2h20m0s")),
    ),
    np("should succeed when creating a budget with neither duration nor cron", True, budgets(budget("10"))),
    np(
        "should succeed when creating a budget with special cased crons",
        True,
        budgets(budget("10", "@annually", D20M)),
    ),
    np(
        "should fail when creating two budgets where one has an invalid crontab",
        False,
        budgets(budget("10", "@annually", D20M), budget("10", "*", D20M)),
    ),
    np(
        "should fail when creating multiple budgets where one doesn't have both schedule and duration",
        False,
        budgets(budget("10", None, D20M), budget("10", "* * * * *", D20M), budget("10")),
    ),
    *[
        np(
            f"should succeed when creating a budget with valid reasons / {r}",
            True,
            budgets(budget("10", "* * * * *", D20M, [r])),
        )
        for r in ("Drifted", "Underutilized", "Empty")
    ],
    *[
        np(
            f"should fail when creating a budget with invalid reasons / {r!r}",
            False,
            budgets(budget("10", "* * * * *", D20M, [r])),
        )
        for r in ("invalid", "expired", "")
    ],
    np(
        "should allow setting multiple reasons",
        True,
        budgets(budget("10", "* * * * *", D20M, ["Drifted", "Empty"])),
    ),
    np(
        "should succeed for valid taints",
        True,
        taints(
            {"key": "a", "value": "b", "effect": "NoSchedule"},
            {"key": "c", "value": "d", "effect": "NoExecute"},
            {"key": "e", "value": "f", "effect": "PreferNoSchedule"},
            {"key": "Test", "value": "f", "effect": "PreferNoSchedule"},
            {"key": "test.com/Test", "value": "f", "effect": "PreferNoSchedule"},
            {"key": "test.com.com/test", "value": "f", "effect": "PreferNoSchedule"},
            {"key": "key-only", "effect": "NoExecute"},
        ),
    ),
    *[
        np(f"should fail for invalid taint keys / {k}", False, taints({"key": k, "effect": "NoSchedule"}))
        for k in ("test.com.com}", "Test.com/test", "test/test/test", "test/", "/test")
    ],
    # Too long for Kubernetes' qualified names, but the CRD lets it through (Karpenter refuses it at runtime).
    np(
        "should fail at runtime for taint keys that are too long / stored by the API server (long prefix)",
        True,
        taints({"key": f"test.com.test.{LONG}/test", "effect": "NoSchedule"}),
    ),
    np(
        "should fail at runtime for taint keys that are too long / stored by the API server (long name)",
        True,
        taints({"key": f"test.com.test/test-{LONG}", "effect": "NoSchedule"}),
    ),
    np("should fail for missing taint key", False, taints({"effect": "NoSchedule"})),
    np(
        "should fail for invalid taint value",
        False,
        taints({"key": "invalid-value", "effect": "NoSchedule", "value": "???"}),
    ),
    np("should fail for invalid taint effect", False, taints({"key": "invalid-effect", "effect": "???"})),
    np(
        "should not fail for same key with different effects",
        True,
        taints({"key": "a", "effect": "NoSchedule"}, {"key": "a", "effect": "NoExecute"}),
    ),
    np(
        "should succeed for valid requirement keys",
        True,
        at(REQ, [req(k, "Exists") for k in ("Test", "test.com/Test", "test.com.com/test", "key-only")]),
    ),
    *[
        np(f"should fail for invalid requirement keys / {k}", False, at(REQ, [req(k, "Exists")]))
        for k in ("test.com.com}", "Test.com/test", "test/test/test", "test/", "/test")
    ],
    np(
        "should fail at runtime for requirement keys that are too long"
        " / stored by the API server (long prefix)",
        True,
        at(REQ, [req(f"test.com.test.{LONG}/test", "Exists")]),
    ),
    np(
        "should fail at runtime for requirement keys that are too long"
        " / stored by the API server (long name)",
        True,
        at(REQ, [req(f"test.com.test/test-{LONG}", "Exists")]),
    ),
    np(
        "should fail for the karpenter.sh/nodepool label (requirements)",
        False,
        at(REQ, [req("karpenter.sh/nodepool", "In", [SILLY])]),
    ),
    np(
        "should allow supported ops",
        True,
        at(
            REQ,
            [
                req(ZONE, "In", ["test"]),
                req(ZONE, "Gt", ["1"]),
                req(ZONE, "Lt", ["1"]),
                req(ZONE, "NotIn"),
                req(ZONE, "Exists"),
            ],
        ),
    ),
    np("should fail for unsupported ops / unknown", False, at(REQ, [req(ZONE, "unknown", ["test"])])),
    np(
        "should fail for restricted domains / karpenter.sh",
        False,
        at(REQ, [req("karpenter.sh/test", "In", ["test"])]),
    ),
    np(
        "should fail for restricted labels / kubernetes.io/hostname",
        False,
        at(REQ, [req("kubernetes.io/hostname/test", "In", ["test"])]),
    ),
    *[
        np(f"should allow kubernetes domains / {d}", True, at(REQ, [req(f"{d}/test", "In", ["test"])]))
        for d in ("kubernetes.io", "k8s.io")
    ],
    *[
        np(
            f"should allow kubernetes subdomains exceptions / {d}",
            True,
            at(REQ, [req(f"subdomain.{d}/test", "In", ["test"])]),
        )
        for d in ("kubernetes.io", "k8s.io")
    ],
    *[
        np(f"should allow well known label exceptions / {k}", True, at(REQ, [req(k, "In", ["test"])]))
        for k in (
            ZONE,
            "topology.kubernetes.io/region",
            ITYPE,
            "kubernetes.io/arch",
            "kubernetes.io/os",
            "node.kubernetes.io/windows-build",
        )
    ],
    np(
        "should allow non-empty set after removing overlapped value",
        True,
        at(REQ, [req(ZONE, "In", ["test", "foo"]), req(ZONE, "NotIn", ["test", "bar"])]),
    ),
    np("should allow empty requirements", True, at(REQ, [])),
    *[
        np(f"should fail with invalid GT or LT values / {op} {vals}", False, at(REQ, [req(ZONE, op, vals)]))
        for op in ("Gt", "Lt")
        for vals in ([], ["1", "2"], ["a"], ["-1"])
    ],
    *[
        np(f"should fail with invalid GTE or LTE values / {op} {vals}", False, at(REQ, [req(ZONE, op, vals)]))
        for op in ("Gte", "Lte")
        for vals in ([], ["1", "2"], ["a"], ["-1"])
    ],
    np("should error when minValues is negative", False, at(REQ, [req(ITYPE, "In", ["insance-type-1"], -1)])),
    np("should error when minValues is zero", False, at(REQ, [req(ITYPE, "In", ["insance-type-1"], 0)])),
    np("should error when minValues is more than 50", False, at(REQ, [req(ITYPE, "Exists", None, 51)])),
    np(
        "should allow more than 50 values if minValues is not specified.",
        True,
        at(REQ, [req(ITYPE, "In", [f"instance{i}" for i in range(90)])]),
    ),
    np(
        "should error when minValues is greater than the number of unique values"
        " specified within In operator",
        False,
        at(REQ, [req(ITYPE, "In", ["insance-type-1"], 2)]),
    ),
    np("should allow unrecognized labels", True, labels({"foo": SILLY})),
    np(
        "should fail for the karpenter.sh/nodepool label (labels)",
        False,
        labels({"karpenter.sh/nodepool": SILLY}),
    ),
    # Stored by the API server; Karpenter refuses it at runtime (as karpy's webhook does).
    np(
        "should fail for invalid label keys / stored by the API server",
        True,
        labels({"spaces are not allowed": SILLY}),
    ),
    np(
        "should fail at runtime for label keys that are too long / stored by the API server (long prefix)",
        True,
        labels({f"test.com.test.{LONG}/test": SILLY}),
    ),
    np(
        "should fail at runtime for label keys that are too long / stored by the API server (long name)",
        True,
        labels({f"test.com.test/test-{LONG}": SILLY}),
    ),
    np("should fail for invalid label values", False, labels({SILLY: "/ is not allowed"})),
    np(
        "should fail for restricted label domains / karpenter.sh",
        False,
        labels({"karpenter.sh/unknown": SILLY}),
    ),
    np(
        "should allow labels kOps require",
        True,
        labels({"kops.k8s.io/instancegroup": "karpenter-nodes", "kops.k8s.io/gpu": "1"}),
    ),
    *[
        np(f"should allow labels in kubernetes domains / {d}", True, labels({d: "test-value"}))
        for d in ("kubernetes.io", "k8s.io")
    ],
    *[
        np(
            f"should allow labels prefixed with the kubernetes domain / {d}",
            True,
            labels({f"{d}/key": "test-value"}),
        )
        for d in ("kubernetes.io", "k8s.io")
    ],
    *[
        np(
            f"should allow subdomain labels in restricted domains exceptions list / {d}",
            True,
            labels({f"subdomain.{d}": "test-value"}),
        )
        for d in ("kubernetes.io", "k8s.io")
    ],
    *[
        np(
            f"should allow subdomain labels prefixed with the kubernetes domain / {d}",
            True,
            labels({f"subdomain.{d}/key": "test-value"}),
        )
        for d in ("kubernetes.io", "k8s.io")
    ],
    *[
        np(
            f"should succeed on a valid terminationGracePeriod / {n}",
            True,
            at(f"{TPL}.terminationGracePeriod", v),
        )
        for n, v in (("single unit", "30s"), ("multiple units", "1h30m5s"))
    ],
    *[
        np(
            f"should fail on an invalid terminationGracePeriod / {n}",
            False,
            at(f"{TPL}.terminationGracePeriod", v),
        )
        for n, v in (
            ("negative", "-1s"),
            ("invalid unit", "1hr"),
            ("never", "Never"),
            ("partial match", "FooNever"),
        )
    ],
    np(
        "should fail to mutate group",
        False,
        update=[at(f"{TPL}.nodeClassRef.group", "karpenter.test.mutated.sh")],
    ),
    np("should fail to mutate kind", False, update=[at(f"{TPL}.nodeClassRef.kind", "TestNodeClass2")]),
    np("should fail if group is unset", False, at(f"{TPL}.nodeClassRef.group", "")),
    np("should fail if kind is unset", False, at(f"{TPL}.nodeClassRef.kind", "")),
    np("should fail if name is unset", False, at(f"{TPL}.nodeClassRef.name", "")),
    *[
        np(f"should succeed when replicas is set to {n}", True, at("spec.replicas", v))
        for n, v in (("a positive value", 5), ("zero", 0), ("a large value", 1000))
    ],
    np("should fail when replicas is set to a negative value", False, at("spec.replicas", -100)),
    *[
        np(f"should fail for incompatible fields / {n}", False, edit, at("spec.replicas", 10))
        for n, edit in (
            ("limits.cpu", at("spec.limits", {"cpu": "1k"})),
            ("limits.memory", at("spec.limits", {"memory": "2000Gi"})),
            ("limits.pods", at("spec.limits", {"pods": "10"})),
            ("limits.ephemeral-storage", at("spec.limits", {"ephemeral-storage": "10Gi"})),
            ("weight", at("spec.weight", 25)),
        )
    ],
    *[
        np(f"should succeed for compatible fields / {n}", True, edit, at("spec.replicas", 10))
        for n, edit in (
            ("limits.nodes", at("spec.limits", {"nodes": "100"})),
            (
                "disruption with multiple budgets",
                at(
                    "spec.disruption",
                    {
                        "consolidationPolicy": "WhenEmptyOrUnderutilized",
                        "consolidateAfter": "5m",
                        "budgets": [
                            budget("20%", "0 9 * * mon-fri", "8h0m0s", ["Drifted", "Empty"]),
                            budget("30%", "0 22 * * sat,sun", "4h0m0s", ["Underutilized"]),
                            budget("5"),
                        ],
                    },
                ),
            ),
            ("template labels", labels({"environment": "production"})),
            (
                "template annotations",
                at("spec.template.metadata.annotations", {"example.com/last-updated": "2024-01-01"}),
            ),
            ("taints", taints({"key": "gpu-workload", "value": "enabled", "effect": "NoSchedule"})),
            (
                "startup taints",
                at(
                    f"{TPL}.startupTaints",
                    [{"key": "example.com/initializing", "value": "true", "effect": "NoSchedule"}],
                ),
            ),
            (
                "requirements",
                at(
                    REQ,
                    [
                        req(
                            ITYPE,
                            "In",
                            [
                                "m5.large",
                                "m5.xlarge",
                                "m5.2xlarge",
                                "c5.large",
                                "c5.xlarge",
                                "r5.large",
                                "r5.xlarge",
                            ],
                            3,
                        ),
                        req(ZONE, "In", ["us-west-2a", "us-west-2b", "us-west-2c"]),
                        req("karpenter.sh/capacity-type", "In", ["on-demand", "spot"]),
                        req("kubernetes.io/arch", "In", ["amd64"]),
                        req("karpenter.k8s.aws/instance-memory", "Gt", ["8192"]),
                        req("karpenter.k8s.aws/instance-cpu", "Lt", ["64"]),
                    ],
                ),
            ),
            ("expireAfter", at(f"{TPL}.expireAfter", "72h")),
            ("terminationGracePeriod", at(f"{TPL}.terminationGracePeriod", "5m0s")),
        )
    ],
    np(
        "should succeed when increasing replicas in a NodePool",
        True,
        at("spec.replicas", 3),
        update=[at("spec.replicas", 5)],
    ),
    np(
        "should fail when changing the NodePool from static to dynamic",
        False,
        at("spec.replicas", 3),
        update=[at("spec.replicas", None)],
    ),
    np(
        "should fail when changing the NodePool from dynamic to static",
        False,
        update=[at("spec.replicas", 3)],
    ),
    np(
        "should succeed when changing the static NodePool nodes limit",
        True,
        at("spec.replicas", 3),
        at("spec.limits", {"nodes": "10"}),
        update=[at("spec.limits", {"nodes": "100"})],
    ),
]

FAMILIES = ("AL2", "AL2023", "Bottlerocket", "Windows2019", "Windows2022", "Windows2025")


def kubelet(value: dict[str, Any]) -> Edit:
    return at("spec.kubelet", value)


def bdm(*mappings: dict[str, Any]) -> Edit:
    return at("spec.blockDeviceMappings", list(mappings))


def volume(name: str, size: str, root: bool = False, **ebs: Any) -> dict[str, Any]:
    return {"deviceName": name, "ebs": {"volumeSize": size, **ebs}, "rootVolume": root}


def terms(kind: str, *items: dict[str, Any]) -> Edit:
    return at(f"spec.{kind}SelectorTerms", list(items))


def nics(*items: tuple[int, int, str]) -> Edit:
    return at(
        "spec.networkInterfaces",
        [{"networkCardIndex": c, "deviceIndex": d, "interfaceType": t} for c, d, t in items],
    )


def soft(signal: str, threshold: str) -> Edit:
    """kubelet.evictionSoft with its grace period (1m), as NC's evictionSoft cases set them."""
    return kubelet({"evictionSoft": {signal: threshold}, "evictionSoftGracePeriod": {signal: "1m0s"}})


SIGNALS = {
    "memory.available": "5%",
    "nodefs.available": "10%",
    "nodefs.inodesFree": "15%",
    "imagefs.available": "5%",
    "imagefs.inodesFree": "5%",
    "pid.available": "5%",
}
GRACE = {
    "memory.available": "1m0s",
    "nodefs.available": "1m30s",
    "nodefs.inodesFree": "5m0s",
    "imagefs.available": "1h0m0s",
    "imagefs.inodesFree": "24h0m0s",
    "pid.available": "1m0s",
}


def tag_term_cases(kind: str, label: str) -> list[Case]:
    """NC's cases every tag-selecting term list shares (subnet, security group, capacity
    reservation, ami)."""
    return [
        nc(f"should fail when a {label} selector term has no values", False, terms(kind, {})),
        nc(
            f"should fail when a {label} selector term has no tag map values",
            False,
            terms(kind, GO_EMPTY_TAGS),
        ),
        nc(
            f"should fail when a {label} selector term has a tag map key that is empty",
            False,
            terms(kind, {"tags": {"test": ""}}),
        ),
        nc(
            f"should fail when a {label} selector term has a tag map value that is empty",
            False,
            terms(kind, {"tags": {"": "testvalue"}}),
        ),
        nc(
            f"should fail when the last {label} selector is invalid",
            False,
            terms(
                kind,
                {"tags": {"test": "testvalue"}},
                {"tags": {"test2": "testvalue2"}},
                {"tags": {"test3": "testvalue3"}},
                {"tags": {"": "testvalue4"}},
            ),
        ),
    ]


def selector_term_cases(kind: str, label: str, id_value: str) -> list[Case]:
    """NC's SubnetSelectorTerms / SecurityGroupSelectorTerms contexts (the same cases for both)."""
    return [
        nc(
            f"should succeed with a valid {label} selector on tags",
            True,
            terms(kind, {"tags": {"test": "testvalue"}}),
        ),
        nc(f"should succeed with a valid {label} selector on id", True, terms(kind, {"id": id_value})),
        nc(
            f"should fail when {label} selector terms is set to nil",
            False,
            at(f"spec.{kind}SelectorTerms", None),
        ),
        nc(f"should fail when no {label} selector terms exist", False, terms(kind)),
        *tag_term_cases(kind, label),
        nc(
            "should fail when specifying id with tags",
            False,
            terms(kind, {"id": id_value, "tags": {"test": "testvalue"}}),
        ),
    ]


NODECLASS_CASES: list[Case] = [
    nc("should succeed if just specifying role", True),
    nc(
        "should succeed if just specifying instance profile",
        True,
        at("spec.instanceProfile", "test-instance-profile"),
        at("spec.role", None),
    ),
    nc(
        "should fail if specifying both instance profile and role",
        False,
        at("spec.instanceProfile", "test-instance-profile"),
    ),
    nc("should fail if not specifying one of instance profile and role", False, at("spec.role", None)),
    nc("should succeed if user data is empty", True),
    *[
        nc(
            f"should succeed with valid families / {f}",
            True,
            terms("ami", {"id": "ami-0123456789abcdef"}),
            at("spec.amiFamily", f),
        )
        for f in (*FAMILIES, "Custom")
    ],
    nc(
        "should fail with the ubuntu family",
        False,
        terms("ami", {"id": "ami-0123456789abcdef"}),
        at("spec.amiFamily", "Ubuntu"),
    ),
    *[
        nc(
            f'should succeed when the amiFamily matches amiSelectorTerms[].alias / family "{f}"',
            True,
            terms("ami", {"alias": f"{f.lower()}@latest"}),
            at("spec.amiFamily", f),
        )
        for f in FAMILIES
    ],
    *[
        nc(
            f"should succeed when the amiFamily is custom with amiSelectorTerms[].alias"
            f' / alias "{f.lower()}@latest"',
            True,
            terms("ami", {"alias": f"{f.lower()}@latest"}),
            at("spec.amiFamily", "Custom"),
        )
        for f in FAMILIES
    ],
    *[
        nc(
            f"should fail when then amiFamily does not match amiSelectorTerms[].alias"
            f' / family "{f}" with alias "{g.lower()}@latest"',
            False,
            terms("ami", {"alias": f"{g.lower()}@latest"}),
            at("spec.amiFamily", f),
        )
        for f in FAMILIES
        for g in FAMILIES
        if f != g
    ],
    nc(
        "should fail when neither amiFamily nor an alias are specified",
        False,
        terms("ami", {"id": "ami-01234567890abcdef"}),
        at("spec.amiFamily", None),
    ),
    nc("should succeed when tags are empty", True, at("spec.tags", {})),
    nc(
        "should succeed if tags aren't in restricted tag keys",
        True,
        at(
            "spec.tags",
            {
                "karpenter.sh/custom-key": "value",
                "karpenter.sh/managed": "true",
                "kubernetes.io/role/key": "value",
            },
        ),
    ),
    *[
        nc(f"should fail if tags contain a restricted domain key / {k}", False, at("spec.tags", {k: "value"}))
        for k in (
            "karpenter.sh/nodepool",
            "kubernetes.io/cluster/test",
            "eks:eks-cluster-name",
            "karpenter.k8s.aws/ec2nodeclass",
            "karpenter.sh/nodeclaim",
        )
    ],
    *selector_term_cases("subnet", "subnet", "subnet-12345749"),
    *selector_term_cases("securityGroup", "security group", "sg-12345749"),
    nc(
        "should succeed with a valid security group selector on name",
        True,
        terms("securityGroup", {"name": "testname"}),
    ),
    nc(
        "should fail when specifying id with name",
        False,
        terms("securityGroup", {"id": "sg-12345749", "name": "my-security-group"}),
    ),
    nc(
        "should fail when specifying name with tags",
        False,
        terms("securityGroup", {"name": "my-security-group", "tags": {"test": "testvalue"}}),
    ),
    nc(
        "should succeed with a valid capacity reservation selector on tags",
        True,
        terms("capacityReservation", {"tags": {"test": "testvalue"}}),
    ),
    nc(
        "should succeed with a valid capacity reservation selector on id",
        True,
        terms("capacityReservation", {"id": "cr-12345749"}),
    ),
    nc(
        "should succeed for a valid ownerID",
        True,
        terms("capacityReservation", {"ownerID": "012345678901", "tags": {"test": "testvalue"}}),
    ),
    nc(
        "should fail with a capacity reservation selector on a malformed id",
        False,
        terms("capacityReservation", {"id": "r-12345749"}),
    ),
    nc(
        "should succeed when capacity group selector terms is set to nil",
        True,
        at("spec.capacityReservationSelectorTerms", None),
    ),
    *tag_term_cases("capacityReservation", "capacity reservation"),
    nc(
        "should fail when specifying id with tags in a single term",
        False,
        terms("capacityReservation", {"id": "cr-12345749", "tags": {"test": "testvalue"}}),
    ),
    nc(
        "should fail when specifying id with ownerID in a single term",
        False,
        terms("capacityReservation", {"ownerID": "012345678901", "id": "cr-12345749"}),
    ),
    nc(
        "should fail when the ownerID is malformed",
        False,
        terms("capacityReservation", {"ownerID": "01234567890", "tags": {"test": "testvalue"}}),
    ),
    nc(
        "should fail when the ownerID is set by itself",
        False,
        terms("capacityReservation", {"ownerID": "012345678901"}),
    ),
    nc(
        "should succeed with a valid instanceMatchCriteria 'open'",
        True,
        terms("capacityReservation", {"instanceMatchCriteria": "open"}),
    ),
    nc(
        "should succeed with a valid instanceMatchCriteria 'targeted'",
        True,
        terms("capacityReservation", {"instanceMatchCriteria": "targeted"}),
    ),
    nc(
        "should succeed with instanceMatchCriteria combined with tags",
        True,
        terms("capacityReservation", {"instanceMatchCriteria": "open", "tags": {"test": "testvalue"}}),
    ),
    nc(
        "should succeed with instanceMatchCriteria combined with ownerID and tags",
        True,
        terms(
            "capacityReservation",
            {"instanceMatchCriteria": "targeted", "ownerID": "012345678901", "tags": {"test": "testvalue"}},
        ),
    ),
    nc(
        "should fail with invalid instanceMatchCriteria value",
        False,
        terms("capacityReservation", {"instanceMatchCriteria": "invalid"}),
    ),
    nc(
        "should fail when specifying id with instanceMatchCriteria",
        False,
        terms("capacityReservation", {"id": "cr-12345749", "instanceMatchCriteria": "open"}),
    ),
    nc("should succeed with a valid ami selector on alias", True, terms("ami", {"alias": "al2023@latest"})),
    nc(
        "should succeed with a valid ami selector on tags",
        True,
        terms("ami", {"tags": {"test": "testvalue"}}),
    ),
    nc("should succeed with a valid ami selector on id", True, terms("ami", {"id": "ami-12345749"})),
    nc("should succeed with a valid ami selector on name", True, terms("ami", {"name": "testname"})),
    nc(
        "should succeed with a valid ami selector on name and owner",
        True,
        terms("ami", {"name": "testname", "owner": "testowner"}),
    ),
    nc(
        "should succeed when an ami selector term has an owner key with tags",
        True,
        terms("ami", {"owner": "testowner", "tags": {"test": "testvalue"}}),
    ),
    *tag_term_cases("ami", "ami"),
    *[
        nc(
            f"should fail when specifying id with other fields / {n}",
            False,
            terms("ami", {"id": "ami-1234749", **extra}),
        )
        for n, extra in (
            ("alias", {"alias": "al2023@latest"}),
            ("tags", {"tags": {"test": "testvalue"}}),
            ("name", {"name": "my-custom-ami"}),
            ("owner", {"owner": "123456789"}),
        )
    ],
    *[
        nc(
            f"should fail when specifying alias with other fields / {n}",
            False,
            terms("ami", {"alias": "al2023@latest", **extra}),
        )
        for n, extra in (
            ("id", {"id": "ami-1234749"}),
            ("tags", {"tags": {"test": "testvalue"}}),
            ("name", {"name": "my-custom-ami"}),
            ("owner", {"owner": "123456789"}),
        )
    ],
    nc(
        "should fail when specifying alias with other terms",
        False,
        terms("ami", {"alias": "al2023@latest"}, {"id": "ami-1234749"}),
    ),
    *[
        nc(
            f"should succeed for valid aliases / {n}",
            True,
            at("spec.amiFamily", f),
            terms("ami", {"alias": a}),
        )
        for n, a, f in (
            ("al2 (latest)", "al2@latest", "AL2"),
            ("al2 (pinned)", "al2@v20240625", "AL2"),
            ("al2023 (latest)", "al2023@latest", "AL2023"),
            ("al2023 (pinned)", "al2023@v20240625", "AL2023"),
            ("bottlerocket (latest)", "bottlerocket@latest", "Bottlerocket"),
            ("bottlerocket (pinned)", "bottlerocket@1.10.0", "Bottlerocket"),
            ("windows2019 (latest)", "windows2019@latest", "Windows2019"),
            ("windows2022 (latest)", "windows2022@latest", "Windows2022"),
            ("windows2025 (latest)", "windows2025@latest", "Windows2025"),
        )
    ],
    *[
        nc(f"should fail for incorrectly formatted aliases / {n} {a!r}", False, terms("ami", {"alias": a}))
        for n, a in (
            ("missing family", "@latest"),
            ("missing version", "al2023"),
            ("missing version", "al2023@"),
            ("invalid separator", "al2023-latest"),
        )
    ],
    nc("should fail for an alias with an invalid family", False, terms("ami", {"alias": "ubuntu@latest"})),
    *[
        nc(
            f"should fail when specifying non-latest versions with Windows aliases / {w}",
            False,
            terms("ami", {"alias": f"{w.lower()}@v1.0.0"}),
        )
        for w in ("Windows2019", "Windows2022", "Windows2025")
    ],
    nc("should fail on kubeReserved with invalid keys", False, kubelet({"kubeReserved": {"pods": "2"}})),
    nc("should fail on systemReserved with invalid keys", False, kubelet({"systemReserved": {"pods": "2"}})),
    nc("should succeed on evictionHard with valid keys", True, kubelet({"evictionHard": SIGNALS})),
    nc("should fail on evictionHard with invalid keys", False, kubelet({"evictionHard": {"memory": "5%"}})),
    nc(
        "should fail on invalid formatted percentage value in evictionHard",
        False,
        kubelet({"evictionHard": {"memory.available": "5%3"}}),
    ),
    nc(
        "should fail on invalid percentage value (too large) in evictionHard",
        False,
        kubelet({"evictionHard": {"memory.available": "110%"}}),
    ),
    nc(
        "should fail on invalid quantity value in evictionHard",
        False,
        kubelet({"evictionHard": {"memory.available": "110GB"}}),
    ),
    nc(
        "should succeed on evictionSoft with valid keys",
        True,
        kubelet({"evictionSoft": SIGNALS, "evictionSoftGracePeriod": GRACE}),
    ),
    nc(
        "should fail on evictionSoft with invalid keys",
        False,
        soft("memory", "5%"),
    ),
    nc(
        "should fail on invalid formatted percentage value in evictionSoft",
        False,
        soft("memory.available", "5%3"),
    ),
    nc(
        "should fail on invalid percentage value (too large) in evictionSoft",
        False,
        soft("memory.available", "110%"),
    ),
    nc(
        "should fail on invalid quantity value in evictionSoft",
        False,
        soft("memory.available", "110GB"),
    ),
    nc(
        "should fail when eviction soft doesn't have matching grace period",
        False,
        kubelet({"evictionSoft": {"memory.available": "200Mi"}}),
    ),
    nc(
        "should succeed on a valid imageGCHighThresholdPercent",
        True,
        kubelet({"imageGCHighThresholdPercent": 10}),
    ),
    nc(
        "should fail when imageGCHighThresholdPercent is less than imageGCLowThresholdPercent",
        False,
        kubelet({"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60}),
    ),
    nc(
        "should fail when imageGCLowThresholdPercent is greather than imageGCHighThresheldPercent",
        False,
        kubelet({"imageGCHighThresholdPercent": 50, "imageGCLowThresholdPercent": 60}),
    ),
    nc(
        "should succeed on evictionSoftGracePeriod with valid keys",
        True,
        kubelet({"evictionSoft": SIGNALS, "evictionSoftGracePeriod": GRACE}),
    ),
    nc(
        "should fail on evictionSoftGracePeriod with invalid keys",
        False,
        kubelet({"evictionSoftGracePeriod": {"memory": "1m0s"}}),
    ),
    nc(
        "should fail when eviction soft grace period doesn't have matching threshold",
        False,
        kubelet({"evictionSoftGracePeriod": {"memory.available": "1m0s"}}),
    ),
    nc(
        "should succeed for valid inputs (metadataOptions)",
        True,
        at(
            "spec.metadataOptions",
            {
                "httpEndpoint": "disabled",
                "httpProtocolIPv6": "enabled",
                "httpPutResponseHopLimit": 34,
                "httpTokens": "optional",
            },
        ),
    ),
    nc(
        "should fail for invalid for HTTPEndpoint",
        False,
        at("spec.metadataOptions", {"httpEndpoint": "test"}),
    ),
    nc(
        "should fail for invalid for HTTPProtocolIPv6",
        False,
        at("spec.metadataOptions", {"httpProtocolIPv6": "test"}),
    ),
    nc(
        "should fail for invalid for HTTPPutResponseHopLimit",
        False,
        at("spec.metadataOptions", {"httpPutResponseHopLimit": -5}),
    ),
    nc("should fail for invalid for HTTPTokens", False, at("spec.metadataOptions", {"httpTokens": "test"})),
    nc(
        "should succeed if more than one root volume is specified",
        True,
        at("spec.amiFamily", None),
        bdm(volume("map-device-1", "500G", True), volume("map-device-2", "50T")),
    ),
    nc(
        "should succeed for valid VolumeSize in G",
        True,
        at("spec.amiFamily", None),
        bdm(volume("map-device-1", "58G")),
    ),
    nc(
        "should succeed for valid VolumeSize in T",
        True,
        at("spec.amiFamily", None),
        bdm(volume("map-device-1", "45T")),
    ),
    nc(
        "should fail if more than one root volume is specified",
        False,
        at("spec.amiFamily", None),
        bdm(volume("map-device-1", "50G", True), volume("map-device-2", "50G", True)),
    ),
    nc(
        "should fail VolumeSize is less then 1Gi/1G",
        False,
        at("spec.amiFamily", None),
        bdm(volume("map-device-1", "1m")),
    ),
    nc(
        "should fail VolumeSize is greater then 64T",
        False,
        at("spec.amiFamily", None),
        bdm(volume("map-device-1", "100T")),
    ),
    nc(
        "should fail for VolumeSize that do not parse into quantity values",
        False,
        at("spec.amiFamily", None),
        bdm(volume("map-device-1", "0")),
    ),
    nc(
        "should fail if VolumeInitializationRate set but SnapshotID not specified",
        False,
        at("spec.amiFamily", None),
        bdm(volume("map-device-1", "0", volumeInitializationRate=100)),
    ),
    nc(
        "should fail if VolumeInitializationRate too low",
        False,
        at("spec.amiFamily", None),
        bdm(volume("map-device-1", "0", snapshotID="snap-1", volumeInitializationRate=99)),
    ),
    nc(
        "should fail if VolumeInitializationRate too high",
        False,
        at("spec.amiFamily", None),
        bdm(volume("map-device-1", "0", snapshotID="snap-1", volumeInitializationRate=888)),
    ),
    nc(
        "should succeed with valid multiple network interfaces",
        True,
        nics((0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "efa-only"), (1, 1, "interface")),
    ),
    nc("should succeed when network interfaces is empty", True, at("spec.networkInterfaces", [])),
    nc("should fail with an invalid interface type", False, nics((0, 0, "efa"))),
    nc(
        "should fail with a negative NetworkCardIndex", False, nics((0, 0, "interface"), (-1, 0, "interface"))
    ),
    nc("should fail with a negative DeviceIndex", False, nics((-1, 0, "interface"), (0, -1, "interface"))),
    nc(
        "should fail with duplicate Network Interface and Device Index fields",
        False,
        nics((0, 0, "interface"), (0, 1, "efa-only"), (1, 0, "interface"), (1, 0, "efa-only")),
    ),
    nc("should fail with no primary network interface", False, nics((0, 1, "interface"))),
    nc("should fail when primary network interface is not ENA", False, nics((0, 0, "efa-only"))),
    nc(
        "should fail when multiple EFA devices on one network card",
        False,
        nics((0, 0, "interface"), (1, 0, "efa-only"), (1, 1, "efa-only")),
    ),
    nc(
        "should fail when connectionTracking is specified with no fields set",
        False,
        at("spec.connectionTracking", {}),
    ),
    *[
        nc(f"connectionTracking / {n}", ok, at("spec.connectionTracking", value))
        for n, ok, value in (
            ("should succeed with valid tcpEstablishedTimeout", True, {"tcpEstablishedTimeout": 60}),
            ("should succeed with valid udpStreamTimeout", True, {"udpStreamTimeout": 120}),
            ("should succeed with valid udpTimeout", True, {"udpTimeout": 45}),
            (
                "should succeed with all valid connection tracking settings",
                True,
                {"tcpEstablishedTimeout": 432000, "udpStreamTimeout": 180, "udpTimeout": 60},
            ),
            (
                "should fail when tcpEstablishedTimeout is below minimum (60s)",
                False,
                {"tcpEstablishedTimeout": 59},
            ),
            (
                "should fail when tcpEstablishedTimeout is above maximum (432000s)",
                False,
                {"tcpEstablishedTimeout": 432001},
            ),
            ("should fail when udpStreamTimeout is below minimum (60s)", False, {"udpStreamTimeout": 59}),
            ("should fail when udpStreamTimeout is above maximum (180s)", False, {"udpStreamTimeout": 181}),
            ("should fail when udpTimeout is below minimum (30s)", False, {"udpTimeout": 29}),
            ("should fail when udpTimeout is above maximum (60s)", False, {"udpTimeout": 61}),
        )
    ],
    nc("should fail if role is not defined", False, at("spec.role", None)),
    nc(
        "should succeed when updating the role",
        True,
        at("spec.role", "test-role"),
        update=[at("spec.role", "test-role2")],
    ),
    nc(
        "should succeed to switch between an unmanaged and managed instance profile",
        True,
        at("spec.role", None),
        at("spec.instanceProfile", "test-instance-profile"),
        update=[at("spec.role", "test-role"), at("spec.instanceProfile", None)],
    ),
    nc(
        "should succeed to switch between a managed and unmanaged instance profile",
        True,
        at("spec.role", "test-role"),
        update=[at("spec.role", None), at("spec.instanceProfile", "test-instance-profile")],
    ),
    nc(
        "should succeed with nestedVirtualization enabled",
        True,
        at("spec.cpuOptions", {"nestedVirtualization": "enabled"}),
    ),
    nc(
        "should succeed with nestedVirtualization disabled",
        True,
        at("spec.cpuOptions", {"nestedVirtualization": "disabled"}),
    ),
    nc(
        "should fail with invalid nestedVirtualization value",
        False,
        at("spec.cpuOptions", {"nestedVirtualization": "invalid"}),
    ),
    nc("should succeed with empty CPUOptions", True, at("spec.cpuOptions", {})),
]

CASES = NODEPOOL_CASES + NODECLASS_CASES
