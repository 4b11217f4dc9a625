"""`karpy webhook`: serve Provisioner defaulting/validation and pod defaulting over TLS with gunicorn.

TLS comes from --tls-cert/--tls-key, or --self-signed (a CA and serving cert made at start, shared
through --cert-secret when set, its CA patched into the named webhook configurations), or
--insecure-http for local tests only.
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from extender.cli.main import UsageError
from extender.settings import Settings, from_env

log = logging.getLogger("karpy.webhook")


def local_command(*, port: int, cert_dir: Path | str, extra: Sequence[str] = ()) -> list[str]:
    """The command line tests and benchmarks use: this webhook on 127.0.0.1 with a self-signed cert."""
    return [
        sys.executable,
        "-m",
        "extender.cli.main",
        "webhook",
        f"--bind=127.0.0.1:{port}",
        "--self-signed",
        "--san=127.0.0.1",
        f"--cert-dir={cert_dir}",
        *extra,
    ]


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("webhook", help="serve the admission webhook (Provisioners and pod defaulting)")
    p.add_argument("--bind", default="0.0.0.0:8443", help="HOST:PORT to serve on (default %(default)s)")
    p.add_argument("--tls-cert", default="", help="PEM serving certificate")
    p.add_argument("--tls-key", default="", help="PEM private key of --tls-cert")
    p.add_argument("--self-signed", action="store_true", help="create a CA and serving certificate at start")
    p.add_argument("--insecure-http", action="store_true", help="plain HTTP; only for local tests")
    p.add_argument("--service", default="karpy-webhook", help="Service name put in the certificate's SANs")
    p.add_argument("--san", action="append", default=[], help="extra SAN (DNS name or IP); repeatable")
    p.add_argument("--cert-dir", default="", help="where --self-signed writes ca.crt/tls.crt/tls.key")
    p.add_argument("--cert-secret", default="", help="Secret in --namespace sharing the self-signed pair")
    p.add_argument(
        "--cert-days",
        type=float,
        default=365.0,
        help="validity of a self-signed pair; it is rotated at 2/3 of it (default %(default)s)",
    )
    p.add_argument(
        "--cert-check-seconds",
        type=float,
        default=300.0,
        help="how often the self-signed pair is checked for rotation (default %(default)s)",
    )
    p.add_argument(
        "--patch-mutating",
        action="append",
        default=[],
        metavar="NAME",
        help="MutatingWebhookConfiguration to receive the self-signed caBundle; repeatable",
    )
    p.add_argument(
        "--patch-validating",
        action="append",
        default=[],
        metavar="NAME",
        help="ValidatingWebhookConfiguration to receive the self-signed caBundle; repeatable",
    )
    p.add_argument(
        "--cluster-name", default=None, help="default provider.cluster.name (env KARPY_CLUSTER_NAME)"
    )
    p.add_argument("--cluster-endpoint", default=None, help="default provider.cluster.endpoint")
    p.add_argument("--namespace", default=None, help="karpy's namespace; its pods are never mutated")
    p.add_argument("--kubeconfig", default=None, help="kubeconfig; default in-cluster, then ~/.kube/config")
    p.add_argument(
        "--default-instance-profile", default="", help="instanceProfile for Provisioners without one"
    )
    p.add_argument("--default-provisioner", default="default", help="used when no Provisioner is known")
    p.add_argument("--provisioner-cache-seconds", type=float, default=5.0)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--threads", type=int, default=128, help="request threads (slow clients hold one each)")
    p.set_defaults(func=run)


def _settings(args: argparse.Namespace) -> Settings:
    settings = from_env()
    for flag, attr in (
        ("cluster_name", "cluster_name"),
        ("cluster_endpoint", "cluster_endpoint"),
        ("namespace", "namespace"),
        ("kubeconfig", "kubeconfig"),
    ):
        if getattr(args, flag) is not None:
            setattr(settings, attr, getattr(args, flag))
    return settings


def _tls(args: argparse.Namespace, settings: Settings) -> tuple[str, str]:
    modes = [bool(args.tls_cert or args.tls_key), args.self_signed, args.insecure_http]
    if sum(modes) != 1:
        raise UsageError("choose exactly one of --tls-cert/--tls-key, --self-signed, --insecure-http")
    if args.insecure_http:
        return "", ""
    if not args.self_signed:
        if not (args.tls_cert and args.tls_key):
            raise UsageError("--tls-cert and --tls-key go together")
        for path in (args.tls_cert, args.tls_key):
            if not Path(path).is_file():
                raise UsageError(f"no such file: {path}")
        return args.tls_cert, args.tls_key
    rotator = _rotator(args, settings)
    rotator.ensure()
    # gunicorn's master keeps this thread; workers load tls.pem for every new connection.
    threading.Thread(
        target=rotator.run,
        args=(threading.Event(),),
        kwargs={"check_seconds": args.cert_check_seconds},
        name="cert-rotation",
        daemon=True,
    ).start()
    return str(rotator.serving_pem), str(rotator.serving_pem)


def _rotator(args: argparse.Namespace, settings: Settings) -> Any:
    """The self-signed pair's keeper: in the --cert-secret Secret (shared) or in memory."""
    from webhook import certs, rotation

    if args.cert_days <= 0 or args.cert_check_seconds <= 0:
        raise UsageError("--cert-days and --cert-check-seconds must be positive")
    hosts = [*certs.service_hosts(args.service, settings.namespace), *args.san]
    kube: Any = None
    if args.cert_secret or args.patch_mutating or args.patch_validating:
        from extender.cluster.client import load

        kube = load(settings)
    store: rotation.Store = rotation.MemoryStore()
    if args.cert_secret:
        from kubernetes import client

        store = rotation.SecretStore(
            client.CoreV1Api(kube), namespace=settings.namespace, name=args.cert_secret
        )
    publish = None
    if args.patch_mutating or args.patch_validating:
        targets = ", ".join([*args.patch_mutating, *args.patch_validating])

        def publish(ca_pem: bytes) -> None:
            certs.patch_ca_bundles(
                kube, ca_pem, mutating=args.patch_mutating, validating=args.patch_validating
            )
            log.info("Patched caBundle into %s", targets)

    directory = Path(args.cert_dir or tempfile.mkdtemp(prefix="karpy-webhook-"))
    return rotation.Rotator(store, hosts, directory, publish_ca=publish, days=args.cert_days)


def run(args: argparse.Namespace) -> int:
    if ":" not in args.bind:
        raise UsageError(f"--bind wants HOST:PORT, got {args.bind!r}")
    if args.workers < 1 or args.threads < 1:
        raise UsageError("--workers and --threads must be at least 1")
    settings = _settings(args)
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    certfile, keyfile = _tls(args, settings)

    from extender.serve import serve
    from webhook.app import create_app
    from webhook.config import WebhookConfig
    from webhook.gunicorn_conf import options

    config = WebhookConfig.from_settings(
        settings,
        default_provisioner=args.default_provisioner,
        # The flag, else KARPY_AWS_DEFAULT_INSTANCE_PROFILE: the controller's setting, one for both.
        default_instance_profile=args.default_instance_profile or settings.aws.default_instance_profile,
        provisioner_cache_seconds=args.provisioner_cache_seconds,
    )
    log.info("Serving admission webhook on %s (%s)", args.bind, "https" if certfile else "http")
    serve(
        lambda: create_app(config),
        options(
            bind=args.bind, certfile=certfile, keyfile=keyfile, workers=args.workers, threads=args.threads
        ),
    )
    return 0
