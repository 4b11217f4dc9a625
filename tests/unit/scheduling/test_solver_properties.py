"""Hypothesis: allocatable never exceeded (daemonsets included), requirements hold on node labels,
every pod accounted, and the lower bound never above the plan."""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from extender.api import labels as wk
from extender.api.resources import Resources, total
from extender.scheduling.constraints import pod_terms
from extender.scheduling.solver import solve
from tests import builders
from tests.unit.scheduling.builders import ZONES, catalog, make_provisioner

SELECTORS = [
    {},
    {wk.ARCH: "arm64"},
    {wk.ARCH: "amd64"},
    {wk.ZONE: ZONES[1]},
    {wk.CAPACITY_TYPE: "on-demand"},
    {wk.INSTANCE_TYPE: "c5.xlarge"},
    {"team": "a"},
]

pod_specs = st.lists(
    st.tuples(
        st.sampled_from(["100m", "250m", "500m", "1", "1500m", "3", "7"]),
        st.sampled_from(["", "128Mi", "1Gi", "4Gi", "12Gi"]),
        st.sampled_from(range(len(SELECTORS))),
        st.integers(0, 1) | st.just(0),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=pod_specs,
    daemon_cpu=st.sampled_from(["", "200m", "1"]),
    sort_key=st.sampled_from(["cpu", "memory", "euclidean"]),
)
def test_plan_respects_capacity_requirements_and_accounts_for_every_pod(specs, daemon_cpu, sort_key):
    pods = [
        builders.pod(f"p{i}", cpu=cpu, memory=mem, gpu=gpu, nodeSelector=SELECTORS[sel])
        for i, (cpu, mem, sel, gpu) in enumerate(specs)
    ]
    daemons = [builders.pod("ds", cpu=daemon_cpu, memory="100Mi")] if daemon_cpu else []
    plan = solve(pods, [make_provisioner()], catalog(), daemonsets=daemons, sort_key=sort_key)

    placed = [p.key for n in plan.nodes for p in n.pods]
    reported = [u.pod.key for u in plan.unschedulable]
    assert sorted(placed + reported) == sorted(p.key for p in pods)
    assert all("team" in {**u.pod.node_selector} or u.reason for u in plan.unschedulable)
    for node in plan.nodes:
        used = total([p.requests for p in node.pods] + [d.requests for d in daemons])
        used = used + Resources({"pods": len(node.pods) + len(daemons)})
        for option in node.options:
            assert used.fits_in(option.allocatable), (option.name, used, option.allocatable)
        labels = node.node_labels()
        for pod in node.pods:
            assert any(term.matches(labels) for term in pod_terms(pod)), (pod.key, labels)
        assert node.price == min(
            o.price
            for o in node.instance_type.offerings
            if o.zone in node.zones and o.capacity_type in node.capacity_types
        )


def _exclusive(group: str) -> dict:
    """Labels and hostname anti-affinity that keep the pods of `group` on distinct nodes."""
    term = {"topologyKey": wk.HOSTNAME, "labelSelector": {"matchLabels": {"group": group}}}
    return {
        "labels": {"group": group},
        "affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}},
    }


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    specs=st.lists(
        st.tuples(
            st.sampled_from(["100m", "500m", "1", "2", "3500m"]),
            st.sampled_from(["", "256Mi", "1Gi", "3Gi", "8Gi", "30Gi"]),
            st.integers(1, 30),
            st.sampled_from(range(len(SELECTORS) - 1)),
            st.sampled_from([None, "a", "b"]),
        ),
        min_size=1,
        max_size=4,
    )
)
def test_lower_bound_never_exceeds_the_plan(specs):
    pods = [
        builders.pod(
            f"p{i}-{j}",
            cpu=cpu,
            memory=mem,
            nodeSelector=SELECTORS[sel],
            **(_exclusive(group) if group else {}),
        )
        for i, (cpu, mem, count, sel, group) in enumerate(specs)
        for j in range(count)
    ]
    plan = solve(pods, [make_provisioner()], catalog())
    assert plan.lower_bound <= plan.total_price + 1e-9
    assert (plan.lower_bound > 0) == bool(plan.nodes)
    for group in {g for *_, g in specs if g}:
        nodes = [n for n in plan.nodes if any(p.labels.get("group") == group for p in n.pods)]
        assert all(sum(p.labels.get("group") == group for p in n.pods) == 1 for n in nodes)
