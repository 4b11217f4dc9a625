"""API-server errors become typed ClusterErrors with the step named; only transient ones retry."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.exceptions import ApiException

from extender.cluster import errors


def _api_error(status: int, reason: str = "", message: str = "boom") -> ApiException:
    err = ApiException(status=status, reason="Reason")
    err.body = json.dumps({"kind": "Status", "reason": reason, "message": message})
    return err


@pytest.mark.parametrize(
    ("status", "reason", "kind"),
    [
        (404, "NotFound", errors.NotFound),
        (409, "Conflict", errors.Conflict),
        (409, "AlreadyExists", errors.AlreadyExists),
        (422, "Invalid", errors.Invalid),
        (429, "TooManyRequests", errors.Throttled),
        (500, "InternalError", errors.Unavailable),
        (503, "ServiceUnavailable", errors.Unavailable),
        (403, "Forbidden", errors.ClusterError),
    ],
)
def test_status_maps_to_its_error(status: int, reason: str, kind: type) -> None:
    err = errors.translate(_api_error(status, reason), "patching node n1")
    assert type(err) is kind
    assert str(err).startswith(f"patching node n1: {status} boom")
    assert err.status == status and err.reason == reason


def test_translated_reraises_with_the_cause_kept() -> None:
    original = _api_error(404, "NotFound")
    with pytest.raises(errors.NotFound) as caught, errors.translated("deleting node n1"):
        raise original
    assert caught.value.__cause__ is original


def test_a_non_json_body_still_translates() -> None:
    err = ApiException(status=502, reason="Bad Gateway")
    err.body = "<html>bad gateway</html>"
    got = errors.translate(err, "listing pods")
    assert isinstance(got, errors.Unavailable) and "Bad Gateway" in str(got)


def test_only_throttling_and_server_errors_are_transient() -> None:
    assert errors.is_transient(errors.translate(_api_error(429), ""))
    assert errors.is_transient(_api_error(500))
    assert errors.is_transient(ConnectionResetError())
    assert not errors.is_transient(errors.translate(_api_error(409, "Conflict"), ""))
    assert not errors.is_transient(ValueError())
