"""karpy's NodeOverlay CRD (manifests/crd/nodeoverlays.karpenter.sh.yaml) stores or refuses as
Karpenter's: the cases of kubernetes-sigs/karpenter pkg/apis/v1alpha1/nodeoverlay_validation_test.go
whose expectation is on `env.Client.Create` (the API server: schema and CEL alone, no webhook), run
as server-side dry runs on the local control plane. Runtime-only cases are the loader's
(tests/unit/api/test_nodeoverlay.py)."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from hack.localcluster.karpyenv import PROVISIONER_CRD, install_crd
from tests.unit.api.test_nodeoverlay import INVALID_PRICES

pytestmark = pytest.mark.integration

RUN = uuid.uuid4().hex[:8]
ZONE = "topology.kubernetes.io/zone"


def req(key: str, operator: str, *values: str) -> dict[str, Any]:
    return (
        {"key": key, "operator": operator, "values": list(values)}
        if values
        else {"key": key, "operator": operator}
    )


STORED: list[tuple[str, dict[str, Any]]] = [
    (
        "valid requirement keys",
        {"requirements": [req("Test", "Exists"), req("test.com/Test", "Exists"), req("key-only", "Exists")]},
    ),
    ("karpenter.sh/nodepool label", {"requirements": [req("karpenter.sh/nodepool", "In", "batch")]}),
    ("too-long key passes the CRD", {"requirements": [req(f"test.com.test.{'a' * 250}/test", "Exists")]}),
    (
        "supported ops",
        {
            "requirements": [
                req(ZONE, "In", "test"),
                req(ZONE, "Gt", "1"),
                req(ZONE, "Lt", "1"),
                req(ZONE, "Gte", "1"),
                req(ZONE, "Lte", "1"),
                req(ZONE, "NotIn", "1"),
                req(ZONE, "Exists"),
            ]
        },
    ),
    ("kubernetes domain exception", {"requirements": [req("kubernetes.io/test", "In", "test")]}),
    ("k8s subdomain exception", {"requirements": [req("subdomain.k8s.io/test", "In", "test")]}),
    ("aws instance label", {"requirements": [req("karpenter.k8s.aws/instance-family", "In", "m5")]}),
    ("empty requirements", {"requirements": []}),
    *[
        (f"priceAdjustment {v}", {"requirements": [], "priceAdjustment": v})
        for v in ("+1%", "-1%", "-100%", "+100.102%", "+298%", "+43", "-43", "+34.43", "-34.43")
    ],
    *[(f"price {v}", {"requirements": [], "price": v}) for v in ("43", "34.43")],
    ("custom resource capacity", {"requirements": [], "capacity": {"smarter-devices/fuse": "1"}}),
    ("weight 10000", {"requirements": [], "weight": 10000}),
]

REFUSED: list[tuple[str, dict[str, Any]]] = [
    ("In without values", {"requirements": [req("Test", "In")]}),
    ("NotIn without values", {"requirements": [req("Test", "NotIn")]}),
    *[
        (f"invalid key {k}", {"requirements": [req(k, "Exists")]})
        for k in ("test.com.com}", "Test.com/test", "test/test/test", "test/", "/test")
    ],
    ("unsupported op", {"requirements": [req(ZONE, "unknown", "test")]}),
    ("karpenter.sh domain", {"requirements": [req("karpenter.sh/test", "In", "test")]}),
    ("karpenter.k8s.aws domain", {"requirements": [req("karpenter.k8s.aws/bogus", "In", "test")]}),
    ("hostname", {"requirements": [req("kubernetes.io/hostname", "In", "x")]}),
    *[
        (f"{op} {vs}", {"requirements": [req(ZONE, op, *vs)]})
        for op in ("Gt", "Lt", "Gte", "Lte")
        for vs in ((), ("1", "2"), ("a",), ("-1",))
    ],
    ("price and priceAdjustment", {"requirements": [], "price": "0.432", "priceAdjustment": "+10%"}),
    *[(f"price {v!r}", {"requirements": [], "price": v}) for v in INVALID_PRICES],
    *[
        (f"priceAdjustment {v!r}", {"requirements": [], "priceAdjustment": v})
        for v in ("1%", "1", "1.3", "-101.1%", "-100.0%")
    ],
    *[
        (f"capacity {r}", {"requirements": [], "capacity": {r: "1"}})
        for r in ("cpu", "memory", "pods", "ephemeral-storage")
    ],
    ("weight 0", {"requirements": [], "weight": 0}),
    ("no requirements", {}),
]


@pytest.fixture(scope="module")
def objects(cluster: Any) -> Any:
    from kubernetes import client

    with cluster.api_client() as api:
        install_crd(api, PROVISIONER_CRD.with_name("nodeoverlays.karpenter.sh.yaml"))
        yield client.CustomObjectsApi(api)


def stored(objects: Any, index: int, spec: dict[str, Any]) -> bool:
    from kubernetes.client.exceptions import ApiException

    body = {
        "apiVersion": "karpenter.sh/v1alpha1",
        "kind": "NodeOverlay",
        "metadata": {"name": f"cel-{RUN}-{index}"},
        "spec": spec,
    }
    try:
        objects.create_cluster_custom_object("karpenter.sh", "v1alpha1", "nodeoverlays", body, dry_run="All")
    except ApiException as err:
        if err.status not in (400, 422):
            raise
        return False
    return True


def test_every_case_is_stored_or_refused_as_karpenter_expects(objects: Any) -> None:
    cases = [(name, spec, True) for name, spec in STORED] + [(name, spec, False) for name, spec in REFUSED]
    wrong = [
        f"{name}: expected {'stored' if expected else 'refused'}"
        for index, (name, spec, expected) in enumerate(cases)
        if stored(objects, index, spec) != expected
    ]
    assert not wrong, "\n".join(wrong)
