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


#: Karpenter v1.14's third `consolidationPolicy`: a move must save a share of the pool's cost at
#: least 1/k of the share of the pool's disruption it causes (designs/balanced-consolidation.md).
BALANCED = "Balanced"
#: Karpenter's k for Balanced (`v1.DefaultConsolidationThreshold`); v1.14's CRD has no field to
#: change it ("k=2 fixed for now", kubernetes-sigs/karpenter#2962).
DEFAULT_CONSOLIDATION_THRESHOLD = 2


@dataclass(frozen=True)
class PolicyRules:
    """What a consolidation policy turns into on the loaded Provisioner."""

    ttl_seconds_after_empty: int | None
    consolidation: bool
    consolidation_threshold: int | None


def policy_rules(policy: str, after: int | None, *, static: bool = False) -> PolicyRules:
    """The rules a v1 `consolidationPolicy` with `consolidateAfter` seconds (None = Never) sets.
    WhenEmpty with Never removes no empty node; WhenEmptyOrUnderutilized with Never none at all; a
    static pool keeps its nodes however empty (Karpenter's static NodePools)."""
    return PolicyRules(
        ttl_seconds_after_empty=after if policy == WHEN_EMPTY and not static else None,
        consolidation=policy in (WHEN_EMPTY_OR_UNDERUTILIZED, BALANCED) and after is not None and not static,
        consolidation_threshold=DEFAULT_CONSOLIDATION_THRESHOLD if policy == BALANCED else None,
    )


def v1alpha5_policy(
    ttl_seconds_after_empty: int | None, consolidation_enabled: bool
) -> tuple[str, int | None]:
    """The v1 (consolidationPolicy, consolidateAfter seconds, None = Never) that a v1alpha5
    Provisioner's `ttlSecondsAfterEmpty` and `consolidation.enabled` stand for (Karpenter's v1
    migration guide; the two are mutually exclusive)."""
    if consolidation_enabled:
        return WHEN_EMPTY_OR_UNDERUTILIZED, 0
    return WHEN_EMPTY, ttl_seconds_after_empty


#: The annotation (on a Provisioner or a NodePool) that sets the least a consolidation move must
#: save: an annotation, not a spec field, so both APIs carry it and Karpenter's CRDs (which prune
#: unknown fields) keep it.
MIN_SAVINGS_ANNOTATION = "karpy.sh/consolidation-min-savings"
#: Its longest accepted value (two terms and spaces).
MAX_MIN_SAVINGS_LENGTH = 64


@dataclass(frozen=True)
class SavingsThreshold:
    """The least a consolidation move that evicts pods must save: `per_hour` $/h and `fraction`
    of the price of the nodes it removes, both (the default: $0.02/h and 5 %)."""

    per_hour: float = 0.02
    fraction: float = 0.05

    def required(self, price_before: float) -> float:
        """$/h a move removing nodes worth `price_before` $/h must save."""
        return max(self.per_hour, self.fraction * price_before)

    def __str__(self) -> str:
        return f"${self.per_hour:g}/h and {self.fraction * 100:g}%"


def parse_min_savings(text: str) -> SavingsThreshold:
    """`karpy.sh/consolidation-min-savings`: one or two comma-separated terms, a $/h amount
    ("0.05", "$0.05/h") and a share of the removed nodes' price ("10%"); a term left out is 0, so
    "0" turns the threshold off. Raises ValueError with a short message."""
    if len(text) > MAX_MIN_SAVINGS_LENGTH:
        raise ValueError(f"at most {MAX_MIN_SAVINGS_LENGTH} characters ({len(text)} given)")
    terms = [t.strip() for t in text.split(",")]
    if not text.strip() or len(terms) > 2 or not all(terms):
        raise ValueError(f'"{text}" is not one or two comma-separated terms such as "0.05,10%"')
    per_hour: float | None = None
    fraction: float | None = None
    for term in terms:
        if term.endswith("%"):
            if fraction is not None:
                raise ValueError(f'"{text}" gives a percentage twice')
            fraction = _number(term.removesuffix("%"), term) / 100
            if fraction > 1:
                raise ValueError(f'"{term}" is more than 100%')
        else:
            if per_hour is not None:
                raise ValueError(f'"{text}" gives a $/h amount twice')
            per_hour = _number(term.removeprefix("$").removesuffix("/h"), term)
    return SavingsThreshold(per_hour=per_hour or 0.0, fraction=fraction or 0.0)


def _number(text: str, term: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f'"{term}" is not a $/h amount ("0.05") or a percentage ("10%")') from None
    if not 0 <= value < float("inf"):
        raise ValueError(f'"{term}" must be a finite number at least 0')
    return value
