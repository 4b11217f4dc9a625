"""Fuzzing the admission endpoints: 10,000 malformed bodies, never a 5xx, never an internal error.

Three generators, 10,000 examples in all: raw bytes, arbitrary JSON, and AdmissionReviews whose
request/object have random subtrees replaced (structure-aware, so the handlers themselves are reached).
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from flask.testing import FlaskClient
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.webhook.reviews import (
    field_paths,
    fuzz,
    loaded,
    make_review,
    pod_manifest,
    pod_review,
    provisioner_manifest,
    valid_spec,
)
from webhook.app import create_app
from webhook.config import WebhookConfig

pytestmark = pytest.mark.slow

PATHS = ("/mutate/provisioner", "/validate/provisioner", "/mutate/pod")


_client: FlaskClient | None = None


def client() -> FlaskClient:
    global _client
    if _client is None:
        known = [loaded("general", weight=10), loaded("gpu", taints=[{"key": "gpu", "effect": "NoSchedule"}])]
        _client = create_app(WebhookConfig(read_provisioners=False), provisioners=lambda: known).test_client()
    return _client


def check(path: str, body: bytes) -> None:
    resp = client().post(path, data=body, content_type="application/json")
    assert resp.status_code in (200, 400), (resp.status_code, body[:200])
    answer = resp.get_json()
    if resp.status_code == 400:
        assert answer["code"] == 400 and answer["message"]
        return
    response = answer["response"]
    assert isinstance(response["uid"], str) and response["uid"]
    assert "internal error" not in json.dumps(response), (path, body[:300])


text = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=12)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=12,
)


def dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")


@fuzz(2000)
@given(path=st.sampled_from(PATHS), body=st.binary(max_size=300))
def test_raw_bytes(path: str, body: bytes) -> None:
    check(path, body)


@fuzz(2000)
@given(path=st.sampled_from(PATHS), value=json_values)
def test_arbitrary_json(path: str, value: Any) -> None:
    check(path, dumps(value))


def _templates() -> list[dict[str, Any]]:
    spec = valid_spec()
    spec["labels"] = {"team": "a"}
    spec["taints"] = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    spec["limits"] = {"resources": {"cpu": "10"}}
    spec["kubeletConfiguration"] = {"clusterDNS": ["10.0.0.10"], "maxPods": 10}
    pod = pod_manifest(
        nodeSelector={"kubernetes.io/arch": "amd64"},
        tolerations=[{"key": "gpu", "operator": "Exists"}],
        affinity={
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
                            ]
                        }
                    ]
                }
            }
        },
    )
    return [make_review(provisioner_manifest("p", **spec)), pod_review(pod)]


TEMPLATES = _templates()


@fuzz(6000)
@given(path=st.sampled_from(PATHS), data=st.data())
def test_mutated_reviews(path: str, data: st.DataObject) -> None:
    review = copy.deepcopy(data.draw(st.sampled_from(TEMPLATES)))
    for _ in range(data.draw(st.integers(1, 3))):
        candidates = [p for p in field_paths(review) if len(p) >= 2]
        where = data.draw(st.sampled_from(candidates))
        parent = review
        for key in where[:-1]:
            parent = parent[key]
        parent[where[-1]] = data.draw(json_values)
    check(path, dumps(review))
