"""Issue 33 (latency): what the round resolves once for pods alike, and that it answers as if asked per pod.

The Resolver resolves a pod once per shape less its identity and inter-pod rules (`RESOLUTION`),
and `build_classes` computes hostname rules once per shape less what they do not read
(`HOST_RULES`): Karpenter's diverse benchmark pods differ mostly in labels and requests, so most
classes shared every answer but were asked again.
"""

from __future__ import annotations

from extender.api.labels import HOSTNAME, ZONE
from extender.api.pod import Pod
from extender.api.provisioner import Provisioner
from extender.scheduling.candidates import CandidateCache, ProvisionerView
from extender.scheduling.requirements import Requirements
from extender.scheduling.resolver import Resolver
from extender.scheduling.shape import HOST_RULES, Shapes
from extender.scheduling.solver import dimensions
from extender.scheduling.topology import HostConstraints, Terms
from tests import builders
from tests.unit.scheduling.builders import ZONES, catalog


def _resolver(pods: list[Pod]) -> Resolver:
    dims = dimensions(pods, ())
    views = [ProvisionerView.build(Provisioner(name="default"), catalog(), (), dims)]
    return Resolver(views, CandidateCache(()), dims, Shapes())


def _fresh(resolver: Resolver) -> Resolver:
    """A resolver of the same views that has resolved nothing yet."""
    return Resolver(resolver.views, resolver.cache, resolver.dims, Shapes())


#: A preference no instance type meets: every pod carrying it has it relaxed, with a note.
IMPOSSIBLE = [(10, [builders.req("node.kubernetes.io/instance-type", "In", "no-such-type")])]


def test_pods_alike_but_for_labels_and_spreads_resolve_once_and_each_gets_its_note():
    pods = [
        builders.pod("a", cpu="1", labels={"app": "a"}, preferred_terms=IMPOSSIBLE),
        builders.pod(
            "b", cpu="1", labels={"app": "b"}, preferred_terms=IMPOSSIBLE, spreads=[builders.spread()]
        ),
    ]
    resolver = _resolver(pods)
    first, second = (resolver.resolve(p) for p in pods)
    assert len(resolver._resolved) == 1
    assert first == second == _fresh(resolver).resolve(pods[1])
    assert [n.split(",")[0] for n in resolver.notes] == [
        "Relaxed preferred node affinity of pod default/a",
        "Relaxed preferred node affinity of pod default/b",
    ]


def test_what_the_resolution_reads_keeps_pods_apart():
    """Requests, node selectors, tolerations, pins and excluded Provisioners each change the answer
    or may: each is its own memo entry, and each answer is the one a fresh resolver gives."""
    plain = builders.pod("plain", cpu="1")
    others = [
        builders.pod("big", cpu="2"),
        builders.pod("zonal", cpu="1", node_selector={ZONE: ZONES[0]}),
        builders.pod("tolerant", cpu="1", tolerations=[{"operator": "Exists"}]),
    ]
    resolver = _resolver([plain, *others])
    pinned = Requirements.from_labels({ZONE: ZONES[1]})
    asked = [(p, None, ()) for p in (plain, *others)] + [(plain, pinned, ()), (plain, None, ("default",))]
    answers = [resolver.resolve(pod, extra, excluded) for pod, extra, excluded in asked]
    assert len(resolver._resolved) == len(asked)
    for (pod, extra, excluded), answer in zip(asked, answers, strict=True):
        assert answer == _fresh(resolver).resolve(pod, extra, excluded)
    assert answers[2][2] is not None and answers[2][2].get(ZONE).values == {ZONES[0]}
    assert answers[-1][0] is None  # the only Provisioner excluded


def test_request_is_asked_once_per_pod_and_counts_the_pod_itself():
    pod = builders.pod("a", cpu="1500m", memory="1Gi")
    resolver = _resolver([pod])
    assert resolver.request(pod) is resolver.request(pod)
    assert resolver.request(pod)[:3] == (1.5, 2.0**30, 1.0)


def test_hostname_rules_follow_the_namespace_and_the_rules_not_labels_or_requests():
    """`build_classes` computes a pod's hostname rules once per HOST_RULES key: pods differing only in
    labels or requests share the key and the rules; a hostname spread counts pods in the pod's own
    namespace (kube-scheduler PodTopologySpread), so another namespace is another key and term."""
    rule = builders.spread(HOSTNAME, selector={"matchLabels": {"app": "web"}})
    pods = {
        "one": builders.pod("one", cpu="1", labels={"app": "web"}, spreads=[rule]),
        "bigger": builders.pod("bigger", cpu="2", labels={"app": "web"}, spreads=[rule]),
        "relabelled": builders.pod("relabelled", cpu="1", labels={"app": "db"}, spreads=[rule]),
        "elsewhere": builders.pod(
            "elsewhere", namespace="other", cpu="1", labels={"app": "web"}, spreads=[rule]
        ),
    }
    shapes, terms = Shapes(), Terms()
    keys = {name: shapes(pod).key(HOST_RULES) for name, pod in pods.items()}
    rules = {name: HostConstraints.of(pod, terms, None) for name, pod in pods.items()}
    for alike in ("bigger", "relabelled"):
        assert keys[alike] == keys["one"] and rules[alike] == rules["one"]
    assert keys["elsewhere"] != keys["one"]
    assert rules["elsewhere"].spread != rules["one"].spread
