"""Issue 31: what karpy admits is what it can compute with and honour. Hostile or careless v1
NodePools, EC2NodeClasses and v1alpha5 Provisioners are refused by the loaders (the webhook's and
the controller's one validator) naming the field, quickly, with a short message; nothing but
ValidationError/CronError leaves them.

Time bounds here are loose hang guards (seconds where the fixed code takes microseconds); the
figures are benchmarks/admission.py's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from extender.api import cron, ranges
from extender.api.ec2nodeclass import validate_ec2nodeclass
from extender.api.nodeclaim import Record, conditions_of, spec_taints
from extender.api.nodepool import load_nodepool, validate_nodepool
from extender.api.nodetemplate import validate_node_template
from extender.api.provisioner_schema import validate_provisioner
from extender.api.quantity import QuantityError, parse_quantity
from tests.builders import nodepool_manifest
from tests.unit.api.test_nodepool import node_class
from tests.unit.webhook.reviews import provisioner_manifest, valid_spec

HANG_GUARD_SECONDS = 1.0


def template_spec(**changes: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "requirements": [],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    }
    return {**spec, **changes}


def budget(**fields: Any) -> dict[str, Any]:
    return {"budgets": [{"nodes": "1", **fields}]}


def problems_within_guard(validate: Callable[[Any], list[str]], obj: Any) -> list[str]:
    started = time.perf_counter()
    problems = validate(obj)
    assert time.perf_counter() - started < HANG_GUARD_SECONDS
    return problems


def only_problem(problems: list[str], path: str) -> str:
    assert len(problems) == 1 and problems[0].startswith(path + ": "), problems
    return problems[0]


# -- schedules: parsed, not matched --------------------------------------------------------------


def three_line_schedule() -> str:
    """An 8,011-character schedule over three lines, as in the issue: a long line of tokens, an
    empty line, a valid five-field line. kube-apiserver's CRD pattern (Go, unanchored search) finds
    the last line and admits it; karpy's old `re.match` of the same pattern must start at the first
    line, cannot cross the empty one, and backtracks through every way of splitting 4,000 tokens
    into five groups, holding the webhook past kube-apiserver's 10 s timeout."""
    schedule = " ".join(["1"] * 4000) + "1\n\n0 0 * * *"
    assert len(schedule) == 8011 and schedule.count("\n") == 2
    return schedule


@pytest.mark.parametrize(
    "schedule",
    [
        pytest.param(" ".join(["1"] * 120) + "\n\n", id="backtracking-120-tokens"),
        pytest.param(three_line_schedule(), id="8011-characters-three-lines"),
    ],
)
def test_a_schedule_built_to_backtrack_is_refused_quickly_by_name(schedule: str) -> None:
    # The old pattern took 1.6 s at 100 tokens and 39 s at 200 (issue 31).
    problems = problems_within_guard(
        validate_nodepool, nodepool_manifest(disruption=budget(schedule=schedule, duration="1h"))
    )
    message = only_problem(problems, "spec.disruption.budgets[0].schedule")
    assert len(message) < 400


@pytest.mark.parametrize(
    "schedule",
    ["@daily", "@annually", "0 9 * * 1-5", "*/15 0-6 1,15 jan-jun MON", "0,5,10,15,20 * ? * *"],
)
def test_cron_schedules_karpenter_parses_are_admitted(schedule: str) -> None:
    assert validate_nodepool(nodepool_manifest(disruption=budget(schedule=schedule, duration="1h"))) == []


@pytest.mark.parametrize(
    ("schedule", "why"),
    [
        ("9" * 10_000 + " * * * *", "characters, more than"),
        ("9" * 900 + " * * * *", "value out of range"),
        ("61 * * * *", "above maximum"),
        ("a b c d e", "failed to parse int"),
        ("@every 5m", "unrecognized descriptor"),
    ],
)
def test_schedules_robfig_cron_refuses_are_refused_at_admission(schedule: str, why: str) -> None:
    """robfig/cron's ParseStandard (what Karpenter's Budget.IsActive parses with) refuses each;
    the 10,000-digit field was admitted and crashed consolidation on every pass (issue 31)."""
    message = only_problem(
        validate_nodepool(nodepool_manifest(disruption=budget(schedule=schedule, duration="1h"))),
        "spec.disruption.budgets[0].schedule",
    )
    assert why in message and len(message) < 400


def test_cron_parse_raises_only_cron_error_on_a_huge_field() -> None:
    with pytest.raises(cron.CronError, match="value out of range"):
        cron.parse("9" * 10_000 + " * * * *")


# -- durations: Go's time.Duration range ---------------------------------------------------------

DURATION_FIELDS = [
    (
        "spec.template.spec.expireAfter",
        lambda d: nodepool_manifest(template_spec=template_spec(expireAfter=d)),
    ),
    (
        "spec.template.spec.terminationGracePeriod",
        lambda d: nodepool_manifest(template_spec=template_spec(terminationGracePeriod=d)),
    ),
    ("spec.disruption.consolidateAfter", lambda d: nodepool_manifest(disruption={"consolidateAfter": d})),
    (
        "spec.disruption.budgets[0].duration",
        lambda d: nodepool_manifest(disruption=budget(schedule="@daily", duration=d)),
    ),
]


@pytest.mark.parametrize(("path", "make"), DURATION_FIELDS, ids=[p for p, _ in DURATION_FIELDS])
def test_a_duration_past_gos_maximum_is_refused_naming_the_field(
    path: str, make: Callable[[str], dict[str, Any]]
) -> None:
    """Go's time.Duration holds (2**63 - 1) ns = 2562047h47m16.854775807s; Karpenter's
    time.ParseDuration refuses more. 99999999999h was admitted and raised OverflowError in the
    lifecycle's timedelta arithmetic (issue 31)."""
    for too_long in ("99999999999h", "2562048h", "9" * 10_000 + "h"):
        message = only_problem(validate_nodepool(make(too_long)), path)
        assert len(message) < 400
    assert validate_nodepool(make("2562047h")) == []


def test_the_largest_duration_is_exactly_gos() -> None:
    assert ranges.MAX_DURATION_SECONDS == 2562047 * 3600 + 47 * 60 + 16
    largest = load_nodepool(
        nodepool_manifest(template_spec=template_spec(expireAfter=ranges.MAX_DURATION_TEXT))
    )
    assert largest.ttl_seconds_until_expired == ranges.MAX_DURATION_SECONDS
    assert validate_nodepool(nodepool_manifest(template_spec=template_spec(expireAfter="2562047h47m17s")))


@pytest.mark.parametrize("field", ["ttlSecondsUntilExpired", "ttlSecondsAfterEmpty"])
def test_a_provisioner_ttl_past_gos_maximum_is_refused(field: str) -> None:
    """Karpenter v1alpha5 multiplies these into a time.Duration: the same maximum."""
    spec = {**valid_spec(), field: ranges.MAX_DURATION_SECONDS + 1}
    if field == "ttlSecondsAfterEmpty":
        spec.pop("consolidation", None)
    only_problem(validate_provisioner(provisioner_manifest(**spec)), f"spec.{field}")
    assert validate_provisioner(provisioner_manifest(**{**spec, field: ranges.MAX_DURATION_SECONDS})) == []


def test_a_kubelet_grace_period_past_gos_maximum_is_refused() -> None:
    kubelet = {"evictionSoft": {"memory.available": "1Gi"}, "evictionSoftGracePeriod": {}}
    for grace in ("99999999999h", "9" * 10_000 + "s"):
        kubelet["evictionSoftGracePeriod"] = {"memory.available": grace}
        problems = validate_ec2nodeclass(node_class(kubelet=kubelet))
        only_problem(problems, 'spec.kubelet.evictionSoftGracePeriod["memory.available"]')
    kubelet["evictionSoftGracePeriod"] = {"memory.available": "1m30.5s"}
    assert validate_ec2nodeclass(node_class(kubelet=kubelet)) == []


# -- counts and numbers --------------------------------------------------------------------------


@pytest.mark.parametrize("nodes", ["2147483648", "9" * 5000])
def test_a_budget_node_count_past_max_int32_is_refused(nodes: str) -> None:
    """A count above math.MaxInt32 (Karpenter's "no budget applies") crashed int() in the budget
    arithmetic past 4300 digits."""
    only_problem(
        validate_nodepool(nodepool_manifest(disruption={"budgets": [{"nodes": nodes}]})),
        "spec.disruption.budgets[0].nodes",
    )
    assert (
        validate_nodepool(nodepool_manifest(disruption={"budgets": [{"nodes": str(ranges.MAX_COUNT)}]})) == []
    )


def test_a_provisioner_budget_past_max_int32_is_refused() -> None:
    spec = {**valid_spec(), "disruption": {"nodes": "9" * 5000}}
    only_problem(validate_provisioner(provisioner_manifest(**spec)), "spec.disruption.nodes")


@pytest.mark.parametrize("field", ["maxPods", "podsPerCore", "evictionMaxPodGracePeriod"])
def test_a_kubelet_count_past_int32_is_refused(field: str) -> None:
    only_problem(validate_ec2nodeclass(node_class(kubelet={field: 2**31})), f"spec.kubelet.{field}")


def test_a_gt_value_past_int64_is_refused() -> None:
    """The NodePool CRD's CEL rule converts Gt/Lt values with int(), an int64."""
    req = {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gt", "values": [str(2**63)]}
    only_problem(
        validate_nodepool(nodepool_manifest(template_spec=template_spec(requirements=[req]))),
        "spec.template.spec.requirements[0].values",
    )
    req["values"] = [str(2**63 - 1)]
    assert validate_nodepool(nodepool_manifest(template_spec=template_spec(requirements=[req]))) == []


# -- quantities ----------------------------------------------------------------------------------


def test_a_quantity_whose_exponent_overflows_is_refused_not_raised() -> None:
    """decimal.Overflow escaped the loader (an internal error at admission) before."""
    problems = validate_ec2nodeclass(node_class(kubelet={"kubeReserved": {"memory": "1e99999999Ki"}}))
    only_problem(problems, 'spec.kubelet.kubeReserved["memory"]')
    problems = validate_nodepool(nodepool_manifest(limits={"cpu": 10**400}))
    only_problem(problems, "spec.limits.cpu")


def test_a_reserved_quantity_past_the_maximum_is_refused() -> None:
    problems = validate_ec2nodeclass(node_class(kubelet={"systemReserved": {"memory": "1e20"}}))
    assert "larger than" in only_problem(problems, 'spec.kubelet.systemReserved["memory"]')


@pytest.mark.parametrize("digits", [20_000])
def test_the_quantity_grammar_fails_in_linear_time(digits: int) -> None:
    """`\\d+\\.?\\d*` made a failed match quadratic: 17 s for 16,000 digits."""
    started = time.perf_counter()
    with pytest.raises(QuantityError):
        parse_quantity("1" * digits + "x")
    assert time.perf_counter() - started < HANG_GUARD_SECONDS


# -- what a launch could never honour ------------------------------------------------------------


def test_more_tags_than_ec2_allows_with_karpys_are_refused_naming_spec_tags() -> None:
    """EC2 allows 50 tags a resource (User Guide, "Tag restrictions"); karpy adds 5 to every
    instance (extender/cloud/aws/provider.py instance_tags): 60 failed every launch with
    TagLimitExceeded (issue 31)."""
    message = only_problem(
        validate_ec2nodeclass(node_class(tags={f"k{i}": "v" for i in range(60)})), "spec.tags"
    )
    assert "60 tags" in message and "at most 45" in message
    only_problem(validate_ec2nodeclass(node_class(tags={f"k{i}": "v" for i in range(46)})), "spec.tags")
    # Name replaces karpy's own Name tag rather than adding one.
    assert validate_ec2nodeclass(node_class(tags={"Name": "n", **{f"k{i}": "v" for i in range(45)}})) == []


def test_tags_ec2_refuses_are_refused_by_key() -> None:
    problems = validate_ec2nodeclass(node_class(tags={"k" * 129: "v", "aws:x": "v", "ok": "v" * 257}))
    assert len(problems) == 3 and all(p.startswith("spec.tags[") for p in problems), problems


def test_the_same_tag_rule_holds_for_provisioners_and_node_templates() -> None:
    tags = {f"k{i}": "v" for i in range(60)}
    spec = valid_spec()
    spec["provider"] = {**spec["provider"], "tags": tags}
    only_problem(validate_provisioner(provisioner_manifest(**spec)), "spec.provider.tags")
    template = {
        "apiVersion": "karpenter.k8s.aws/v1alpha1",
        "kind": "AWSNodeTemplate",
        "metadata": {"name": "t"},
        "spec": {"instanceProfile": "p", "tags": tags},
    }
    assert any(p.startswith("spec.tags: 60 tags") for p in validate_node_template(template))


def test_template_annotations_no_node_can_carry_are_refused_naming_the_field() -> None:
    """apimachinery ValidateAnnotationsSize: len(key) + len(value) summed, at most 256 KiB. A 1 MB
    template annotation was admitted and every Node create failed with 422 (issue 31)."""
    big = nodepool_manifest(
        template={"metadata": {"annotations": {"a": "x" * 2**20}}, "spec": template_spec()}
    )
    message = only_problem(
        problems_within_guard(validate_nodepool, big), "spec.template.metadata.annotations"
    )
    assert "1048577 bytes" in message
    fits = nodepool_manifest(
        template={"metadata": {"annotations": {"a": "x" * 200_000}}, "spec": template_spec()}
    )
    assert validate_nodepool(fits) == []


def test_template_labels_no_node_can_carry_are_refused_naming_the_field() -> None:
    bad = nodepool_manifest(template={"metadata": {"labels": {"team": "x" * 64}}, "spec": template_spec()})
    only_problem(validate_nodepool(bad), 'spec.template.metadata.labels["team"]')


def test_user_data_past_ec2s_limit_is_refused() -> None:
    """RunInstances takes at most 16 KB of user data before base64."""
    only_problem(validate_ec2nodeclass(node_class(userData="x" * (16 * 1024 + 1))), "spec.userData")


# -- sizes bounded before anything is loaded ------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "obj"),
    [
        (
            "spec.template.spec.requirements",
            nodepool_manifest(
                template_spec=template_spec(requirements=[{"key": "a/b/c", "operator": "Foo"}] * 90_000)
            ),
        ),
        (
            "spec.template.spec.requirements[0].values",
            nodepool_manifest(
                template_spec=template_spec(
                    requirements=[{"key": "a", "operator": "In", "values": ["-"] * 10_000}]
                )
            ),
        ),
        (
            "spec.template.metadata.labels",
            nodepool_manifest(
                template={
                    "metadata": {"labels": {f"-{i}": "-" for i in range(100_000)}},
                    "spec": template_spec(),
                }
            ),
        ),
        ("spec.disruption.budgets", nodepool_manifest(disruption={"budgets": [{"nodes": "x"}] * 50_000})),
    ],
)
def test_an_oversized_list_or_map_is_one_quick_problem(path: str, obj: dict[str, Any]) -> None:
    """Each used to be loaded item by item: seconds of work and up to 60 million characters of
    problems (issue 31's 10.8 MB denial)."""
    only_problem(problems_within_guard(validate_nodepool, obj), path)


@pytest.mark.parametrize(
    ("path", "spec"),
    [
        ("spec.metadataOptions", {"metadataOptions": {f"k{i}": 1 for i in range(100_000)}}),
        (
            "spec.blockDeviceMappings",
            {"blockDeviceMappings": [{"deviceName": f"/dev/{i}"} for i in range(60_000)]},
        ),
        ("spec.tags", {"tags": {f"k{i}": "v" for i in range(200_000)}}),
    ],
)
def test_an_oversized_node_class_is_one_quick_problem(path: str, spec: dict[str, Any]) -> None:
    """Distinct objects, as decoded from JSON: neither copied nor loaded item by item (a 100,000-key
    metadataOptions was 100,000 unknown-field lines, 0.5 s)."""
    only_problem(problems_within_guard(validate_ec2nodeclass, node_class(**spec)), path)


def test_an_oversized_provisioner_is_one_quick_problem() -> None:
    spec = {**valid_spec(), "requirements": [{"key": "a/b/c", "operator": "Foo"}] * 90_000}
    only_problem(
        problems_within_guard(validate_provisioner, provisioner_manifest(**spec)), "spec.requirements"
    )


# -- NodeClaims read back ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "claim",
    [
        {"metadata": "x", "status": 3, "spec": []},
        {"metadata": {"finalizers": 7}, "status": {"conditions": "no"}, "spec": {"startupTaints": [1, "a"]}},
        {"status": {"conditions": [5, {"observedGeneration": "9" * 5000}, {"observedGeneration": {"a": 1}}]}},
    ],
)
def test_a_hand_made_nodeclaim_of_any_shape_reads_without_raising(claim: dict[str, Any]) -> None:
    """A NodeClaim is read by every worker: a wrong shape must read as unset, never stop one."""
    record = Record.from_manifest(claim)
    assert record.finalized is False
    assert all(c.observed_generation == 0 for c in conditions_of(claim))
    assert all(t.key in ("", "None") for t in spec_taints(claim, "startupTaints"))
