"""AdmissionReview parsing, response building and JSON Patch generation (pure functions)."""

from __future__ import annotations

import base64
import json

import pytest

from tests.unit.webhook.reviews import make_review
from webhook.admission import BadReview, Verdict, build_response, json_patch, parse_review


def test_parse_review_reads_the_request() -> None:
    request = parse_review(json.dumps(make_review({"kind": "Provisioner"}, operation="UPDATE")).encode())
    assert request.uid == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert (request.kind.group, request.kind.version, request.kind.kind) == (
        "karpenter.sh",
        "v1alpha5",
        "Provisioner",
    )
    assert request.operation == "UPDATE" and request.object == {"kind": "Provisioner"}


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{", "body is not JSON"),
        (b"\xff\xfe{}", "body is not UTF-8: invalid byte at offset 0"),
        (b"[]", "expected a JSON object, got list"),
        (b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}', "expected apiVersion"),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}',
            "AdmissionReview has no request",
        ),
        (
            b'{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": 5}}',
            "AdmissionReview request has no uid",
        ),
        (b"[" * 100_000 + b"]" * 100_000, "body is not JSON"),
    ],
)
def test_parse_review_rejects_with_a_clear_message(body: bytes, message: str) -> None:
    with pytest.raises(BadReview, match=message):
        parse_review(body)


def test_response_without_change_has_no_patch() -> None:
    assert build_response("u", Verdict()) == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u", "allowed": True},
    }


def test_response_with_patch_is_base64_json_patch() -> None:
    ops = [{"op": "add", "path": "/spec/ttlSecondsAfterEmpty", "value": 30}]
    response = build_response("u", Verdict(patch=ops))["response"]
    assert response["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(response["patch"])) == ops


def test_denial_carries_code_and_message() -> None:
    response = build_response("u", Verdict.deny(403, "spec.weight: bad"))["response"]
    assert response == {
        "uid": "u",
        "allowed": False,
        "status": {"code": 403, "message": "spec.weight: bad", "status": "Failure"},
    }


def test_json_patch_escapes_keys_and_adds_missing_parents_whole() -> None:
    old = {"spec": {"containers": []}}
    new = {"spec": {"containers": [], "nodeSelector": {"karpenter.sh/provisioner-name": "default"}}}
    assert json_patch(old, new) == [
        {"op": "add", "path": "/spec/nodeSelector", "value": {"karpenter.sh/provisioner-name": "default"}}
    ]
    assert json_patch({"a~b/c": 1}, {"a~b/c": 2}) == [{"op": "replace", "path": "/a~0b~1c", "value": 2}]


def test_json_patch_removes_renamed_keys_and_replaces_changed_lists() -> None:
    old = {"labels": {"node.k8s.aws/capacity-type": "spot"}, "requirements": [{"key": "a"}]}
    new = {"labels": {"karpenter.sh/capacity-type": "spot"}, "requirements": [{"key": "a"}, {"key": "b"}]}
    assert json_patch(old, new) == [
        {"op": "remove", "path": "/labels/node.k8s.aws~1capacity-type"},
        {"op": "add", "path": "/labels/karpenter.sh~1capacity-type", "value": "spot"},
        {"op": "replace", "path": "/requirements", "value": [{"key": "a"}, {"key": "b"}]},
    ]
    assert json_patch({"a": 1}, {"a": True}) == [{"op": "replace", "path": "/a", "value": True}]
    assert json_patch(new, new) == []
