"""Drift: a node that is no longer what its Provisioner would launch today is replaced.

Checked each time the node worker looks at a node (node and pod events, and every resync), as
Karpenter's drift check (fact sheet §7), in this order:
- `ProvisionerDrifted` (`NodePoolDrifted` for a NodePool, as Karpenter v1 names it): the node-shaping
  hash (api/provisioner_hash.py: labels, taints, kubelet configuration, provider settings) differs
  from the one stamped on the node at launch; compared only when both carry the same hash version.
  Limits, weight, TTLs and consolidation are not hashed, so changing them never drifts a node;
- `RequirementsDrifted`: the node's labels no longer meet the Provisioner's requirements;
- `AMIDrift`: the AMI the node booted from (its `karpenter.k8s.aws/instance-ami-id` label) is not
  the one the cloud provider resolves for its Provisioner and instance type now.
A node is judged against the live object: the verdict (drifted, or no longer drifted) changes only
after a listing that started after the node was created confirms it (pool_lookup.ProvisionerLookup
`fresh`), so a node launched from a NodePool edited, or deleted and re-created under its name, since
the lifecycle's cached listing is never compared with the old spec (issue 31).
A drifted node is annotated (`karpenter.sh/voluntary-disruption: drifted`), gets a `Drifted` Event
and counts in `karpenter_nodes_drifted{reason}`; as Karpenter sets `Drifted` on any launched
NodeClaim. It is replaced only once initialized (`blocker`), then through the replacement path
expiry uses (expiry.Expiry.replace: disruption slot, the Provisioner's budget, replacements launched
and initialized before the node is drained).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from extender.api import labels as wk
from extender.api.node import Node
from extender.api.nodeclass import AMI_ID_ANNOTATION
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.api.provisioner_hash import HASH_VERSION, hash_annotations, provisioner_hash
from extender.api.resources import total
from extender.lifecycle import metrics, nodepatch, protection, readiness
from extender.lifecycle.context import Context
from extender.scheduling.requirements import Requirements

DRIFTED = "drifted"


def drift_reason(node: Node, provisioner: Provisioner, image: str | None) -> str | None:
    """Pure: why `node` drifted from `provisioner` (its current AMI being `image`), or None."""
    stamped = node.annotations.get(wk.PROVISIONER_HASH_ANNOTATION)
    same_version = node.annotations.get(wk.PROVISIONER_HASH_VERSION_ANNOTATION) == HASH_VERSION
    if stamped and same_version and stamped != provisioner_hash(provisioner):
        return provisioner.drifted_reason
    if not Requirements.from_requirements(provisioner.requirements).matches(wk.with_ga_keys(node.labels)):
        return "RequirementsDrifted"
    launched = node.annotations.get(AMI_ID_ANNOTATION)
    if launched and image and launched != image:
        return "AMIDrift"
    return None


def current_image(ctx: Context, provisioner: Provisioner, node: Node) -> str | None:
    """The AMI the cloud provider would boot the node from today (`CloudProvider.image_id`); None
    when it cannot say, and for a Provisioner with its own launch template (the AMI is the user's)."""
    name = node.labels.get(wk.INSTANCE_TYPE)
    if provisioner.provider.launch_template or not name or AMI_ID_ANNOTATION not in node.annotations:
        return None
    try:
        found = next((t for t in ctx.cloud.get_instance_types(provisioner) if t.name == name), None)
        return ctx.cloud.image_id(provisioner, found) if found else None
    except Exception as err:  # an SSM outage must not stop the node worker: no AMI drift this time
        ctx.log.warning("Resolving the AMI of node %s for drift, %s", node.name, err)
        return None


def blocker(node: Node, pods: Sequence[Pod]) -> str | None:
    """Why a drifted node is not replaced now, or None. Karpenter disrupts only initialized nodes
    (`pkg/controllers/disruption/types.go` NewCandidate: "state node isn't initialized"): one still
    coming up may be waiting for the very pods it was launched for. Then do-not-disrupt."""
    requests = total(p.requests for p in nodepatch.workload(pods))
    if not readiness.initialized(node, requests):
        return "node is not initialized"
    return protection.node_blocker(node.annotations, pods)


Reread = Callable[[], Provisioner | None]


def check(ctx: Context, node: Node, provisioner: Provisioner, reread: Reread | None = None) -> str | None:
    """The node's drift reason, marking it drifted (annotation, Event, metric) the first time; a
    node that is no longer drifted (the Provisioner changed back) loses the mark. `reread`: the
    node's Provisioner from a listing newer than the node; a verdict that would change is judged
    again against it before anything is written."""
    marked = node.annotations.get(wk.VOLUNTARY_DISRUPTION_ANNOTATION) == DRIFTED
    stamped = node.annotations.get(wk.PROVISIONER_HASH_VERSION_ANNOTATION) == HASH_VERSION
    reason = drift_reason(node, provisioner, current_image(ctx, provisioner, node))
    if reread is not None and (not stamped or (reason is None) == marked):
        live = reread()
        if live is None:
            return None  # gone since the cached listing: nothing to judge against
        provisioner, reason = live, drift_reason(node, live, current_image(ctx, live, node))
    if not stamped:
        # Launched before hashing, or under another hash version (not compared by hash above): stamp
        # the current hash, so later changes are compared (as Karpenter re-stamps on a hash-version
        # change) and no node drifts only because karpy hashes differently now.
        for key, value in hash_annotations(provisioner).items():
            nodepatch.set_annotation(ctx.kube, node.name, key, value)
    if reason is None and marked:
        ctx.log.info("Node %s is no longer drifted", node.name)
        nodepatch.set_annotation(ctx.kube, node.name, wk.VOLUNTARY_DISRUPTION_ANNOTATION, None)
    if reason is None or marked:
        return reason
    message = f"Marked node {node.name} drifted, {reason} ({provisioner.noun} {provisioner.name})"
    ctx.log.info(message)
    nodepatch.set_annotation(ctx.kube, node.name, wk.VOLUNTARY_DISRUPTION_ANNOTATION, DRIFTED)
    ctx.recorder.node(node, "Drifted", message)
    metrics.NODES_DRIFTED.labels(reason=reason).inc()
    return reason
