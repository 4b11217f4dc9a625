"""Builders for the Karpenter-suite port: pods from API JSON, v1alpha5 Provisioners, and a tiny cluster.

Karpenter's tests run a real provisioner against envtest: every `ExpectProvisioned` launches NodeClaims,
binds the pods, and later rounds see those nodes and pods. `Cluster` replays that on karpy's pure
`solve()`: each `provision()` call solves against the nodes so far (`existing_nodes`, with their pods),
then commits the plan -- pods placed on existing nodes join them, every planned node becomes a new
schedulable node labelled as it would launch (its cheapest option; hostname = node name).

Mapping used throughout (Karpenter -> karpy):
- test-zone-1/2/3 -> us-west-2a/b/c (the fixture catalog's zones);
- a NodePool -> a v1alpha5 Provisioner (requirements, labels, taints, limits.resources, weight);
  `capacity-type Exists` = no capacity-type requirement;
- `test.Node(...)` (a node Karpenter does not own) -> `ExistingNode(schedulable=False)`;
- ExpectScheduled -> the pod is bound to a node of the cluster; ExpectNotScheduled -> it is not;
- ExpectSkew(ns, constraint) -> `Cluster.skew(constraint)`: per-domain counts of the bound pods in `ns`
  (all namespaces for "") matching the constraint's labelSelector (all pods when it has none).
"""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import pytest

from extender.api.pod import Pod
from extender.api.provisioner import Provisioner, Taint
from extender.api.resources import Resources, total
from extender.scheduling.solver import ExistingNode, Plan, PlannedNode, solve
from tests.builders import ZONE, req
from tests.model_builders import existing_node
from tests.unit.scheduling.builders import ZONES, catalog

Z1, Z2, Z3 = ZONES
HOSTNAME = "kubernetes.io/hostname"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
ARCH = "kubernetes.io/arch"
OS = "kubernetes.io/os"
SPOT, ON_DEMAND = "spot", "on-demand"


# --- tests not ported ----------------------------------------------------------------------------


def not_ported(*titles: str, reason: str) -> Callable[[Callable[..., Any]], Any]:
    """Marks a test that stands for Karpenter tests karpy cannot port: one case per Karpenter test title
    (passed as the test's `title` argument), each skipped with `reason`."""

    def mark(test: Callable[..., Any]) -> Any:
        return pytest.mark.skip(reason=reason)(pytest.mark.parametrize("title", titles)(test))

    return mark


def zones_requirement(*zones: str) -> dict[str, Any]:
    return req(ZONE, "In", *zones)


# --- volumes (Karpenter's test.PersistentVolume / StorageClass) ----------------------------------


def zonal_volume(name: str, *zones: str, terms: Sequence[Sequence[Mapping[str, Any]]] | None = None) -> dict:
    """A CSI PersistentVolume whose node affinity is `zone In zones`, or the ORed `terms`, or none."""
    spec: dict[str, Any] = {"csi": {"driver": "test.driver", "volumeHandle": "test-handle"}}
    node_terms = (
        [list(t) for t in terms] if terms is not None else [[req(ZONE, "In", *zones)]] if zones else []
    )
    if node_terms:
        spec["nodeAffinity"] = {
            "required": {"nodeSelectorTerms": [{"matchExpressions": t} for t in node_terms]}
        }
    return {"metadata": {"name": name}, "spec": spec}


def storage_class(
    name: str,
    *,
    zones: Sequence[str] = (),
    topologies: Sequence[Sequence[Mapping[str, Any]]] | None = None,
    binding: str = "WaitForFirstConsumer",
    default: bool = False,
    provisioner_name: str = "fake.csi.provider",
) -> dict[str, Any]:
    """A StorageClass; `zones` -> one allowedTopologies term, `topologies` -> ORed terms of
    {key, values} label requirements."""
    item: dict[str, Any] = {
        "metadata": {"name": name},
        "provisioner": provisioner_name,
        "volumeBindingMode": binding,
    }
    if default:
        item["metadata"]["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    terms = [list(t) for t in topologies] if topologies is not None else []
    if zones:
        terms.append([{"key": ZONE, "values": list(zones)}])
    if terms:
        item["allowedTopologies"] = [{"matchLabelExpressions": t} for t in terms]
    return item


def claim(name: str, namespace: str = "default", **spec: Any) -> dict[str, Any]:
    """A PersistentVolumeClaim (spec keys as API JSON: volumeName, storageClassName...); with a volumeName
    it carries pv.kubernetes.io/bind-completed, as Karpenter's test.PersistentVolumeClaim."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if spec.get("volumeName"):
        metadata["annotations"] = {"pv.kubernetes.io/bind-completed": "yes"}
    return {"metadata": metadata, "spec": spec}


# --- selectors ------------------------------------------------------------------------------------


def selector_matches(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector semantics as Karpenter's TopologyListOptions uses them (None = everything)."""
    if selector is None:
        return True
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for expr in selector.get("matchExpressions") or ():
        key, op, values = expr["key"], expr["operator"], expr.get("values") or ()
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels[key] in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


# --- the cluster ----------------------------------------------------------------------------------


def _uncertain_keys(node: PlannedNode) -> set[str]:
    """Well-known keys whose value the plan leaves open (several zones, capacity types, types...)."""
    result = set()
    if len(set(node.zones)) > 1:
        result.add(ZONE)
    if len(set(node.capacity_types)) > 1:
        result.add(CAPACITY_TYPE)
    for key in (INSTANCE_TYPE, ARCH, OS):
        if len({t.labels()[key] for t in node.options}) > 1:
            result.add(key)
    return result


def _volumes_in_use(pods: Iterable[Pod]) -> tuple[tuple[str, int], ...]:
    """(driver, unique volumes) the pods hold: a claim pods share is one (kube-scheduler NodeVolumeLimits)."""
    unique = {(driver, f"{p.namespace}/{name}") for p in pods for driver, name in p.csi_claims}
    return tuple(sorted(Counter(driver for driver, _ in unique).items()))


class Cluster:
    """The nodes (with their pods) that Karpenter's envtest would hold between provisioning rounds."""

    def __init__(self, *provisioners: Provisioner, instance_types: Sequence[Any] | None = None) -> None:
        self.provisioners: list[Provisioner] = list(provisioners)
        #: The catalog solve() sees (default: the fixture catalog).
        self.instance_types = list(instance_types) if instance_types is not None else list(catalog())
        self.nodes: list[ExistingNode] = []
        #: Per node name: keys whose value the plan that made the node had not settled.
        self.uncertain: dict[str, set[str]] = {}
        self.plans: list[Plan] = []
        self._node_names = itertools.count(1)

    # nodes not owned by karpy (Karpenter's test.Node + ExpectApplied)
    def add_node(
        self,
        name: str | None = None,
        *,
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, str]] = (),
        allocatable: Mapping[str, Any] | None = None,
        pods: Iterable[Pod] = (),
        schedulable: bool = False,
        provisioner: str = "",
        instance_type: str = "",
    ) -> ExistingNode:
        name = name or f"existing-{next(self._node_names)}"
        bound = tuple(pods)
        node = existing_node(
            name,
            zone=None,
            hostname=False,
            provisioner=provisioner,
            instance_type=instance_type,
            labels={**(labels or {}), HOSTNAME: name},
            taints=tuple(Taint(t["key"], t["effect"], t.get("value", "")) for t in taints),
            allocatable=Resources.parse(allocatable or {}),
            pods=bound,
            schedulable=schedulable,
        )
        self.nodes.append(node)
        return node

    def provision(
        self, batch: Sequence[Pod], provisioners: Sequence[Provisioner] | None = None, **kwargs: Any
    ) -> Plan:
        """One ExpectProvisioned: solve the batch against the cluster, then launch and bind the plan."""
        if provisioners is not None:
            self.provisioners = list(provisioners)
        plan = solve(
            list(batch), self.provisioners, self.instance_types, existing_nodes=tuple(self.nodes), **kwargs
        )
        self.plans.append(plan)
        self._commit(plan)
        return plan

    def _commit(self, plan: Plan) -> None:
        for i, node in enumerate(self.nodes):
            added = tuple(plan.existing.get(node.name, ()))
            if added:
                bound = (*node.pods, *added)
                self.nodes[i] = dataclasses.replace(
                    node,
                    pods=bound,
                    requested=node.requested + total(p.requests for p in added),
                    pod_count=node.pod_count + len(added),
                    volumes_in_use=_volumes_in_use(bound),
                )
        for planned in plan.nodes:
            name = f"node-{next(self._node_names)}"
            self.uncertain[name] = _uncertain_keys(planned)
            self.nodes.append(
                existing_node(
                    name,
                    zone=None,
                    hostname=False,
                    provisioner=planned.provisioner,
                    instance_type=planned.instance_type.name,
                    labels={**planned.node_labels(), HOSTNAME: name},
                    taints=planned.taints,
                    allocatable=planned.instance_type.allocatable,
                    pods=planned.pods,
                    volumes_in_use=_volumes_in_use(planned.pods),
                )
            )

    # --- expectations
    def node_of(self, pod: Pod) -> ExistingNode | None:
        for node in self.nodes:
            if any(p.key == pod.key for p in node.pods):
                return node
        return None

    def expect_scheduled(self, pod: Pod) -> ExistingNode:
        node = self.node_of(pod)
        assert node is not None, f"pod {pod.key} not scheduled: {self.reason(pod)}"
        return node

    def expect_not_scheduled(self, pod: Pod) -> None:
        node = self.node_of(pod)
        assert node is None, (
            f"pod {pod.key} scheduled to {node.name if node else ''} ({dict(node.labels) if node else ''})"
        )

    def reason(self, pod: Pod) -> str:
        for plan in reversed(self.plans):
            for item in plan.unschedulable:
                if item.pod.key == pod.key:
                    return item.reason
        return "not in any plan"

    def scheduled(self, batch: Iterable[Pod]) -> list[Pod]:
        return [p for p in batch if self.node_of(p) is not None]

    def replace_node(self, name: str, **changes: Any) -> None:
        """Swap node `name` for a copy with `changes` (ExistingNode fields), as the controller would see it
        now (terminating, tainted, holding other pods...)."""
        self.nodes = [dataclasses.replace(n, **changes) if n.name == name else n for n in self.nodes]

    def delete_pod(self, pod: Pod) -> None:
        for i, node in enumerate(self.nodes):
            kept = tuple(p for p in node.pods if p.key != pod.key)
            if len(kept) != len(node.pods):
                self.nodes[i] = dataclasses.replace(
                    node, pods=kept, requested=node.requested - pod.requests, pod_count=node.pod_count - 1
                )

    def domains(
        self,
        constraint: Mapping[str, Any] | str,
        namespace: str = "default",
        *,
        certain: bool = True,
    ) -> Counter[str]:
        """ExpectSkew: bound pods per domain of the constraint's key, selected by its labelSelector.

        With `certain`, a node counted here whose domain the plan had left open fails the check when
        one of its pods has a DoNotSchedule spread on that key: karpy's contract is that a rule depending
        on an unsettled label must hold for every value, so such a spread would not be guaranteed.
        """
        if isinstance(constraint, str):
            constraint = {"topologyKey": constraint}
        key = constraint["topologyKey"]
        selector = constraint.get("labelSelector")
        counts: Counter[str] = Counter()
        for node in self.nodes:
            selected = [
                p
                for p in node.pods
                if (not namespace or p.namespace == namespace) and selector_matches(selector, p.labels)
            ]
            if not selected:
                continue
            if key == HOSTNAME:
                domain = node.name
            elif key in node.labels:
                domain = node.labels[key]
            else:
                continue
            if certain and key in self.uncertain.get(node.name, ()):
                hard = [
                    p.key
                    for p in node.pods
                    if any(
                        s.topology_key == key and s.hard and s.selector is not None for s in p.topology_spread
                    )
                ]
                assert not hard, (
                    f"node {node.name} hosts {hard} (DoNotSchedule spread on {key}) but the plan left {key} "
                    f"open"
                )
            counts[domain] += len(selected)
        return counts

    def skew(self, constraint: Mapping[str, Any] | str, namespace: str = "default", **kw: Any) -> list[int]:
        """The per-domain counts as a sorted list (Gomega's ConsistOf is a multiset match)."""
        return sorted(self.domains(constraint, namespace, **kw).values())

    def max_skew(self, constraint: Mapping[str, Any], namespace: str = "default") -> int:
        counts = self.domains(constraint, namespace)
        return max(counts.values()) - min(counts.values()) if counts else 0

    def new_nodes(self) -> list[ExistingNode]:
        return [n for n in self.nodes if n.name.startswith("node-")]


def ms(*counts: int) -> list[int]:
    """Gomega ConsistOf(counts...) as a sorted list to compare with Cluster.skew."""
    return sorted(counts)
