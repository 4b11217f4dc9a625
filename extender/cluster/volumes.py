"""Volume topology: which nodes a pod's persistent volumes allow, as kube-scheduler's VolumeBinding
and VolumeZone plugins see it (Karpenter 0.5 resolved it the same way, `volumetopology.go`).

- A bound claim: its PersistentVolume's `spec.nodeAffinity.required.nodeSelectorTerms`.
- An unbound claim whose StorageClass binds `WaitForFirstConsumer`: the class's `allowedTopologies`
  (none = anywhere); the volume is then created where the pod lands.
- An unbound claim with `Immediate` binding, a missing claim or class, a claim or volume being
  deleted, a Lost claim, or a claim naming its volume before the bind is marked complete
  (`pv.kubernetes.io/bind-completed`): unresolved. The pod stays unmodelled (reported with an Event, never
  bound) until that settles.

`load` lists claims, volumes and classes once per batch, only when a pod has claims.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubernetes import client

from extender.api import labels as wk
from extender.api.pod import RequiredTerms, VolumeTopology
from extender.api.provisioner import Requirement
from extender.cluster.watch import list_objects

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
#: CSI drivers' zone keys: labels their node plugin adds once the node runs, the zone all the same.
CSI_ZONE_KEYS = frozenset({"topology.ebs.csi.aws.com/zone"})


@dataclass
class Volumes:
    #: namespace/name -> PersistentVolumeClaim
    claims: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    volumes: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    classes: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    def topology(self, pod: Mapping[str, Any]) -> VolumeTopology:
        """Claim name -> ORed node terms, for the claims of `pod` that can be resolved."""
        result: dict[str, RequiredTerms] = {}
        for claim, pvc, template in self._claims(pod):
            terms = self._claim(pvc, template)
            if terms is not None:
                result[claim] = terms
        return result

    def awaiting_provisioning(self, pod: Mapping[str, Any]) -> list[str]:
        """Claims of `pod` a WaitForFirstConsumer class has yet to provision. kube-scheduler's
        VolumeBinding PreBind names the chosen node on such a claim and waits for its volume before
        binding; karpy's bind would skip that, so these pods are reported, not bound."""
        waiting = []
        for claim, pvc, template in self._claims(pod):
            spec = ((pvc.get("spec") or {}) if pvc is not None else template) or {}
            if not spec.get("volumeName") and self._delayed(spec.get("storageClassName")):
                waiting.append(claim)
        return waiting

    def csi_volumes(self, pod: Mapping[str, Any]) -> tuple[tuple[str, int], ...]:
        """(CSI driver, distinct volumes) of the pod's claims, as kube-scheduler's NodeVolumeLimits
        counts them: a bound claim by its PersistentVolume's CSI driver, an unbound one by its class's
        provisioner. In-tree and non-CSI volumes (NFS, hostPath) count against no limit."""
        counts: dict[str, int] = {}
        seen: set[str] = set()
        for claim, pvc, template in self._claims(pod):
            if claim in seen:
                continue
            seen.add(claim)
            if driver := self._driver(pvc, template):
                counts[driver] = counts.get(driver, 0) + 1
        return tuple(sorted(counts.items()))

    def _driver(self, pvc: Mapping[str, Any] | None, template: Mapping[str, Any] | None) -> str | None:
        spec = ((pvc.get("spec") or {}) if pvc is not None else template) or {}
        if volume_name := spec.get("volumeName"):
            pv = self.volumes.get(str(volume_name)) or {}
            driver = ((pv.get("spec") or {}).get("csi") or {}).get("driver")
            return str(driver) if driver else None
        provisioner = str((self._class(spec.get("storageClassName")) or {}).get("provisioner") or "")
        return provisioner if provisioner and not provisioner.startswith("kubernetes.io/") else None

    def _claims(
        self, pod: Mapping[str, Any]
    ) -> Iterator[tuple[str, Mapping[str, Any] | None, Mapping[str, Any] | None]]:
        """(claim name, its PersistentVolumeClaim if it exists, the ephemeral volume's claim
        template) for each persistent and generic ephemeral volume of `pod`."""
        meta = pod.get("metadata") or {}
        namespace, name = meta.get("namespace") or "default", meta.get("name") or ""
        for volume in (pod.get("spec") or {}).get("volumes") or ():
            if not isinstance(volume, Mapping):
                continue
            template: Mapping[str, Any] | None = None
            if isinstance(volume.get("persistentVolumeClaim"), Mapping):
                claim = str(volume["persistentVolumeClaim"].get("claimName") or "")
            elif isinstance(volume.get("ephemeral"), Mapping):
                claim = f"{name}-{volume.get('name') or ''}"
                template = (volume["ephemeral"].get("volumeClaimTemplate") or {}).get("spec") or {}
            else:
                continue
            yield claim, self.claims.get(f"{namespace}/{claim}"), template

    def _claim(
        self, pvc: Mapping[str, Any] | None, template: Mapping[str, Any] | None
    ) -> RequiredTerms | None:
        spec = (pvc.get("spec") or {}) if pvc is not None else template
        if spec is None or (pvc is not None and not _usable(pvc)):
            return None
        if volume_name := spec.get("volumeName"):
            pv = self.volumes.get(str(volume_name))
            if pv is None or not _usable(pv):
                return None
            # kube-scheduler's VolumeBinding: a claim whose bind is not marked complete is not bound
            # yet (it may still be refused); wait for the PV controller rather than guess.
            annotations = ((pvc or {}).get("metadata") or {}).get("annotations") or {}
            if BIND_COMPLETED not in annotations:
                return None
            affinity = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
            return _terms(affinity.get("nodeSelectorTerms") or (), "matchExpressions")
        if not self._delayed(spec.get("storageClassName")):
            return None
        storage_class = self._class(spec.get("storageClassName")) or {}
        return _terms(storage_class.get("allowedTopologies") or (), "matchLabelExpressions")

    def _delayed(self, class_name: Any) -> bool:
        storage_class = self._class(class_name)
        return storage_class is not None and storage_class.get("volumeBindingMode") == "WaitForFirstConsumer"

    def _class(self, name: Any) -> Mapping[str, Any] | None:
        if name:
            return self.classes.get(str(name))
        if name == "":
            return None  # "" asks for no class: a pre-bound volume only
        return next(
            (
                c
                for c in self.classes.values()
                if ((c.get("metadata") or {}).get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION)
                == "true"
            ),
            None,
        )


def _usable(obj: Mapping[str, Any]) -> bool:
    """Not being deleted, and not Lost (a claim whose volume is gone)."""
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return False
    return (obj.get("status") or {}).get("phase") not in ("Lost", "Failed")


def _terms(raw_terms: Iterable[Any], field_name: str) -> RequiredTerms | None:
    """Node selector terms (PV) or topology selector terms (StorageClass) -> ORed requirements."""
    result = []
    for raw in raw_terms:
        if not isinstance(raw, Mapping) or raw.get("matchFields"):
            return None
        term = []
        for expr in raw.get(field_name) or ():
            if not isinstance(expr, Mapping) or not expr.get("key"):
                return None
            operator = str(expr.get("operator") or "In")  # topology selector terms are In lists
            if operator not in OPERATORS:
                return None
            name = str(expr["key"])
            name = wk.ZONE if name in CSI_ZONE_KEYS else wk.normalize_key(name)
            term.append(Requirement(name, operator, tuple(str(v) for v in expr.get("values") or ())))
        result.append(tuple(term))
    return tuple(result)


def has_claims(pods: Iterable[Mapping[str, Any]]) -> bool:
    return any(
        isinstance(v, Mapping) and (v.get("persistentVolumeClaim") or v.get("ephemeral"))
        for pod in pods
        for v in (pod.get("spec") or {}).get("volumes") or ()
    )


def load(kube: client.ApiClient) -> Volumes:
    core, storage = client.CoreV1Api(kube), client.StorageV1Api(kube)

    def key(obj: Mapping[str, Any]) -> str:
        meta = obj.get("metadata") or {}
        return (
            f"{meta.get('namespace')}/{meta.get('name')}" if meta.get("namespace") else str(meta.get("name"))
        )

    claims, _ = list_objects(core.list_persistent_volume_claim_for_all_namespaces)
    volumes, _ = list_objects(core.list_persistent_volume)
    classes, _ = list_objects(storage.list_storage_class)
    return Volumes(
        claims={key(c): c for c in claims},
        volumes={key(v): v for v in volumes},
        classes={key(c): c for c in classes},
    )
