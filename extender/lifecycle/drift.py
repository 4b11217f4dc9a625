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
A drifted node is annotated (`karpenter.sh/voluntary-disruption: drifted`), gets a `Drifted` Event
and counts in `karpenter_nodes_drifted{reason}`, then goes through the replacement path expiry
uses (expiry.Expiry.replace: disruption slot, the Provisioner's budget, replacements launched and
Ready before the node is drained).
"""

from __future__ import annotations

from extender.api import labels as wk
from extender.api.node import Node
from extender.api.nodeclass import AMI_ID_ANNOTATION
from extender.api.provisioner import Provisioner
from extender.api.provisioner_hash import HASH_VERSION, hash_annotations, provisioner_hash
from extender.lifecycle import metrics, nodepatch
from extender.lifecycle.context import Context
from extender.scheduling.requirements import Requirements

DRIFTED = "drifted"


def drift_reason(node: Node, provisioner: Provisioner, image: str | None) -> str | None:
    """Pure: why `node` drifted from `provisioner` (its current AMI being `image`), or None."""
    stamped = node.annotations.get(wk.PROVISIONER_HASH_ANNOTATION)
    same_version = node.annotations.get(wk.PROVISIONER_HASH_VERSION_ANNOTATION) == HASH_VERSION
    if stamped and same_version and stamped != provisioner_hash(provisioner):
        return "NodePoolDrifted" if provisioner.kind == "NodePool" else "ProvisionerDrifted"
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


def check(ctx: Context, node: Node, provisioner: Provisioner) -> str | None:
    """The node's drift reason, marking it drifted (annotation, Event, metric) the first time; a
    node that is no longer drifted (the Provisioner changed back) loses the mark."""
    if node.annotations.get(wk.PROVISIONER_HASH_VERSION_ANNOTATION) != HASH_VERSION:
        # Launched before hashing, or under another hash version: stamp the current hash, so later
        # changes are compared (as Karpenter re-stamps on a hash-version change) and no node drifts
        # only because karpy hashes differently now.
        for key, value in hash_annotations(provisioner).items():
            nodepatch.set_annotation(ctx.kube, node.name, key, value)
    reason = drift_reason(node, provisioner, current_image(ctx, provisioner, node))
    marked = node.annotations.get(wk.VOLUNTARY_DISRUPTION_ANNOTATION) == DRIFTED
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
