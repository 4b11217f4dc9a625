"""`karpy status`: rows and table from API JSON (no cluster), and its usage errors."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import partial

import pytest

from extender.cli import status
from extender.cli.main import main
from extender.cli.plan import plan_settings
from extender.cluster.pool_resources import load_configured
from extender.scheduling.pricing import PriceBook, Shape, estimate
from tests import builders

NOW = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC).timestamp()
SETTINGS = plan_settings()


def pools(*objs: dict) -> list[status.Pool]:
    """As `karpy status` reads them: through extender/api, with `karpy plan`'s defaults."""
    return status.load_pools(objs, lambda obj: load_configured(obj, SETTINGS))


def ago(seconds: float) -> datetime:
    return datetime.fromtimestamp(NOW - seconds, UTC)


#: A spot-only Provisioner whose nodes hold 8 CPU and 16Gi; keywords as tests.builders.provisioner_manifest.
provisioner = partial(
    builders.provisioner_manifest,
    requirements=[{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}],
    status={"resources": {"cpu": "8", "memory": "16Gi"}},
)


#: A karpy spot node of 4 CPU and 8Gi in us-west-2a, 5 minutes old, no providerID; keywords as
#: tests.builders.node_manifest.
node = partial(
    builders.node_manifest,
    created=ago(300),
    instance=None,
    zone="us-west-2a",
    capacity_type="spot",
    arch="amd64",
    capacity={"cpu": "4", "memory": "8Gi", "pods": "58"},
)


#: A pod asking 1 CPU and 512Mi, Unschedulable since 10 s ago; keywords as tests.builders.pod_manifest.
waiting_pod = partial(
    builders.pod_manifest,
    uid="",
    created=ago(10),
    image=None,
    cpu="1",
    memory="512Mi",
    conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
)


PRICES = PriceBook(
    on_demand={"c5.xlarge": 0.17, "m5.large": 0.096}, spot={"c5.xlarge": 0.068}, origin="prices.json"
)


def test_summarize_counts_prices_and_orders_rows() -> None:
    nodes = [
        node("n-old", instance_type="c5.xlarge", created=ago(7200)),
        node(
            "n-new",
            instance_type="m5.large",
            capacity_type="on-demand",
            created=ago(30),
            zone="us-west-2b",
            ready=False,
        ),
    ]
    assigned = [waiting_pod(f"inflate-{i}", node_name="n-old") for i in range(3)] + [
        waiting_pod("other", node_name="elsewhere")
    ]
    result = status.summarize(
        pools(
            provisioner("spot-only", weight=10, ttlSecondsAfterEmpty=30),
            provisioner("default", ttlSecondsAfterEmpty=30),
        ),
        nodes,
        [waiting_pod("waiting", created=ago(42))],
        assigned,
        prices=PRICES,
        now=NOW,
    )

    assert [p.name for p in result.provisioners] == ["default", "spot-only"]
    assert result.provisioners[1].weight == 10
    assert result.provisioners[0].nodes == 2 and result.provisioners[1].nodes == 0
    assert result.provisioners[0].capacity_types == ("spot",)

    old, new = result.nodes  # oldest first
    assert (old.name, old.instance_type, old.zone, old.capacity_type, old.pods, old.ready) == (
        "n-old",
        "c5.xlarge",
        "us-west-2a",
        "spot",
        3,
        True,
    )
    assert old.price == pytest.approx(0.068) and old.price_source == "spot prices.json"
    assert old.age_seconds == pytest.approx(7200)
    assert (new.capacity_type, new.price, new.price_source, new.ready) == (
        "on-demand",
        0.096,
        "on-demand prices.json",
        False,
    )
    assert result.price_per_hour == pytest.approx(0.068 + 0.096)

    (waiting,) = result.pending
    assert (waiting.pod, waiting.reason, waiting.cpu, waiting.memory) == (
        "default/waiting",
        "Unschedulable",
        "1",
        "512Mi",
    )
    assert waiting.age_seconds == pytest.approx(42)


def test_unknown_types_fall_back_to_the_documented_estimate() -> None:
    on_demand = status.node_row(
        node(
            "n",
            instance_type="zz9.huge",
            capacity_type="on-demand",
            capacity={"cpu": "8", "memory": "32Gi", "pods": "58"},
        ),
        0,
        PriceBook(),
        NOW,
    )
    spot = status.node_row(
        node("n", instance_type="zz9.huge", capacity={"cpu": "8", "memory": "32Gi", "pods": "58"}),
        0,
        PriceBook(),
        NOW,
    )
    assert on_demand.price_source == "estimate"
    assert on_demand.price == pytest.approx(estimate("zz9.huge", Shape(cpu=8, memory_gib=32)))
    assert (spot.price, spot.price_source) == (on_demand.price, "estimate")


def test_render_shows_every_section_and_the_hourly_total() -> None:
    result = status.summarize(
        pools(provisioner("default")),
        [node("ip-10-0-1-4", instance_type="c5.xlarge", unschedulable=True)],
        [waiting_pod("p", created=ago(90))],
        [],
        prices=PRICES,
        now=NOW,
    )
    text = status.render(result)
    lines = text.splitlines()
    assert lines[0] == "PROVISIONERS (1)"
    assert lines[1].split() == ["NAME", "WEIGHT", "CAPACITY-TYPES", "TTL-EMPTY", "NODES", "CPU", "MEMORY"]
    assert lines[2].split() == ["default", "0", "spot", "-", "1", "8", "16Gi"]
    assert "NODES (1, $0.0680/h)" in lines
    row = next(line for line in lines if line.startswith("ip-10-0-1-4"))
    assert row.split() == [
        "ip-10-0-1-4",
        "default",
        "c5.xlarge",
        "us-west-2a",
        "spot",
        "5m",
        "Ready,Cordoned",
        "0",
        "0.0680",
        "spot",
        "prices.json",
    ]
    assert "PENDING PODS (1)" in lines
    assert lines[-1].split() == ["default/p", "90s", "Unschedulable", "1", "512Mi"]


def test_json_output_is_the_same_rows() -> None:
    result = status.summarize([], [node("n", instance_type="c5.xlarge")], [], [], prices=PRICES, now=NOW)
    data = json.loads(status.as_json(result))
    assert data["nodes"][0]["instance_type"] == "c5.xlarge"
    assert data["pricePerHour"] == pytest.approx(0.068)
    assert data["provisioners"] == [] and data["pending"] == []


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (119, "119s"),
        (120, "2m"),
        (119 * 60, "119m"),
        (2 * 3600, "2h"),
        (47 * 3600, "47h"),
        (3 * 86400, "3d"),
    ],
)
def test_human_age_reads_like_kubectl(seconds: float, text: str) -> None:
    assert status.human_age(seconds) == text


def test_a_missing_price_file_is_a_usage_error(tmp_path, capsys) -> None:
    missing = tmp_path / "nope.json"
    assert main(["status", "--prices", str(missing)]) == 2
    assert capsys.readouterr().err.strip() == f"karpy status: reading {missing}: No such file or directory"


def test_a_malformed_price_file_is_a_usage_error(tmp_path, capsys) -> None:
    bad = tmp_path / "prices.json"
    bad.write_text(json.dumps({"onDemand": {"m5.large": -1}}))
    assert main(["status", "--prices", str(bad)]) == 2
    assert "onDemand.m5.large: price must be a positive number" in capsys.readouterr().err


def test_a_nodepool_has_a_row_read_from_its_v1_fields_and_counts_its_nodes() -> None:
    pool = {
        "kind": "NodePool",
        "metadata": {"name": "v1pool"},
        "spec": {
            "weight": 7,
            "template": {
                "spec": {
                    "requirements": [
                        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]}
                    ],
                    "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
                }
            },
            "disruption": {"consolidationPolicy": "WhenEmpty", "consolidateAfter": "1m30s"},
        },
        "status": {"resources": {"cpu": "4", "memory": "8Gi"}},
    }
    owned = node("n-v1", instance_type="c5.xlarge")
    owned["metadata"]["labels"].pop("karpenter.sh/provisioner-name")
    owned["metadata"]["labels"]["karpenter.sh/nodepool"] = "v1pool"
    result = status.summarize(pools(pool), [owned], [], [], prices=PRICES, now=NOW)
    (row,) = result.provisioners
    assert (row.name, row.weight, row.ttl_seconds_after_empty, row.capacity_types, row.nodes) == (
        "v1pool",
        7,
        90,
        ("spot",),
        1,
    )


@pytest.mark.parametrize(
    ("quantity", "text"),
    [("15518924Ki", "14.8Gi"), ("16Gi", "16Gi"), ("512Mi", "512Mi"), ("1536Mi", "1.5Gi"), ("1000", "1000")],
)
def test_a_provisioners_memory_reads_in_the_largest_unit(quantity: str, text: str) -> None:
    """Issue 32: the demo's Provisioner row read `15518924Ki` (a node's capacity summed as the API
    writes it); people read Gi, as `kubectl top` shows it."""
    obj = {"metadata": {"name": "default"}, "spec": {}, "status": {"resources": {"memory": quantity}}}
    (pool,) = pools(obj)
    assert status.provisioner_row(pool, []).memory == text


def test_an_invalid_provisioner_is_listed_with_why_karpy_leaves_it_out() -> None:
    """Status shows the pools as the controller loads them (extender/api): one that does not load
    has no weight or TTL to show, and says why, rather than rows read from a manifest karpy ignores."""
    bad = provisioner("broken")
    bad["spec"]["limits"] = {"resources": {"memory": "lots"}}
    result = status.summarize(
        pools(bad, provisioner("fine", ttlSecondsAfterEmpty=30)), [], [], [], prices=PRICES, now=NOW
    )
    broken, fine = result.provisioners
    assert (fine.name, fine.problem) == ("fine", "")
    assert broken.name == "broken" and broken.problem.startswith("spec.limits.resources.memory")
    assert (broken.weight, broken.ttl_seconds_after_empty, broken.capacity_types) == (0, None, ())
    assert f"broken is invalid, karpy leaves it out: {broken.problem}" in status.render(result).splitlines()


def test_without_the_controller_the_lower_bound_says_where_karpy_looked() -> None:
    from extender.cli import figures as dash

    figures = dash.Figures(
        source="pods",
        startup=(),
        limits=(),
        price_per_hour=0.0,
        unreachable="no controller metrics: x; or --metrics",
    )
    assert status.render_figures(figures).endswith("lower bound - (no controller metrics: x; or --metrics)")


def test_the_cost_line_prices_the_nodes_just_listed_not_the_controllers_lagging_gauge() -> None:
    """Seen in `make demo`: NODES (1, $0.3060/h) above `COST $0.0000/h`, the controller's
    karpy_nodes_price gauge not yet counting a node launched 4 s before."""
    listed = status.summarize(
        pools(provisioner("default", ttlSecondsAfterEmpty=30)),
        [node("n1", instance_type="c5.xlarge")],
        [],
        [],
        prices=PRICES,
        now=NOW,
    )
    lagging = "# TYPE karpy_nodes_price_dollars_per_hour gauge\nkarpy_nodes_price_dollars_per_hour 0.0\n"
    figures = status.from_controller(listed, lagging)
    assert figures.source == "metrics" and figures.price_per_hour == pytest.approx(0.068)
    assert status.render_figures(figures).splitlines()[-1].startswith("COST $0.0680/h")
