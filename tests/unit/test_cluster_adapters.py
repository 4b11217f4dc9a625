"""The cluster adapters answer in typed errors (or the documented None/False), never ApiException."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import MaxRetryError

from extender.cluster import bind, errors, eviction, leases, nodes
from extender.lifecycle import nodepatch


def api_error(status: int, reason: str = "", message: str = "boom") -> ApiException:
    err = ApiException(status=status, reason="Reason")
    err.body = json.dumps({"kind": "Status", "reason": reason, "message": message})
    return err


class Api:
    """A generated API class whose every method raises `error`."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    def __call__(self, _kube: Any = None) -> Api:
        return self

    def __getattr__(self, _name: str) -> Any:
        def method(*_args: Any, **_kwargs: Any) -> Any:
            raise self.error

        return method


def failing(monkeypatch: pytest.MonkeyPatch, module: Any, api: str, error: BaseException) -> None:
    monkeypatch.setattr(module.client, api, Api(error))


def test_a_bind_answered_409_is_already_bound_a_conflict_with_its_status(monkeypatch) -> None:
    failing(monkeypatch, bind, "CoreV1Api", api_error(409, "Conflict", "pod p is already assigned to node n"))
    with pytest.raises(bind.AlreadyBound) as caught:
        bind.bind(None, namespace="ns", name="p", uid="u", node="n2")
    assert isinstance(caught.value, errors.Conflict) and caught.value.status == 409
    assert "binding pod ns/p to node n2" in str(caught.value) and "already assigned" in str(caught.value)


def test_a_bind_the_apiserver_fails_is_unavailable(monkeypatch) -> None:
    failing(monkeypatch, bind, "CoreV1Api", api_error(503, "ServiceUnavailable"))
    with pytest.raises(errors.Unavailable):
        bind.bind(None, namespace="ns", name="p", uid="", node="n")


def test_no_connection_at_all_is_unavailable_with_status_0(monkeypatch) -> None:
    failing(monkeypatch, nodes, "CoreV1Api", MaxRetryError(None, "/api/v1/nodes/n1", "refused"))  # type: ignore[arg-type]
    with pytest.raises(errors.Unavailable) as caught:
        nodes.read_node(None, "n1")
    assert caught.value.status == 0 and "reading node n1" in str(caught.value)


def test_node_reads_and_creates_answer_none_and_false_for_gone_and_existing(monkeypatch) -> None:
    failing(monkeypatch, nodes, "CoreV1Api", api_error(404, "NotFound"))
    assert nodes.read_node(None, "n1") is None
    failing(monkeypatch, nodes, "CoreV1Api", api_error(409, "AlreadyExists"))
    assert nodes.create_node(None, {"metadata": {"name": "n1"}}) is False
    failing(monkeypatch, nodes, "CoreV1Api", api_error(422, "Invalid"))
    with pytest.raises(errors.Invalid):
        nodes.create_node(None, {"metadata": {"name": "n1"}})


def test_a_lease_someone_else_wrote_first_is_none(monkeypatch) -> None:
    failing(monkeypatch, leases, "CoordinationV1Api", api_error(409, "AlreadyExists"))
    assert leases.create(None, "karpy", "karpy-controller", {}) is None
    failing(monkeypatch, leases, "CoordinationV1Api", api_error(429, "TooManyRequests"))
    with pytest.raises(errors.Throttled):
        leases.get(None, "karpy", "karpy-controller")


@pytest.mark.parametrize(
    ("status", "reason", "outcome", "message"),
    [
        (404, "NotFound", eviction.Outcome.GONE, "gone"),
        (409, "Conflict", eviction.Outcome.GONE, "replaced"),
        (429, "TooManyRequests", eviction.Outcome.PDB_VIOLATION, "budget"),
        (500, "InternalError", eviction.Outcome.PDB_MISCONFIGURED, "more than one PDB"),
        (403, "Forbidden", eviction.Outcome.ERROR, "403 no"),
    ],
)
def test_eviction_outcomes(monkeypatch, status: int, reason: str, outcome: Any, message: str) -> None:
    text = message.removeprefix("403 ")
    failing(monkeypatch, eviction, "CoreV1Api", api_error(status, reason, text))
    assert eviction.evict(None, "ns", "p", "uid") == (outcome, message)


class Answers:
    """A generated API class whose calls answer from a script: an exception is raised, else returned."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)
        self.calls = 0

    def __call__(self, _kube: Any = None) -> Answers:
        return self

    def __getattr__(self, _name: str) -> Any:
        def method(*_args: Any, **_kwargs: Any) -> Any:
            self.calls += 1
            answer = self.answers.pop(0)
            if isinstance(answer, BaseException):
                raise answer
            return answer

        return method


class Response:
    data = b"{}"

    def release_conn(self) -> None:
        pass


def test_a_node_create_the_apiserver_throttles_or_fails_is_retried(monkeypatch) -> None:
    # Unretried, one 503 on a Node create raised out of the launch group's task: its instances
    # without Nodes were left to garbage collection and their pods waited for a second launch
    # (found reading the chaos run's failures, issue 13).
    api = Answers(api_error(429, "TooManyRequests"), api_error(503, "ServiceUnavailable"), Response())
    monkeypatch.setattr(nodes.client, "CoreV1Api", api)
    assert nodes.create_node(None, {"metadata": {"name": "n1"}}) is True
    assert api.calls == 3


def test_a_node_create_whose_answer_was_lost_finds_its_node_on_the_retry(monkeypatch) -> None:
    # 504 after etcd committed: the retry meets the Node the first attempt wrote.
    api = Answers(api_error(504, "Timeout"), api_error(409, "AlreadyExists"))
    monkeypatch.setattr(nodes.client, "CoreV1Api", api)
    assert nodes.create_node(None, {"metadata": {"name": "n1"}}) is False
    assert api.calls == 2


def test_the_lifecycles_node_reads_answer_in_typed_errors_naming_the_step(monkeypatch) -> None:
    # The chaos run (issue 13) logged these failures as the client's multi-line ApiException dump
    # ("(503)\nReason: ...\nHTTP response headers: ..."), without saying what was being read.
    failing(monkeypatch, nodepatch, "CoreV1Api", api_error(404, "NotFound"))
    assert nodepatch.get_node(None, "n1") is None
    failing(monkeypatch, nodepatch, "CoreV1Api", api_error(503, "ServiceUnavailable", "unavailable"))
    with pytest.raises(errors.Unavailable, match="reading node n1: 503 unavailable"):
        nodepatch.get_node(None, "n1")
    with pytest.raises(errors.Unavailable, match="listing pods on node n1: 503 unavailable"):
        nodepatch.pods_on_node(None, "n1")
