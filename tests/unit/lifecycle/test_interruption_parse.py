"""Parsing EventBridge envelopes delivered through SQS into interruption kinds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from extender.lifecycle import interruption as ir


def envelope(source: str, detail_type: str, detail: Any, **extra: Any) -> str:
    # Shaped like what moto delivers (no "account" field, as testinfra.md 9 records).
    body = {
        "id": "e1",
        "time": "2026-12-02T14:17:06Z",
        "version": "0",
        "detail-type": detail_type,
        "source": source,
        "region": "us-west-2",
        "resources": [],
        "detail": detail,
    }
    body.update(extra)
    return json.dumps(body)


def test_spot_interruption_warning() -> None:
    msg = ir.parse(
        envelope(
            "aws.ec2",
            "EC2 Spot Instance Interruption Warning",
            {"instance-id": "i-0abc", "instance-action": "terminate"},
        )
    )
    assert (msg.kind, msg.instance_ids, msg.id) == (ir.SPOT_INTERRUPTED, ("i-0abc",), "e1")
    assert msg.time is not None and msg.time.year == 2026


def test_rebalance_recommendation() -> None:
    msg = ir.parse(envelope("aws.ec2", "EC2 Instance Rebalance Recommendation", {"instance-id": "i-1"}))
    assert (msg.kind, msg.instance_ids) == (ir.REBALANCE, ("i-1",))


@pytest.mark.parametrize(
    ("state", "kind"),
    [
        ("stopping", ir.INSTANCE_STOPPED),
        ("stopped", ir.INSTANCE_STOPPED),
        ("shutting-down", ir.INSTANCE_TERMINATED),
        ("terminated", ir.INSTANCE_TERMINATED),
        ("running", ir.NO_OP),
        ("pending", ir.NO_OP),
    ],
)
def test_state_change(state: str, kind: str) -> None:
    msg = ir.parse(
        envelope("aws.ec2", "EC2 Instance State-change Notification", {"instance-id": "i-2", "state": state})
    )
    assert msg.kind == kind
    assert msg.instance_ids == (() if kind == ir.NO_OP else ("i-2",))


def test_health_scheduled_change_lists_every_affected_instance() -> None:
    detail = {
        "service": "EC2",
        "eventTypeCategory": "scheduledChange",
        "affectedEntities": [{"entityValue": "i-3"}, {"entityValue": "i-4"}, {"entityValue": "vol-1"}],
    }
    msg = ir.parse(envelope("aws.health", "AWS Health Event", detail))
    assert (msg.kind, msg.instance_ids) == (ir.SCHEDULED_CHANGE, ("i-3", "i-4"))


def test_health_event_for_other_services_or_categories_is_no_op() -> None:
    for detail in (
        {"service": "RDS", "eventTypeCategory": "scheduledChange", "affectedEntities": []},
        {"service": "EC2", "eventTypeCategory": "issue", "affectedEntities": []},
    ):
        assert ir.parse(envelope("aws.health", "AWS Health Event", detail)).kind == ir.NO_OP


def test_unknown_source_or_detail_type_or_version_is_no_op() -> None:
    assert ir.parse(envelope("aws.s3", "Object Created", {})).kind == ir.NO_OP
    assert ir.parse(envelope("aws.ec2", "EC2 AMI State Change", {})).kind == ir.NO_OP
    assert (
        ir.parse(
            envelope("aws.ec2", "EC2 Spot Instance Interruption Warning", {"instance-id": "i-1"}, version="1")
        ).kind
        == ir.NO_OP
    )


@pytest.mark.parametrize(
    "body",
    [
        "not json",
        "[1, 2]",
        json.dumps({"source": "aws.ec2"}),
        envelope("aws.ec2", "EC2 Spot Instance Interruption Warning", {"instance-action": "terminate"}),
        envelope("aws.ec2", "EC2 Spot Instance Interruption Warning", {"instance-id": 42}),
        envelope("aws.ec2", "EC2 Spot Instance Interruption Warning", {"instance-id": "i-1"}, time="noon"),
        envelope(
            "aws.health", "AWS Health Event", {"service": "EC2", "eventTypeCategory": "scheduledChange"}
        ),
    ],
)
def test_malformed(body: str) -> None:
    with pytest.raises(ir.MalformedMessage):
        ir.parse(body)
