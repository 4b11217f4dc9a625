"""Crash recovery at leadership start: adopt launches that have an instance but no Node yet.

A controller killed between CreateFleet and the Node create leaves an instance tagged with its
`karpy.sh/launch-id` and no Node, while its pods are still pending. Provisioning owns both the
Node object and the batch that would launch for those pods again, so adoption is its
`adopt_instances` (serialised with its batches, which list both the Nodes and the instances).
Without a provisioning controller, such an instance is left to GC.
"""

from __future__ import annotations

from extender.lifecycle.context import Context


def recover(ctx: Context) -> list[str]:
    """Adopt in-flight launches; returns the names of the Nodes created for them."""
    if ctx.provisioning is None:
        return []
    return ctx.provisioning.adopt_instances()
