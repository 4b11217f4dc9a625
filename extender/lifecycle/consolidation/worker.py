"""The consolidation worker: decide, wait, re-decide, then replace (launch, wait Ready) and drain.

One thread, acting only while leader. Each pass reads the cluster into a ClusterView and asks the
pure `decide`; a decision is acted on only if the same decision comes out again after the
validation delay (Karpenter's commandValidationDelay). The nodes take slots of their Provisioners'
disruption budgets (the ledger emptiness and expiry use), are marked and cordoned, a replacement
is launched through provisioning's `provision_replacements` and must be Ready before anything is
drained; then the nodes are deleted and the termination finalizer drains them (PDB-aware
eviction). A replacement that fails to launch or come up leaves the old nodes serving: uncordoned,
unmarked, their slots released.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import Any

from kubernetes import client

from extender.api.node import Node
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.cloud.reserved import reserved_catalog
from extender.cluster import errors, inventory
from extender.cluster import namespaces as kube_namespaces
from extender.cluster import nodes as kube_nodes
from extender.cluster import pods as kube_pods
from extender.cluster.boundpods import BoundPods
from extender.cluster.cordon import cordon, uncordon
from extender.cluster.nodeclaims import Tracker
from extender.cluster.pool_resources import list_configured
from extender.cluster.watch import list_objects
from extender.lifecycle import budgets, metrics, nodepatch
from extender.lifecycle.budgets import DisruptionLedger
from extender.lifecycle.consolidation import eligibility, snapshot, verdict
from extender.lifecycle.consolidation.decide import Action, Method, decide
from extender.lifecycle.consolidation.eligibility import Blocker, free_slots, movable
from extender.lifecycle.consolidation.verdict_writer import VerdictWriter
from extender.lifecycle.consolidation.view import ClusterView, NodeState, Settings
from extender.lifecycle.context import Context
from extender.lifecycle.podevents import PodEvents
from extender.loops import run_forever
from extender.retry import call
from extender.scheduling.solver import solve

READY_POLL_SECONDS = 1.0
#: The lower bound behind the gauge costs seconds for a large Provisioner: not on every pass.
REPORT_INTERVAL_SECONDS = 60.0
#: ... and when it costs more than 1/REPORT_SHARE of the interval, the interval stretches, so the
#: gauge never takes more than that share of the process (it shares the GIL with the extender).
REPORT_SHARE = 20
REASON = "consolidation"


def budget_reason(action: Action) -> str:
    """The budget reason of an action: deleting empty nodes is Empty, the rest Underutilized."""
    return budgets.EMPTY if action.method is Method.EMPTY else budgets.UNDERUTILIZED


def observe_done(action: Action) -> None:
    """Churn against savings, per source Provisioner: its share of the $/h saved (by its nodes'
    share of the price removed) and the pods its nodes evicted."""
    before = action.price_before
    for name in sorted({n.provisioner for n in action.nodes}):
        own = [n for n in action.nodes if n.provisioner == name]
        share = sum(n.price for n in own) / before if before > 0 else 0.0
        labels = {"method": action.method.value, "provisioner": name}
        metrics.CONSOLIDATION_SAVING.labels(**labels).observe(max(0.0, action.saving * share))
        metrics.CONSOLIDATION_EVICTED.labels(**labels).observe(sum(len(movable(n)) for n in own))


def refusals(
    kept: Mapping[str, Blocker], judged: Mapping[str, Blocker | None], assessment: eligibility.Assessment
) -> dict[str, Blocker]:
    """The refusals a pass's verdicts name: its judgements (`decide`'s) over the kept ones, for the
    nodes nothing else blocks (a blocked node was not simulated, and its blockers say why it stays;
    a budget's too)."""
    merged = {**kept, **judged}
    return {
        n.name: refused
        for n in assessment.candidates
        if not assessment.blockers.get(n.name) and (refused := merged.get(n.name)) is not None
    }


class Consolidator:
    def __init__(
        self,
        ctx: Context,
        ledger: DisruptionLedger,
        census: Callable[[str], dict[str, Any]],
        *,
        provisioners: Callable[[], list[Provisioner]] | None = None,
        bound: BoundPods | None = None,
        pod_events: PodEvents | None = None,
        claims: Tracker | None = None,
    ) -> None:
        self.ctx = ctx
        self.ledger = ledger
        self.census = census
        self._provisioners = provisioners or (lambda: list_configured(ctx.kube, ctx.settings))
        self._reported_at: float | None = None
        self._report_every = REPORT_INTERVAL_SECONDS
        #: Every bound pod, kept by the index's watch (shared with provisioning in the controller).
        self.bound = bound if bound is not None else BoundPods()
        #: Last pod event per node (the node worker's), for consolidateAfter; None: every node
        #: counts from its creation.
        self.pod_events = pod_events
        self._blocked: set[tuple[str, str]] = set()
        #: Candidates whose single-node move the last pass that simulated it found not worth its
        #: evictions: a pass that acts stops searching early, and the verdict keeps the last word
        #: instead of flapping between passes.
        self._refused: dict[str, Blocker] = {}
        #: Each node's verdict on its NodeClaim (`claims`: the node worker's tracker) and as an Event.
        self.verdicts = VerdictWriter(
            claims, lambda node, reason, message: ctx.recorder.node(node, reason, message, dedupe=False)
        )

    @property
    def settings(self) -> Settings:
        return Settings(min_node_age_seconds=self.ctx.settings.lifecycle.consolidation_min_node_age_seconds)

    # --- loop ------------------------------------------------------------------------------------

    def run(self, stop: threading.Event) -> None:
        """A pass every interval while leading, the first one interval after start; a failed pass
        is retried after backoff."""
        lifecycle = self.ctx.settings.lifecycle

        def one_pass() -> float:
            if self.ctx.is_leader():
                self.reconcile(stop)
            # Read each pass: a setting changed on the running process takes effect at the next one.
            return lifecycle.consolidation_interval_seconds

        run_forever(
            one_pass,
            stop,
            doing="consolidating",
            logger=self.ctx.log,
            start_after=lifecycle.consolidation_interval_seconds,
        )

    def reconcile(self, stop: threading.Event) -> Action | None:
        """One pass; the action taken, or None."""
        provisioners = self._provisioners()
        if not any(p.consolidation for p in provisioners):
            return None
        view, nodes = self.observe(provisioners)
        self.report(view)
        # The blockers of every node, once per pass: for the decision, the budget log and verdicts.
        assessment = eligibility.assess(view, self.settings)
        judged: dict[str, Blocker | None] = {}
        action = decide(view, self.settings, assessment.candidates, judged)
        self._log_blocked(view, assessment.candidates)
        self._refused = refusals(self._refused, judged, assessment)
        self.verdicts.write(
            verdict.verdicts(view, self.settings, assessment, self._refused), nodes, view.provisioner
        )
        if action is None:
            return None
        delay = self.ctx.settings.lifecycle.consolidation_validation_seconds
        self.ctx.log.info("Validating consolidation of node(s) %s after %gs", list(action.names), delay)
        if stop.wait(delay):
            return None
        view, nodes = self.observe(self._provisioners())
        again = decide(view, self.settings)
        if again is None or not action.same_as(again):
            self.ctx.log.info("Abandoning consolidation attempt, the decision changed during validation")
            return None
        return again if self.execute(again, nodes, self._pods_of(again), view, stop) else None

    # --- reading ---------------------------------------------------------------------------------

    def observe(self, provisioners: list[Provisioner]) -> tuple[ClusterView, dict[str, Node]]:
        """The view, and the Nodes by name (events need them)."""
        kube, state = self.ctx.kube, self.ctx.state
        nodes = kube_nodes.list_nodes(kube)
        bound = self.bound.current(lambda: kube_pods.list_assigned(kube))
        pending, _ = kube_pods.list_pending(kube)
        pdbs, _ = list_objects(client.PolicyV1Api(kube).list_pod_disruption_budget_for_all_namespaces)
        daemonsets = inventory.parse_pods(kube_pods.daemonset_pods(kube))
        marked = set(self.ledger.held()) | (set(state.marked()) if state is not None else set())
        # Reservations are capacity provisioning promised to pods it is binding right now.
        binding = state is not None and bool(state.reserved_nodes())
        provisioning = self.ctx.provisioning
        # Offerings EC2 refused lately (provisioning's ICE cache): a replacement must avoid them too.
        refused = frozenset(provisioning.unavailable) if provisioning is not None else frozenset()
        # With the pools' reservations, as provisioning plans: a replacement may take a free slot.
        catalog, provisioners = reserved_catalog(
            self.ctx.cloud, self.ctx.cloud.get_instance_types(None), list(provisioners)
        )
        # Replacements are priced and sized as provisioning would launch them: with NodeOverlays.
        view = snapshot.build(
            provisioners=provisioning.overlays.apply(provisioners, catalog) if provisioning else provisioners,
            instance_types=catalog,
            nodes=nodes,
            bound=bound,
            pending=inventory.parse_pods(pending),
            pdbs=pdbs,
            daemonsets=daemonsets,
            now=self.ctx.clock(),
            marked=marked,
            batch_in_flight=binding,
            namespaces=kube_namespaces.list_labels(kube),
            unavailable=refused,
            pod_events=self.pod_events.last(n.name for n in nodes) if self.pod_events is not None else {},
        )
        return view, {n.name: n for n in nodes}

    def _pods_of(self, action: Action) -> dict[str, Pod]:
        """The pods on the nodes to replace, by key (their replacement is launched for them), read now."""
        return {
            p.key: p
            for name in action.names
            for p in map(Pod.from_live, kube_pods.list_on_node(self.ctx.kube, name))
        }

    def report(self, view: ClusterView) -> None:
        """Gauges: each consolidating Provisioner's $/h and the lower bound for its pods."""
        now = time.monotonic()
        if self._reported_at is not None and now - self._reported_at < self._report_every:
            return
        self._reported_at = now
        for prov in view.provisioners:
            if not prov.consolidation:
                continue
            own = [n for n in view.nodes if n.karpy and n.provisioner == prov.name and not n.disrupting]
            metrics.CLUSTER_COST.labels(provisioner=prov.name).set(sum(n.price for n in own))
            pods = [p for n in own for p in n.node.pods if not p.is_daemonset]
            bound = solve(pods, [prov], view.instance_types, daemonsets=view.daemonsets).lower_bound
            metrics.LOWER_BOUND_COST.labels(provisioner=prov.name).set(bound)
        self._report_every = max(REPORT_INTERVAL_SECONDS, REPORT_SHARE * (time.monotonic() - now))

    def _log_blocked(self, view: ClusterView, pool: Sequence[NodeState]) -> None:
        """Say once (until it changes) which Provisioners have candidates (`pool`) that a budget
        allowing no disruption for the reason holds back (Karpenter's DisruptionBlocked event)."""
        blocked: set[tuple[str, str]] = set()
        for reason in (budgets.EMPTY, budgets.UNDERUTILIZED):
            slots = free_slots(view, reason)
            wanting = {n.provisioner for n in pool if (reason == budgets.EMPTY) == (not movable(n))}
            blocked |= {(p, reason) for p in wanting if slots.get(p, 0) == 0}
        for name, reason in sorted(blocked - self._blocked):
            prov = view.provisioner(name)
            self.ctx.log.info(
                "No allowed disruptions for disruption reason %s due to blocking budget (%s %s)",
                reason,
                prov.noun if prov is not None else "provisioner",
                name,
            )
        self._blocked = blocked

    # --- acting ----------------------------------------------------------------------------------

    def execute(
        self,
        action: Action,
        nodes: Mapping[str, Node],
        pods: Mapping[str, Pod],
        view: ClusterView,
        stop: threading.Event,
    ) -> bool:
        ctx = self.ctx
        if not self._acquire(action, view):
            metrics.disruption("consolidated", "blocked")
            ctx.log.info("Consolidation of %s waits for its disruption budget", list(action.names))
            return False
        message = action.describe()
        ctx.log.info(message)
        for name in action.names:
            ctx.mark(name, REASON)
            if cordon(ctx.kube, name):
                ctx.log.info("Cordoned node %s", name)
            if name in nodes:
                ctx.recorder.node(nodes[name], "Consolidating", message)
        if action.replacements:
            launched, failed = self._launch(action, pods)
            if failed:
                self._abandon(action, nodes, "launching the replacement failed", launched)
                return False
            if not self._wait_ready(launched, stop):
                self._abandon(action, nodes, f"replacement node(s) {launched} did not become Ready")
                return False
            ctx.log.info("Replacement node(s) %s Ready, draining %s", launched, list(action.names))
        for name in action.names:
            with metrics.disrupting("consolidated"):
                nodepatch.delete_node(ctx.kube, name)
            metrics.NODES_TERMINATED.labels(reason=REASON).inc()
        metrics.CONSOLIDATION_ACTIONS.labels(method=action.method.value, outcome="done").inc()
        observe_done(action)
        return True

    def _acquire(self, action: Action, view: ClusterView) -> bool:
        by_provisioner: dict[str, list[str]] = defaultdict(list)
        for node in action.nodes:
            by_provisioner[node.provisioner].append(node.name)
        reason = budget_reason(action)
        now = self.ctx.clock()
        taken: list[str] = []
        for name, members in by_provisioner.items():
            allowed = budgets.limit(view.provisioner(name), reason, now)
            if not self.ledger.acquire(name, members, REASON, allowed=allowed, **self.census(name)):
                for held in taken:
                    self.ledger.release(held)
                return False
            taken += members
        return True

    def _launch(self, action: Action, pods: Mapping[str, Pod]) -> tuple[list[str], bool]:
        """Launch every replacement (one provisioning call per planned node, so each comes up as
        simulated); the names launched, and whether any replacement failed."""
        launched: list[str] = []
        if self.ctx.provisioning is None:
            return launched, True
        for planned in action.replacements:
            replaced = [pods[p.key] for p in planned.pods if p.key in pods]
            try:
                names = list(self.ctx.provisioning.provision_replacements(replaced))
            except Exception as err:
                self.ctx.log.error("Launching replacement for %s failed, %s", list(action.names), err)
                names = []
            if not names:
                return launched, True
            launched += names
        return launched, False

    def _wait_ready(self, names: list[str], stop: threading.Event) -> bool:
        waited = 0.0
        while waited < self.ctx.settings.lifecycle.replacement_wait_seconds:
            ready = [nodepatch.get_node(self.ctx.kube, n) for n in names]
            if all(n is not None and n.ready for n in ready):
                return True
            if stop.wait(READY_POLL_SECONDS):
                return False
            waited += READY_POLL_SECONDS
        return False

    def _abandon(
        self,
        action: Action,
        nodes: Mapping[str, Node],
        why: str,
        unused: Sequence[str] = (),
    ) -> None:
        """Leave the old nodes serving: schedulable again, unmarked, their budget slots freed.
        `unused`: replacements launched moments ago for an action that cannot complete (another
        replacement failed); nothing was drained onto them, so they go too."""
        ctx = self.ctx
        message = f"Abandoning consolidation of {list(action.names)}, {why}; the node(s) keep serving"
        ctx.log.warning(message)
        for name in unused:
            nodepatch.delete_node(ctx.kube, name)
            ctx.log.info("Deleted unused replacement node %s", name)
        for name in action.names:
            call(partial(uncordon, ctx.kube, name), retry_on=errors.is_transient, doing=f"uncordon {name}")
            ctx.unmark(name)
            self.ledger.release(name)
            if name in nodes:
                ctx.recorder.node(nodes[name], "ConsolidationFailed", message, warning=True)
        metrics.CONSOLIDATION_ACTIONS.labels(method=action.method.value, outcome="abandoned").inc()
        for _ in action.names:
            metrics.disruption("consolidated", "failed")
