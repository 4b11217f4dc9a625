"""Issue 33: the domain planner driven by plain data, no resolver: what new nodes offer is an object
with three named methods (`domains.NewNodes`), and a pod whose required affinity finds no pod yet
takes its turn later (`Step.LATER`).

The affinity rule is kube-scheduler's InterPodAffinity filter (pkg/scheduler/framework/plugins/
interpodaffinity/filtering.go): a pod with required affinity goes only to a domain holding a pod
its term selects, unless no pod anywhere matches and it matches its own term (the first of its group).
"""

from __future__ import annotations

from dataclasses import dataclass

from extender.api import labels as wk
from extender.api.affinity import TopologySpread
from extender.api.pod import Pod
from extender.scheduling.domains import DomainPlanner, Outcome
from extender.scheduling.requirements import Requirements
from tests import builders

ZONES = frozenset({"zone-a", "zone-b", "zone-c"})


@dataclass(frozen=True)
class NewNodesIn:
    """New nodes can come up in any of `zones`, for every pod."""

    zones: frozenset[str]

    def reachable(self, pod: Pod, key: str, extra: Requirements) -> frozenset[str]:
        return frozenset(z for z in self.zones if extra.matches({key: z})) if key == wk.ZONE else frozenset()

    def possible(self, pod: Pod, key: str, spread: TopologySpread) -> frozenset[str]:
        return self.zones if key == wk.ZONE else frozenset()

    def may_share(self, counted: Pod, pod: Pod, spread: TopologySpread) -> bool:
        return True


def follower(name: str, app: str, follows: str) -> Pod:
    """A pod labelled app=`app` with a required zone affinity to pods labelled app=`follows`."""
    term = {"labelSelector": {"matchLabels": {"app": follows}}, "topologyKey": wk.ZONE}
    affinity = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return builders.pod(name, cpu="1", labels={"app": app}, affinity=affinity)


def plan(pods: list[Pod]) -> Outcome:
    """The pods in the given order (the solver ranks them largest first)."""
    planner = DomainPlanner((), None, NewNodesIn(ZONES))
    return planner.plan(pods, {p.key: i for i, p in enumerate(pods)})


def zone_of(outcome: Outcome, pod: Pod) -> frozenset[str]:
    return outcome.requirements[pod.key].get(wk.ZONE).values


def test_a_chain_of_followers_waits_for_the_pods_it_follows_and_joins_their_zone():
    """first follows second, second follows the leader: first's turn comes before second has a
    zone, so it waits a pass (were it refused then, it would fail for want of a domain)."""
    leader = builders.pod("leader", cpu="1", labels={"app": "leader"})
    second = follower("second", "second", follows="leader")
    first = follower("first", "first", follows="second")
    outcome = plan([first, second, leader])
    assert outcome.failed == {}
    assert len(zone_of(outcome, leader)) == 1
    assert zone_of(outcome, first) == zone_of(outcome, second) == zone_of(outcome, leader)
    assert zone_of(outcome, leader) <= ZONES


def test_a_follower_of_no_pod_fails_once_nothing_else_can_come():
    """No pod matches app=nobody and the pod does not match it itself: no domain, named in the reason."""
    lonely = follower("lonely", "lonely", follows="nobody")
    leader = builders.pod("leader", cpu="1", labels={"app": "leader"})
    second = follower("second", "second", follows="leader")
    outcome = plan([lonely, second, leader])
    assert outcome.failed == {lonely.key: f"pod affinity on {wk.ZONE} leaves no domain"}
    assert zone_of(outcome, second) == zone_of(outcome, leader)
