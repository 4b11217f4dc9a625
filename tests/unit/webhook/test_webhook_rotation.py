"""Webhook certificate rotation before expiry, shared across replicas, without a restart (issue 13,
Found 8: the certificate was valid 10 years and never rotated; these tests did not run before,
webhook/rotation.py did not exist)."""

from __future__ import annotations

import datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from cryptography import x509
from kubernetes.client.exceptions import ApiException

from webhook.certs import ServingCert, generate
from webhook.rotation import Conflict, MemoryStore, Rotator, SecretStore, live_cas, rotation_due

T0 = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
HOSTS = ["karpy-webhook.karpy.svc", "127.0.0.1"]
ROOT = Path(__file__).resolve().parents[3]


class FakeCore:
    """One Secret with a resourceVersion; a replace with a stale version is a 409."""

    def __init__(self) -> None:
        self.secret: dict[str, Any] | None = None
        self.version = 0

    def read_namespaced_secret(self, _name: str, _ns: str) -> Any:
        if self.secret is None:
            raise ApiException(status=404)
        return SimpleNamespace(
            data=self.secret["data"], metadata=SimpleNamespace(resource_version=str(self.version))
        )

    def create_namespaced_secret(self, _ns: str, body: dict[str, Any]) -> None:
        if self.secret is not None:
            raise ApiException(status=409)
        self.secret, self.version = body, 1

    def replace_namespaced_secret(self, _name: str, _ns: str, body: dict[str, Any]) -> None:
        if body["metadata"].get("resourceVersion") != str(self.version):
            raise ApiException(status=409)
        self.secret, self.version = body, self.version + 1


def _cas(bundle: bytes) -> list[x509.Certificate]:
    return x509.load_pem_x509_certificates(bundle)


def _replica(
    core: FakeCore, tmp_path: Path, name: str, clock: list[datetime.datetime], published: list[bytes]
):
    store = SecretStore(core, namespace="karpy", name="karpy-webhook-cert")
    return Rotator(store, HOSTS, tmp_path / name, publish_ca=published.append, clock=lambda: clock[0])


def test_replicas_share_one_pair_and_rotate_it_at_two_thirds_of_its_life(tmp_path: Path) -> None:
    core, clock = FakeCore(), [T0]
    published_a: list[bytes] = []
    published_b: list[bytes] = []
    a = _replica(core, tmp_path, "a", clock, published_a)
    b = _replica(core, tmp_path, "b", clock, published_b)
    first = a.ensure()
    assert b.ensure() == first and published_a == published_b == [first.ca_pem]
    assert (tmp_path / "a" / "tls.pem").read_bytes() == first.cert_pem + first.key_pem

    clock[0] = T0 + datetime.timedelta(days=200)  # before 2/3 of 365 days: nothing changes
    assert a.ensure() == first and b.ensure() == first and len(published_a) == 1

    clock[0] = T0 + datetime.timedelta(days=250)
    rotated = a.ensure()
    assert rotated != first and core.version == 2
    assert b.ensure() == rotated  # the other replica serves what the first one stored, no second rotation
    assert core.version == 2
    assert (tmp_path / "b" / "tls.pem").read_bytes() == rotated.cert_pem + rotated.key_pem
    new_ca, old_ca = _cas(rotated.ca_pem)
    assert old_ca == _cas(first.ca_pem)[0]  # replicas still serving the old certificate stay trusted
    x509.load_pem_x509_certificate(rotated.cert_pem).verify_directly_issued_by(new_ca)
    assert published_a[-1] == published_b[-1] == rotated.ca_pem
    assert rotation_due(rotated.cert_pem) > clock[0] + datetime.timedelta(days=200)

    clock[0] = T0 + datetime.timedelta(days=250 + 250)  # the first CA has expired by the next rotation
    assert len(_cas(a.ensure().ca_pem)) == 2 and _cas(a.serving.ca_pem)[1] == new_ca  # type: ignore[union-attr]


def test_a_replica_losing_the_rotation_race_serves_the_winners_pair(tmp_path: Path) -> None:
    core = FakeCore()
    winner = SecretStore(core, namespace="karpy", name="s")
    loser = SecretStore(core, namespace="karpy", name="s")
    old = winner.create(generate(HOSTS, now=T0))
    assert loser.read() == old and winner.read() == old
    fresh = generate(HOSTS, now=T0)
    winner.replace(old, fresh)
    with pytest.raises(Conflict):
        loser.replace(old, generate(HOSTS, now=T0))
    assert loser.read() == ServingCert(fresh.ca_pem, fresh.cert_pem, fresh.key_pem)


def test_live_cas_drops_expired_ones() -> None:
    old = generate(HOSTS, days=1, now=T0)
    new = generate(HOSTS, days=365, now=T0)
    bundle = new.ca_pem + old.ca_pem
    assert live_cas(bundle, T0 + datetime.timedelta(hours=1)) == bundle
    assert live_cas(bundle, T0 + datetime.timedelta(days=2)) == new.ca_pem


def test_memory_store_rotates_a_single_replica(tmp_path: Path) -> None:
    clock = [T0]
    rotator = Rotator(MemoryStore(), HOSTS, tmp_path, clock=lambda: clock[0], days=30)
    first = rotator.ensure()
    clock[0] = T0 + datetime.timedelta(days=21)
    assert rotator.ensure() != first
