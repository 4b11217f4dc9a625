"""The Flask app end to end through the test client: wire protocol, bad input, health and metrics."""

from __future__ import annotations

import json
from typing import Any

import pytest
from flask.testing import FlaskClient

from tests.unit.webhook.reviews import (
    decoded_patch,
    make_review,
    pod_manifest,
    pod_review,
    provisioner_manifest,
    valid_spec,
)
from webhook.app import create_app
from webhook.config import WebhookConfig


def post(client: FlaskClient, path: str, body: Any) -> tuple[int, dict[str, Any]]:
    data = body if isinstance(body, bytes) else json.dumps(body)
    resp = client.post(path, data=data, content_type="application/json")
    return resp.status_code, resp.get_json()


def test_mutate_provisioner_patches_walkthrough_and_echoes_uid(client: FlaskClient) -> None:
    spec = valid_spec()
    spec["requirements"][0]["key"] = "node.k8s.aws/capacity-type"
    del spec["provider"]["subnetSelector"], spec["provider"]["securityGroupSelector"]
    status, review = post(client, "/mutate/provisioner", make_review(provisioner_manifest("default", **spec)))
    assert status == 200
    assert review["apiVersion"] == "admission.k8s.io/v1" and review["kind"] == "AdmissionReview"
    response = review["response"]
    assert response["uid"] == "705ab4f5-6393-11e8-b7cc-42010a800002" and response["allowed"] is True
    ops = {op["path"]: op for op in decoded_patch(response)}
    assert ops["/spec/requirements"]["value"] == [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
    ]
    assert ops["/spec/provider/subnetSelector"]["value"] == {"kubernetes.io/cluster/demo": "*"}


def test_mutate_provisioner_already_defaulted_has_no_patch(client: FlaskClient) -> None:
    spec = valid_spec()
    spec["requirements"].append({"key": "kubernetes.io/arch", "operator": "In", "values": ["arm64"]})
    _, review = post(client, "/mutate/provisioner", make_review(provisioner_manifest("p", **spec)))
    assert review["response"] == {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "allowed": True}


def test_validate_provisioner_allows_valid_and_denies_with_paths(client: FlaskClient) -> None:
    _, ok = post(client, "/validate/provisioner", make_review(provisioner_manifest("p", **valid_spec())))
    assert ok["response"]["allowed"] is True
    spec = valid_spec()
    spec["requirements"].append({"key": "kubernetes.io/arch", "operator": "Foo", "values": ["a"]})
    spec["ttlSecondsAfterEmpty"] = -3
    status, denied = post(client, "/validate/provisioner", make_review(provisioner_manifest("p", **spec)))
    assert status == 200
    assert denied["response"]["allowed"] is False
    assert denied["response"]["status"]["code"] == 403
    assert denied["response"]["status"]["message"] == (
        'spec.requirements[1].operator: "Foo" not in [In NotIn Exists DoesNotExist Gt Lt]; '
        "spec.ttlSecondsAfterEmpty: cannot be negative"
    )


def test_delete_and_status_writes_are_allowed_untouched(client: FlaskClient) -> None:
    for path in ("/mutate/provisioner", "/validate/provisioner"):
        _, review = post(client, path, make_review(None, operation="DELETE"))
        assert review["response"]["allowed"] is True and "patch" not in review["response"]


def test_wrong_kind_and_non_provisioner_object_are_denied_400(client: FlaskClient) -> None:
    _, review = post(
        client, "/validate/provisioner", make_review({}, group="apps", version="v1", kind="Deployment")
    )
    assert review["response"]["status"] == {
        "code": 400,
        "message": "expected karpenter.sh Provisioner, got apps/v1 Deployment",
        "status": "Failure",
    }
    _, review = post(client, "/mutate/provisioner", make_review({"kind": "ConfigMap"}))
    assert review["response"]["status"]["message"] == "request.object is not a Provisioner"
    _, review = post(client, "/mutate/pod", make_review(provisioner_manifest()))
    assert review["response"]["status"]["code"] == 400


def test_bad_bodies_get_http_400_with_message(client: FlaskClient) -> None:
    for body, message in (
        (b"not json", "body is not JSON"),
        (b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}', "AdmissionReview has no request"),
        (b"\xc3\x28", "body is not UTF-8"),
        (b'"\\ud800"', "expected a JSON object, got str"),
    ):
        status, answer = post(client, "/mutate/pod", body)
        assert status == 400 and answer["code"] == 400 and answer["message"].startswith(message)


def test_ten_megabyte_body_is_refused_with_400(client: FlaskClient) -> None:
    body = (
        b'{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","x":"'
        + (b"a" * (10 * 1024 * 1024))
        + b'"}}'
    )
    status, answer = post(client, "/validate/provisioner", body)
    assert status == 400 and answer["message"] == "request body larger than 4194304 bytes"


def test_odd_unicode_in_object_comes_back_as_valid_json(client: FlaskClient) -> None:
    spec = valid_spec()
    spec["labels"] = {"\ud83d\ude00\u202e\ud800": "\u0000"}
    status, review = post(client, "/validate/provisioner", make_review(provisioner_manifest("p", **spec)))
    assert status == 200 and review["response"]["allowed"] is False
    assert "spec.labels[" in review["response"]["status"]["message"]


def test_unknown_path_and_method_answer_json(client: FlaskClient) -> None:
    resp = client.get("/mutate/pod")
    assert resp.status_code == 405 and resp.get_json()["code"] == 405
    assert client.post("/nope").get_json()["code"] == 404


def test_health_and_metrics(client: FlaskClient) -> None:
    assert client.get("/healthz").data == b"ok\n"
    assert client.get("/readyz").status_code == 200
    post(client, "/mutate/pod", pod_review(pod_manifest()))
    post(client, "/mutate/pod", b"{")
    text = client.get("/metrics").data.decode()
    assert 'karpy_webhook_requests_total{path="/mutate/pod",result="patched"} 1.0' in text
    assert 'karpy_webhook_requests_total{path="/mutate/pod",result="bad_request"} 1.0' in text
    assert 'karpy_webhook_request_duration_seconds_count{path="/mutate/pod"} 2.0' in text


def test_handler_crash_fails_open_for_pods_and_closed_for_provisioners() -> None:
    def broken() -> None:
        raise RuntimeError("boom")

    app = create_app(WebhookConfig(read_provisioners=False), provisioners=broken)  # type: ignore[arg-type]
    client = app.test_client()
    status, review = post(client, "/mutate/pod", pod_review(pod_manifest()))
    assert status == 200 and review["response"]["allowed"] is True
    assert review["response"]["warnings"] == ["karpy: internal error, admitted unchanged"]
    assert (
        'karpy_webhook_requests_total{path="/mutate/pod",result="error"} 1.0'
        in client.get("/metrics").data.decode()
    )


def test_factory_builds_independent_apps() -> None:
    first, second = (
        create_app(WebhookConfig(read_provisioners=False)),
        create_app(WebhookConfig(read_provisioners=False)),
    )
    assert first is not second and not first.testing


def _deep(levels: int) -> Any:
    value: Any = "x"
    for _ in range(levels):
        value = {"a": value}
    return value


@pytest.mark.parametrize("levels", [200, 900])
def test_deeply_nested_provisioner_is_denied_with_its_field_path(
    client: FlaskClient, caplog: Any, levels: int
) -> None:
    """Found 8 (issue 13): a Provisioner nested ~900 levels failed with a RecursionError logged as a
    traceback of thousands of lines. Issue 26, found while probing: the HTTP 400 that replaced it
    reached users as the API server's 500 "failed calling webhook", with no field path; it is now a
    denial naming where the object is too deep."""
    spec = valid_spec()
    spec["provider"] = {**spec.get("provider", {}), "deep": _deep(levels)}
    for path in ("/mutate/provisioner", "/validate/provisioner"):
        caplog.clear()
        status, answer = post(client, path, make_review(provisioner_manifest("default", **spec)))
        response = answer["response"]
        assert status == 200 and response["allowed"] is False and response["status"]["code"] == 400
        assert response["status"]["message"].startswith("spec.provider.deep.a.a.a")
        assert "nested deeper than 97 levels" in response["status"]["message"]
        assert len(response["status"]["message"]) < 200
        assert sum(len(r.getMessage().splitlines()) + len(r.exc_text or "") for r in caplog.records) < 10
