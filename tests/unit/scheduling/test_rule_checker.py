"""Issue 11 proof: an independent rule checker (rulecheck.py) finds no kube-scheduler rule broken by
the solver's plans, nor a pod reported unschedulable that an instance type could hold alone.

Part 1 shows the checker can fail: hand-made plans breaking each rule are caught, valid ones pass.
Part 2 runs the solver on random workloads (existing nodes with running pods, several
Provisioners, batch pods mixing every rule) and checks each plan. The random test gates the
features the solver does not parse yet (found by probing its API; KARPY_RULECHECK_ALL=1 turns
them all on), and prints which were on and what the plans did. A failure lists each violation
class with its seeds; `run(seed)` replays one.
"""

from __future__ import annotations

import dataclasses
import inspect
import os
import random
import time
from collections import Counter
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from extender.api import labels as wk
from extender.api.pod import Pod, PodError
from extender.api.provisioner import Taint
from extender.api.resources import Resources
from extender.scheduling.plan import ExistingNode, Plan, PlannedNode, Unschedulable
from tests import builders
from tests.model_builders import existing_node, planned_node
from tests.unit.scheduling import rulecheck
from tests.unit.scheduling.builders import ZONES, catalog, make_provisioner

A, B, C = ZONES
TYPES = {t.name: t for t in catalog()}


# -- builders for hand-made plans -----------------------------------------------------------------


#: A pod as API JSON asking 100m CPU, no uid or image; keywords as tests.builders.pod_manifest.
raw_pod = partial(builders.pod_manifest, cpu="100m", uid="", image=None)


@dataclass(frozen=True)
class Ref:
    """Stands for a karpy Pod in a hand-made plan: the checker only reads `key`."""

    key: str


def ref(raw: dict) -> Ref:
    return Ref(f"{raw['metadata'].get('namespace', 'default')}/{raw['metadata']['name']}")


def node(pods: list[dict], *, options: tuple[str, ...] = ("m5.xlarge",), **fields: Any) -> PlannedNode:
    """A planned node holding the checker's stand-ins for `pods`, its options named from the catalog."""
    return planned_node([ref(p) for p in pods], options=[TYPES[o] for o in options], **fields)


#: An amd64 node of the cluster (4 CPU, 16Gi); arguments as tests.builders.cluster_node.
existing = partial(builders.cluster_node, labels={wk.ARCH: "amd64"})


@dataclass
class Case:
    """New pods, existing nodes and a hand-made plan; `check()` runs the checker on them."""

    new: list[dict]
    nodes: list[PlannedNode] = field(default_factory=list)
    cluster: list[dict] = field(default_factory=list)
    on_existing: dict[str, list[dict]] = field(default_factory=dict)
    unschedulable: list[tuple[dict, str]] = field(default_factory=list)
    provisioners: list = field(default_factory=lambda: [make_provisioner()])
    namespaces: dict | None = None
    usage: dict | None = None
    #: pod name -> bind phase (Plan.bind_phases).
    phases: dict[str, int] = field(default_factory=dict)

    def plan(self) -> Plan:
        return Plan(
            nodes=tuple(self.nodes),
            existing={k: tuple(ref(p) for p in v) for k, v in self.on_existing.items()},
            unschedulable=tuple(Unschedulable(ref(p), r) for p, r in self.unschedulable),
            bind_phases={f"default/{name}": phase for name, phase in self.phases.items()},
        )

    def check(self) -> list[str]:
        args = (self.new, self.cluster, self.plan(), self.provisioners, catalog())
        kw = {"namespaces": self.namespaces, "usage": self.usage}
        return (
            rulecheck.violations(*args, **kw)
            + rulecheck.unjustified_unschedulable(*args, **kw)
            + rulecheck.stricter_than_scheduler(*args, **kw)
        )


def caught(case: Case, prefix: str) -> list[str]:
    found = case.check()
    assert any(line.startswith(prefix) for line in found), found
    return found


def clean(case: Case) -> None:
    assert case.check() == []


def spread(key: str, skew: int = 1, selector: dict | None = None, **extra: Any) -> dict:
    item = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", **extra}
    if selector is not None:
        item["labelSelector"] = {"matchLabels": selector}
    return item


def pod_terms(kind: str, key: str, selector: dict | None, **extra: Any) -> dict:
    term = {"topologyKey": key, **extra}
    if selector is not None:
        term["labelSelector"] = {"matchLabels": selector}
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


# -- part 1: the checker can fail ------------------------------------------------------------------


def test_quantities_and_sidecar_requests_follow_kubernetes():
    assert rulecheck.quantity("500m") == 0.5 and rulecheck.quantity("1Gi") == 2**30
    assert rulecheck.quantity("2e3") == 2000 and rulecheck.quantity("1k") == 1000
    spec = {
        "containers": [{"resources": {"requests": {"cpu": "1"}}}],
        "initContainers": [
            {"resources": {"requests": {"cpu": "500m"}}, "restartPolicy": "Always"},
            {"resources": {"requests": {"cpu": "3"}}},
            {"resources": {"limits": {"cpu": "250m"}}, "restartPolicy": "Always"},
        ],
        "overhead": {"cpu": "100m"},
    }
    # app 1 + sidecars 0.75 = 1.75; init 3 + sidecar before it 0.5 = 3.5; plus overhead.
    assert rulecheck.pod_requests(spec) == {"cpu": 3.6}


def test_resources_over_any_option_are_caught():
    pods = [raw_pod(f"p{i}", cpu="1") for i in range(5)]
    caught(
        Case(pods, [node(pods, options=("m5.2xlarge", "m5.large"))]), "resources: planned-0 option m5.large"
    )
    clean(Case(pods, [node(pods, options=("m5.2xlarge",))]))
    disk = [
        builders.pod_manifest("d", uid="", image=None, requests={"cpu": "100m", "ephemeral-storage": "100Ti"})
    ]
    caught(Case(disk, [node(disk)]), "resources: planned-0 option m5.xlarge: ephemeral-storage")
    device = [
        builders.pod_manifest("g", uid="", image=None, requests={"cpu": "100m", "example.com/fpga": "1"})
    ]
    caught(Case(device, [node(device)]), "resources: planned-0 option m5.xlarge: example.com/fpga 1 > 0")
    tiny = [raw_pod(f"t{i}", cpu="10m") for i in range(9)]
    caught(
        Case(tiny, [node(tiny, options=("c6g.medium",))]),
        "resources: planned-0 option c6g.medium: pods 9 > 8",
    )


def test_resources_on_existing_nodes_count_running_pods():
    running = [raw_pod("run", cpu="3")]
    new = [raw_pod("n", cpu="2")]
    case = Case(new, cluster=[existing("e1", A, running)], on_existing={"e1": new})
    caught(case, "resources: e1 allocatable: cpu 5 > 4")
    case.new = case.on_existing["e1"] = [raw_pod("n", cpu="1")]
    clean(case)


def test_placing_on_an_unschedulable_or_unknown_node_is_caught():
    new = [raw_pod("n")]
    caught(Case(new, cluster=[existing("e1", A, schedulable=False)], on_existing={"e1": new}), "existing:")
    caught(Case(new, on_existing={"ghost": new}), "existing: plan places pods on unknown node ghost")


def test_accounting_catches_lost_and_duplicated_pods():
    a, b = (
        raw_pod("a"),
        raw_pod("b"),
    )
    caught(Case([a, b], [node([a])]), "accounting: pod default/b neither placed")
    caught(Case([a], [node([a]), node([a])]), "accounting: pod default/a placed on planned-0 and planned-1")


def test_host_port_conflicts_are_caught():
    def web(name, ip="", protocol="TCP"):
        return raw_pod(
            name, ports=[{"containerPort": 80, "hostPort": 8080, "hostIP": ip, "protocol": protocol}]
        )

    a, b = web("a"), web("b")
    caught(Case([a, b], [node([a, b])]), "host ports: default/a and default/b both use TCP/8080")
    clean(Case([a, b], [node([a]), node([b])]))
    x, y = web("x", "10.0.0.1"), web("y", "10.0.0.2")
    clean(Case([x, y], [node([x, y])]))
    z = web("z", "0.0.0.0")
    caught(Case([x, z], [node([x, z])]), "host ports:")
    u = web("u", protocol="UDP")
    clean(Case([a, u], [node([a, u])]))
    running = web("running")
    caught(Case([a], cluster=[existing("e1", A, [running])], on_existing={"e1": [a]}), "host ports:")


def test_csi_volumes_over_a_nodes_attach_limit_are_caught():
    """Issue 24, kube-scheduler NodeVolumeLimits: distinct EBS volumes over a new node's limit (every
    option's, by the EBS CSI driver's rules) or an existing node's CSINode count are violations."""
    claims = {f"default/v{i}": "ebs.csi.aws.com" for i in range(30)}

    def holder(name: str, first: int, count: int) -> dict:
        vols = [
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": f"v{i}"}}
            for i in range(first, first + count)
        ]
        return raw_pod(name, volumes=vols)

    many, few = holder("many", 0, 30), holder("few", 0, 3)
    for case, expected in (
        (Case([many], [node([many], options=("m5.large",))]), "volumes: planned-0 option m5.large: 30"),
        (Case([few], cluster=[existing("e1", A, [])], on_existing={"e1": [few]}), "volumes: e1 CSINode: 3"),
    ):
        for raw in case.cluster:
            raw["attach_limits"] = {"ebs.csi.aws.com": 2}
        found = rulecheck.violations(
            case.new, case.cluster, case.plan(), case.provisioners, catalog(), claims=claims
        )
        assert any(line.startswith(expected) for line in found), found
    fine = Case([few], [node([few], options=("m5.large",))])
    assert (
        rulecheck.violations(fine.new, fine.cluster, fine.plan(), fine.provisioners, catalog(), claims=claims)
        == []
    )


def test_a_daemonset_host_port_on_a_new_node_is_caught():
    """Issue 24: the DaemonSet pods landing on a new node hold their host ports there."""
    exporter = raw_pod("exporter", ports=[{"containerPort": 80, "hostPort": 9100}])
    exporter["metadata"]["ownerReferences"] = [{"kind": "DaemonSet", "name": "ds", "controller": True}]
    clash = raw_pod("clash", ports=[{"containerPort": 80, "hostPort": 9100}])
    case = Case([clash], [node([clash])])
    args = (case.new, case.cluster, case.plan(), case.provisioners, catalog())
    found = rulecheck.violations(*args, daemonsets=[exporter])
    assert any(
        line.startswith("host ports: default/clash and DaemonSet pod default/exporter") for line in found
    )
    other = raw_pod("other", ports=[{"containerPort": 80, "hostPort": 8080}])
    case = Case([other], [node([other])])
    args = (case.new, case.cluster, case.plan(), case.provisioners, catalog())
    assert rulecheck.violations(*args, daemonsets=[exporter]) == []


def test_untolerated_provisioner_and_node_taints_are_caught():
    tainted = make_provisioner(taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])
    plain = raw_pod("p")
    caught(Case([plain], [node([plain])], provisioners=[tainted]), "taints: default/p on planned-0")
    tolerant = raw_pod("t", tolerations=[{"key": "gpu", "operator": "Exists"}])
    clean(Case([tolerant], [node([tolerant])], provisioners=[tainted]))
    soft = make_provisioner(taints=[{"key": "gpu", "value": "yes", "effect": "PreferNoSchedule"}])
    clean(Case([plain], [node([plain])], provisioners=[soft]))
    taint = {"key": "team", "value": "x", "effect": "NoExecute"}
    caught(Case([plain], cluster=[existing("e1", A, taints=[taint])], on_existing={"e1": [plain]}), "taints:")


def test_node_selector_and_affinity_must_hold_for_every_possible_value():
    zonal = raw_pod("z", nodeSelector={wk.ZONE: A})
    caught(Case([zonal], [node([zonal], zones=(A, B))]), "node affinity: default/z on planned-0")
    clean(Case([zonal], [node([zonal], zones=(A,))]))
    legacy = raw_pod("l", nodeSelector={"failure-domain.beta.kubernetes.io/zone": B})
    caught(Case([legacy], [node([legacy], zones=(A,))]), "node affinity:")
    clean(Case([legacy], [node([legacy], zones=(B,))]))
    arm = raw_pod("arm", nodeSelector={wk.ARCH: "arm64"})
    caught(Case([arm], [node([arm], options=("m6g.xlarge", "m5.xlarge"))]), "node affinity:")
    clean(Case([arm], [node([arm], options=("m6g.xlarge", "c6g.xlarge"))]))
    terms = [
        {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": [C]}]},
        {"matchExpressions": [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}]},
    ]
    ored = raw_pod(
        "o",
        affinity={
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}
        },
    )
    clean(Case([ored], [node([ored], zones=(C,), capacity_types=("on-demand", "spot"))]))
    clean(Case([ored], [node([ored], zones=(A, B), capacity_types=("spot",))]))
    caught(Case([ored], [node([ored], zones=(B, C), capacity_types=("spot", "on-demand"))]), "node affinity:")
    team = raw_pod("t", nodeSelector={"team": "a"})
    caught(Case([team], [node([team])]), "node affinity:")
    labelled = make_provisioner(labels={"team": "a"})
    clean(Case([team], [node([team])], provisioners=[labelled]))


def test_provisioner_requirements_and_labels_must_hold():
    prov = make_provisioner(
        requirements=[
            {"key": wk.ZONE, "operator": "In", "values": [A]},
            {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]},
        ]
    )
    p = raw_pod("p")
    caught(
        Case([p], [node([p], zones=(A, B), capacity_types=("spot",))], provisioners=[prov]), "provisioner:"
    )
    caught(
        Case([p], [node([p], zones=(A,), capacity_types=("on-demand",))], provisioners=[prov]), "provisioner:"
    )
    clean(Case([p], [node([p], zones=(A,), capacity_types=("spot",))], provisioners=[prov]))
    caught(Case([p], [node([p], provisioner="nope")]), "planned-0: unknown provisioner nope")
    wrong = node([p], labels={wk.ZONE: B})
    caught(Case([p], [wrong]), "planned-0: label topology.kubernetes.io/zone=us-west-2b yet option")


def test_limits_are_checked_against_the_cheapest_options():
    prov = make_provisioner(limits={"resources": {"cpu": "6"}})
    a, b = (
        raw_pod("a"),
        raw_pod("b"),
    )
    caught(
        Case([a, b], [node([a]), node([b])], provisioners=[prov]),
        "limits: provisioner default cpu 8 > limit 6",
    )
    clean(Case([a], [node([a])], provisioners=[prov]))


def test_zone_spread_skew_is_caught():
    group = {"app": "w"}
    pods = [
        raw_pod(f"w{i}", labels=group, topologySpreadConstraints=[spread(wk.ZONE, 1, group)])
        for i in range(4)
    ]
    caught(
        Case(pods, [node(pods[:3], zones=(A,)), node(pods[3:], zones=(B,))]), "topology spread: default/w0"
    )
    clean(Case(pods, [node(pods[:2], zones=(A,)), node(pods[2:], zones=(B,))]))
    loose = [
        raw_pod(f"w{i}", labels=group, topologySpreadConstraints=[spread(wk.ZONE, 2, group)])
        for i in range(4)
    ]
    clean(Case(loose, [node(loose[:3], zones=(A,)), node(loose[3:], zones=(B,))]))
    anyway = [
        raw_pod(
            f"w{i}",
            labels=group,
            topologySpreadConstraints=[{**spread(wk.ZONE, 1, group), "whenUnsatisfiable": "ScheduleAnyway"}],
        )
        for i in range(4)
    ]
    clean(Case(anyway, [node(anyway, zones=(A,)), node([], zones=(B,))]))


def test_a_nil_label_selector_counts_no_pod_but_the_key_is_still_required():
    group = {"app": "w"}
    pods = [
        raw_pod(f"w{i}", labels=group, topologySpreadConstraints=[spread(wk.ZONE, 1, None)]) for i in range(4)
    ]
    clean(Case(pods, [node(pods, zones=(A,)), node([], zones=(B,))]))
    racked = [
        raw_pod(f"r{i}", labels=group, topologySpreadConstraints=[spread("rack", 1, None)]) for i in range(2)
    ]
    caught(
        Case(racked, [node(racked)]), "topology spread: default/r0 on planned-0 may lack topology key rack"
    )


def test_existing_pods_and_empty_existing_nodes_count_in_spread():
    group = {"app": "w"}
    running = [raw_pod(f"old{i}", labels=group) for i in range(2)]
    new = [raw_pod("w", labels=group, topologySpreadConstraints=[spread(wk.ZONE, 1, group)])]
    cluster = [existing("e1", A, running), existing("e2", B)]
    caught(
        Case(new, [node(new, zones=(A,))], cluster=cluster), "topology spread: default/w on planned-0 skew 3"
    )
    clean(Case(new, [node(new, zones=(B,))], cluster=cluster))
    # Pods in other namespaces are not counted.
    other = [raw_pod(f"old{i}", labels=group, namespace="other") for i in range(2)]
    clean(Case(new, [node(new, zones=(A,))], cluster=[existing("e1", A, other), existing("e2", B)]))


def test_spread_honours_node_affinity_policy_and_min_domains():
    group = {"app": "w"}
    required = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": [A, B]}]}
                ]
            }
        }
    }

    def pods(**extra):
        constraint = spread(wk.ZONE, 1, group, **extra)
        return [
            raw_pod(f"w{i}", labels=group, affinity=required, topologySpreadConstraints=[constraint])
            for i in range(4)
        ]

    empty_c = [existing("e3", C)]
    honor = pods()
    clean(Case(honor, [node(honor[:2], zones=(A,)), node(honor[2:], zones=(B,))], cluster=empty_c))
    ignore = pods(nodeAffinityPolicy="Ignore")
    caught(
        Case(ignore, [node(ignore[:2], zones=(A,)), node(ignore[2:], zones=(B,))], cluster=empty_c),
        "topology spread:",
    )
    few = pods(minDomains=3)
    caught(Case(few, [node(few[:2], zones=(A,)), node(few[2:], zones=(B,))]), "topology spread:")
    clean(Case(few[:2], [node(few[:1], zones=(A,)), node(few[1:2], zones=(B,))]))


def test_spread_taints_policy_honor_leaves_out_untolerated_nodes():
    group = {"app": "w"}
    taint = {"key": "dedicated", "value": "x", "effect": "NoSchedule"}
    cluster = [existing("e3", C, taints=[taint])]

    def pods(**extra):
        return [
            raw_pod(f"w{i}", labels=group, topologySpreadConstraints=[spread(wk.ZONE, 1, group, **extra)])
            for i in range(4)
        ]

    ignore = pods()
    caught(
        Case(ignore, [node(ignore[:2], zones=(A,)), node(ignore[2:], zones=(B,))], cluster=cluster),
        "topology spread:",
    )
    honor = pods(nodeTaintsPolicy="Honor")
    clean(Case(honor, [node(honor[:2], zones=(A,)), node(honor[2:], zones=(B,))], cluster=cluster))


def test_spread_match_label_keys_split_the_count():
    def pods(hash_):
        constraint = spread(wk.HOSTNAME, 1, {"app": "w"}, matchLabelKeys=["pod-template-hash"])
        labels = {"app": "w", "pod-template-hash": hash_}
        return [
            raw_pod(f"w{hash_}{i}", labels=labels, topologySpreadConstraints=[constraint]) for i in range(2)
        ]

    old, new = pods("a"), pods("b")
    # Each revision is spread over the two nodes on its own: one of each per node.
    clean(Case(old + new, [node([old[0], new[0]]), node([old[1], new[1]])]))
    caught(Case(old + new, [node(old), node(new)]), "topology spread:")


def test_uncertain_zones_count_in_the_worst_case():
    group = {"app": "w"}

    def pods(n, prefix="w"):
        return [
            raw_pod(f"{prefix}{i}", labels=group, topologySpreadConstraints=[spread(wk.ZONE, 1, group)])
            for i in range(n)
        ]

    ws = pods(4)
    # Two pods on a node that may land in A next to a certain A pod: skew 2 in that world.
    caught(
        Case(ws, [node(ws[:1], zones=(A,)), node(ws[1:2], zones=(B,)), node(ws[2:], zones=(A, B, C))]),
        "topology spread:",
    )
    clean(Case(ws, [node(ws[:1], zones=(A,)), node(ws[1:2], zones=(B,)), node(ws[2:], zones=(C,))]))
    # An eligible empty node that may open a third zone makes the minimum 0.
    ws = pods(4)
    spare = raw_pod("spare")
    base = [node(ws[:2], zones=(A,)), node(ws[2:], zones=(B,))]
    caught(Case([*ws, spare], [*base, node([spare], zones=(A, B, C))]), "topology spread:")
    clean(Case([*ws, spare], [*base, node([spare], zones=(A, B))]))


def test_a_breach_only_pods_bound_later_cause_is_classed_order_dependent():
    watcher = raw_pod("c", labels={"app": "c"}, topologySpreadConstraints=[spread(wk.ZONE, 1, {"app": "x"})])
    xs = [raw_pod(f"x{i}", labels={"app": "x"}) for i in range(2)]
    found = caught(
        Case([watcher, *xs], [node([watcher, *xs], zones=(A,)), node([], zones=(B,))]), "topology spread ("
    )
    assert found[0].startswith("topology spread (order-dependent): default/c on planned-0 skew 2"), found
    # The same count from running pods is a plain breach: no binding order helps.
    cluster = [existing("e1", A, xs)]
    caught(
        Case([watcher], [node([watcher], zones=(A,)), node([], zones=(B,))], cluster=cluster),
        "topology spread:",
    )


def test_each_pod_is_checked_at_its_bind_in_the_plans_bind_order():
    """kube-scheduler checks a pod's own spread when it binds (podtopologyspread/filtering.go), never
    again when others bind: a pod the spread counts may join the zone after the spreading pod."""
    watcher = raw_pod("c", labels={"app": "x"}, topologySpreadConstraints=[spread(wk.ZONE, 1, {"app": "x"})])
    joiner = raw_pod("j", labels={"app": "x"})
    cluster = [existing(f"e-{z}", z) for z in (B, C)]
    nodes = [node([watcher, joiner], zones=(A,))]
    clean(Case([watcher, joiner], nodes, cluster=cluster, phases={"j": 1}))
    # Bound together (one phase) or the joiner first, the watcher sees a skew of 2 at its bind.
    caught(Case([watcher, joiner], nodes, cluster=cluster), "topology spread (order-dependent): default/c")
    caught(Case([watcher, joiner], nodes, cluster=cluster, phases={"c": 1}), "topology spread")
    # Required affinity finds only pods bound before it.
    leader = raw_pod("l", labels={"role": "lead"})
    follower = raw_pod("f", affinity=pod_terms("podAffinity", wk.HOSTNAME, {"role": "lead"}))
    pair = [node([leader, follower])]
    clean(Case([leader, follower], pair, phases={"f": 1}))
    caught(Case([leader, follower], pair, phases={"l": 1}), "pod affinity: default/f")
    # A pod bound later meets the required anti-affinity of those bound before it (symmetry).
    loner = raw_pod(
        "lo", labels={"app": "lo"}, affinity=pod_terms("podAntiAffinity", wk.HOSTNAME, {"app": "y"})
    )
    other = raw_pod("y", labels={"app": "y"})
    caught(Case([loner, other], [node([loner, other])], phases={"y": 1}), "pod anti-affinity (symmetry)")


def stricter(case: Case) -> list[str]:
    """The pods the checker finds kube-scheduler would have bound (pod key, node)."""
    args = (case.new, case.cluster, case.plan(), case.provisioners, catalog())
    lines = rulecheck.stricter_than_scheduler(*args, namespaces=case.namespaces, usage=case.usage)
    return [(line.split()[1], line.split()[-1]) for line in lines]


def test_a_pod_left_unschedulable_that_kube_scheduler_would_bind_is_caught():
    """stricter_than_scheduler: bound last to a node of the plan (or a schedulable node of the
    cluster) the pod passes every filter, so karpy was stricter than kube-scheduler."""
    watcher = raw_pod("c", labels={"app": "x"}, topologySpreadConstraints=[spread(wk.ZONE, 1, {"app": "x"})])
    joiner = raw_pod("j", labels={"app": "x"})
    cluster = [existing(f"e-{z}", z, schedulable=False) for z in (B, C)]
    left = Case([watcher, joiner], [node([watcher])], cluster=cluster, unschedulable=[(joiner, "spread")])
    assert stricter(left) == [("default/j", "planned-0")]
    assert caught(left, "stricter: default/j reported as 'spread' but kube-scheduler would bind it last")
    # On a running node with room too, but never on one karpy does not pack (cordoned, not its own).
    assert stricter(Case([joiner], cluster=[existing("e1", A)], unschedulable=[(joiner, "x")])) == [
        ("default/j", "e1")
    ]
    assert (
        stricter(
            Case([joiner], cluster=[existing("e1", A, schedulable=False)], unschedulable=[(joiner, "x")])
        )
        == []
    )
    # Not where its own spread would break, nor without room.
    spreader = raw_pod("s", labels={"app": "x"}, topologySpreadConstraints=[spread(wk.ZONE, 1, {"app": "x"})])
    assert (
        stricter(
            Case([watcher, spreader], [node([watcher])], cluster=cluster, unschedulable=[(spreader, "x")])
        )
        == []
    )
    huge = raw_pod("h", cpu="64")
    assert stricter(Case([huge], [node([])], unschedulable=[(huge, "x")])) == []
    # Pods that exclude each other: only one of them would have been bound.
    twins = [
        raw_pod(
            f"t{i}", labels={"app": "t"}, affinity=pod_terms("podAntiAffinity", wk.HOSTNAME, {"app": "t"})
        )
        for i in range(2)
    ]
    assert stricter(Case(twins, [node([])], unschedulable=[(t, "anti-affinity") for t in twins])) == [
        ("default/t0", "planned-0")
    ]


def test_hostname_spread_counts_each_node():
    group = {"app": "h"}
    pods = [
        raw_pod(f"h{i}", labels=group, topologySpreadConstraints=[spread(wk.HOSTNAME, 1, group)])
        for i in range(4)
    ]
    caught(Case(pods, [node(pods[:3]), node(pods[3:])]), "topology spread:")
    clean(Case(pods, [node(pods[:2]), node(pods[2:])]))
    clean(Case(pods, [node([p]) for p in pods]))


def test_pod_anti_affinity_is_caught_on_shared_or_possibly_shared_domains():
    group = {"app": "db"}
    host = [
        raw_pod(f"d{i}", labels=group, affinity=pod_terms("podAntiAffinity", wk.HOSTNAME, group))
        for i in range(2)
    ]
    caught(
        Case(host, [node(host)]),
        "pod anti-affinity: default/d0 on planned-0 may share kubernetes.io/hostname",
    )
    clean(Case(host, [node(host[:1]), node(host[1:])]))
    zone = [
        raw_pod(f"z{i}", labels=group, affinity=pod_terms("podAntiAffinity", wk.ZONE, group))
        for i in range(2)
    ]
    caught(Case(zone, [node(zone[:1], zones=(A, B)), node(zone[1:], zones=(B, C))]), "pod anti-affinity:")
    clean(Case(zone, [node(zone[:1], zones=(A,)), node(zone[1:], zones=(B, C))]))
    # A term with a nil selector selects nothing.
    nil = [
        raw_pod(f"n{i}", labels=group, affinity=pod_terms("podAntiAffinity", wk.HOSTNAME, None))
        for i in range(2)
    ]
    clean(Case(nil, [node(nil)]))


def test_existing_pods_anti_affinity_is_symmetric():
    guard = raw_pod(
        "guard", labels={"app": "guard"}, affinity=pod_terms("podAntiAffinity", wk.ZONE, {"app": "web"})
    )
    web = raw_pod("web", labels={"app": "web"})
    cluster = [existing("e1", A, [guard])]
    caught(
        Case([web], [node([web], zones=(A,))], cluster=cluster), "pod anti-affinity (symmetry): default/web"
    )
    clean(Case([web], [node([web], zones=(B,))], cluster=cluster))
    # Between new pods, too.
    guard2 = raw_pod(
        "guard2", labels={"app": "guard"}, affinity=pod_terms("podAntiAffinity", wk.HOSTNAME, {"app": "web"})
    )
    caught(Case([guard2, web], [node([guard2, web])]), "pod anti-affinity (symmetry):")


def test_namespaces_and_namespace_selectors_scope_terms():
    group = {"app": "db"}
    other = raw_pod("other", namespace="team-b", labels=group)
    own_ns = raw_pod("mine", labels=group, affinity=pod_terms("podAntiAffinity", wk.HOSTNAME, group))
    clean(Case([own_ns, other], [node([own_ns, other])]))
    listed = raw_pod(
        "mine", labels=group, affinity=pod_terms("podAntiAffinity", wk.HOSTNAME, group, namespaces=["team-b"])
    )
    caught(Case([listed, other], [node([listed, other])]), "pod anti-affinity: default/mine")
    everywhere = raw_pod(
        "mine", labels=group, affinity=pod_terms("podAntiAffinity", wk.HOSTNAME, group, namespaceSelector={})
    )
    caught(Case([everywhere, other], [node([everywhere, other])]), "pod anti-affinity: default/mine")
    prod = raw_pod(
        "mine",
        labels=group,
        affinity=pod_terms(
            "podAntiAffinity", wk.HOSTNAME, group, namespaceSelector={"matchLabels": {"env": "prod"}}
        ),
    )
    namespaces = {"default": {"env": "prod"}, "team-b": {"env": "dev"}}
    clean(Case([prod, other], [node([prod, other])], namespaces=namespaces))
    namespaces["team-b"] = {"env": "prod"}
    caught(Case([prod, other], [node([prod, other])], namespaces=namespaces), "pod anti-affinity:")


def test_pod_affinity_needs_a_matching_pod_in_every_possible_domain():
    db = raw_pod("db", labels={"app": "db"})
    web = raw_pod("web", labels={"app": "web"}, affinity=pod_terms("podAffinity", wk.ZONE, {"app": "db"}))
    cluster = [existing("e1", A, [db])]
    clean(Case([web], [node([web], zones=(A,))], cluster=cluster))
    caught(Case([web], [node([web], zones=(B,))], cluster=cluster), "pod affinity: default/web on planned-0")
    caught(Case([web], [node([web], zones=(A, B))], cluster=cluster), "pod affinity:")
    # Nothing matches anywhere and the pod does not match its own term: it cannot be placed.
    caught(Case([web], [node([web], zones=(A,))]), "pod affinity:")
    # A db pod on a node whose zone is undecided does not pin the web pod's zone.
    newdb = raw_pod("db2", labels={"app": "db"})
    caught(Case([web, newdb], [node([web], zones=(A,)), node([newdb], zones=(A, B))]), "pod affinity:")
    clean(Case([web, newdb], [node([web, newdb], zones=(A, B))]))


def test_self_affinity_lets_the_first_pod_anywhere_but_the_rest_must_join():
    group = {"app": "g"}
    pods = [
        raw_pod(f"g{i}", labels=group, affinity=pod_terms("podAffinity", wk.HOSTNAME, group))
        for i in range(3)
    ]
    clean(Case(pods[:1], [node(pods[:1])]))
    clean(Case(pods, [node(pods)]))
    caught(Case(pods, [node(pods[:2]), node(pods[2:])]), "pod affinity: default/g2 on planned-1")


def test_pods_with_unmodelled_rules_must_not_be_placed():
    claim = raw_pod("pvc", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    caught(Case([claim], [node([claim])]), "unmodelled: default/pvc on planned-0")
    clean(Case([claim], unschedulable=[(claim, "karpy does not model volume data")]))
    fields = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}]
    pinned = raw_pod(
        "pin",
        affinity={
            "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": fields}}
        },
    )
    found = caught(Case([pinned], [node([pinned])]), "unmodelled: default/pin")
    assert any(line.startswith("node affinity: default/pin") for line in found)


def test_unjustified_unschedulable_is_caught_and_justified_ones_are_not():
    small = raw_pod("small")
    caught(
        Case([small], unschedulable=[(small, "no instance type has room")]), "unschedulable: default/small"
    )
    huge = raw_pod("huge", cpu="500")
    clean(Case([huge], unschedulable=[(huge, "no instance type has room")]))
    clean(Case([small], unschedulable=[(small, "provisioner default limits exceeded")]))
    tainted = make_provisioner(taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])
    clean(Case([small], unschedulable=[(small, "did not tolerate")], provisioners=[tainted]))
    lonely = raw_pod(
        "lonely", labels={"app": "x"}, affinity=pod_terms("podAffinity", wk.ZONE, {"app": "nobody"})
    )
    clean(Case([lonely], unschedulable=[(lonely, "pod affinity: no pod matches")]))
    # A topology reason with nothing topological about the pod is not a justification.
    caught(Case([small], unschedulable=[(small, "topology spread: no eligible zone")]), "unschedulable:")
    limited = make_provisioner(limits={"resources": {"cpu": "4"}})
    clean(
        Case(
            [small], unschedulable=[(small, "other")], provisioners=[limited], usage={"default": {"cpu": 3.5}}
        )
    )
    caught(
        Case(
            [small], unschedulable=[(small, "other")], provisioners=[limited], usage={"default": {"cpu": 1}}
        ),
        "unschedulable:",
    )
    disk = builders.pod_manifest(
        "disk", uid="", image=None, requests={"cpu": "100m", "ephemeral-storage": "100Ti"}
    )
    clean(Case([disk], unschedulable=[(disk, "no instance type has room")]))
    arm = raw_pod("arm", nodeSelector={wk.ARCH: "arm64"})
    amd_only = make_provisioner(requirements=[{"key": wk.ARCH, "operator": "In", "values": ["amd64"]}])
    clean(Case([arm], unschedulable=[(arm, "no instance type")], provisioners=[amd_only]))


# -- part 2: random workloads through the solver ---------------------------------------------------

#: `KARPY_RULECHECK_SEEDS=0:3000` runs more (about 0.03-0.05 s a seed); one seed alone:
#: `python -c "from tests.unit.scheduling.test_rule_checker import run; print(*run(980)[2], sep=chr(10))"`.
SEEDS = range(*map(int, os.environ.get("KARPY_RULECHECK_SEEDS", "0:400").split(":")))
NAMESPACES = {"default": {"env": "prod"}, "team-a": {"env": "prod", "team": "a"}, "team-b": {"env": "dev"}}
CPUS = ["100m", "250m", "500m", "1", "1500m", "2", "3"]
MEMORIES = ["128Mi", "512Mi", "1Gi", "2Gi", "4Gi", "8Gi"]
RUNNING_APPS = ["legacy", "system", "cache"]
DEDICATED = "dedicated"


@dataclass(frozen=True)
class Features:
    """What the solver's API accepts; features it does not are left out of the workloads."""

    existing_pods: bool = True
    namespaces: bool = True
    any_topology_key: bool = True
    spread_fields: bool = True
    host_ports: bool = True
    sidecars: bool = True
    deprecated_keys: bool = True
    namespace_selector: bool = True
    unmodelled: bool = True

    @classmethod
    def probe(cls) -> Features:
        from extender.scheduling.solver import solve

        if os.environ.get("KARPY_RULECHECK_ALL"):
            return cls()

        def parses(**spec: Any) -> Pod | None:
            try:
                return Pod.from_manifest(
                    builders.pod_manifest(
                        "probe", cpu="100m", uid="", image=None, labels={"app": "x"}, **spec
                    )
                )
            except PodError:
                return None

        spread_pod = parses(topologySpreadConstraints=[spread(wk.ZONE, 1, None, minDomains=2)])
        term = pod_terms("podAntiAffinity", wk.ZONE, {"app": "x"}, namespaceSelector={})
        anti = parses(affinity=term)
        sidecar = parses(
            initContainers=[{"name": "s", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}]
        )
        return cls(
            existing_pods="pods" in {f.name for f in dataclasses.fields(ExistingNode)},
            namespaces="namespaces" in inspect.signature(solve).parameters,
            any_topology_key=parses(topologySpreadConstraints=[spread(wk.CAPACITY_TYPE, 1, {})]) is not None,
            spread_fields=spread_pod is not None
            and getattr(spread_pod.topology_spread[0], "min_domains", None) == 2
            and spread_pod.topology_spread[0].selector is None,
            host_ports=hasattr(parses(), "host_ports"),
            sidecars=sidecar is not None and sidecar.requests.cpu == 1.1,
            deprecated_keys=wk.normalize_key("failure-domain.beta.kubernetes.io/zone") == wk.ZONE,
            namespace_selector=anti is not None and hasattr(anti.pod_anti_affinity[0], "namespace_selector"),
            unmodelled="unmodelled" in {f.name for f in dataclasses.fields(Unschedulable)},
        )


@dataclass
class Scenario:
    seed: int
    provisioners: list
    new: list[dict]
    cluster: list[dict]
    unavailable: frozenset
    usage: dict
    #: namespace/claim -> CSI driver of the pods' EBS claims (issue 24: attach limits).
    claims: dict = field(default_factory=dict)


def _provisioners(rng: random.Random) -> list:
    result = []
    for i in range(rng.randint(1, 3)):
        requirements = []
        if rng.random() < 0.4:
            requirements.append(
                {"key": wk.ZONE, "operator": "In", "values": rng.sample(ZONES, rng.randint(1, 2))}
            )
        if capacity := rng.choice([None, ["on-demand"], ["spot"], ["spot", "on-demand"]]):
            requirements.append({"key": wk.CAPACITY_TYPE, "operator": "In", "values": capacity})
        if arch := rng.choice([None, None, ["amd64"], ["arm64"], ["amd64", "arm64"]]):
            requirements.append({"key": wk.ARCH, "operator": "In", "values": arch})
        if rng.random() < 0.1:
            requirements.append(
                {"key": wk.INSTANCE_TYPE, "operator": "NotIn", "values": ["m5.large", "c5.large"]}
            )
        spec: dict[str, Any] = {"requirements": requirements, "weight": rng.choice([0, 0, 10, 50])}
        labels = {}
        if rng.random() < 0.4:
            labels["team"] = rng.choice("ab")
        if rng.random() < 0.2:
            labels["tier"] = "gold"
        if labels:
            spec["labels"] = labels
        if i and rng.random() < 0.4:
            spec["taints"] = [{"key": DEDICATED, "value": f"prov{i}", "effect": "NoSchedule"}]
        if rng.random() < 0.3:
            spec["limits"] = {"resources": {"cpu": rng.choice(["8", "16", "48"])}}
        if rng.random() < 0.15:
            # Issue 24: every resource a limit names is counted, pods and accelerators too.
            limits = spec.setdefault("limits", {"resources": {}})["resources"]
            limits[rng.choice(["pods", "nvidia.com/gpu", "memory"])] = rng.choice(["0", "40", "120"])
        result.append(make_provisioner(f"prov{i}", **spec))
    return result


def _allowed(provisioner, key: str, values: list[str]) -> list[str]:
    for req in provisioner.requirements:
        if wk.normalize_key(req.key) == key and req.operator == "In":
            values = [v for v in values if v in req.values]
    return values


def _running_pod(rng: random.Random, name: str, groups: int) -> dict:
    app = rng.choice([*RUNNING_APPS, *(f"g{j}" for j in range(groups))])
    spec: dict[str, Any] = {}
    if rng.random() < 0.2:
        target = rng.choice([app, f"g{rng.randrange(groups)}"])
        spec["affinity"] = pod_terms("podAntiAffinity", rng.choice([wk.HOSTNAME, wk.ZONE]), {"app": target})
    cpu = rng.choice(["100m", "250m", "500m"])
    return builders.pod_manifest(
        name,
        uid="",
        image=None,
        namespace=rng.choice(list(NAMESPACES)),
        labels={"app": app},
        requests={"cpu": cpu, "memory": rng.choice(["128Mi", "512Mi", "1Gi"])},
        **spec,
    )


def _cluster(rng: random.Random, provisioners: list, groups: int) -> list[dict]:
    nodes = []
    big = [t for t in catalog() if 4 <= t.cpu <= 16 and not t.burstable and not t.has_gpu]
    for i in range(rng.randint(0, 4)):
        prov = rng.choice(provisioners)
        types = [t for t in big if t.arch in _allowed(prov, wk.ARCH, ["amd64", "arm64"])]
        zones = _allowed(prov, wk.ZONE, list(ZONES))
        capacity_types = _allowed(prov, wk.CAPACITY_TYPE, ["on-demand", "spot"])
        if not types or not zones or not capacity_types:
            continue
        itype = rng.choice(types)
        name = f"karpy-{i}"
        nodes.append(
            builders.cluster_node(
                name,
                rng.choice(zones),
                labels={
                    wk.CAPACITY_TYPE: rng.choice(capacity_types),
                    **itype.labels(),
                    wk.PROVISIONER_NAME: prov.name,
                    **prov.labels,
                },
                provisioner=prov.name,
                instance_type=itype.name,
                taints=[{"key": t.key, "value": t.value, "effect": t.effect} for t in prov.taints],
                allocatable=dict(itype.allocatable.amounts),
                pods=[_running_pod(rng, f"{name}-run{j}", groups) for j in range(rng.randint(0, 4))],
                schedulable=rng.random() > 0.15,
            )
        )
    for i in range(rng.randint(0, 2)):
        name = f"static-{i}"
        zone = rng.choice(ZONES)
        labels = dict(catalog_type("m5.xlarge").labels())
        if rng.random() < 0.3:
            labels["team"] = rng.choice("ab")
        taints = (
            [{"key": "CriticalAddonsOnly", "value": "", "effect": "NoSchedule"}] if rng.random() < 0.3 else []
        )
        nodes.append(
            builders.cluster_node(
                name,
                zone,
                labels=labels,
                provisioner="",
                instance_type="m5.xlarge",
                taints=taints,
                allocatable=dict(catalog_type("m5.xlarge").allocatable.amounts),
                pods=[_running_pod(rng, f"{name}-run{j}", groups) for j in range(rng.randint(0, 3))],
                schedulable=False,
            )
        )
    return nodes


def catalog_type(name: str):
    return TYPES[name]


def _group_spec(rng: random.Random, j: int, groups: int, features: Features) -> dict:
    """The shared spec of group j's pods: node constraints, tolerations, topology, ports."""
    spec: dict[str, Any] = {}
    app = {"app": f"g{j}"}
    other = {"app": f"g{rng.randrange(groups)}"}
    running = {"app": rng.choice(RUNNING_APPS)}
    if rng.random() < 0.25:
        choices = [
            {wk.ZONE: rng.choice(ZONES)},
            {wk.ARCH: rng.choice(["amd64", "arm64"])},
            {wk.CAPACITY_TYPE: rng.choice(["spot", "on-demand"])},
            {"team": rng.choice("ab")},
            {wk.INSTANCE_TYPE: rng.choice(["m5.xlarge", "c5.2xlarge", "m6g.large"])},
        ]
        if features.deprecated_keys:
            choices += [
                {"failure-domain.beta.kubernetes.io/zone": rng.choice(ZONES)},
                {"beta.kubernetes.io/arch": "amd64"},
            ]
        spec["nodeSelector"] = rng.choice(choices)
    affinity: dict[str, Any] = {}
    if rng.random() < 0.2:
        terms = rng.choice(
            [
                [[{"key": wk.ZONE, "operator": "In", "values": rng.sample(ZONES, 2)}]],
                [[{"key": wk.ARCH, "operator": "NotIn", "values": ["arm64"]}]],
                [
                    [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}],
                    [{"key": wk.ZONE, "operator": "In", "values": [rng.choice(ZONES)]}],
                ],
                [[{"key": "team", "operator": "Exists"}]],
            ]
        )
        required = {"nodeSelectorTerms": [{"matchExpressions": t} for t in terms]}
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": required}
    if rng.random() < 0.2:
        preference = rng.choice(
            [
                {"key": wk.ZONE, "operator": "In", "values": [rng.choice(ZONES)]},
                {"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]},
                {"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["r5.large"]},
            ]
        )
        preferred = [{"weight": rng.randint(1, 100), "preference": {"matchExpressions": [preference]}}]
        affinity.setdefault("nodeAffinity", {})["preferredDuringSchedulingIgnoredDuringExecution"] = preferred
    if rng.random() < 0.3:
        spec["tolerations"] = [
            rng.choice(
                [
                    {"key": DEDICATED, "operator": "Exists"},
                    {
                        "key": DEDICATED,
                        "operator": "Equal",
                        "value": f"prov{rng.randint(1, 2)}",
                        "effect": "NoSchedule",
                    },
                    {"operator": "Exists"},
                ]
            )
        ]
    keys = [wk.ZONE, wk.HOSTNAME] + ([wk.CAPACITY_TYPE, "team"] if features.any_topology_key else [])
    if rng.random() < 0.4:
        constraints = []
        for key in rng.sample(keys, rng.choice([1, 1, 2])):
            selector = rng.choices([app, other, None], [8, 1, 1 if features.spread_fields else 0])[0]
            item = spread(key, rng.randint(1, 3), selector)
            if rng.random() < 0.2:
                item["whenUnsatisfiable"] = "ScheduleAnyway"
            if features.spread_fields:
                if rng.random() < 0.2 and item["whenUnsatisfiable"] == "DoNotSchedule":
                    item["minDomains"] = rng.randint(2, 3)
                if rng.random() < 0.1:
                    item["nodeAffinityPolicy"] = "Ignore"
                if rng.random() < 0.1:
                    item["nodeTaintsPolicy"] = "Honor"
                if rng.random() < 0.15 and selector is not None:
                    item["matchLabelKeys"] = ["pod-template-hash"]
            constraints.append(item)
        spec["topologySpreadConstraints"] = constraints
    for kind, chance in (("podAffinity", 0.15), ("podAntiAffinity", 0.25)):
        if rng.random() < chance:
            key = rng.choice(
                [wk.HOSTNAME, wk.ZONE] if kind == "podAntiAffinity" else [wk.ZONE, wk.HOSTNAME, wk.ZONE]
            )
            target = rng.choices([app, other, running], [6, 2, 2])[0]
            extra: dict[str, Any] = {}
            if features.namespace_selector and rng.random() < 0.3:
                extra = rng.choice(
                    [
                        {"namespaces": [rng.choice(list(NAMESPACES))]},
                        {"namespaceSelector": {}},
                        {"namespaceSelector": {"matchLabels": {"env": "prod"}}},
                    ]
                )
            affinity.update(pod_terms(kind, key, target, **extra))
    if rng.random() < 0.1:
        weighted = {
            "weight": 50,
            "podAffinityTerm": {"topologyKey": wk.ZONE, "labelSelector": {"matchLabels": other}},
        }
        kind = rng.choice(["podAffinity", "podAntiAffinity"])
        affinity.setdefault(kind, {})["preferredDuringSchedulingIgnoredDuringExecution"] = [weighted]
    if affinity:
        spec["affinity"] = affinity
    if features.host_ports and rng.random() < 0.1:
        spec["ports"] = [{"containerPort": 80, "hostPort": rng.choice([8080, 9090])}]
    if features.unmodelled and rng.random() < 0.04:
        spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": f"data-g{j}"}}]
    if features.sidecars and rng.random() < 0.1:
        spec["initContainers"] = [
            {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m"}}},
            {"name": "migrate", "resources": {"requests": {"cpu": "2"}}},
        ]
    return spec


def scenario(seed: int, features: Features) -> Scenario:
    rng = random.Random(seed)
    provisioners = _provisioners(rng)
    groups = rng.randint(2, 6)
    cluster = _cluster(rng, provisioners, groups) if features.existing_pods else []
    new = []
    for j in range(groups):
        spec = _group_spec(rng, j, groups, features)
        requests = {"memory": rng.choice(MEMORIES)}
        if rng.random() < 0.08:
            requests["ephemeral-storage"] = "1Gi"
        cpu = rng.choice(CPUS)
        ns = rng.choice(list(NAMESPACES))
        gpu = rng.random() < 0.03
        for r in range(rng.randint(1, 10)):
            labels = {
                "app": f"g{j}",
                "tier": rng.choice(["fe", "be"]),
                "pod-template-hash": rng.choice(["h1", "h2"]),
            }
            raw = builders.pod_manifest(
                f"g{j}-{r}",
                uid="",
                image=None,
                namespace=ns,
                labels=labels,
                requests={"cpu": cpu, **requests},
                **json_copy(spec),
            )
            if gpu:
                raw["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": 1}
            new.append(raw)
    rng.shuffle(new)
    unavailable = frozenset()
    if rng.random() < 0.2:
        unavailable = frozenset(
            (t.name, o.zone, o.capacity_type)
            for t in rng.sample(list(TYPES.values()), 8)
            for o in t.offerings
        )
    usage = {}
    limited = [p for p in provisioners if p.limits.get("cpu") > 0]
    if limited and rng.random() < 0.5:
        prov = rng.choice(limited)
        usage = {prov.name: Resources.of(cpu=rng.choice([2.0, 6.0, prov.limits.get("cpu") - 1]))}
    claims = _ebs_volumes(random.Random(seed * 7919 + 1), new, cluster)
    return Scenario(seed, provisioners, new, cluster, unavailable, usage, claims)


def _ebs_volumes(rng: random.Random, new: list[dict], cluster: list[dict]) -> dict[str, str]:
    """Issue 24: EBS claims (1, 4 or 12 per pod, and on half the groups one claim the group shares) on
    some groups, and CSINode attach limits on some existing nodes, drawn from their own generator so
    the rest of each scenario stays as it was."""
    claims: dict[str, str] = {}
    groups = sorted({raw["metadata"]["labels"]["app"] for raw in new})
    chosen = rng.sample(groups, min(len(groups), rng.choice([0, 0, 1, 2])))
    for raw in new:
        if raw["metadata"]["labels"]["app"] not in chosen:
            continue
        name, ns = raw["metadata"]["name"], raw["metadata"]["namespace"]
        # Up to 12 volumes a pod: a group of ten then needs several nodes by attachments alone.
        count = (1, 4, 12)[sum(ord(c) for c in raw["metadata"]["labels"]["app"]) % 3]
        volumes = raw["spec"].setdefault("volumes", [])
        for i in range(count):
            volumes.append({"name": f"ebs{i}", "persistentVolumeClaim": {"claimName": f"ebs-{name}-{i}"}})
            claims[f"{ns}/ebs-{name}-{i}"] = "ebs.csi.aws.com"
        # Half the groups also share one claim: one attachment on each node their pods meet on.
        if sum(ord(c) for c in raw["metadata"]["labels"]["app"]) % 2 == 0:
            shared = f"ebs-shared-{raw['metadata']['labels']['app']}"
            volumes.append({"name": "shared", "persistentVolumeClaim": {"claimName": shared}})
            claims[f"{ns}/{shared}"] = "ebs.csi.aws.com"
    for node_ in cluster:
        if node_["provisioner"] and rng.random() < 0.5:
            node_["attach_limits"] = {"ebs.csi.aws.com": rng.choice([1, 2, 4, 8])}
    return claims


def json_copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: json_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [json_copy(v) for v in value]
    return value


def _existing_node(raw: dict) -> ExistingNode:
    """The checker's node of the cluster as solve() takes it."""
    return existing_node(
        raw["name"],
        zone=None,
        hostname=False,
        labels=raw["labels"],
        provisioner=raw["provisioner"],
        instance_type=raw["instance_type"],
        taints=tuple(Taint(t["key"], t["effect"], t["value"]) for t in raw["taints"]),
        allocatable=Resources(raw["allocatable"]),
        pods=tuple(Pod.from_manifest(p) for p in raw["pods"]),
        schedulable=raw["schedulable"],
        volume_limits=tuple(sorted((raw.get("attach_limits") or {}).items())),
    )


def _with_volumes(raw: dict, claims: dict[str, str]) -> Pod:
    """The pod as the controller parses it: resolved claims (no topology of their own here) and
    their CSI volumes by driver."""
    ns = raw["metadata"].get("namespace", "default")
    names = [
        v["persistentVolumeClaim"]["claimName"]
        for v in raw["spec"].get("volumes") or ()
        if "persistentVolumeClaim" in v
    ]
    resolved = {n: () for n in names if f"{ns}/{n}" in claims}
    pod = Pod.from_manifest(raw, resolved or None)
    found = tuple(sorted((claims[f"{ns}/{n}"], n) for n in resolved))
    return dataclasses.replace(pod, csi_claims=found) if found else pod


def solve_scenario(s: Scenario, features: Features) -> Plan:
    """The solver's plan for a scenario (benchmarks/fingerprint.py replays these too)."""
    from extender.scheduling.solver import solve

    pods = [_with_volumes(raw, s.claims) for raw in s.new]
    kwargs: dict[str, Any] = {"unavailable": s.unavailable, "usage": s.usage}
    if s.cluster:
        kwargs["existing_nodes"] = [_existing_node(raw) for raw in s.cluster]
    if features.namespaces:
        kwargs["namespaces"] = NAMESPACES
    if "with_bound" in inspect.signature(solve).parameters:
        kwargs["with_bound"] = False
    return solve(pods, s.provisioners, catalog(), **kwargs)


def run(seed: int, features: Features | None = None) -> tuple[Scenario, Plan | None, list[str]]:
    """One seed: its scenario, the solver's plan and every line the checker reports."""
    features = features or Features.probe()
    s = scenario(seed, features)
    try:
        plan = solve_scenario(s, features)
    except Exception as err:  # the solver must take every valid workload
        return s, None, [f"solver: {type(err).__name__}: {err}"]
    args = (s.new, s.cluster, plan, s.provisioners, catalog())
    kw = {"namespaces": NAMESPACES, "unavailable": s.unavailable, "usage": s.usage, "claims": s.claims}
    return (
        s,
        plan,
        rulecheck.violations(*args, **kw)
        + rulecheck.unjustified_unschedulable(*args, **kw)
        + rulecheck.stricter_than_scheduler(*args, **kw),
    )


#: Pods karpy leaves out although kube-scheduler would bind them, for a reason known and kept
#: (each is counted and printed; any other stricter line fails):
#: - "no domain": a hard topology spread's minimum counts, as Karpenter's does, every domain a
#:   Provisioner could launch a node into for the pod (scheduling-rules.md), while kube-scheduler
#:   counts only domains of nodes that exist. With no node yet in such a domain (say on-demand,
#:   where only spot nodes run), karpy's minimum is 0 and a pod that kube-scheduler would bind
#:   beside the others is refused, in the rounds and in the last binds alike; the reason ends "...
#:   leaves no domain", after the limits that sent it there if they did.
#: Pods left out for limits or hostname rules are no longer known here: the solver's last binds
#: (solver.py, lastbind.py) place them where kube-scheduler would.
KNOWN_STRICTER = {
    "no domain": lambda item: item.reason.endswith("leaves no domain"),
}


def _known_stricter(plan: Plan, line: str) -> str | None:
    key = line.split()[1]
    item = next(u for u in plan.unschedulable if u.pod.key == key)
    return next((name for name, known in KNOWN_STRICTER.items() if known(item)), None)


def test_random_workloads_break_no_rule_and_leave_no_pod_unjustly_unschedulable():
    features = Features.probe()
    started = time.monotonic()
    failures: list[str] = []
    counts: Counter[str] = Counter()
    classes: Counter[str] = Counter()
    for seed in SEEDS:
        s, plan, lines = run(seed, features)
        if plan is not None:
            known = [(line, _known_stricter(plan, line)) for line in lines if line.startswith("stricter:")]
            for line, name in known:
                if name is not None:
                    counts[f"stricter than kube-scheduler, known ({name})"] += 1
                    lines.remove(line)
        counts["pods"] += len(s.new)
        counts["existing nodes"] += len(s.cluster)
        if plan is not None:
            counts["placed on new nodes"] += sum(len(n.pods) for n in plan.nodes)
            counts["placed on existing nodes"] += sum(len(p) for p in plan.existing.values())
            counts["new nodes"] += len(plan.nodes)
            for item in plan.unschedulable:
                counts[f"unschedulable ({rulecheck.reason_category(item)})"] += 1
        for line in lines:
            classes[line.split(":")[0]] += 1
            failures.append(f"seed {seed}: {line}")
    elapsed = time.monotonic() - started
    print(f"\nrule checker: {len(SEEDS)} seeds in {elapsed:.1f}s; features {features}")
    for name, value in sorted(counts.items()):
        print(f"  {name}: {value}")
    for name, value in classes.most_common():
        print(f"  violations [{name}]: {value}")
    assert not failures, f"{len(failures)} violation(s):\n" + "\n".join(_by_class(failures))


def _by_class(failures: list[str]) -> list[str]:
    """Per violation class: how many, which seeds, and the first lines of two seeds."""
    grouped: dict[str, list[tuple[int, str]]] = {}
    for line in failures:
        seed, rest = line.removeprefix("seed ").split(": ", 1)
        grouped.setdefault(rest.split(":")[0], []).append((int(seed), line))
    lines = []
    for name, items in sorted(grouped.items(), key=lambda kv: -len(kv[1])):
        seeds = sorted({seed for seed, _ in items})
        lines.append(
            f"[{name}] {len(items)} line(s) in seeds {seeds[:20]}{' ...' if len(seeds) > 20 else ''}"
        )
        for seed in seeds[:2]:
            lines.append("    " + next(text for s, text in items if s == seed))
    return lines
