"""The one set of test builders: pods, nodes and pools as API JSON, and the models karpy parses from it.

Plain data, no API calls. `pod_manifest` / `node_manifest` / `provisioner_manifest` build the JSON
(for fakes of the API, files `karpy plan` reads, or the local control plane); `pod` / `node` /
`provisioner` parse it as karpy does (`Pod.from_manifest` or `from_live`, `Node.from_live`,
`load_provisioner`). Keyword arguments are snake_case for what the builder shapes (requests,
owners, affinity terms...) and camelCase for spec fields passed through as written. A test file keeps
at most a `functools.partial` of the options its tests share; shapes a test needs go here as keywords.

Named shapes: `running_pod*` (a pod the lifecycle finds on a node), `workload_pod(s)` (consolidation's
pods), `INFLATE` (Karpenter's inflate pod), `launched_node_manifest` (a node karpy launched),
`cluster_node` (a node of the cluster as the rule checker reads it), `nodepool_manifest` (v1).

The pod keywords follow Karpenter's test.PodOptions (pkg/test/pods.go): node_requirements /
node_preferences, pod_requirements / pod_anti_requirements, spreads, tolerations, host_ports...
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from extender.api import labels as wk
from extender.api.node import Node
from extender.api.nodepool import load_nodepool
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.api.provisioner_schema import load_provisioner
from extender.cluster.volumes import Volumes

ZONE = "topology.kubernetes.io/zone"
#: The labels Karpenter's topology tests put on their pods and select on.
LABELS = {"test": "test"}
#: The creation time of the nodes built here unless a test sets one.
T0 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=UTC)

_names = itertools.count()


def stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- selector and affinity parts -----------------------------------------------------------------


def req(key: str, operator: str, *values: str) -> dict[str, Any]:
    """A NodeSelectorRequirement / LabelSelectorRequirement."""
    item: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        item["values"] = list(values)
    return item


def spread(
    key: str = ZONE,
    *,
    max_skew: int = 1,
    when: str = "DoNotSchedule",
    selector: Mapping[str, Any] | str | None = "labels",
    min_domains: int | None = None,
    node_affinity_policy: str | None = None,
    node_taints_policy: str | None = None,
    match_label_keys: Sequence[str] | None = None,
) -> dict[str, Any]:
    """A TopologySpreadConstraint; `selector` defaults to matchLabels LABELS, None leaves it out."""
    item: dict[str, Any] = {"maxSkew": max_skew, "topologyKey": key, "whenUnsatisfiable": when}
    if selector == "labels":
        item["labelSelector"] = {"matchLabels": dict(LABELS)}
    elif selector is not None:
        item["labelSelector"] = dict(selector)  # type: ignore[arg-type]
    if min_domains is not None:
        item["minDomains"] = min_domains
    if node_affinity_policy:
        item["nodeAffinityPolicy"] = node_affinity_policy
    if node_taints_policy:
        item["nodeTaintsPolicy"] = node_taints_policy
    if match_label_keys is not None:
        item["matchLabelKeys"] = list(match_label_keys)
    return item


def term(
    key: str,
    match_labels: Mapping[str, str] | None,
    *,
    namespaces: Sequence[str] | None = None,
    namespace_selector: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A PodAffinityTerm selecting `match_labels` (None = no labelSelector) over `key`."""
    item: dict[str, Any] = {"topologyKey": key}
    if match_labels is not None:
        item["labelSelector"] = {"matchLabels": dict(match_labels)}
    if namespaces is not None:
        item["namespaces"] = list(namespaces)
    if namespace_selector is not None:
        item["namespaceSelector"] = dict(namespace_selector)
    return item


def weighted(weight: int, pod_term: Mapping[str, Any]) -> dict[str, Any]:
    return {"weight": weight, "podAffinityTerm": dict(pod_term)}


# --- pods ----------------------------------------------------------------------------------------


def pod_manifest(
    name: str | None = None,
    *,
    namespace: str | None = "default",
    uid: str | None = None,
    resource_version: str | None = None,
    created: datetime | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    owner_kind: str | None = None,
    owner_name: str = "owner",
    owners: Sequence[Mapping[str, Any]] | None = None,
    deleted_at: datetime | None = None,
    cpu: str | None = None,
    memory: str | None = None,
    requests: Mapping[str, Any] | None = None,
    limits: Mapping[str, Any] | None = None,
    guaranteed: Mapping[str, Any] | None = None,
    gpu: int = 0,
    container: str = "c",
    image: str | None = "pause",
    node_name: str | None = None,
    node_selector: Mapping[str, str] | None = None,
    node_requirements: Sequence[Mapping[str, Any]] | None = None,
    node_preferences: Sequence[Mapping[str, Any]] | None = None,
    required_terms: Sequence[Sequence[Mapping[str, Any]]] | None = None,
    preferred_terms: Sequence[tuple[int, Sequence[Mapping[str, Any]]]] | None = None,
    pod_requirements: Sequence[Mapping[str, Any]] | None = None,
    pod_preferences: Sequence[Mapping[str, Any]] | None = None,
    pod_anti_requirements: Sequence[Mapping[str, Any]] | None = None,
    pod_anti_preferences: Sequence[Mapping[str, Any]] | None = None,
    spreads: Sequence[Mapping[str, Any]] | None = None,
    tolerations: Sequence[Mapping[str, Any]] | None = None,
    host_ports: Sequence[int] | None = None,
    ports: Sequence[Mapping[str, Any]] | None = None,
    init_containers: Sequence[Mapping[str, Any]] | None = None,
    overhead: Mapping[str, Any] | None = None,
    priority_class: str | None = None,
    claims: Sequence[str] | None = None,
    ephemeral: Sequence[tuple[str, str | None]] | None = None,
    phase: str | None = None,
    conditions: Sequence[Mapping[str, Any]] | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A v1 Pod as API JSON, shaped like Karpenter's test.PodOptions; `**spec` are spec fields as
    written (`affinity`, `topologySpreadConstraints`, `containers`...), set last.

    namespace None: none (the API request names it). uid: None -> "uid-<name>", "" -> none. cpu /
    memory "" or None: no request. gpu: that many NVIDIA GPUs as a limit (extended resources are
    requested through limits). guaranteed: resources asked as requests and limits alike (extended
    resources and hugepages must be). container: the one container's name. host_ports: ports 80 on those
    host ports; ports: the container's ports as written. owner_kind: one controller owner reference
    of that kind named `owner_name`; owners: the ownerReferences as written. node_requirements -> one
    required nodeSelectorTerm; node_preferences -> one preferred term of weight 1 (as Karpenter's
    builder); `required_terms` / `preferred_terms` give several terms. claims ->
    persistentVolumeClaim volumes; ephemeral -> (volume, storage class) generic ephemeral volumes.
    phase -> status.phase, conditions -> status.conditions (`status` gives the rest of the status).
    """
    name = name or f"pod-{next(_names)}"
    container_requests = dict(requests or {})
    if cpu:
        container_requests["cpu"] = cpu
    if memory:
        container_requests["memory"] = memory
    container_requests.update(guaranteed or {})
    container_limits = {**(limits or {}), **(guaranteed or {})}
    if gpu:
        container_limits["nvidia.com/gpu"] = gpu
    resources: dict[str, Any] = {}
    if container_requests:
        resources["requests"] = container_requests
    if container_limits:
        resources["limits"] = container_limits
    main: dict[str, Any] = {"name": container, "resources": resources}
    if image is not None:
        main["image"] = image
    if host_ports:
        main["ports"] = [{"containerPort": 80, "hostPort": p, "protocol": "TCP"} for p in host_ports]
    if ports:
        main["ports"] = [dict(p) for p in ports]
    body: dict[str, Any] = {"containers": [main]}
    if node_name is not None:
        body["nodeName"] = node_name
    if node_selector:
        body["nodeSelector"] = dict(node_selector)
    affinity = _affinity(
        node_requirements,
        node_preferences,
        required_terms,
        preferred_terms,
        (pod_requirements, pod_preferences),
        (pod_anti_requirements, pod_anti_preferences),
    )
    if affinity:
        body["affinity"] = affinity
    if spreads:
        body["topologySpreadConstraints"] = [dict(s) for s in spreads]
    if tolerations:
        body["tolerations"] = [dict(t) for t in tolerations]
    if init_containers:
        body["initContainers"] = [dict(c) for c in init_containers]
    if overhead:
        body["overhead"] = dict(overhead)
    if priority_class:
        body["priorityClassName"] = priority_class
    volumes = _volumes(claims, ephemeral)
    if volumes:
        body["volumes"] = volumes
    body.update(spec)
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    if uid != "":
        metadata["uid"] = uid or f"uid-{name}"
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    if created is not None:
        metadata["creationTimestamp"] = stamp(created)
    if labels:
        metadata["labels"] = dict(labels)
    if annotations:
        metadata["annotations"] = dict(annotations)
    if owner_kind:
        metadata["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner_kind,
                "name": owner_name,
                "uid": "owner",
                "controller": True,
            }
        ]
    if owners is not None:
        metadata["ownerReferences"] = [dict(o) for o in owners]
    if deleted_at is not None:
        metadata["deletionTimestamp"] = stamp(deleted_at)
    manifest: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": body}
    if status is not None or phase is not None or conditions is not None:
        manifest["status"] = {
            **(status or {}),
            **({"phase": phase} if phase is not None else {}),
            **({"conditions": [dict(c) for c in conditions]} if conditions is not None else {}),
        }
    return manifest


#: `pod_manifest` options of Karpenter's `inflate` pod (pause, no grace period, app=inflate, 64Mi) for
#: `create_namespaced_pod`, which names the namespace: `pod_manifest(name, **INFLATE, cpu=...)`.
INFLATE: Mapping[str, Any] = MappingProxyType(
    {
        "namespace": None,
        "uid": "",
        "labels": {"app": "inflate"},
        "container": "pause",
        "image": "registry.k8s.io/pause:3.9",
        "memory": "64Mi",
        "terminationGracePeriodSeconds": 0,
    }
)


def _affinity(
    node_requirements: Sequence[Mapping[str, Any]] | None,
    node_preferences: Sequence[Mapping[str, Any]] | None,
    required_terms: Sequence[Sequence[Mapping[str, Any]]] | None,
    preferred_terms: Sequence[tuple[int, Sequence[Mapping[str, Any]]]] | None,
    pod_affinity: tuple[Sequence[Mapping[str, Any]] | None, Sequence[Mapping[str, Any]] | None],
    pod_anti_affinity: tuple[Sequence[Mapping[str, Any]] | None, Sequence[Mapping[str, Any]] | None],
) -> dict[str, Any]:
    affinity: dict[str, Any] = {}
    node_affinity: dict[str, Any] = {}
    terms = [list(t) for t in required_terms or ()]
    if node_requirements is not None:
        terms.insert(0, list(node_requirements))
    if terms:
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": [{"matchExpressions": t} for t in terms]
        }
    preferred = [(w, list(t)) for w, t in preferred_terms or ()]
    if node_preferences is not None:
        preferred.insert(0, (1, list(node_preferences)))
    if preferred:
        node_affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "preference": {"matchExpressions": t}} for w, t in preferred
        ]
    if node_affinity:
        affinity["nodeAffinity"] = node_affinity
    for kind, (required, preferred_pod) in (
        ("podAffinity", pod_affinity),
        ("podAntiAffinity", pod_anti_affinity),
    ):
        section: dict[str, Any] = {}
        if required is not None:
            section["requiredDuringSchedulingIgnoredDuringExecution"] = [dict(t) for t in required]
        if preferred_pod is not None:
            section["preferredDuringSchedulingIgnoredDuringExecution"] = [dict(t) for t in preferred_pod]
        if required is not None or preferred_pod is not None:
            affinity[kind] = section
    return affinity


def _volumes(claims: Sequence[str] | None, ephemeral: Sequence[tuple[str, str | None]] | None) -> list[Any]:
    volumes: list[dict[str, Any]] = [
        {"name": f"claim-{i}", "persistentVolumeClaim": {"claimName": claim}}
        for i, claim in enumerate(claims or ())
    ]
    for volume_name, storage_class in ephemeral or ():
        claim_spec: dict[str, Any] = {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        }
        if storage_class is not None:
            claim_spec["storageClassName"] = storage_class
        volumes.append({"name": volume_name, "ephemeral": {"volumeClaimTemplate": {"spec": claim_spec}}})
    return volumes


def pod(
    name: str | None = None,
    *,
    cluster_volumes: Volumes | None = None,
    csi_volumes: Mapping[str, int] | None = None,
    live: bool = False,
    **options: Any,
) -> Pod:
    """`pod_manifest(name, **options)` parsed: Karpenter's test.UnschedulablePod(options).

    With `cluster_volumes` (the cluster's claims, volumes and classes) the pod's claims are resolved to
    node terms as the controller does (`Volumes.topology`); without, a pod with a claim is unmodelled.
    csi_volumes: per CSI driver, that many claims (`claim-<i>`) already resolved to it, set on the
    parsed pod as the controller's resolution would (no volumes in the manifest).
    `live`: parsed as the lifecycle reads a pod that exists (`Pod.from_live`).
    """
    manifest = pod_manifest(name, **options)
    if live:
        return Pod.from_live(manifest)
    if cluster_volumes is None:
        parsed = Pod.from_manifest(manifest)
    else:
        parsed = Pod.from_manifest(manifest, cluster_volumes.topology(manifest))
        parsed = dataclasses.replace(parsed, csi_claims=cluster_volumes.csi_claims(manifest))
    if csi_volumes:
        claims = tuple((driver, f"claim-{i}") for driver, count in csi_volumes.items() for i in range(count))
        parsed = dataclasses.replace(parsed, csi_claims=claims, claims=tuple(name for _, name in claims))
    return parsed


def pods(count: int, *, prefix: str | None = None, **options: Any) -> list[Pod]:
    """Karpenter's test.UnschedulablePods(options, count): identical pods with distinct names
    (`<prefix><i>` for i from 0 when a prefix is given)."""
    return [pod(None if prefix is None else f"{prefix}{i}", **options) for i in range(count)]


# --- nodes ---------------------------------------------------------------------------------------


def launched_labels(
    name: str, instance_type: str, *, zone: str = "us-west-2a", capacity_type: str = "on-demand"
) -> dict[str, str]:
    """The well-known labels a node karpy launched carries (hostname, type, zone, capacity type,
    amd64 Linux)."""
    return {
        wk.HOSTNAME: name,
        wk.INSTANCE_TYPE: instance_type,
        wk.ZONE: zone,
        wk.CAPACITY_TYPE: capacity_type,
        wk.ARCH: "amd64",
        wk.OS: "linux",
    }


def node_manifest(
    name: str = "n1",
    *,
    created: datetime | None = T0,
    ready: bool | None = True,
    reason: str = "KubeletReady",
    instance_type: str | None = None,
    zone: str | None = None,
    capacity_type: str | None = None,
    arch: str | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] | None = None,
    annotations: Mapping[str, str] | None = None,
    instance: str | None = "i-0001",
    provisioner: str | None = "default",
    deleting: bool = False,
    unschedulable: bool = False,
    allocatable: Mapping[str, str] | None = None,
    capacity: Mapping[str, str] | None = None,
    room: Mapping[str, str] | None = None,
    resource_version: str | None = None,
) -> dict[str, Any]:
    """A v1 Node as API JSON: owned by `provisioner` (its karpenter.sh/provisioner-name label; None =
    not karpy's), with a providerID for `instance` (None = none) and a Ready condition (`ready` None =
    no condition). created None: no creationTimestamp. instance_type / zone / capacity_type / arch:
    that well-known label (None = none), before `labels`. room: allocatable and capacity alike (a node
    reserving nothing) where those are not given."""
    well_known = {
        wk.INSTANCE_TYPE: instance_type,
        wk.ZONE: zone,
        wk.CAPACITY_TYPE: capacity_type,
        wk.ARCH: arch,
    }
    meta: dict[str, Any] = {"name": name}
    if created is not None:
        meta["creationTimestamp"] = stamp(created)
    meta["annotations"] = dict(annotations or {})
    meta["labels"] = {**{k: v for k, v in well_known.items() if v is not None}, **(labels or {})}
    if provisioner:
        meta["labels"][wk.PROVISIONER_NAME] = provisioner
    if deleting:
        meta["deletionTimestamp"] = stamp(created or T0)
    if resource_version is not None:
        meta["resourceVersion"] = resource_version
    conditions = (
        [] if ready is None else [{"type": "Ready", "status": "True" if ready else "False", "reason": reason}]
    )
    status: dict[str, Any] = {"conditions": conditions}
    allocatable = room if allocatable is None else allocatable
    capacity = room if capacity is None else capacity
    if allocatable is not None:
        status["allocatable"] = dict(allocatable)
    if capacity is not None:
        status["capacity"] = dict(capacity)
    spec: dict[str, Any] = {"taints": [dict(t) for t in taints or ()]}
    if instance is not None:
        spec["providerID"] = f"aws:///us-west-2a/{instance}"
    if unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec, "status": status}


def launched_node_manifest(
    name: str = "n1",
    instance_type: str = "m5.xlarge",
    *,
    zone: str = "us-west-2a",
    capacity_type: str = "on-demand",
    labels: Mapping[str, str] | None = None,
    **options: Any,
) -> dict[str, Any]:
    """A node karpy launched: `node_manifest` labelled with `launched_labels`, then `labels`."""
    launched = launched_labels(name, instance_type, zone=zone, capacity_type=capacity_type)
    return node_manifest(name, labels={**launched, **(labels or {})}, **options)


def node(name: str = "n1", *, launched: str | None = None, **options: Any) -> Node:
    """`node_manifest(name, **options)` as the lifecycle reads it (`Node.from_live`); with `launched`
    (an instance type), `launched_node_manifest(name, launched, **options)`."""
    if launched is not None:
        return Node.from_live(launched_node_manifest(name, launched, **options))
    return Node.from_live(node_manifest(name, **options))


def cluster_node(
    name: str,
    zone: str,
    pods: Sequence[Mapping[str, Any]] = (),
    *,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] = (),
    allocatable: Mapping[str, Any] | None = None,
    schedulable: bool = True,
    **fields: Any,
) -> dict[str, Any]:
    """A node of the cluster as the rule checker reads it (tests/unit/scheduling/rulecheck.py): plain
    data labelled with its hostname and `zone`, then `labels`; `pods` (API JSON) bound to it;
    allocatable 4 CPU, 16Gi and 110 pods unless given; `**fields` are other fields as written
    (provisioner, instance_type, attach_limits)."""
    return {
        "name": name,
        **fields,
        "labels": {wk.HOSTNAME: name, wk.ZONE: zone, **(labels or {})},
        "taints": [dict(t) for t in taints],
        "allocatable": dict(allocatable)
        if allocatable is not None
        else {"cpu": "4", "memory": "16Gi", "pods": 110},
        "pods": [{**p, "spec": {**p["spec"], "nodeName": name}} for p in pods],
        "schedulable": schedulable,
    }


# --- pools ---------------------------------------------------------------------------------------


def provisioner_manifest(
    name: str = "default",
    *,
    requirements: Sequence[Mapping[str, Any]] | None = None,
    labels: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, Any]] | None = None,
    limits: Mapping[str, Any] | None = None,
    weight: int | None = None,
    max_pods: int | None = None,
    annotations: Mapping[str, str] | None = None,
    status: Mapping[str, Any] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A karpenter.sh/v1alpha5 Provisioner as API JSON. limits -> spec.limits.resources; max_pods ->
    kubeletConfiguration.maxPods; status as written; `**spec` are spec fields as written
    (consolidation, provider...)."""
    body: dict[str, Any] = {}
    if requirements:
        body["requirements"] = [dict(r) for r in requirements]
    if labels:
        body["labels"] = dict(labels)
    if taints:
        body["taints"] = [dict(t) for t in taints]
    if limits is not None:
        body["limits"] = {"resources": dict(limits)}
    if weight is not None:
        body["weight"] = weight
    if max_pods is not None:
        body["kubeletConfiguration"] = {"maxPods": max_pods}
    body.update(spec)
    metadata: dict[str, Any] = {"name": name}
    if annotations:
        metadata["annotations"] = dict(annotations)
    manifest = {
        "apiVersion": "karpenter.sh/v1alpha5",
        "kind": "Provisioner",
        "metadata": metadata,
        "spec": body,
    }
    if status is not None:
        manifest["status"] = dict(status)
    return manifest


def provisioner(name: str = "default", **options: Any) -> Provisioner:
    """`provisioner_manifest(name, **options)` through load_provisioner (the webhook's schema)."""
    return load_provisioner(provisioner_manifest(name, **options))


def running_pod_manifest(
    name: str = "p1",
    *,
    owner: str | None = "ReplicaSet",
    owner_name: str = "o",
    node_name: str = "n1",
    phase: str = "Running",
    **options: Any,
) -> dict[str, Any]:
    """A pod the lifecycle finds on a node: bound to `node_name`, in `phase`, owned by an `owner`
    kind named `owner_name` (owner None = a bare pod); other keywords as `pod_manifest`."""
    return pod_manifest(
        name, owner_kind=owner, owner_name=owner_name, node_name=node_name, phase=phase, **options
    )


def running_pod(name: str = "p1", **options: Any) -> Pod:
    """`running_pod_manifest` as the lifecycle reads it (`Pod.from_live`)."""
    return Pod.from_live(running_pod_manifest(name, **options))


def workload_pod(name: str, cpu: str = "1", *, owner: str = "ReplicaSet", **options: Any) -> Pod:
    """A pod of a workload as the consolidation tests write it (`cpu` positional): `cpu` and 256Mi
    requested, owned by the `owner` kind named rs ("" = a bare pod), no uid or image; other keywords
    as `pod`."""
    return pod(
        name,
        uid="",
        image=None,
        cpu=cpu,
        memory="256Mi",
        owner_kind=owner or None,
        owner_name="rs",
        **options,
    )


def workload_pods(prefix: str, count: int, cpu: str = "1") -> list[Pod]:
    """`count` workload pods named `<prefix>-<i>`."""
    return [workload_pod(f"{prefix}-{i}", cpu) for i in range(count)]


#: The EC2NodeClass a NodePool built here refers to.
NODE_CLASS_REF = {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"}


def nodepool_manifest(
    name: str = "np",
    *,
    template_spec: Mapping[str, Any] | None = None,
    requirements: Sequence[Mapping[str, Any]] | None = None,
    taints: Sequence[Mapping[str, Any]] | None = None,
    startup_taints: Sequence[Mapping[str, Any]] | None = None,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    uid: str | None = None,
    resource_version: str | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A karpenter.sh/v1 NodePool as API JSON: `template_spec` given whole (default: no requirements,
    the `default` EC2NodeClass), then `requirements`, `taints` and `startup_taints` set in it;
    labels / annotations -> template.metadata; `**spec` are spec fields as written (disruption,
    limits, weight, replicas...)."""
    body = (
        dict(template_spec)
        if template_spec is not None
        else {"requirements": [], "nodeClassRef": dict(NODE_CLASS_REF)}
    )
    if requirements is not None:
        body["requirements"] = [dict(r) for r in requirements]
    if taints is not None:
        body["taints"] = [dict(t) for t in taints]
    if startup_taints is not None:
        body["startupTaints"] = [dict(t) for t in startup_taints]
    template: dict[str, Any] = {"spec": body}
    if labels is not None or annotations is not None:
        template["metadata"] = {
            **({"labels": dict(labels)} if labels is not None else {}),
            **({"annotations": dict(annotations)} if annotations is not None else {}),
        }
    metadata: dict[str, Any] = {"name": name}
    if uid is not None:
        metadata["uid"] = uid
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": metadata,
        "spec": {"template": template, **spec},
    }


def nodepool(name: str = "np", **options: Any) -> Provisioner:
    """`nodepool_manifest(name, **options)` through load_nodepool, its node class unresolved."""
    return load_nodepool(nodepool_manifest(name, **options))
