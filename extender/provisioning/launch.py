"""Launch: one CreateFleet per launch group (`launcher.group` decides the groups and their ids).

Runs on the launch pool, one group per task. Leadership is checked right before the cloud call:
a replica that stopped leading while planning leaves the launch to the new leader. Offerings EC2
refused for capacity are marked unavailable and the group's pods re-planned without them; any
other cloud error parks the pods (a Warning Event on the Provisioner says why). One retrying cannot
fix (backoff.py: TagLimitExceeded, ...) also backs the pool off: while that lasts, a group of the
pool parks its pods without a cloud call, one Event on each pod saying why.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from extender.api.pod import Pod
from extender.cloud.types import CloudError, CloudProvider, Instance, InsufficientCapacityError
from extender.provisioning import metrics
from extender.provisioning.backoff import LaunchBackoff, permanent_cloud_error
from extender.provisioning.launcher import LaunchGroup
from extender.provisioning.offerings import UnavailableOfferings
from extender.provisioning.report import LAUNCH_FAILED_REASON, BatchReport, Reporter
from extender.scheduling.plan import PlannedNode

log = logging.getLogger("karpy.controller.provisioning")


@dataclass(frozen=True)
class Launched:
    """What became of one group: instances with the planned node each stands for, pods to re-plan
    (nodes the cloud did not launch for capacity), pods to park (launch failed or not leading)."""

    instances: tuple[tuple[Instance, PlannedNode], ...] = ()
    replan: tuple[Pod, ...] = ()
    park: tuple[Pod, ...] = ()


def pods_of(nodes: tuple[PlannedNode, ...]) -> tuple[Pod, ...]:
    return tuple(p for node in nodes for p in node.pods)


class Launcher:
    def __init__(
        self,
        *,
        cloud: CloudProvider,
        is_leader: Callable[[], bool],
        unavailable: UnavailableOfferings,
        reporter: Reporter,
        clock: Callable[[], float],
        backoff: LaunchBackoff | None = None,
    ) -> None:
        self.cloud = cloud
        self.is_leader = is_leader
        self.unavailable = unavailable
        self.reporter = reporter
        self.clock = clock
        self.backoff = backoff if backoff is not None else LaunchBackoff(clock)

    def launch(self, group: LaunchGroup, report: BatchReport) -> Launched:
        request = group.request
        provisioner = request.provisioner
        if not self.is_leader():
            log.info("Not launching %d node(s), no longer the leader", request.count)
            return Launched(park=pods_of(group.nodes))
        if (hold := self.backoff.blocked(provisioner)) is not None:
            # No time left in the text: one Event per pod for the whole hold, not one per batch.
            message = (
                f"not launching for {provisioner.noun} {provisioner.name} while backed off, {hold.message}"
            )
            log.debug(
                "Not launching %d node(s) for %.0fs, %s",
                request.count,
                hold.seconds_left(self.clock()),
                message,
            )
            for pod in pods_of(group.nodes):
                self.reporter.waiting(pod, LAUNCH_FAILED_REASON, message)
            return Launched(park=pods_of(group.nodes))
        t0 = self.clock()
        report.count("fleet_calls")
        try:
            result = self.cloud.create(request)
        except InsufficientCapacityError as err:
            self.unavailable.mark(err.offerings)
            metrics.LAUNCH_ERRORS.labels(provisioner=provisioner.name, code=err.code).inc()
            log.error("Launching %d node(s) failed, %s", request.count, err)
            return Launched(replan=pods_of(group.nodes))
        except CloudError as err:
            metrics.LAUNCH_ERRORS.labels(provisioner=provisioner.name, code=err.code or "Unknown").inc()
            if permanent_cloud_error(err):
                self.backoff.failed(provisioner, f"launching node, {err}")  # its Event and condition
                for pod in pods_of(group.nodes):
                    self.reporter.waiting(pod, LAUNCH_FAILED_REASON, f"launching node, {err}")
                return Launched(park=pods_of(group.nodes))
            log.error("Provisioning failed, launching node, %s", err)
            self.reporter.provisioner_event(
                provisioner, "FailedLaunch", f"launching node, {err}", warning=True
            )
            return Launched(park=pods_of(group.nodes))
        finally:
            elapsed = self.clock() - t0
            metrics.LAUNCH.labels(provisioner=provisioner.name).observe(elapsed)
            report.add("fleet", elapsed)
        self.unavailable.mark(result.unavailable)
        launched = tuple(zip(result.instances, group.nodes, strict=False))
        # Nodes EC2 did not launch (partial fleet): their pods go round again.
        return Launched(instances=launched, replan=pods_of(group.nodes[len(launched) :]))
