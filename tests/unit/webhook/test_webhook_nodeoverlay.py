"""/validate/nodeoverlay through the Flask test client: a NodeOverlay karpy can honour is admitted,
one it cannot is refused with the field paths, and the route serves NodeOverlays only."""

from __future__ import annotations

import json
from typing import Any

from flask.testing import FlaskClient

from tests.unit.webhook.reviews import make_review


def overlay(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": "savings-plan"},
        "spec": {
            "requirements": [
                {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["m5"]}
            ],
            **spec,
        },
    }


def post(client: FlaskClient, obj: Any, **review: Any) -> dict[str, Any]:
    body = make_review(obj, group="karpenter.sh", version="v1alpha1", kind="NodeOverlay", **review)
    resp = client.post("/validate/nodeoverlay", data=json.dumps(body), content_type="application/json")
    assert resp.status_code == 200
    answer: dict[str, Any] = resp.get_json()["response"]
    return answer


def test_admits_what_karpy_honours(client: FlaskClient) -> None:
    assert post(client, overlay(priceAdjustment="-20%", capacity={"example.com/widget": 4}, weight=10))[
        "allowed"
    ]


def test_refuses_with_field_paths(client: FlaskClient) -> None:
    bad = overlay(price="0.1", priceAdjustment="-10%", capacity={"memory": "1Gi"})
    bad["spec"]["requirements"].append(
        {"key": "karpenter.k8s.aws/instance-cpu", "operator": "Gte", "values": ["4"]}
    )
    answer = post(client, bad)
    assert not answer["allowed"]
    message = answer["status"]["message"]
    for path in ("spec.requirements[1].operator", "spec.price", "spec.capacity.memory"):
        assert path in message, message
    assert "operator Gte is not supported by karpy" in message


def test_other_kinds_are_refused_and_deletes_pass(client: FlaskClient) -> None:
    body = make_review(overlay(), group="karpenter.sh", version="v1", kind="NodePool")
    resp = client.post("/validate/nodeoverlay", data=json.dumps(body), content_type="application/json")
    assert not resp.get_json()["response"]["allowed"]
    assert post(client, {"kind": "NodeOverlay"}, operation="DELETE")["allowed"]
