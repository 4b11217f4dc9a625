"""admission.check: kube-scheduler's Filter plugins replayed for one pod on one concrete node."""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.provisioner import Requirement, Taint
from extender.api.resources import Resources
from extender.scheduling.admission import check
from extender.scheduling.plan import ExistingNode
from tests import builders
from tests.model_builders import existing_node

ZONE_A, ZONE_B, ZONE_C = "us-west-2a", "us-west-2b", "us-west-2c"


def spread(key: str = wk.ZONE, max_skew: int = 1, selector: Any = ..., **extra: Any) -> dict[str, Any]:
    constraint = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": "DoNotSchedule", **extra}
    if selector is ...:
        selector = {"matchLabels": {"app": "web"}}
    if selector is not None:
        constraint["labelSelector"] = selector
    return constraint


def affinity(kind: str, *terms: dict[str, Any]) -> dict[str, Any]:
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def term(key: str = wk.HOSTNAME, app: str = "web", **extra: Any) -> dict[str, Any]:
    return {"topologyKey": key, "labelSelector": {"matchLabels": {"app": app}}, **extra}


def web(name: str, namespace: str = "default", **spec: Any) -> Pod:
    return builders.pod(name, cpu="100m", uid="", namespace=namespace, labels={"app": "web"}, **spec)


def verdict(p: Pod, target: ExistingNode, *others: ExistingNode, namespaces=None) -> str | None:
    return check(p, target, [target, *others], namespaces)


# --- NodeResourcesFit ---------------------------------------------------------------------------


def test_resources_fit_passes_within_allocatable_and_fails_on_cpu():
    """NodeResourcesFit: the node's pods + the pod must fit allocatable cpu."""
    busy = existing_node("n1", zone=ZONE_A, pods=[builders.pod("a", uid="", cpu="3")])
    assert verdict(builders.pod("p", uid="", cpu="1"), busy) is None
    reason = verdict(builders.pod("p", uid="", cpu="1500m"), busy)
    assert reason == "insufficient cpu on node n1: the pod requests 1500m, 1000m free"


def test_resources_fit_unlisted_extended_resource_has_zero_allocatable():
    """NodeResourcesFit: a resource the node does not list (nvidia.com/gpu) has allocatable 0."""
    gpu_pod = builders.pod("g", uid="", requests={"cpu": "1", "nvidia.com/gpu": 1})
    assert "insufficient nvidia.com/gpu on node n1" in verdict(gpu_pod, existing_node("n1"))
    gpu_node = existing_node(
        "n1", allocatable=Resources.parse({"cpu": "4", "memory": "16Gi", "pods": 110, "nvidia.com/gpu": 1})
    )
    assert verdict(gpu_pod, gpu_node) is None
    taken = existing_node(
        "n1",
        zone=ZONE_A,
        pods=[builders.pod("h", uid="", requests={"nvidia.com/gpu": 1})],
        allocatable=Resources.parse(gpu_node.allocatable.amounts),
    )
    assert "insufficient nvidia.com/gpu" in verdict(gpu_pod, taken)


def test_resources_fit_pod_count_and_fallback_to_node_totals():
    """NodeResourcesFit: pods + 1 <= allocatable pods; node.requested/pod_count when pods is empty."""
    full = existing_node(
        "n1",
        zone=ZONE_A,
        pods=[builders.pod("a", cpu="100m", uid=""), builders.pod("b", cpu="100m", uid="")],
        allocatable=Resources.parse({"cpu": "4", "pods": 2}),
    )
    assert (
        verdict(builders.pod("p", cpu="100m", uid=""), full)
        == "too many pods on node n1: 2 running, 2 allowed"
    )
    roomy = existing_node(
        "n1",
        zone=ZONE_A,
        pods=[builders.pod("a", cpu="100m", uid="")],
        allocatable=Resources.parse({"cpu": "4", "pods": 2}),
    )
    assert verdict(builders.pod("p", cpu="100m", uid=""), roomy) is None
    unparsed = replace(roomy, pod_count=2)  # a bound pod karpy could not parse still counts
    assert (
        verdict(builders.pod("p", cpu="100m", uid=""), unparsed)
        == "too many pods on node n1: 2 running, 2 allowed"
    )
    opaque = replace(existing_node("n1"), requested=Resources.of(cpu=3.5), pod_count=3)
    assert "insufficient cpu" in verdict(builders.pod("p", uid="", cpu="1"), opaque)
    assert verdict(builders.pod("p", uid="", cpu="500m"), opaque) is None


def test_resources_fit_does_not_count_the_pod_itself():
    """NodeResourcesFit: the pod already listed on the node (same key) is not counted twice."""
    p = builders.pod("p", uid="", cpu="3")
    assert verdict(p, existing_node("n1", zone=ZONE_A, pods=[p])) is None


# --- NodePorts ----------------------------------------------------------------------------------


def test_host_port_conflict_and_its_exceptions():
    """NodePorts: same protocol and port with overlapping host IPs (0.0.0.0/empty = every address)."""
    holder = builders.pod("holder", cpu="100m", uid="", ports=[{"containerPort": 80, "hostPort": 8080}])
    wants = builders.pod("p", cpu="100m", uid="", ports=[{"containerPort": 80, "hostPort": 8080}])
    assert verdict(wants, existing_node("n1", zone=ZONE_A, pods=[holder])) == (
        "host port TCP/8080 is in use on node n1 by pod default/holder"
    )
    assert verdict(wants, existing_node("n1", zone=ZONE_A, pods=[holder]), existing_node("n2")) is not None
    assert verdict(wants, existing_node("n2"), existing_node("n1", zone=ZONE_A, pods=[holder])) is None
    udp = builders.pod(
        "p", cpu="100m", uid="", ports=[{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}]
    )
    assert verdict(udp, existing_node("n1", zone=ZONE_A, pods=[holder])) is None
    ip1 = builders.pod(
        "a", cpu="100m", uid="", ports=[{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.1"}]
    )
    ip2 = builders.pod(
        "p", cpu="100m", uid="", ports=[{"containerPort": 80, "hostPort": 8080, "hostIP": "10.0.0.2"}]
    )
    assert verdict(ip2, existing_node("n1", zone=ZONE_A, pods=[ip1])) is None
    assert verdict(wants, existing_node("n1", zone=ZONE_A, pods=[ip1])) is not None


# --- TaintToleration ----------------------------------------------------------------------------


def test_taints_must_be_tolerated_except_prefer_no_schedule():
    """TaintToleration: NoSchedule/NoExecute taints need a toleration; PreferNoSchedule only scores."""
    tainted = existing_node("n1", taints=(Taint(key="team", value="a", effect="NoSchedule"),))
    assert (
        verdict(builders.pod("p", cpu="100m", uid=""), tainted)
        == "node n1 has taint team=a:NoSchedule that the pod does not tolerate"
    )
    tolerant = builders.pod(
        "p",
        cpu="100m",
        uid="",
        tolerations=[{"key": "team", "operator": "Equal", "value": "a", "effect": "NoSchedule"}],
    )
    assert verdict(tolerant, tainted) is None
    assert (
        verdict(
            builders.pod("p", cpu="100m", uid=""),
            existing_node("n1", taints=(Taint(key="x", effect="PreferNoSchedule"),)),
        )
        is None
    )
    assert (
        verdict(
            builders.pod("p", cpu="100m", uid=""),
            existing_node("n1", taints=(Taint(key="x", effect="NoExecute"),)),
        )
        is not None
    )


# --- NodeAffinity -------------------------------------------------------------------------------


def test_node_selector_and_ored_required_terms():
    """NodeAffinity: nodeSelector ANDed with one of the ORed required nodeSelectorTerms."""
    n1 = existing_node("n1", labels={"disk": "ssd"})
    assert verdict(builders.pod("p", cpu="100m", uid="", nodeSelector={"disk": "ssd"}), n1) is None
    assert (
        verdict(builders.pod("p", cpu="100m", uid="", nodeSelector={"disk": "hdd"}), n1)
        == "node selector disk=hdd does not match node n1"
    )
    terms = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "disk", "operator": "In", "values": ["hdd"]}]},
                    {"matchExpressions": [{"key": wk.ZONE, "operator": "In", "values": [ZONE_A]}]},
                ]
            }
        }
    }
    assert verdict(builders.pod("p", cpu="100m", uid="", affinity=terms), n1) is None
    assert verdict(
        builders.pod("p", cpu="100m", uid="", affinity=terms), existing_node("n2", zone=ZONE_B)
    ) == ("node n2 matches none of the pod's required node affinity terms")


def test_node_affinity_empty_term_matches_no_node():
    """NodeAffinity: kube-scheduler skips an empty nodeSelectorTerm (it selects no node)."""
    zone_a = (Requirement(wk.ZONE, "In", (ZONE_A,)),)
    assert (
        verdict(replace(builders.pod("p", cpu="100m", uid=""), required_terms=((),)), existing_node("n1"))
        is not None
    )
    assert (
        verdict(
            replace(builders.pod("p", cpu="100m", uid=""), required_terms=((), zone_a)), existing_node("n1")
        )
        is None
    )
    assert (
        verdict(
            replace(builders.pod("p", cpu="100m", uid=""), required_terms=((), zone_a)),
            existing_node("n2", zone=ZONE_B),
        )
        is not None
    )


def test_deprecated_node_label_is_seen_under_its_ga_name():
    """NodeAffinity: a node labelled failure-domain.beta.kubernetes.io/zone matches a zone selector."""
    old = existing_node("n1", zone=None, labels={"failure-domain.beta.kubernetes.io/zone": ZONE_A})
    assert verdict(builders.pod("p", cpu="100m", uid="", nodeSelector={wk.ZONE: ZONE_A}), old) is None
    assert (
        verdict(
            builders.pod(
                "p", cpu="100m", uid="", nodeSelector={"failure-domain.beta.kubernetes.io/zone": ZONE_A}
            ),
            old,
        )
        is None
    )
    assert verdict(builders.pod("p", cpu="100m", uid="", nodeSelector={wk.ZONE: ZONE_B}), old) is not None


# --- PodTopologySpread --------------------------------------------------------------------------


def test_topology_spread_skew_over_zones():
    """PodTopologySpread: count(domain) + self - min over eligible domains must be <= maxSkew."""
    a = existing_node("a", zone=ZONE_A, pods=[web("w1"), web("w2")])
    b = existing_node("b", zone=ZONE_B, pods=[web("w3")])
    c = existing_node("c", zone=ZONE_C, pods=[web("w4")])
    p = web("p", topologySpreadConstraints=[spread()])
    assert verdict(p, a, b, c) == f"topology spread on {wk.ZONE}: skew 2 > maxSkew 1 in {ZONE_A}"
    assert verdict(p, b, a, c) is None
    assert verdict(web("p", topologySpreadConstraints=[spread(max_skew=2)]), a, b, c) is None


def test_topology_spread_counts_only_the_pods_namespace_and_not_the_pod_itself():
    """PodTopologySpread: counted pods are in the incoming pod's namespace; the pod itself is skipped."""
    p = web("p", topologySpreadConstraints=[spread()])
    a = existing_node("a", zone=ZONE_A, pods=[web("x1", "other"), web("x2", "other")])
    assert verdict(p, a, existing_node("b", zone=ZONE_B)) is None
    assert verdict(p, existing_node("a", zone=ZONE_A, pods=[p]), existing_node("b", zone=ZONE_B)) is None
    assert (
        verdict(p, existing_node("a", zone=ZONE_A, pods=[p, web("w1")]), existing_node("b", zone=ZONE_B))
        is not None
    )


def test_topology_spread_nil_selector_never_constrains_and_schedule_anyway_is_ignored():
    """PodTopologySpread: a nil labelSelector counts no pod; ScheduleAnyway only scores."""
    a = existing_node("a", zone=ZONE_A, pods=[web("w1"), web("w2")])
    assert (
        verdict(
            web("p", topologySpreadConstraints=[spread(selector=None)]), a, existing_node("b", zone=ZONE_B)
        )
        is None
    )
    soft = spread(whenUnsatisfiable="ScheduleAnyway")
    assert verdict(web("p", topologySpreadConstraints=[soft]), a, existing_node("b", zone=ZONE_B)) is None


def test_topology_spread_node_without_the_key_fails():
    """PodTopologySpread: a node lacking the topology key cannot take a DoNotSchedule pod."""
    bare = existing_node("n1", zone=None)
    reason = verdict(web("p", topologySpreadConstraints=[spread()]), bare, existing_node("b", zone=ZONE_B))
    assert reason == f"topology spread on {wk.ZONE}: node n1 has no {wk.ZONE} label"


def test_topology_spread_min_domains_takes_minimum_as_zero():
    """PodTopologySpread: with fewer eligible domains than minDomains the global minimum is 0."""
    a = existing_node("a", zone=ZONE_A, pods=[web("w1")])
    b = existing_node("b", zone=ZONE_B, pods=[web("w2")])
    assert verdict(web("p", topologySpreadConstraints=[spread()]), a, b) is None
    reason = verdict(web("p", topologySpreadConstraints=[spread(minDomains=3)]), a, b)
    assert reason == f"topology spread on {wk.ZONE}: skew 2 > maxSkew 1 in {ZONE_A}"


def test_topology_spread_node_affinity_policy_limits_eligible_domains():
    """PodTopologySpread: nodeAffinityPolicy Honor (default) drops domains the pod's affinity excludes."""
    a = existing_node("a", zone=ZONE_A, pods=[web("w1")], labels={"pool": "x"})
    b = existing_node("b", zone=ZONE_B, labels={"pool": "y"})
    honor = web("p", nodeSelector={"pool": "x"}, topologySpreadConstraints=[spread()])
    assert verdict(honor, a, b) is None
    ignore = web(
        "p", nodeSelector={"pool": "x"}, topologySpreadConstraints=[spread(nodeAffinityPolicy="Ignore")]
    )
    assert verdict(ignore, a, b) == f"topology spread on {wk.ZONE}: skew 2 > maxSkew 1 in {ZONE_A}"


def test_topology_spread_node_taints_policy_honor_drops_untolerated_nodes():
    """PodTopologySpread: nodeTaintsPolicy Honor drops nodes whose taints the pod does not tolerate."""
    a = existing_node("a", zone=ZONE_A, pods=[web("w1")])
    b = existing_node("b", zone=ZONE_B, taints=(Taint(key="team", value="b", effect="NoSchedule"),))
    assert verdict(web("p", topologySpreadConstraints=[spread()]), a, b) is not None
    honor = web("p", topologySpreadConstraints=[spread(nodeTaintsPolicy="Honor")])
    assert verdict(honor, a, b) is None


def test_topology_spread_hostname_counts_every_node_as_a_domain():
    """PodTopologySpread: on kubernetes.io/hostname each node is its own domain (empty nodes count as 0)."""
    p = web("p", topologySpreadConstraints=[spread(wk.HOSTNAME)])
    assert (
        verdict(p, existing_node("a", zone=ZONE_A, pods=[web("w1")]), existing_node("b", zone=ZONE_A))
        is not None
    )
    assert (
        verdict(p, existing_node("b", zone=ZONE_A), existing_node("a", zone=ZONE_A, pods=[web("w1")])) is None
    )


# --- InterPodAffinity ---------------------------------------------------------------------------


def test_pod_affinity_needs_a_matching_pod_in_the_domain():
    """InterPodAffinity: required affinity passes only where a matching pod runs in the node's domain."""
    p = builders.pod("p", cpu="100m", uid="", affinity=affinity("podAffinity", term(wk.ZONE)))
    a = existing_node("a", zone=ZONE_A, pods=[web("w1")])
    b = existing_node("b", zone=ZONE_B)
    assert verdict(p, a, b) is None
    assert verdict(p, existing_node("a2", zone=ZONE_A), a, b) is None
    assert verdict(p, b, a) == f"pod affinity on {wk.ZONE}: no matching pod in {ZONE_B}"


def test_pod_affinity_first_pod_of_a_self_selecting_group_goes_anywhere():
    """InterPodAffinity: no pod matches anywhere and the pod matches its own term -> allowed."""
    self_selecting = web("p", affinity=affinity("podAffinity", term(wk.ZONE)))
    assert verdict(self_selecting, existing_node("a", zone=ZONE_A), existing_node("b", zone=ZONE_B)) is None
    other = builders.pod("p", cpu="100m", uid="", affinity=affinity("podAffinity", term(wk.ZONE)))
    assert verdict(other, existing_node("a", zone=ZONE_A), existing_node("b", zone=ZONE_B)) is not None


def test_pod_affinity_node_without_the_key_fails_even_for_the_first_pod():
    """InterPodAffinity: every affinity term's topology key must exist on the node."""
    self_selecting = web("p", affinity=affinity("podAffinity", term("example.com/rack")))
    reason = verdict(self_selecting, existing_node("a", zone=ZONE_A))
    assert reason == "pod affinity on example.com/rack: node a has no example.com/rack label"


def test_pod_affinity_counts_only_pods_matching_every_term():
    """InterPodAffinity: an existing pod counts for the affinity terms only if it matches all of them."""
    tier = {"labelSelector": {"matchLabels": {"tier": "front"}}}
    p = builders.pod(
        "p", cpu="100m", uid="", affinity=affinity("podAffinity", term(wk.ZONE), term(wk.ZONE, **tier))
    )
    split = existing_node(
        "a", zone=ZONE_A, pods=[web("w1"), builders.pod("f1", cpu="100m", uid="", labels={"tier": "front"})]
    )
    assert verdict(p, split) == f"pod affinity on {wk.ZONE}: no matching pod in {ZONE_A}"
    both = existing_node(
        "a",
        zone=ZONE_A,
        pods=[builders.pod("wf", cpu="100m", uid="", labels={"app": "web", "tier": "front"})],
    )
    assert verdict(p, both) is None


def test_pod_affinity_namespaces_and_namespace_selector():
    """InterPodAffinity: term namespaces = own namespace by default, `namespaces`, or namespaceSelector."""
    a = existing_node("a", zone=ZONE_A, pods=[web("w1", "shop")])
    b = existing_node("b", zone=ZONE_B, pods=[web("w2")])
    default = builders.pod("p", cpu="100m", uid="", affinity=affinity("podAffinity", term(wk.ZONE)))
    assert verdict(default, a, b) is not None
    listed = builders.pod(
        "p", cpu="100m", uid="", affinity=affinity("podAffinity", term(wk.ZONE, namespaces=["shop"]))
    )
    assert verdict(listed, a, b) is None
    by_label = term(wk.ZONE, namespaceSelector={"matchLabels": {"team": "shop"}})
    selected = builders.pod("p", cpu="100m", uid="", affinity=affinity("podAffinity", by_label))
    assert verdict(selected, a, b, namespaces={"shop": {"team": "shop"}, "default": {}}) is None
    assert verdict(selected, b, a, namespaces={"shop": {"team": "shop"}, "default": {}}) is not None
    assert "namespace labels, which are unknown" in verdict(selected, a, b)
    everywhere = builders.pod(
        "p", cpu="100m", uid="", affinity=affinity("podAffinity", term(wk.ZONE, namespaceSelector={}))
    )
    assert verdict(everywhere, a, b) is None


def test_pod_anti_affinity_forbids_domains_with_matching_pods():
    """InterPodAffinity: required anti-affinity fails where a matching pod runs in the node's domain."""
    p = builders.pod("p", cpu="100m", uid="", affinity=affinity("podAntiAffinity", term(wk.ZONE)))
    a = existing_node("a", zone=ZONE_A, pods=[web("w1")])
    assert (
        verdict(p, existing_node("a2", zone=ZONE_A), a)
        == f"pod anti-affinity on {wk.ZONE}: pod default/w1 runs in {ZONE_A}"
    )
    assert verdict(p, existing_node("b", zone=ZONE_B), a) is None
    hostname = builders.pod("p", cpu="100m", uid="", affinity=affinity("podAntiAffinity", term()))
    assert verdict(hostname, existing_node("a2", zone=ZONE_A), a) is None


def test_pod_anti_affinity_node_without_the_key_passes_and_self_is_ignored():
    """InterPodAffinity: anti-affinity on a key the node lacks passes; the pod does not repel itself."""
    p = web("p", affinity=affinity("podAntiAffinity", term("example.com/rack")))
    assert verdict(p, existing_node("a", zone=ZONE_A, pods=[web("w1")])) is None
    self_anti = web("p", affinity=affinity("podAntiAffinity", term()))
    assert verdict(self_anti, existing_node("a", zone=ZONE_A, pods=[self_anti])) is None
    assert verdict(self_anti, existing_node("a", zone=ZONE_A, pods=[web("w1")])) is not None


def test_existing_pods_anti_affinity_is_symmetric():
    """InterPodAffinity: a running pod's anti-affinity term selecting the incoming pod forbids its domain."""
    guard = builders.pod(
        "guard", cpu="100m", uid="", labels={"app": "db"}, affinity=affinity("podAntiAffinity", term(wk.ZONE))
    )
    a = existing_node("a", zone=ZONE_A, pods=[guard])
    assert verdict(web("p"), existing_node("a2", zone=ZONE_A), a) == (
        f"pod anti-affinity of pod default/guard on {wk.ZONE} excludes {ZONE_A}"
    )
    assert verdict(web("p"), existing_node("b", zone=ZONE_B), a) is None
    assert (
        verdict(
            builders.pod("p", cpu="100m", uid="", labels={"app": "api"}), existing_node("a2", zone=ZONE_A), a
        )
        is None
    )
    assert verdict(web("p", namespace="other"), existing_node("a2", zone=ZONE_A), a) is None


def test_symmetric_anti_affinity_with_namespace_selector():
    """InterPodAffinity: a running pod's namespaceSelector is matched against the incoming pod's namespace."""
    by_label = term(wk.ZONE, namespaceSelector={"matchLabels": {"env": "prod"}})
    guard = builders.pod("guard", cpu="100m", uid="", affinity=affinity("podAntiAffinity", by_label))
    a = existing_node("a", zone=ZONE_A, pods=[guard])
    incoming = web("p", namespace="shop")
    assert (
        verdict(incoming, existing_node("a2", zone=ZONE_A), a, namespaces={"shop": {"env": "prod"}})
        is not None
    )
    assert verdict(incoming, existing_node("a2", zone=ZONE_A), a, namespaces={"shop": {"env": "dev"}}) is None
    # Unknown namespace labels: the cautious reading (the term selects).
    assert verdict(incoming, existing_node("a2", zone=ZONE_A), a) is not None


# --- karpy's own guard --------------------------------------------------------------------------


def test_unmodelled_pod_is_refused():
    """Not a kube-scheduler plugin: karpy refuses pods with rules it does not model (PVC volumes)."""
    p = builders.pod(
        "p", cpu="100m", uid="", volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}]
    )
    assert "rules karpy does not model" in verdict(p, existing_node("n1"))


def test_target_node_argument_wins_over_its_namesake_in_cluster():
    """The `node` argument replaces the cluster entry with the same name (it may carry newer pods)."""
    stale = existing_node("a", zone=ZONE_A)
    fresh = existing_node("a", zone=ZONE_A, pods=[web("w1"), web("w2")])
    p = web("p", topologySpreadConstraints=[spread()])
    assert check(p, fresh, [stale, existing_node("b", zone=ZONE_B)]) is not None
    assert check(p, stale, [fresh, existing_node("b", zone=ZONE_B)]) is None


# --- performance sanity -------------------------------------------------------------------------


def test_check_over_a_thousand_nodes_with_ten_pods_each():
    """All plugins at once over 1,000 nodes x 10 pods; prints the time (no timed assertion)."""
    zones = (ZONE_A, ZONE_B, ZONE_C)
    cluster = []
    for i in range(1000):
        pods = [
            builders.pod(
                f"w{i}-{j}",
                uid="",
                labels={"app": f"app{j}"},
                cpu="100m",
                ports=[{"containerPort": 80, "hostPort": 9000 + j}],
                affinity=affinity("podAntiAffinity", term(app="never")),
            )
            for j in range(10)
        ]
        cluster.append(existing_node(f"n{i}", zone=zones[i % 3], pods=[*pods]))
    incoming = builders.pod(
        "p",
        cpu="100m",
        uid="",
        labels={"app": "app1"},
        ports=[{"containerPort": 80, "hostPort": 8080}],
        topologySpreadConstraints=[
            spread(selector={"matchLabels": {"app": "app1"}}),
            spread(wk.HOSTNAME, 1, {"matchLabels": {"app": "app1"}}),
        ],
        affinity={
            **affinity("podAffinity", term(wk.ZONE, app="app2")),
            **affinity("podAntiAffinity", term(app="app3", namespaces=["elsewhere"])),
        },
    )
    start = time.perf_counter()
    runs = 5
    for _ in range(runs):
        reason = check(incoming, cluster[1], cluster)
    elapsed = (time.perf_counter() - start) / runs
    print(f"admission.check over 1000 nodes x 10 pods: {elapsed * 1000:.1f} ms per call ({reason})")
    assert reason is None  # every rule passes, so every plugin ran to the end


def test_a_pod_left_to_kube_scheduler_is_never_bound_by_karpy():
    """Issue 24: kube-scheduler's binding does what karpy's would skip (volume binding, DRA)."""
    p = builders.pod("dra", cpu="100m", uid="", resourceClaims=[{"name": "g", "resourceClaimName": "g"}])
    target = existing_node("n1")
    reason = verdict(p, target)
    assert reason is not None and reason.startswith("kube-scheduler binds pod default/dra")
    assert verdict(builders.pod("plain", cpu="100m", uid=""), target) is None
