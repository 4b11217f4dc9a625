"""WebhookConfig: everything the admission app needs, built once from flags/env and passed to create_app."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from extender.settings import Settings


@dataclass(frozen=True)
class WebhookConfig:
    #: Cluster name used for provider.cluster and the default subnet/security-group selectors.
    cluster_name: str = "karpy"
    #: Filled into provider.cluster.endpoint when the webhook creates provider.cluster.
    cluster_endpoint: str = ""
    #: provider.instanceProfile for Provisioners with neither it nor a launchTemplate; "" = required.
    default_instance_profile: str = ""
    #: karpy's own namespace; its pods are never mutated (the webhook must not gate itself).
    namespace: str = "karpy"
    #: Namespaces whose pods are never mutated, on top of `namespace`.
    excluded_namespaces: frozenset[str] = field(default_factory=lambda: frozenset({"kube-system"}))
    #: Provisioner name used when no Provisioner is known (none exist, or the API server is unreachable).
    default_provisioner: str = "default"
    #: Seconds the list of Provisioners is reused before the API server is asked again.
    provisioner_cache_seconds: float = 5.0
    #: Seconds a failed list is remembered: an unreachable API server costs one timeout, not one per pod.
    provisioner_failure_seconds: float = 5.0
    #: Timeout for listing Provisioners; kept well under the pod webhook's timeoutSeconds.
    provisioner_list_timeout: float = 1.0
    #: Kubeconfig for reading Provisioners; "" = in-cluster, then ~/.kube/config.
    kubeconfig: str = ""
    #: Whether to read Provisioners from the API server at all (unit tests pass their own source).
    read_provisioners: bool = True
    #: Request bodies above this many bytes are refused with HTTP 400. kube-apiserver stores objects
    #: of at most ~1.5 MiB (etcd's request limit) and an UPDATE's review carries the object twice
    #: (object, oldObject), so 4 MiB admits every real review; a review of this size is answered
    #: well within 1 s (benchmarks/admission.py).
    max_body_bytes: int = 4 * 1024 * 1024

    def skips_namespace(self, namespace: str) -> bool:
        return namespace == self.namespace or namespace in self.excluded_namespaces

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: object) -> WebhookConfig:
        base = cls(
            cluster_name=settings.cluster_name,
            cluster_endpoint=settings.cluster_endpoint,
            namespace=settings.namespace,
            kubeconfig=settings.kubeconfig,
        )
        return dataclasses.replace(base, **overrides)  # type: ignore[arg-type]
