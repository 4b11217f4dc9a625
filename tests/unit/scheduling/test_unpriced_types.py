"""Types in no price table (priced by the estimate) win only when no priced type can hold the pods."""

from dataclasses import replace

from extender.scheduling.instancetypes import InstanceType, Offering
from extender.scheduling.pricing import ESTIMATE
from extender.scheduling.solver import solve
from tests import builders
from tests.unit.scheduling.builders import catalog, make_provisioner

ON_DEMAND = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}


def unpriced(base: InstanceType, name: str, price: float) -> InstanceType:
    """`base` under a name no table knows, its offerings 'estimated' at `price` (far below any real one)."""
    offerings = [Offering(o.zone, o.capacity_type, price, True, ESTIMATE) for o in base.offerings]
    return replace(base, name=name).with_offerings(offerings)


def by_name(name: str) -> InstanceType:
    return next(t for t in catalog() if t.name == name)


def test_an_estimate_never_undercuts_a_priced_type_that_fits() -> None:
    cheap = unpriced(by_name("m5.24xlarge"), "zz9.24xlarge", 0.01)
    pods = [builders.pod(f"p{i}", cpu="500m", memory="4Gi") for i in range(100)] + [
        builders.pod(f"q{i}", cpu="1", memory="16Gi") for i in range(20)
    ]
    plan = solve(pods, [make_provisioner(requirements=[ON_DEMAND])], [*catalog(), cheap])
    assert not plan.unschedulable
    assert plan.nodes
    for node in plan.nodes:
        assert node.options[0].name != "zz9.24xlarge"
        assert all(o.price_source != ESTIMATE for o in node.options[0].offerings)
    # The same plan as with the unpriced type absent.
    alone = solve(pods, [make_provisioner(requirements=[ON_DEMAND])], list(catalog()))
    assert plan.total_price == alone.total_price


def test_an_unpriced_type_is_chosen_when_no_priced_type_fits() -> None:
    biggest = max(catalog(), key=lambda t: t.allocatable.cpu)
    huge = InstanceType.build(
        name="zz9.huge",
        cpu=4 * biggest.cpu,
        memory=4 * biggest.memory,
        arch="amd64",
        max_pods=737,
        offerings=[Offering("us-west-2a", "on-demand", 99.0, True, ESTIMATE)],
    )
    big_pod = builders.pod("big", cpu=str(int(biggest.allocatable.cpu) + 2))
    small = builders.pod("small", cpu="1")
    plan = solve([big_pod, small], [make_provisioner()], [*catalog(), huge])
    assert not plan.unschedulable
    placed = {pod.key: node.options[0].name for node in plan.nodes for pod in node.pods}
    assert placed[big_pod.key] == "zz9.huge"


def test_the_demo_walkthrough_plans_a_current_generation_node_priced_from_the_built_in_table() -> None:
    """hack/demo: five 1-CPU `inflate` pods under a spot Provisioner (webhook defaults: amd64)."""
    spot = {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
    amd64 = {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]}
    pods = [builders.pod(f"inflate-{i}", cpu="1") for i in range(5)]
    plan = solve(pods, [make_provisioner(requirements=[spot, amd64])], list(catalog()))
    (node,) = plan.nodes
    chosen = node.options[0]
    generation = int("".join(ch for ch in chosen.name.split(".")[0] if ch.isdigit()))
    assert chosen.cpu == 8 and generation >= 5
    (source,) = {o.price_source for o in chosen.offerings if o.capacity_type == node.capacity_type}
    assert source == "spot unknown: on-demand built-in us-east-1 table 2026-07-20"
