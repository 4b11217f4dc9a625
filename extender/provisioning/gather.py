"""Gather: everything one batch plans against, read from the cluster and the cloud and parsed once.

The pending pods of the batch are read again (a pod bound or deleted while the window was open must
not be bound twice) and parsed into api models here; a pod karpy cannot read is reported and left
out. Provisioners, the catalog, DaemonSet overhead, every node with its bound pods, and the
namespaces' labels complete the picture. The pools carry the NodeOverlays that apply to them
(extender/provisioning/overlays.py).

A pod whose room is held on a node for kube-scheduler to bind (extender/provisioning/nominate.py)
is not planned again while the hold lasts; the nodes plan with that room taken.

Nodes and bound pods come from their indexes (extender/cluster/nodeindex.py, boundpods.py), each
kept by its watch.

Called only under the controller's batch lock.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from extender.api.pod import Pod, PodError
from extender.api.provisioner import Provisioner
from extender.cloud.reserved import reserved_catalog
from extender.cloud.types import CloudProvider
from extender.cluster import csinodes, inventory
from extender.cluster import namespaces as kube_namespaces
from extender.cluster import nodes as kube_nodes
from extender.cluster import pods as kube_pods
from extender.cluster import pool_resources as kube_provisioners
from extender.cluster import volumes as kube_volumes
from extender.cluster.boundpods import BoundPods
from extender.cluster.errors import ClusterError
from extender.cluster.inventory import VolumeCounter
from extender.cluster.nodeindex import NodeIndex
from extender.cluster.objects import pod_key
from extender.provisioning.nominate import Nominations
from extender.provisioning.overlays import Overlays
from extender.provisioning.report import INVALID_POD_REASON, UNMODELLED_REASON, Reporter
from extender.scheduling.instancetypes import InstanceType
from extender.settings import Settings
from extender.state import ClusterState

log = logging.getLogger("karpy.controller.provisioning")


@dataclass(frozen=True)
class Context:
    """What the cluster is configured with: Provisioners by name, their catalog, DaemonSet pods."""

    provisioners: dict[str, Provisioner]
    catalog: list[InstanceType]
    daemonsets: list[Pod]


class Gatherer:
    def __init__(
        self,
        *,
        kube: client.ApiClient,
        settings: Settings,
        cloud: CloudProvider,
        state: ClusterState,
        reporter: Reporter,
        bound: BoundPods,
        nodes: NodeIndex,
        nominations: Nominations,
        overlays: Overlays | None = None,
    ) -> None:
        self.kube = kube
        self.settings = settings
        self.cloud = cloud
        self.state = state
        self.reporter = reporter
        self.bound = bound
        self.nodes = nodes
        self.nominations = nominations
        self.overlays = overlays
        #: The claims of the last batch whose pods hold CSI volumes: existing nodes are then given
        #: their CSINode attach limits and the volumes their pods hold (inventory()).
        self._attaching: kube_volumes.Volumes | None = None

    def pending(self, keys: Collection[str]) -> list[Pod]:
        """The batch's pods still pending now, parsed; unreadable ones get an InvalidPod Event."""
        pending, _ = kube_pods.list_pending(self.kube)
        fresh = self._not_held([p for p in pending if pod_key(p) in keys])
        claims = self._volumes(fresh)
        parsed = [pod for pod in (self._parse_pending(m, claims) for m in fresh) if pod is not None]
        self._attaching = claims if any(pod.csi_volumes for pod in parsed) else None
        return parsed

    def _not_held(self, manifests: list[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """The pods without a hold, once holds on nodes that are gone have ended."""
        if not any(self.state.held(pod_key(m)) for m in manifests):
            return manifests
        nodes = self.nodes.current(lambda: kube_nodes.list_node_manifests(self.kube))
        self.nominations.release_on_missing(frozenset(n.name for n in nodes))
        result = []
        for manifest in manifests:
            hold = self.state.held(pod_key(manifest))
            if hold is None:
                result.append(manifest)
            else:
                log.debug("Not provisioning for pod %s, room held on node %s", hold.pod.key, hold.node)
        return result

    def _volumes(self, manifests: Sequence[Mapping[str, Any]]) -> kube_volumes.Volumes | None:
        """Claims, volumes and classes, read once per batch and only when a pod has claims; None when
        they cannot be read (a pod with claims is then reported unmodelled, never bound blind)."""
        if not kube_volumes.has_claims(manifests):
            return None
        try:
            return kube_volumes.load(self.kube)
        except ClusterError as err:
            log.warning("Listing volumes failed, pods with claims wait for the next batch, %s", err)
            return None

    def _parse_pending(self, manifest: Mapping[str, Any], claims: kube_volumes.Volumes | None) -> Pod | None:
        try:
            pod, unresolved = kube_volumes.parse_pod(manifest, claims)
            if unresolved:
                message = f"not provisioning for this pod, {'; '.join(unresolved)}"
                self.reporter.ignoring(pod, UNMODELLED_REASON, message)
                return None
            return pod
        except PodError as err:
            meta = manifest.get("metadata") or {}
            pod = Pod(
                namespace=str(meta.get("namespace") or "default"),
                name=str(meta.get("name") or ""),
                uid=str(meta.get("uid") or ""),
            )
            self.reporter.ignoring(pod, INVALID_POD_REASON, f"not provisioning for this pod, {err}")
            return None

    def context(self) -> Context:
        provisioners = kube_provisioners.list_configured(self.kube, self.settings)
        daemonsets = inventory.parse_pods(kube_pods.daemonset_pods(self.kube))
        catalog = self.cloud.get_instance_types(None) if provisioners else []
        catalog, provisioners = reserved_catalog(self.cloud, catalog, provisioners)
        if self.overlays is not None and provisioners:
            provisioners = self.overlays.apply(provisioners, catalog)
        return Context({p.name: p for p in provisioners}, catalog, daemonsets)

    def inventory(self) -> inventory.Inventory:
        """Every node and every bound pod (from their indexes), and the namespaces' labels."""
        nodes = self.nodes.current(lambda: kube_nodes.list_node_manifests(self.kube))
        bound = self.bound.current(lambda: kube_pods.list_assigned(self.kube))
        held: dict[str, list[Pod]] = {}
        for hold in self.state.holds():
            held.setdefault(hold.node, []).append(hold.pod)
        result = inventory.build(
            nodes, bound, self.state.marked(), self._namespaces(), held, *self._attach_limits()
        )
        self.state.set_nodes(result.nodes)
        return result

    def _attach_limits(self) -> tuple[csinodes.Limits | None, VolumeCounter | None]:
        """Existing nodes' CSINode limits and their pods' volume counter, when the batch attaches
        CSI volumes; unreadable CSINodes leave existing nodes unlimited, as kube-scheduler treats a
        node without one (its Filter still refuses a node over its limit when it binds)."""
        if self._attaching is None:
            return None, None
        try:
            return csinodes.list_limits(self.kube), self._attaching.in_use
        except ClusterError as err:
            log.warning("Listing CSINodes failed, existing nodes' attach limits are not counted, %s", err)
            return None, None

    def _namespaces(self) -> dict[str, dict[str, str]] | None:
        """Namespace -> labels; None (unknown: pods with a namespaceSelector are not provisioned
        for) when they cannot be listed."""
        try:
            return kube_namespaces.list_labels(self.kube)
        except ClusterError as err:
            log.warning("Listing namespaces failed, namespace selectors are not evaluated, %s", err)
            return None
