"""One batch through the named steps: gather -> plan -> launch -> register -> bind -> report.

`provision` runs a batch (its pods claimed by the caller), `replacements` launches for a node's
pods without binding them (the lifecycle drains the node afterwards), `launch_nodes` launches a
static NodePool's nodes, which have no pods. After capacity errors the
pods of the refused nodes are planned again without the refused offerings, at most MAX_REPLANS
times; the rest waits parked.

Launch groups run in parallel on the launch pool. The batch waits for every group, including
those that failed, before it returns: its caller then releases the claims, and a claim released
while a sibling group is still binding would let kube-scheduler place those pods a second time.

Pods bind in the plan's bind order (`Plan.bind_phases`): each group binds the pods of phase 0 as
soon as its nodes are registered; the pods of later phases (a pod that would put a spreading pod
over its maxSkew, and those planned after it) bind once every group is done, phase by phase, so
every pod of an earlier phase is bound (or refused) before them, as kube-scheduler would have
seen the pods one at a time.

Not thread-safe by itself: the controller runs it under its batch lock.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from concurrent.futures import wait
from dataclasses import replace

from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.provisioning import launcher, metrics
from extender.provisioning.batch_plan import plan, world
from extender.provisioning.bind import Binder, Held, by_phase
from extender.provisioning.gather import Context, Gatherer
from extender.provisioning.launch import Launched, Launcher, pods_of
from extender.provisioning.offerings import UnavailableOfferings
from extender.provisioning.pools import Pools
from extender.provisioning.register import NodeRefused, Registrar
from extender.provisioning.report import LAUNCH_FAILED_REASON, BatchReport, Reporter
from extender.provisioning.snapshot import BindSnapshot
from extender.provisioning.unplannable import FAILED_PLANNING_REASON, Unplannable
from extender.scheduling.plan import PlannedNode

log = logging.getLogger("karpy.controller.provisioning")

#: Re-plans of one batch after capacity errors before the rest waits for the next batch.
MAX_REPLANS = 3


class Pipeline:
    def __init__(
        self,
        *,
        gather: Gatherer,
        launch: Launcher,
        register: Registrar,
        bind: Binder,
        report: Reporter,
        unavailable: UnavailableOfferings,
        pools: Pools,
        park: Callable[[Iterable[str]], None],
        clock: Callable[[], float],
    ) -> None:
        self.gather = gather
        self.launcher = launch
        self.registrar = register
        self.binder = bind
        self.reporter = report
        self.unavailable = unavailable
        self.pools = pools
        self.park = park
        self.clock = clock
        #: Pools the solver raised on, left out until edited.
        self.unplannable = Unplannable(
            lambda pool, message: report.provisioner_event(
                pool, FAILED_PLANNING_REASON, message, warning=True
            )
        )

    def provision(self, keys: Collection[str], report: BatchReport) -> Context | None:
        """Re-read, plan, launch and bind one batch; its context, or None when nothing was planned."""
        t0 = self.clock()
        pods = self.gather.pending(keys)
        report.add("reread", self.clock() - t0)
        report.pods = len(pods)
        if not pods:
            return None
        log.info("Found %d provisionable pod(s)", len(pods))
        ctx = self.gather.context()
        if not ctx.provisioners:
            log.info("No provisioners found, %d pod(s) wait for one", len(pods))
            self.park(p.key for p in pods)
            return None
        self._plan_and_launch(pods, ctx, report, bind=True)
        # A NodePool's status is v1's, written by the v1 status pass (cluster/v1status.py).
        self.reporter.refresh_status(n for n, p in ctx.provisioners.items() if not p.has_v1_status)
        return ctx

    def replacements(self, pods: Sequence[Pod]) -> list[str]:
        """Launch nodes (without binding) for `pods`; their names."""
        return self._plan_and_launch(pods, self.gather.context(), BatchReport(), bind=False)

    def launch_nodes(
        self, nodes: Sequence[PlannedNode], provisioners: Mapping[str, Provisioner], launch_id: str
    ) -> list[str]:
        """Launch and register planned nodes without pods (a static NodePool's, static.py) under
        `launch_id`; the names of the nodes registered."""
        groups = [
            replace(g, request=replace(g.request, launch_id=f"{launch_id}-{i}"))
            for i, g in enumerate(launcher.group(nodes, provisioners))
        ]
        return [
            name for names, _, _ in self._launch_groups(groups, BatchReport(), None, {}) for name in names
        ]

    def _plan_and_launch(
        self, pods: Sequence[Pod], ctx: Context, report: BatchReport, *, bind: bool
    ) -> list[str]:
        """The names of the nodes launched; with `bind`, pods are bound and what cannot be placed
        now is parked."""
        remaining = list(pods)
        launched: list[str] = []
        for attempt in range(MAX_REPLANS + 1):
            t0 = self.clock()
            inv = self.gather.inventory()
            if bind:
                # kube-scheduler may have bound some between the re-read and this listing.
                unbound = [p for p in remaining if p.key not in inv.assigned]
                if len(unbound) < len(remaining):
                    log.info("Not provisioning for %d pod(s) bound meanwhile", len(remaining) - len(unbound))
                    if not unbound:
                        return launched
                    remaining = unbound
            self.reporter.reasons.clear(p.key for p in remaining)
            result = plan(
                remaining,
                ctx,
                inv,
                self.unavailable.current(),
                onto_existing=bind,
                unplannable=self.unplannable,
            )
            packing = self.clock() - t0
            metrics.PACKING.observe(packing)
            report.add("packing", packing)
            pools = self.unplannable.usable(list(ctx.provisioners.values()))
            explaining = world(ctx, inv, self.unavailable.current(), pools) if result.unschedulable else None
            waiting = self.reporter.plan(result, ctx.provisioners, explaining)
            phases = result.bind_phases
            held: list[Held] = []
            snapshot = None
            if bind:
                # The picture for the re-check holds only what binds first; later phases join it
                # as they bind.
                first = {node: by_phase(placed, phases)[0] for node, placed in result.existing.items()}
                snapshot = BindSnapshot(inv.existing, inv.namespaces, first)
                self.park(waiting)
                for node, placed in result.existing.items():
                    held += Held.split(node, placed, "", phases)
                    report.count("bound", self.binder.bind(node, first[node], "", report, snapshot))
            groups = launcher.group(result.nodes, ctx.provisioners, attempt, self.binder.refusals())
            report.count(
                "option_lists",
                len({(n.provisioner, tuple(t.name for t in n.options)) for n in result.nodes}),
            )
            retry: list[Pod] = []
            for names, replan, later in self._launch_groups(groups, report, snapshot, phases):
                launched.extend(names)
                retry.extend(replan)
                held.extend(later)
            if snapshot is not None and held:
                self._bind_held(held, report, snapshot)
            if bind and attempt == 0:
                self.reporter.bound(result, report)  # after the binds, off the batch's path
            if not retry:
                return launched
            if attempt < MAX_REPLANS:
                log.info("Re-planning %d pod(s) without the offerings EC2 refused", len(retry))
            remaining = retry
        if bind:
            self.park(p.key for p in remaining)
        return launched

    def _launch_groups(
        self,
        groups: Sequence[launcher.LaunchGroup],
        report: BatchReport,
        snapshot: BindSnapshot | None,
        phases: Mapping[str, int],
    ) -> list[tuple[list[str], tuple[Pod, ...], list[Held]]]:
        """Each group's (node names, pods to re-plan, binds held for a later phase), after every
        group has finished."""
        futures = [self.pools.launch.submit(self._group, g, report, snapshot, phases) for g in groups]
        wait(futures)
        results: list[tuple[list[str], tuple[Pod, ...], list[Held]]] = []
        for group, future in zip(groups, futures, strict=True):
            err = future.exception()
            if err is None:
                results.append(future.result())
                continue
            # A group's task is a loop boundary: its pods wait, its siblings' work stands.
            log.error(
                "Provisioning failed, launching %d node(s) for provisioner %s, %s",
                group.request.count,
                group.request.provisioner.name,
                err,
            )
            if snapshot is not None:
                self.park(p.key for p in pods_of(group.nodes))
            results.append(([], (), []))
        return results

    def _group(
        self,
        group: launcher.LaunchGroup,
        report: BatchReport,
        snapshot: BindSnapshot | None,
        phases: Mapping[str, int],
    ) -> tuple[list[str], tuple[Pod, ...], list[Held]]:
        """Launch one group, register its nodes and (with `snapshot`) bind their pods of the first
        bind phase; the binds of later phases are returned."""
        outcome: Launched = self.launcher.launch(group, report)
        if snapshot is not None:
            self.park(p.key for p in outcome.park)
        provisioner = group.request.provisioner
        names: list[str] = []
        held: list[Held] = []
        # Marked before the Node exists: readiness keeps its not-ready taint until the batch is done.
        mark = self.binder.state.binding_to if snapshot is not None else (lambda _name: None)
        for instance, planned in outcome.instances:
            try:
                name = self.registrar.register(instance, planned, provisioner, report, before_create=mark)
            except NodeRefused as err:
                # The instance is gone and the pool backed off: the pods wait, never relaunched for
                # in the next batch (launch.py checks the backoff first).
                for pod in planned.pods:
                    self.reporter.waiting(pod, LAUNCH_FAILED_REASON, str(err))
                if snapshot is not None:
                    self.park(p.key for p in planned.pods)
                continue
            names.append(name)
            if snapshot is not None:
                held += Held.split(name, planned.pods, provisioner.name, phases)
                first = by_phase(planned.pods, phases)[0]
                report.count("bound", self.binder.bind(name, first, provisioner.name, report, snapshot))
        return names, outcome.replan, held

    def _bind_held(self, held: Sequence[Held], report: BatchReport, snapshot: BindSnapshot) -> None:
        """The binds of later phases, phase by phase: the nodes of one phase in parallel, the next
        phase once every bind of this one has finished."""
        for phase in sorted({h.phase for h in held}):
            binds = [h for h in held if h.phase == phase]
            log.info("Binding %d pod(s) of bind phase %d", sum(len(h.pods) for h in binds), phase)
            futures = [
                self.pools.launch.submit(self.binder.bind, h.node, h.pods, h.provisioner, report, snapshot)
                for h in binds
            ]
            wait(futures)
            for h, future in zip(binds, futures, strict=True):
                err = future.exception()
                if err is None:
                    report.count("bound", future.result())
                    continue
                log.error("Failed to bind %d pod(s) to node %s, %s", len(h.pods), h.node, err)
                self.park(p.key for p in h.pods)
