"""Launch templates: one per distinct (AMI, security groups, instance profile, user data, tags).

The name carries a hash of those inputs (`karpy-<cluster>-<hash>`), so equal inputs always map to
the same template and a changed input makes a new one; nothing is ever updated in place. Templates
are looked up, created if missing (a concurrent creator's AlreadyExists is fine) and remembered
for 60 s. Called by AWSCloudProvider.create once per distinct AMI in a launch.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shlex
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from botocore.exceptions import ClientError
from cachetools import TTLCache

from extender.api.provisioner import Taint
from extender.cloud.aws import errors
from extender.cloud.aws.selectors import CACHE_TTL_SECONDS

# IMDSv2 only, with a hop limit that lets pods on the node reach it through one extra hop.
METADATA_OPTIONS = {"HttpEndpoint": "enabled", "HttpTokens": "required", "HttpPutResponseHopLimit": 2}


def user_data(
    *,
    cluster: str,
    endpoint: str,
    labels: Mapping[str, str],
    taints: Sequence[Taint],
    container_runtime: str = "containerd",
) -> str:
    """The EKS bootstrap script that joins the node with the provisioner's labels and taints.

    Labels and taints are sorted so equal inputs give byte-equal scripts (and one template).
    """
    kubelet_args = []
    if labels:
        kubelet_args.append("--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items())))
    if taints:
        rendered = sorted(f"{t.key}={t.value}:{t.effect}" for t in taints)
        kubelet_args.append("--register-with-taints=" + ",".join(rendered))
    command = ["/etc/eks/bootstrap.sh", cluster, "--container-runtime", container_runtime]
    if endpoint:
        command += ["--apiserver-endpoint", endpoint]
    if kubelet_args:
        command += ["--kubelet-extra-args", " ".join(kubelet_args)]
    return "\n".join(
        [
            "#!/bin/bash -xe",
            "exec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1",
            " ".join(shlex.quote(part) for part in command),
            "",
        ]
    )


@dataclass(frozen=True)
class LaunchTemplateSpec:
    image_id: str
    security_group_ids: tuple[str, ...]
    instance_profile: str
    user_data: str
    tags: tuple[tuple[str, str], ...]

    @classmethod
    def of(
        cls,
        *,
        image_id: str,
        security_group_ids: Sequence[str],
        instance_profile: str,
        user_data: str,
        tags: Mapping[str, str],
    ) -> LaunchTemplateSpec:
        return cls(
            image_id,
            tuple(sorted(security_group_ids)),
            instance_profile,
            user_data,
            tuple(sorted(tags.items())),
        )

    def name(self, cluster: str) -> str:
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode()).hexdigest()
        return f"karpy-{cluster}-{digest[:16]}"

    def template_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "ImageId": self.image_id,
            "SecurityGroupIds": list(self.security_group_ids),
            "UserData": base64.b64encode(self.user_data.encode()).decode(),
            "MetadataOptions": dict(METADATA_OPTIONS),
        }
        if self.instance_profile:
            data["IamInstanceProfile"] = {"Name": self.instance_profile}
        return data


class LaunchTemplateProvider:
    def __init__(self, ec2: Any, *, cluster: str, timer: Callable[[], float] = time.monotonic) -> None:
        self._ec2 = ec2
        self._cluster = cluster
        self._known: TTLCache[str, bool] = TTLCache(maxsize=256, ttl=CACHE_TTL_SECONDS, timer=timer)
        self._lock = threading.Lock()

    def ensure(self, spec: LaunchTemplateSpec) -> str:
        """The name of a launch template for `spec`, creating it if EC2 does not have it."""
        name = spec.name(self._cluster)
        with self._lock:
            if name not in self._known:
                if not self._exists(name):
                    self._create(name, spec)
                self._known[name] = True
        return name

    def _exists(self, name: str) -> bool:
        with errors.translated(f"describing launch template {name}"):
            try:
                self._ec2.describe_launch_templates(LaunchTemplateNames=[name])
            except ClientError as err:
                if errors.is_not_found(err):
                    return False
                raise
        return True

    def _create(self, name: str, spec: LaunchTemplateSpec) -> None:
        tags = [{"Key": key, "Value": value} for key, value in spec.tags]
        with errors.translated(f"creating launch template {name}"):
            try:
                self._ec2.create_launch_template(
                    LaunchTemplateName=name,
                    LaunchTemplateData=spec.template_data(),
                    TagSpecifications=[{"ResourceType": "launch-template", "Tags": tags}] if tags else [],
                )
            except ClientError as err:
                # Another controller replica (or a restart racing its predecessor) created it first.
                if not errors.is_already_exists(err):
                    raise
