"""`karpy controller`: the extender, provisioning and lifecycle in one process (see extender/main.py).

Flags override KARPY_* environment variables (extender.settings.from_env), which override defaults.
"""

from __future__ import annotations

import argparse
import logging
import ssl
from typing import Any

from extender.cli.main import UsageError
from extender.settings import Settings, from_env

# Karpenter's zap console layout: time, level, logger, message.
LOG_FORMAT = "%(asctime)s\t%(levelname)s\t%(name)s\t%(message)s"

#: flag -> (settings group or "", field)
FLAGS: dict[str, tuple[str, str]] = {
    "kubeconfig": ("", "kubeconfig"),
    "cluster_name": ("", "cluster_name"),
    "cluster_endpoint": ("", "cluster_endpoint"),
    "log_level": ("", "log_level"),
    "aws_region": ("aws", "region"),
    "aws_endpoint_url": ("aws", "endpoint_url"),
    "cluster_ca_bundle": ("", "cluster_ca_bundle"),
    "cluster_cidr": ("", "cluster_cidr"),
    "cluster_dns": ("", "cluster_dns"),
    "ssm_root": ("aws", "ssm_root"),
    "price_file": ("aws", "price_file"),
    "bind": ("extender", "bind"),
    "metrics_bind": ("extender", "metrics_bind"),
    "tls_cert": ("extender", "tls_cert_file"),
    "tls_key": ("extender", "tls_key_file"),
    "batch_idle_seconds": ("batching", "idle_seconds"),
    "batch_max_seconds": ("batching", "max_seconds"),
    "batch_max_pods": ("batching", "max_pods"),
    "leader_elect": ("leader_election", "enabled"),
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("controller", help="run the scheduler extender, provisioning and node lifecycle")
    p.add_argument("--kubeconfig", help="kubeconfig; default in-cluster, then ~/.kube/config")
    p.add_argument("--cluster-name", help="cluster name in instance tags and selectors")
    p.add_argument("--cluster-endpoint", help="API server URL nodes join")
    p.add_argument("--log-level", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    p.add_argument("--aws-region")
    p.add_argument("--aws-endpoint-url", help="EC2/SSM endpoint (moto in tests)")
    p.add_argument("--cluster-ca-bundle", help="base64 PEM of the cluster CA nodes trust")
    p.add_argument("--cluster-cidr", help="service CIDR of the cluster (AL2023 nodes need it)")
    p.add_argument("--cluster-dns", help="kubelet clusterDNS when a Provisioner names none")
    p.add_argument("--ssm-root", help="where AWS's public SSM parameters (AMI ids) are read")
    p.add_argument("--price-file", help="on-demand/spot price JSON consulted before the estimate")
    p.add_argument("--bind", help="HOST:PORT of the extender (default 127.0.0.1:8088)")
    p.add_argument("--metrics-bind", help="HOST:PORT serving only /metrics")
    p.add_argument("--tls-cert", help="PEM certificate: serve the extender over HTTPS (with --tls-key)")
    p.add_argument("--tls-key", help="PEM private key of --tls-cert")
    p.add_argument("--batch-idle-seconds", type=float)
    p.add_argument("--batch-max-seconds", type=float)
    p.add_argument("--batch-max-pods", type=int)
    p.add_argument("--leader-elect", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument(
        "--threads", type=int, default=128, help="extender request threads (slow clients hold one each)"
    )
    p.set_defaults(func=run)


def settings_from(args: argparse.Namespace, env: dict[str, str] | None = None) -> Settings:
    settings = from_env(env)
    for flag, (group, name) in FLAGS.items():
        value: Any = getattr(args, flag, None)
        if value is None:
            continue
        setattr(getattr(settings, group) if group else settings, name, value)
    if settings.batching.idle_seconds <= 0 or settings.batching.max_seconds < settings.batching.idle_seconds:
        raise UsageError("batching: need 0 < idle seconds <= max seconds")
    if settings.batching.max_pods < 1:
        raise UsageError("batching: max pods must be at least 1")
    if settings.aws.reserved_enis < 0:
        raise UsageError("aws: reserved ENIs (KARPY_AWS_RESERVED_ENIS) cannot be negative")
    _check_tls(settings)
    return settings


def _check_tls(settings: Settings) -> None:
    """Both files or neither, and readable now: a typo must stop start-up, not every handshake."""
    ext = settings.extender
    if bool(ext.tls_cert_file) != bool(ext.tls_key_file):
        raise UsageError("extender TLS: set both the certificate and the key file, or neither")
    if not ext.tls_cert_file:
        return
    cert, key = ext.tls_cert_file, ext.tls_key_file
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as err:
        raise UsageError(f"extender TLS: cannot load {cert} / {key}: {err}") from err


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    logging.basicConfig(level=settings.log_level, format=LOG_FORMAT)
    from extender.main import run as run_controller

    run_controller(settings, threads=args.threads)
    return 0
