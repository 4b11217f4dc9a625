"""The extender app over its wire format: guard, fast path, prioritize, health."""

from __future__ import annotations

import io
from typing import Any

import pytest

from extender.api.resources import Resources
from extender.heartbeat import Heartbeats
from extender.http.app import create_app
from extender.settings import Settings
from extender.state import ClusterState, NodeInfo

POD = {
    "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
    "spec": {"containers": [{"name": "c", "image": "pause", "resources": {"requests": {"cpu": "1"}}}]},
    "status": {},
}


@pytest.fixture
def harness() -> tuple[Any, ClusterState, list[list[dict[str, Any]]]]:
    state = ClusterState()
    enqueued: list[list[dict[str, Any]]] = []
    app = create_app(Settings(), state, enqueued.append)
    return app.test_client(), state, enqueued


def test_filter_keeps_every_node_when_nothing_is_guarded(harness) -> None:
    web, _, enqueued = harness
    reply = web.post("/filter", json={"Pod": POD, "Nodes": None, "NodeNames": ["n1", "n2"]})
    assert reply.status_code == 200
    assert reply.get_json() == {
        "Nodes": None,
        "NodeNames": ["n1", "n2"],
        "FailedNodes": {},
        "FailedAndUnresolvableNodes": {},
        "Error": "",
    }
    assert enqueued == []


def test_marked_node_is_failed_unresolvable_and_unmark_restores_it(harness) -> None:
    web, state, _ = harness
    state.mark_for_removal("n2", "draining")
    body = web.post("/filter", json={"Pod": POD, "NodeNames": ["n1", "n2"]}).get_json()
    assert body["NodeNames"] == ["n1"]
    assert body["FailedAndUnresolvableNodes"] == {"n2": "karpy: node draining"}
    state.unmark("n2")
    assert web.post("/filter", json={"Pod": POD, "NodeNames": ["n2"]}).get_json()["NodeNames"] == ["n2"]


def test_reserved_node_fails_only_pods_that_do_not_fit_the_rest(harness) -> None:
    web, state, _ = harness
    state.set_nodes([NodeInfo(name="n1", provisioner="default", allocatable=Resources.of(cpu=4))])
    state.reserve("n1", {"ns/a": Resources.of(cpu=2)})
    assert web.post("/filter", json={"Pod": POD, "NodeNames": ["n1"]}).get_json()["NodeNames"] == ["n1"]
    state.reserve("n1", {"ns/b": Resources.of(cpu=1.5)})
    body = web.post("/filter", json={"Pod": POD, "NodeNames": ["n1"]}).get_json()
    assert body["NodeNames"] == []
    assert body["FailedAndUnresolvableNodes"] == {"n1": "karpy: room reserved for 2 other pod(s)"}
    state.release("n1", ["ns/a", "ns/b"])
    assert web.post("/filter", json={"Pod": POD, "NodeNames": ["n1"]}).get_json()["NodeNames"] == ["n1"]


def test_guard_leaving_no_node_enqueues_the_pod(harness) -> None:
    web, state, enqueued = harness
    state.mark_for_removal("n1", "expired")
    web.post("/filter", json={"Pod": POD, "NodeNames": ["n1"]})
    assert enqueued == [[POD]]


def test_a_pod_karpy_is_placing_gets_no_node_and_no_second_enqueue(harness) -> None:
    web, state, enqueued = harness
    state.claim(["ns/p"])
    state.claim(["ns/p"])  # a batch and a replacement launch may overlap
    body = web.post("/filter", json={"Pod": POD, "NodeNames": ["n1", "n2"]}).get_json()
    assert body["NodeNames"] == []
    assert body["FailedAndUnresolvableNodes"] == {
        "n1": "karpy: provisioning a node for this pod",
        "n2": "karpy: provisioning a node for this pod",
    }
    assert enqueued == []
    state.unclaim(["ns/p"])
    assert web.post("/filter", json={"Pod": POD, "NodeNames": ["n1"]}).get_json()["NodeNames"] == []
    state.unclaim(["ns/p"])
    assert web.post("/filter", json={"Pod": POD, "NodeNames": ["n1"]}).get_json()["NodeNames"] == ["n1"]
    other = {**POD, "metadata": {**POD["metadata"], "name": "q"}}
    state.claim(["ns/p"])
    assert web.post("/filter", json={"Pod": other, "NodeNames": ["n1"]}).get_json()["NodeNames"] == ["n1"]


def test_nodes_list_is_accepted_without_node_cache(harness) -> None:
    web, state, _ = harness
    state.mark_for_removal("n1", "empty")
    nodes = {"items": [{"metadata": {"name": "n1"}}, {"metadata": {"name": "n2"}}]}
    body = web.post("/filter", json={"Pod": POD, "Nodes": nodes, "NodeNames": None}).get_json()
    assert body["NodeNames"] == ["n2"]


def test_bad_body_answers_200_with_error(harness) -> None:
    web, _, _ = harness
    reply = web.post("/filter", data=b"not json")
    assert reply.status_code == 200 and reply.get_json()["Error"]


@pytest.mark.parametrize("metadata", ["web-0", 7, ["a"]])
def test_pod_metadata_that_is_not_an_object_answers_a_json_error(harness, metadata: Any) -> None:
    """Issue 26, found while probing: `Pod.metadata` a string answered 500 (an AttributeError in
    objects.pod_key); a malformed request is an Error kube-scheduler can skip, never a 500."""
    web, _, _ = harness
    for verb in ("/filter", "/prioritize"):
        reply = web.post(verb, json={"Pod": {"metadata": metadata}, "NodeNames": ["n1"]})
        assert reply.status_code == 200, verb
    body = web.post("/filter", json={"Pod": {"metadata": metadata}, "NodeNames": ["n1"]}).get_json()
    assert body["Error"] == "karpy: bad request, Pod.metadata is not an object"


def test_prioritize_prefers_nodes_not_planned_for_removal(harness) -> None:
    web, state, _ = harness
    state.mark_for_removal("n2", "empty")
    body = web.post("/prioritize", json={"Pod": POD, "NodeNames": ["n1", "n2"]}).get_json()
    assert body == [{"Host": "n1", "Score": 10}, {"Host": "n2", "Score": 0}]


def test_prioritize_with_nothing_to_say_answers_an_empty_list(harness) -> None:
    """kube-scheduler adds an extender's score only to the hosts it lists (prioritizeNodes), so
    equal scores for every node rank nothing: the answer is [] instead of one entry per node. A
    node marked for removal among them, or a pod holding room, gets the scores again."""
    web, state, _ = harness
    names = [f"n{i}" for i in range(1000)]
    assert web.post("/prioritize", json={"Pod": POD, "NodeNames": names}).get_json() == []
    state.mark_for_removal("elsewhere", "empty")
    assert web.post("/prioritize", json={"Pod": POD, "NodeNames": names}).get_json() == []
    state.mark_for_removal("n7", "empty")
    scores = web.post("/prioritize", json={"Pod": POD, "NodeNames": names}).get_json()
    assert len(scores) == 1000 and {"Host": "n7", "Score": 0} in scores


def test_health_ready_and_metrics(harness) -> None:
    web, state, _ = harness
    assert web.get("/healthz").status_code == 200
    assert web.get("/readyz").status_code == 503
    state.set_ready()
    assert web.get("/readyz").status_code == 200
    web.post("/filter", json={"Pod": POD, "NodeNames": ["n1"]})
    assert b"karpy_extender_request_duration_seconds_bucket" in web.get("/metrics").data


def test_node_objects_without_node_cache_are_answered_with_node_objects(harness) -> None:
    """Found 4: with nodeCacheCapable false kube-scheduler reads only `Nodes`; karpy answered null
    (= no node fits) before issue 13."""
    web, state, _ = harness
    state.mark_for_removal("n1", "empty")
    n1 = {"metadata": {"name": "n1", "labels": {"a": "b"}}, "status": {}}
    n2 = {"metadata": {"name": "n2", "labels": {"c": "d"}}, "status": {}}
    body = web.post("/filter", json={"Pod": POD, "Nodes": {"items": [n1, n2]}}).get_json()
    assert body["Nodes"] == {"items": [n2]}
    assert body["FailedAndUnresolvableNodes"] == {"n1": "karpy: node empty"}
    assert body["Error"] == ""


def test_node_names_with_node_cache_leave_nodes_null(harness) -> None:
    web, _, _ = harness
    body = web.post("/filter", json={"Pod": POD, "Nodes": None, "NodeNames": ["n1"]}).get_json()
    assert body["Nodes"] is None and body["NodeNames"] == ["n1"]


@pytest.mark.parametrize(
    "args",
    [
        {"Pod": POD, "Nodes": ["n1"]},
        {"Pod": POD, "NodeNames": "n1"},
        {"Pod": POD, "NodeNames": [1, 2]},
        {"Pod": POD, "Nodes": {"items": "x"}},
        {"Pod": ["x"], "NodeNames": ["n1"]},
        [1, 2, 3],
    ],
)
def test_malformed_args_get_a_json_error_never_an_html_500(harness, args: Any) -> None:
    """Found 8: these raised inside the view before issue 13 and Flask answered an HTML 500."""
    web, _, _ = harness
    reply = web.post("/filter", json=args)
    assert reply.status_code == 200 and reply.get_json()["Error"].startswith("karpy: bad request")
    reply = web.post("/prioritize", json=args)
    assert reply.status_code == 200 and reply.is_json


def test_unknown_paths_and_methods_answer_json(harness) -> None:
    web, _, _ = harness
    for reply in (web.get("/nope"), web.get("/filter")):
        assert reply.status_code in (404, 405)
        assert reply.is_json and reply.get_json()["code"] == reply.status_code


def test_body_cap_refuses_oversized_requests_with_413(harness) -> None:
    """Found 8: the extender had no body cap before issue 13."""
    web, _, _ = harness
    limit = Settings().extender.max_body_bytes
    reply = web.post("/filter", data=b" " * (limit + 1), content_type="application/json")
    assert reply.status_code == 413 and reply.get_json()["code"] == 413


def test_healthz_turns_unhealthy_when_a_worker_misses_its_deadline() -> None:
    """Found 1: /healthz said ok while the lifecycle supervisor was dead."""
    now = [0.0]
    beats = Heartbeats(clock=lambda: now[0])
    tick = beats.register("lifecycle-supervisor", 300.0)
    web = create_app(Settings(), ClusterState(), lambda _pods: None, heartbeats=beats).test_client()
    assert web.get("/healthz").status_code == 200
    now[0] = 301.0
    reply = web.get("/healthz")
    assert reply.status_code == 503
    assert "lifecycle-supervisor" in reply.get_json()["late"][0]
    tick()
    assert web.get("/healthz").status_code == 200


def test_the_body_is_read_up_to_content_length_and_no_further() -> None:
    """PEP 3333: an app must not read past CONTENT_LENGTH. The body cap used to read up to the cap,
    which on werkzeug's server (the raw kept-alive connection as wsgi.input) blocked every /filter
    until the client gave up, so kube-scheduler (ignorable) placed pods on nodes the guard refused."""
    from extender.http.limits import BodyLimit

    seen: list[bytes] = []

    def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
        seen.append(environ["wsgi.input"].read())
        start_response("200 OK", [])
        return [b""]

    stream = io.BytesIO(b'{"a":1}POST /filter HTTP/1.1')  # the body, then the next request
    environ = {"CONTENT_LENGTH": "7", "wsgi.input": stream, "REQUEST_METHOD": "POST"}
    BodyLimit(app, max_body_bytes=1000)(environ, lambda *a: None)
    assert seen == [b'{"a":1}'] and stream.tell() == 7
