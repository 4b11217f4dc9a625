"""An EC2NodeClass's conditions part by part, as Karpenter AWS's node class controller sets them
(aws/karpenter-provider-aws pkg/controllers/nodeclass/securitygroup.go: SecurityGroupsReady=False,
reason SecurityGroupsNotFound, "SecurityGroupSelector did not match any SecurityGroups"; subnet.go,
ami.go alike): a selector that found nothing is its own condition, the others stay True. Before,
a security group selector matching nothing raised out of the resolver and the class showed only
Ready=False ResolutionFailed, no SecurityGroupsReady (issue 35, launch health)."""

from __future__ import annotations

from typing import Any

from extender.cluster import v1status
from extender.settings import Settings
from tests.unit.test_cluster_invalid_objects import NODE_CLASS

FOUND: dict[str, Any] = {
    "subnets": [{"id": "subnet-1", "zone": "us-west-2a"}],
    "securityGroups": [{"id": "sg-1"}],
    "amis": [{"id": "ami-1", "requirements": []}],
    "instanceProfile": "karpy-node",
}


def by_type(status: dict[str, Any]) -> dict[str, tuple[str, str, str]]:
    return {c["type"]: (c["status"], c["reason"], c["message"]) for c in status["conditions"]}


def test_a_security_group_selector_matching_nothing_is_its_own_condition() -> None:
    detail = "no security groups exist given constraints [{'tags': {'a': 'b'}}]"
    found = {**FOUND, "securityGroups": [], v1status.UNRESOLVED: {"securityGroups": detail}}
    status, ready = v1status.node_class_status(NODE_CLASS, lambda _c: found, Settings(), "now")
    conditions = by_type(status)
    message = f"SecurityGroupSelector did not match any SecurityGroups: {detail}"
    assert conditions["SecurityGroupsReady"] == ("False", "SecurityGroupsNotFound", message)
    assert conditions["SubnetsReady"] == ("True", "SubnetsReady", "")
    assert conditions["AMIsReady"] == ("True", "AMIsReady", "")
    assert conditions["Ready"] == ("False", "NotReady", message)
    assert not ready
    assert v1status.UNRESOLVED not in status and status["securityGroups"] == []
    assert found[v1status.UNRESOLVED] == {"securityGroups": detail}  # the resolver's answer is not changed


def test_every_part_found_is_ready() -> None:
    status, ready = v1status.node_class_status(NODE_CLASS, lambda _c: dict(FOUND), Settings(), "now")
    assert ready and {s for s, _r, _m in by_type(status).values()} == {"True"}
