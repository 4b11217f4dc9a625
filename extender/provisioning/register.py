"""Register: the Node object of each launched instance (Karpenter 0.5 creates it before kubelet
registers, so pods can be bound at once), and adoption of instances an interrupted launch left
without one. `launcher` builds the Node objects; this step writes them.

A Node the API server refuses for good (a 4xx other than 409/429, e.g. 422 for template annotations
past 256 KiB) never will be: the instance just launched is terminated at once (not left for garbage
collection while the next batch launches another), its NodeClaim deleted, the pool backed off
(backoff.py), and `NodeRefused` tells the pipeline to park the node's pods.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from kubernetes import client

from extender.api import labels as wk
from extender.api.node import Node
from extender.api.provisioner import Provisioner
from extender.cloud.types import CloudError, CloudProvider, Instance, InstanceNotFoundError
from extender.cluster import nodeclaims
from extender.cluster import nodes as kube_nodes
from extender.cluster.errors import ClusterError
from extender.provisioning import launcher, metrics
from extender.provisioning.backoff import LaunchBackoff, permanent_cluster_error
from extender.provisioning.gather import Context
from extender.provisioning.report import BatchReport, Reporter
from extender.scheduling.plan import PlannedNode

log = logging.getLogger("karpy.controller.provisioning")


class NodeRefused(Exception):
    """The Node of a launched instance cannot be created; the instance is terminated."""


class Registrar:
    def __init__(
        self,
        *,
        kube: client.ApiClient,
        region: str,
        reporter: Reporter,
        clock: Callable[[], float],
        created: Callable[[Mapping[str, Any]], None] = lambda _manifest: None,
        cloud: CloudProvider | None = None,
        backoff: LaunchBackoff | None = None,
    ) -> None:
        self.kube = kube
        self.region = region
        self.reporter = reporter
        self.clock = clock
        self.cloud = cloud
        self.backoff = backoff if backoff is not None else LaunchBackoff(clock)
        #: Told of every Node karpy creates, so the node index counts it before its watch event.
        self.created = created

    def register(
        self,
        instance: Instance,
        planned: PlannedNode,
        provisioner: Provisioner,
        report: BatchReport,
        *,
        before_create: Callable[[str], None] = lambda _name: None,
    ) -> str:
        """Create the Node of a launched instance; its name. `before_create` is told the name
        before the Node exists (the pipeline marks the node as binding: a Node turns Ready as soon
        as it is created, and readiness must not lift its not-ready taint in between)."""
        t0 = self.clock()
        manifest = launcher.node_for(instance, planned, provisioner, region=self.region)
        name: str = manifest["metadata"]["name"]
        before_create(name)
        if provisioner.records_nodeclaims:
            # Before the Node: the lifecycle looks for the claim as soon as the Node appears.
            nodeclaims.record_launch(
                self.kube,
                provisioner,
                Node.from_manifest(manifest),
                requests=planned.requests,
                now=datetime.now(UTC),
            )
        try:
            kube_nodes.create_node(self.kube, manifest)
        except ClusterError as err:
            if not permanent_cluster_error(err):
                raise
            self._abandon(instance, manifest, provisioner, err)
            raise NodeRefused(f"creating node {name} of instance {instance.id}, {err}") from err
        self.backoff.succeeded(provisioner)
        self.created(manifest)
        created = self.clock() - t0
        metrics.NODE_CREATE.labels(provisioner=provisioner.name).observe(created)
        report.add("node_create", created)
        report.count("nodes")
        metrics.NODES_LAUNCHED.labels(
            provisioner=provisioner.name, capacity_type=instance.capacity_type
        ).inc()
        self.reporter.provisioner_event(
            provisioner,
            "LaunchedNode",
            f"Launched node {name} ({instance.instance_type}, {instance.zone}, {instance.capacity_type}) "
            f"for {len(planned.pods)} pod(s)",
        )
        return name

    def _abandon(
        self, instance: Instance, manifest: Mapping[str, Any], provisioner: Provisioner, err: ClusterError
    ) -> None:
        """Terminate the instance whose Node was refused, delete its claim, back its pool off."""
        terminated = "terminated"
        if self.cloud is not None:
            try:
                self.cloud.delete(instance.id)
            except InstanceNotFoundError:
                pass
            except CloudError as cloud_err:  # garbage collection terminates it later
                terminated = f"not terminated ({cloud_err}), left to garbage collection"
        nodeclaims.delete_for_node(self.kube, Node.from_live(manifest))
        metrics.LAUNCH_ERRORS.labels(provisioner=provisioner.name, code=f"NodeCreate{err.status}").inc()
        log.error("Provisioning failed, creating node of instance %s (%s), %s", instance.id, terminated, err)
        self.backoff.failed(
            provisioner, f"creating node of instance {instance.id}, {err} (instance {terminated})"
        )

    def adopt(
        self, list_instances: Callable[[], Sequence[Instance]], ctx: Callable[[], Context]
    ) -> list[str]:
        """Create the Nodes of karpy instances that have none; the adopted node names. An instance
        whose Provisioner or instance type is gone is left to garbage collection.

        The Nodes are listed before the instances: karpy terminates an instance before it deletes
        its Node, so an instance in the (later) listing either still has its Node in the earlier one
        or never had one. Listed the other way round, a node removed in between looked unadopted."""
        nodes = kube_nodes.list_nodes(self.kube, karpy_only=True)
        found = launcher.without_nodes(nodes, list_instances())
        if not found:
            return []
        log.info(
            "Found %d instance(s) without a node from interrupted launches: %s",
            len(found),
            [i.id for i in found],
        )
        context = ctx()
        types = {t.name: t for t in context.catalog}
        adopted: list[str] = []
        for instance in found:
            prov = context.provisioners.get(wk.owner_of(instance.tags) or "")
            itype = types.get(instance.instance_type)
            if prov is None or itype is None:
                log.info(
                    "Leaving instance %s to garbage collection, its provisioner or type is gone",
                    instance.id,
                )
                continue
            manifest = launcher.adopted_node(instance, itype, prov, region=self.region)
            kube_nodes.create_node(self.kube, manifest)
            self.created(manifest)
            adopted.append(manifest["metadata"]["name"])
            log.info(
                "Adopted instance %s of an interrupted launch as node %s",
                instance.id,
                manifest["metadata"]["name"],
            )
        return adopted
