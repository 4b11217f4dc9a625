"""Voluntary-disruption settings shared by both API versions, as plain frozen dataclasses.

A v1alpha5 Provisioner and a v1 NodePool load into the same `Provisioner`; these are the parts of
it that say when karpy may take a node away. Types only: the lifecycle decides with them.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Karpenter v1's `spec.disruption.budgets[].reasons`.
REASONS = ("Empty", "Underutilized", "Drifted")
#: `spec.disruption.consolidationPolicy` values.
WHEN_EMPTY = "WhenEmpty"
WHEN_EMPTY_OR_UNDERUTILIZED = "WhenEmptyOrUnderutilized"
#: The annotation (on a pod or a node) that keeps a node from voluntary disruption.
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"


@dataclass(frozen=True)
class Budget:
    """One of `spec.disruption.budgets`: at most `nodes` ("N" or "N%") disrupted at once, for the
    listed reasons (empty = every reason), only inside the cron `schedule` window of `duration`
    seconds when a schedule is set (None = always active)."""

    nodes: str
    schedule: str | None = None
    duration: int | None = None
    reasons: frozenset[str] = frozenset()
