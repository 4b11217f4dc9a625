"""EKS-optimized AMI ids from SSM, by AMI family (amd64, arm64, gpu), cached 60 s.

Parameter layout, as AWS publishes it under `/aws/service/eks/optimized-ami` (the prefix is
settings.aws.ssm_prefix so tests can mirror it where moto allows writes):
`<prefix>/<k8s major.minor>/amazon-linux-2[-arm64|-gpu]/recommended/image_id`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from cachetools import TTLCache

from extender.cloud.aws import errors
from extender.cloud.aws.selectors import CACHE_TTL_SECONDS
from extender.scheduling.instancetypes import InstanceType

SSM_SEGMENTS = {"amd64": "amazon-linux-2", "arm64": "amazon-linux-2-arm64", "gpu": "amazon-linux-2-gpu"}


def ami_family(instance_type: InstanceType) -> str:
    # The accelerated AMI is x86_64 only: an arm64 GPU type (g5g) still needs the arm64 image to boot.
    if instance_type.arch == "arm64":
        return "arm64"
    return "gpu" if instance_type.has_gpu else "amd64"


def ssm_path(prefix: str, kubernetes_version: str, family: str) -> str:
    return f"{prefix.rstrip('/')}/{kubernetes_version}/{SSM_SEGMENTS[family]}/recommended/image_id"


class AMIProvider:
    def __init__(
        self,
        ssm: Any,
        *,
        prefix: str,
        kubernetes_version: Callable[[], str],
        timer: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ssm = ssm
        self._prefix = prefix
        self._kubernetes_version = kubernetes_version
        self._cache: TTLCache[str, str] = TTLCache(maxsize=32, ttl=CACHE_TTL_SECONDS, timer=timer)
        self._lock = threading.Lock()

    def image_id(self, family: str) -> str:
        path = ssm_path(self._prefix, self._kubernetes_version(), family)
        with self._lock:
            if path not in self._cache:
                with errors.translated(f"getting AMI from SSM parameter {path}"):
                    self._cache[path] = self._ssm.get_parameter(Name=path)["Parameter"]["Value"]
            return self._cache[path]
