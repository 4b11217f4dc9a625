"""Drift: which Provisioner changes drift a node (the node-shaping hash), requirement and AMI drift,
and marking a drifted node once (annotation, Event, metric); and issue 31's rules: a node judged
against a listing newer than itself, replaced only once initialized, after its replacements are up."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest

from extender.api import labels as wk
from extender.api.node import Node
from extender.api.nodeclass import AMI_ID_ANNOTATION
from extender.api.pod import Pod
from extender.api.provisioner_hash import HASH_VERSION, hash_annotations, provisioner_hash
from extender.cloud.types import CloudError
from extender.cluster.nodeclaims import Tracker
from extender.lifecycle import drift, expiry, metrics, nodepatch, pool_lookup
from extender.lifecycle.context import Context, utcnow
from extender.lifecycle.controller import Lifecycle
from extender.lifecycle.events import Recorder
from extender.lifecycle.nodes import NodeWorker
from extender.settings import Settings
from tests.builders import T0, node_manifest, running_pod, running_pod_manifest
from tests.unit.scheduling.builders import catalog, make_provisioner

BASE: dict[str, Any] = {
    "requirements": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.large", "c5.large"]}],
    "labels": {"team": "a"},
    "taints": [{"key": "dedicated", "value": "a", "effect": "NoSchedule"}],
    "provider": {"instanceProfile": "node", "subnetSelector": {"k": "v"}, "tags": {"cost": "1"}},
}


def prov(**changes: Any) -> Any:
    return make_provisioner("p", **{**BASE, **changes})


def node_of(provisioner: Any, *, itype: str = "m5.large", ami: str = "ami-1", **annotations: str) -> Node:
    return Node(
        name="n1",
        labels={
            wk.PROVISIONER_NAME: provisioner.name,
            wk.INSTANCE_TYPE: itype,
            "team": "a",
        },
        annotations={
            **hash_annotations(provisioner),
            **({AMI_ID_ANNOTATION: ami} if ami else {}),
            **annotations,
        },
    )


@pytest.mark.parametrize(
    "change",
    [
        {"limits": {"resources": {"cpu": "10"}}},
        {"weight": 50},
        {"ttlSecondsUntilExpired": 600},
        {"ttlSecondsAfterEmpty": 30},
        {"disruption": {"nodes": "1"}},
        {"provider": {**BASE["provider"], "subnetSelector": {"other": "x"}}},
        {"provider": {**BASE["provider"], "securityGroupSelector": {"sg": "x"}}},
        # requirements are checked against the node's labels, not hashed
        {"requirements": [{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["m5.large"]}]},
    ],
)
def test_fields_that_do_not_shape_the_node_keep_the_hash(change: dict[str, Any]) -> None:
    assert provisioner_hash(prov(**change)) == provisioner_hash(prov())


@pytest.mark.parametrize(
    "change",
    [
        {"labels": {"team": "b"}},
        {"taints": []},
        {"kubeletConfiguration": {"maxPods": 20}},
        {"kubeletConfiguration": {"clusterDNS": ["10.0.0.10"]}},
        {"provider": {**BASE["provider"], "tags": {"cost": "2"}}},
        {"provider": {**BASE["provider"], "instanceProfile": "other"}},
        {"provider": {**BASE["provider"], "amiFamily": "Bottlerocket"}},
    ],
)
def test_node_shaping_fields_change_the_hash(change: dict[str, Any]) -> None:
    assert provisioner_hash(prov(**change)) != provisioner_hash(prov())


def test_drift_reasons() -> None:
    p = prov()
    assert drift.drift_reason(node_of(p), p, "ami-1") is None
    assert drift.drift_reason(node_of(p), prov(labels={"team": "b"}), "ami-1") == "ProvisionerDrifted"
    # A node stamped under another hash version is not compared by hash.
    old = node_of(p, **{wk.PROVISIONER_HASH_VERSION_ANNOTATION: "v0"})
    assert HASH_VERSION != "v0" and drift.drift_reason(old, prov(labels={"team": "b"}), "ami-1") is None
    narrowed = prov(requirements=[{"key": wk.INSTANCE_TYPE, "operator": "In", "values": ["c5.large"]}])
    assert drift.drift_reason(node_of(p), narrowed, "ami-1") == "RequirementsDrifted"
    assert drift.drift_reason(node_of(p), p, "ami-2") == "AMIDrift"
    # Unknown current AMI (custom launch template) or no record of the launched one: no AMI drift.
    assert drift.drift_reason(node_of(p), p, None) is None
    assert drift.drift_reason(node_of(p, ami=""), p, "ami-2") is None


def test_a_nodepool_drifts_and_is_named_as_karpenter_v1_names_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """Karpenter v1's reason for a changed node template is `NodePoolDrifted` (sigs.k8s.io/karpenter
    pkg/controllers/nodeclaim/disruption/drift.go), and its logs name the nodepool."""
    p = replace(prov(), kind="NodePool")
    changed = replace(prov(labels={"team": "b"}), kind="NodePool")
    assert drift.drift_reason(node_of(p), changed, "ami-1") == "NodePoolDrifted"
    monkeypatch.setattr(drift.nodepatch, "set_annotation", lambda *_: None)
    messages: list[str] = []
    recorder = Recorder(None)
    monkeypatch.setattr(recorder, "node", lambda node, reason, message, **_: messages.append(message))
    ctx = Context(Settings(), None, Cloud("ami-1"), None, None, recorder)  # type: ignore[arg-type]
    assert drift.check(ctx, node_of(p), changed) == "NodePoolDrifted"
    assert messages == ["Marked node n1 drifted, NodePoolDrifted (nodepool p)"]


class Cloud:
    def __init__(self, image: str | None) -> None:
        self.image = image

    def get_instance_types(self, provisioner: Any) -> list[Any]:
        return [next(t for t in catalog() if t.name == "m5.large")]

    def image_id(self, provisioner: Any, instance_type: Any) -> str:
        if self.image is None:
            raise CloudError("no AMI")
        return self.image


def test_a_drifted_node_is_marked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    patched: list[tuple[str, str, str | None]] = []
    monkeypatch.setattr(drift.nodepatch, "set_annotation", lambda _, n, k, v: patched.append((n, k, v)))
    events: list[str] = []
    recorder = Recorder(None)
    monkeypatch.setattr(recorder, "node", lambda node, reason, message, **_: events.append(reason))
    ctx = Context(Settings(), None, Cloud("ami-2"), None, None, recorder)  # type: ignore[arg-type]
    p = prov()
    before = metrics.NODES_DRIFTED.labels(reason="AMIDrift")._value.get()
    assert drift.check(ctx, node_of(p), p) == "AMIDrift"
    assert patched == [("n1", wk.VOLUNTARY_DISRUPTION_ANNOTATION, "drifted")] and events == ["Drifted"]
    assert metrics.NODES_DRIFTED.labels(reason="AMIDrift")._value.get() == before + 1
    marked = node_of(p, **{wk.VOLUNTARY_DISRUPTION_ANNOTATION: "drifted"})
    assert drift.check(ctx, marked, p) == "AMIDrift" and len(patched) == 1 and len(events) == 1
    # The AMI published back: the node is no longer drifted and loses the mark.
    ctx.cloud = Cloud("ami-1")  # type: ignore[assignment]
    assert drift.check(ctx, marked, p) is None
    assert patched[-1] == ("n1", wk.VOLUNTARY_DISRUPTION_ANNOTATION, None)


def test_a_node_without_the_current_hash_version_is_stamped_not_drifted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    patched: dict[str, str | None] = {}
    monkeypatch.setattr(drift.nodepatch, "set_annotation", lambda _, n, k, v: patched.__setitem__(k, v))
    ctx = Context(Settings(), None, Cloud(None), None, None, Recorder(None))  # type: ignore[arg-type]
    bare = Node(name="n1", labels={wk.PROVISIONER_NAME: "p", wk.INSTANCE_TYPE: "m5.large", "team": "a"})
    changed = prov(labels={"team": "a", "tier": "x"})
    assert drift.check(ctx, bare, changed) is None
    assert patched == hash_annotations(changed)


# -- issue 31: drift never kills what it just made -------------------------------------------------


def pool(uid: str, **changes: Any) -> Any:
    """NodePool `default` (kind NodePool, as Karpenter's v1 examples apply it) with its object uid."""
    return replace(make_provisioner("default", **{**BASE, **changes}), kind="NodePool", uid=uid)


OLD_POOL = pool("uid-1")
#: The same name deleted and re-created with another template (Karpenter's v1 examples in turn).
NEW_POOL = pool("uid-2", labels={"team": "b"})
GPU = "nvidia.com/gpu"


def launched_node(
    provisioner: Any,
    *,
    created: datetime,
    kubelet_posted: bool = True,
    taints: tuple[str, ...] = (),
    startup_taints: str = "",
    allocatable: dict[str, str] | None = None,
) -> Node:
    """A node as the launcher writes it for `provisioner` (owner label, its labels, hash, AMI), then
    as kubelet left it: Ready once `kubelet_posted`; `taints` still on it (NoSchedule)."""
    manifest = node_manifest(
        "n1",
        created=created,
        ready=True if kubelet_posted else None,
        taints=[{"key": key, "effect": "NoSchedule"} for key in taints],
        annotations={
            **hash_annotations(provisioner),
            AMI_ID_ANNOTATION: "ami-1",
            **({wk.STARTUP_TAINTS_ANNOTATION: startup_taints} if startup_taints else {}),
        },
        provisioner=None,
    )
    manifest["metadata"]["labels"] = {
        provisioner.owner_label: provisioner.name,
        wk.INSTANCE_TYPE: "m5.large",
        **provisioner.labels,
    }
    manifest["status"]["allocatable"] = allocatable or {"cpu": "2", "memory": "8Gi", "pods": "29"}
    return Node.from_live(manifest)


class Listing:
    """The NodePools the API server holds now; counts how often the lifecycle listed them."""

    def __init__(self, *pools: Any) -> None:
        self.pools = list(pools)
        self.calls = 0

    def __call__(self) -> list[Any]:
        self.calls += 1
        return list(self.pools)


class Cluster:
    """What the node worker reads and writes, as plain data (one node, its pods)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, node: Node) -> None:
        self.node = node
        self.pods: list[Pod] = [running_pod("web-1")]
        self.patched: list[tuple[str, str | None]] = []
        self.cordoned: list[str] = []
        self.deleted: list[str] = []
        monkeypatch.setattr(nodepatch, "get_node", lambda _, name: self.node if name == node.name else None)
        monkeypatch.setattr(nodepatch, "ensure_finalizer", lambda *_: False)
        monkeypatch.setattr(nodepatch, "remove_taint", lambda *_: None)
        monkeypatch.setattr(nodepatch, "pods_on_node", lambda _, name: list(self.pods))
        monkeypatch.setattr(nodepatch, "set_annotation", lambda _, n, k, v: self.patched.append((k, v)))
        monkeypatch.setattr(nodepatch, "delete_node", lambda _, name: self.deleted.append(name))
        monkeypatch.setattr(expiry, "cordon", lambda _, name: self.cordoned.append(name) or True)
        monkeypatch.setattr(Tracker, "sync", lambda *_, **__: None)  # NodeClaims are not the point here

    @property
    def marked(self) -> bool:
        return (wk.VOLUNTARY_DISRUPTION_ANNOTATION, drift.DRIFTED) in self.patched


def worker(cluster: Cluster, listing: Listing) -> NodeWorker:
    """The node worker as `karpy controller` builds it (Lifecycle), over `listing`; the node known
    to its cache, so the NodePool's budget (10 % of 1 node, rounded up) admits it."""
    recorder = Recorder(None)
    recorder.node = lambda *_, **__: None  # type: ignore[method-assign]
    ctx = Context(Settings(), None, Cloud("ami-1"), None, None, recorder)  # type: ignore[arg-type]
    nodes = Lifecycle(ctx, provisioners=listing).nodes
    nodes.track("ADDED", cluster.node)
    return nodes


def test_a_node_of_a_nodepool_recreated_since_the_cached_listing_is_not_drifted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 31's log: NodePool `default` applied over the previous one, its first node marked
    NodePoolDrifted and terminated 150 ms after its pod was bound, judged against the cached old
    spec. A verdict is judged on a listing started after the node was created."""
    listing = Listing(OLD_POOL)
    fresh_node = launched_node(NEW_POOL, created=utcnow())
    cluster = Cluster(monkeypatch, fresh_node)
    nodes = worker(cluster, listing)
    assert nodes.provisioners("default") == OLD_POOL  # listed before the re-create: cached
    listing.pools = [NEW_POOL]
    nodes.process("n1")
    assert not cluster.marked and cluster.cordoned == [] and cluster.deleted == []
    assert listing.calls == 2, "the node is newer than the cached listing: listed again once"
    nodes.process("n1")  # the listing is now newer than the node: no more listing
    assert listing.calls == 2 and cluster.deleted == []


def test_a_node_older_than_the_listing_drifts_without_listing_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real template change: the node launched from the old spec (long before the listing) is
    judged on the cached listing, which cannot be older than what it was launched from."""
    listing = Listing(NEW_POOL)
    cluster = Cluster(monkeypatch, launched_node(OLD_POOL, created=utcnow() - timedelta(hours=1)))
    nodes = worker(cluster, listing)
    nodes.process("n1")
    assert cluster.marked and listing.calls == 1
    assert cluster.cordoned == ["n1"] and cluster.deleted == ["n1"]  # no provisioning here: no pods to move


@pytest.mark.parametrize(
    "coming_up",
    [
        {"kubelet_posted": False},
        {"taints": (wk.NOT_READY_TAINT_KEY,)},
        {"taints": ("node.cloudprovider.kubernetes.io/uninitialized",)},
        {"taints": ("example.com/cni-not-ready",), "startup_taints": "example.com/cni-not-ready:NoSchedule"},
    ],
    ids=["not-registered", "not-ready-taint", "ephemeral-taint", "startup-taint"],
)
def test_a_drifted_node_is_replaced_only_once_initialized(
    monkeypatch: pytest.MonkeyPatch, coming_up: dict[str, Any]
) -> None:
    """Karpenter disrupts only initialized nodes (sigs.k8s.io/karpenter pkg/controllers/disruption/
    types.go NewCandidate, "state node isn't initialized"; Initialized = registered, Ready, startup
    and known ephemeral taints gone, requested resources registered: pkg/controllers/nodeclaim/
    lifecycle/initialization.go). A drifted node still coming up is marked, never cordoned."""
    listing = Listing(NEW_POOL)
    # Within the registration TTL (a node that never joins is liveness' to remove, not drift's).
    created = utcnow() - timedelta(minutes=1)
    cluster = Cluster(monkeypatch, launched_node(OLD_POOL, created=created, **coming_up))
    nodes = worker(cluster, listing)
    nodes.process("n1")
    assert cluster.marked and cluster.cordoned == [] and cluster.deleted == []
    cluster.node = launched_node(OLD_POOL, created=created)  # up: Ready, taints lifted
    nodes.process("n1")
    assert cluster.cordoned == ["n1"] and cluster.deleted == ["n1"]


def test_a_drifted_node_whose_requested_resource_is_not_registered_is_not_replaced(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Initialized waits for every resource its pods request (a GPU the device plugin has not
    registered yet): Karpenter's ResourceNotRegistered."""
    listing = Listing(NEW_POOL)
    created = utcnow() - timedelta(hours=1)
    cluster = Cluster(monkeypatch, launched_node(OLD_POOL, created=created))
    gpu_pod = running_pod_manifest("trainer")
    gpu_pod["spec"]["containers"] = [{"name": "c", "resources": {"requests": {GPU: "1"}}}]
    cluster.pods = [Pod.from_live(gpu_pod)]
    nodes = worker(cluster, listing)
    nodes.process("n1")
    assert cluster.marked and cluster.deleted == []
    with_gpu = {"cpu": "2", "memory": "8Gi", "pods": "29", GPU: "1"}
    cluster.node = launched_node(OLD_POOL, created=created, allocatable=with_gpu)
    nodes.process("n1")
    assert cluster.deleted == ["n1"]


class Replacements:
    """Provisioning's side of a replacement: records the pods it was asked to make room for."""

    def __init__(self) -> None:
        self.asked: list[list[str]] = []

    def provision_replacements(self, pods: Any) -> list[str]:
        self.asked.append([p.name for p in pods])
        return ["r1"]


def test_pods_bound_after_the_listing_get_a_replacement_before_the_node_goes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The rest of issue 31's log: the pod was bound 10 ms after the node worker listed the node's
    pods, so the replacement path saw none, launched nothing and deleted the node at once. The
    pods are read again once the node is marked and cordoned, and their replacement must be up
    (initialized) before the node is deleted."""
    cluster = Cluster(monkeypatch, launched_node(OLD_POOL, created=T0))
    replacement: dict[str, Node] = {}
    monkeypatch.setattr(nodepatch, "get_node", lambda _, name: replacement.get(name))
    provisioning = Replacements()
    ctx = Context(Settings(), None, Cloud("ami-1"), None, provisioning, Recorder(None))  # type: ignore[arg-type]
    ctx.clock = lambda: T0 + timedelta(seconds=5)
    keeper = expiry.Expiry()

    def replace_once() -> float | None:
        return keeper.replace(ctx, cluster.node, "drifted", T0, pods=[], deleting=set(), due=[("n1", T0)])

    assert replace_once() == expiry.WAIT_POLL_SECONDS
    assert provisioning.asked == [["web-1"]] and cluster.cordoned == ["n1"] and cluster.deleted == []
    replacement["r1"] = replace(
        launched_node(NEW_POOL, created=T0, taints=(wk.NOT_READY_TAINT_KEY,)), name="r1"
    )
    assert replace_once() == expiry.WAIT_POLL_SECONDS and cluster.deleted == []  # Ready, not initialized
    replacement["r1"] = replace(replacement["r1"], taints=())
    assert replace_once() is None and cluster.deleted == ["n1"]
    assert provisioning.asked == [["web-1"]]


def test_the_lookup_lists_again_only_for_nodes_newer_than_its_listing() -> None:
    listing = Listing(OLD_POOL)
    wall = [T0]
    lookup = pool_lookup.ProvisionerLookup(None, settings=Settings(), wall=lambda: wall[0], lister=listing)
    assert lookup.get("default") == OLD_POOL and listing.calls == 1
    listing.pools = [NEW_POOL]
    older = launched_node(OLD_POOL, created=T0 - timedelta(minutes=5))
    assert lookup.fresh(older) == OLD_POOL and listing.calls == 1
    # Created after the listing started (or within the clock skew allowed for): listed again.
    newer = launched_node(NEW_POOL, created=T0 - pool_lookup.CLOCK_SKEW / 2)
    assert lookup.fresh(newer) == NEW_POOL and listing.calls == 2
    wall[0] = T0 + pool_lookup.CLOCK_SKEW * 2
    assert lookup.fresh(newer) == NEW_POOL and listing.calls == 3
    assert lookup.fresh(newer) == NEW_POOL and listing.calls == 3


def test_a_marked_node_keeps_its_mark_unless_a_fresh_listing_clears_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The other direction: a cached listing older than the node saying "not drifted" does not
    unmark a node a fresh listing still finds drifted."""
    patched: list[tuple[str, str | None]] = []
    monkeypatch.setattr(drift.nodepatch, "set_annotation", lambda _, n, k, v: patched.append((k, v)))
    ctx = Context(Settings(), None, Cloud("ami-1"), None, None, Recorder(None))  # type: ignore[arg-type]
    marked = launched_node(OLD_POOL, created=T0)
    marked = replace(
        marked, annotations={**marked.annotations, wk.VOLUNTARY_DISRUPTION_ANNOTATION: "drifted"}
    )
    assert drift.check(ctx, marked, OLD_POOL, reread=lambda: NEW_POOL) == "NodePoolDrifted"
    assert patched == []
    assert drift.check(ctx, marked, OLD_POOL, reread=lambda: OLD_POOL) is None
    assert patched == [(wk.VOLUNTARY_DISRUPTION_ANNOTATION, None)]


def test_a_drifted_node_held_back_does_not_keep_the_slot_from_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One disruption slot (the default), two drifted nodes: the one found first cannot be
    disrupted (still coming up, or a startup taint nothing lifts), so the other takes the slot
    instead of waiting behind it for ever."""
    cluster = Cluster(monkeypatch, launched_node(OLD_POOL, created=T0))
    ctx = Context(Settings(), None, Cloud("ami-1"), None, None, Recorder(None))  # type: ignore[arg-type]
    ctx.clock = lambda: T0 + timedelta(minutes=5)
    assert ctx.settings.lifecycle.max_disrupting == 1
    keeper = expiry.Expiry()
    due = [("coming-up", T0), ("n1", T0 + timedelta(seconds=1))]
    keeper.hold("coming-up", True)
    assert keeper.replace(ctx, cluster.node, "drifted", T0, pods=[], deleting=set(), due=due) is None
    assert cluster.deleted == ["n1"]
