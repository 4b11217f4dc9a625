"""Webhook certificate rotation before expiry, without a restart, shared by every replica.

The self-signed pair (webhook/certs.py) lives in a Secret when there are several replicas. Each
replica's `Rotator.ensure()` (at start, then every `check_seconds` on a background thread):

1. reads the pair (creating it if absent: a racing replica's copy wins);
2. once 2/3 of the serving certificate's life has passed, replaces it with a fresh CA and serving
   certificate, with optimistic concurrency on the Secret (409: another replica rotated first, its
   pair is used). The new pair's `ca.crt` is a bundle of the new CA and every old CA not yet
   expired, so replicas still serving the old certificate stay trusted meanwhile;
3. when the pair differs from what it serves: patches the bundle into the webhook configurations
   first (so the API server trusts the new certificate before anyone serves it), then writes the
   files. gunicorn builds its TLS context for every new connection from `tls.pem` (certificate and
   key in one file, replaced atomically), so the next connection gets the new certificate.
"""

from __future__ import annotations

import base64
import datetime
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cryptography import x509

from extender.loops import run_forever
from webhook.certs import CA_KEY, CERT_KEY, KEY_KEY, ServingCert, generate

log = logging.getLogger("karpy.webhook")

#: Fraction of a certificate's life after which it is replaced.
ROTATE_AT = 2 / 3
#: Validity of a new self-signed CA and serving certificate.
VALIDITY_DAYS = 365.0
#: How often each replica looks at the Secret (a rotation elsewhere reaches it within this).
CHECK_SECONDS = 300.0
#: The file gunicorn serves: certificate then key, replaced atomically.
SERVING_PEM = "tls.pem"

Clock = Callable[[], datetime.datetime]


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


def rotation_due(cert_pem: bytes) -> datetime.datetime:
    cert = x509.load_pem_x509_certificate(cert_pem)
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * ROTATE_AT


def live_cas(bundle: bytes, now: datetime.datetime) -> bytes:
    """The CAs of a PEM bundle that have not expired, in order."""
    from cryptography.hazmat.primitives import serialization

    kept = [c for c in x509.load_pem_x509_certificates(bundle) if c.not_valid_after_utc > now]
    return b"".join(c.public_bytes(serialization.Encoding.PEM) for c in kept)


class Conflict(Exception):
    """Another replica changed the stored pair first."""


class Store(Protocol):
    def read(self) -> ServingCert | None: ...

    def create(self, pair: ServingCert) -> ServingCert: ...

    def replace(self, old: ServingCert, new: ServingCert) -> ServingCert: ...


class MemoryStore:
    """One replica, no Secret: the pair lives in this process."""

    def __init__(self) -> None:
        self._pair: ServingCert | None = None

    def read(self) -> ServingCert | None:
        return self._pair

    def create(self, pair: ServingCert) -> ServingCert:
        self._pair = pair
        return pair

    def replace(self, old: ServingCert, new: ServingCert) -> ServingCert:
        self._pair = new
        return new


class SecretStore:
    """The pair in Secret namespace/name (type kubernetes.io/tls plus ca.crt), resourceVersion-checked."""

    def __init__(self, core: Any, *, namespace: str, name: str) -> None:
        self.core, self.namespace, self.name = core, namespace, name
        self._versions: dict[bytes, str] = {}

    def read(self) -> ServingCert | None:
        from kubernetes.client.exceptions import ApiException

        try:
            secret = self.core.read_namespaced_secret(self.name, self.namespace)
        except ApiException as err:
            if err.status == 404:
                return None
            raise
        data = secret.data or {}
        pair = ServingCert(*(base64.b64decode(data[k]) for k in (CA_KEY, CERT_KEY, KEY_KEY)))
        self._versions[pair.cert_pem] = secret.metadata.resource_version
        return pair

    def _body(self, pair: ServingCert, version: str | None = None) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "namespace": self.namespace}
        if version:
            metadata["resourceVersion"] = version
        data = ((CA_KEY, pair.ca_pem), (CERT_KEY, pair.cert_pem), (KEY_KEY, pair.key_pem))
        return {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": "kubernetes.io/tls",
            "metadata": metadata,
            "data": {k: base64.b64encode(v).decode() for k, v in data},
        }

    def create(self, pair: ServingCert) -> ServingCert:
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.create_namespaced_secret(self.namespace, self._body(pair))
        except ApiException as err:
            if err.status != 409:
                raise
            raise Conflict(f"secret {self.namespace}/{self.name} created by another replica") from err
        return pair

    def replace(self, old: ServingCert, new: ServingCert) -> ServingCert:
        from kubernetes.client.exceptions import ApiException

        try:
            self.core.replace_namespaced_secret(
                self.name, self.namespace, self._body(new, self._versions.get(old.cert_pem))
            )
        except ApiException as err:
            if err.status != 409:
                raise
            raise Conflict(f"secret {self.namespace}/{self.name} rotated by another replica") from err
        return new


def read_or_create(
    store: Store, hosts: Sequence[str], *, days: float = VALIDITY_DAYS, now: datetime.datetime | None = None
) -> ServingCert:
    """The pair in `store`, created if absent (a racing replica's copy wins)."""
    pair = store.read()
    if pair is not None:
        return pair
    try:
        return store.create(generate(hosts, days=days, now=now))
    except Conflict:
        return _reread(store)


def _reread(store: Store) -> ServingCert:
    pair = store.read()
    if pair is None:
        raise Conflict("the certificate secret vanished while rotating")
    return pair


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        os.fchmod(fd, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@dataclass
class Rotator:
    store: Store
    hosts: Sequence[str]
    directory: Path
    #: Puts a CA bundle into the webhook configurations (certs.patch_ca_bundles); None = nothing to patch.
    publish_ca: Callable[[bytes], None] | None = None
    days: float = VALIDITY_DAYS
    clock: Clock = _now
    serving: ServingCert | None = None

    @property
    def serving_pem(self) -> Path:
        return self.directory / SERVING_PEM

    def ensure(self) -> ServingCert:
        """The pair to serve, rotated if due, published and written when it changed."""
        pair = read_or_create(self.store, self.hosts, days=self.days, now=self.clock())
        now = self.clock()
        if now >= rotation_due(pair.cert_pem):
            fresh = generate(self.hosts, days=self.days, now=now)
            rotated = ServingCert(fresh.ca_pem + live_cas(pair.ca_pem, now), fresh.cert_pem, fresh.key_pem)
            try:
                pair = self.store.replace(pair, rotated)
                log.info("Rotated the webhook certificate, valid until %s", _not_after(pair.cert_pem))
            except Conflict:
                pair = _reread(self.store)
        if pair != self.serving:
            if self.publish_ca is not None and (self.serving is None or pair.ca_pem != self.serving.ca_pem):
                self.publish_ca(pair.ca_pem)
            self._write(pair)
            if self.serving is not None:
                log.info("Serving the rotated webhook certificate, valid until %s", _not_after(pair.cert_pem))
            self.serving = pair
        return pair

    def _write(self, pair: ServingCert) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        for name, data in ((CA_KEY, pair.ca_pem), (CERT_KEY, pair.cert_pem), (KEY_KEY, pair.key_pem)):
            _write_atomically(self.directory / name, data)
        _write_atomically(self.serving_pem, pair.cert_pem + pair.key_pem)

    def run(self, stop: threading.Event, *, check_seconds: float = CHECK_SECONDS) -> None:
        def one_pass() -> float:
            self.ensure()
            return check_seconds

        run_forever(one_pass, stop, doing="checking the webhook certificate", logger=log)


def _not_after(cert_pem: bytes) -> str:
    return x509.load_pem_x509_certificate(cert_pem).not_valid_after_utc.strftime("%Y-%m-%dT%H:%M:%SZ")
