"""Which Provisioner a pod belongs to: by name when it asks for one, else by weight, then name.

Only requirements and taints are checked here; whether some instance type can hold the pod is the
solver's business. Used by the provisioning worker (to route pods) and by the solver.
"""

from __future__ import annotations

from collections.abc import Sequence

from extender.api import labels as wk
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.scheduling.constraints import defined_keys, describe_taint, pod_terms, provisioner_requirements


def ordered(provisioners: Sequence[Provisioner]) -> list[Provisioner]:
    """Highest weight first; name order on ties."""
    return sorted(provisioners, key=lambda p: (-p.weight, p.name))


def match_error(pod: Pod, provisioner: Provisioner) -> str | None:
    """Why the pod cannot run on this Provisioner's nodes, or None."""
    if taint := pod.tolerates(provisioner.taints):
        return f"did not tolerate {describe_taint(taint)}"
    base = provisioner_requirements(provisioner)
    keys = defined_keys(provisioner)
    reasons = []
    for term in pod_terms(pod):
        reason = base.intersect(term).conflict(keys)
        if reason is None:
            return None
        reasons.append(reason)
    return "; ".join(dict.fromkeys(reasons))


def select_provisioner(pod: Pod, provisioners: Sequence[Provisioner]) -> Provisioner | None:
    wanted = wk.owner_of(pod.node_selector)
    candidates = (
        [p for p in provisioners if p.selected_by(pod.node_selector)] if wanted else ordered(provisioners)
    )
    return next((p for p in candidates if match_error(pod, p) is None), None)


def explain(pod: Pod, provisioners: Sequence[Provisioner]) -> str:
    """Karpenter's "matched 0/<n> provisioners" message."""
    tried = [f"tried provisioner/{p.name}: {match_error(pod, p)}" for p in ordered(provisioners)]
    return f"matched 0/{len(provisioners)} provisioners, " + ", ".join(tried)
