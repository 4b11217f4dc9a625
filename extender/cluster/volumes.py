"""Volume topology: which nodes a pod's persistent volumes allow, as kube-scheduler's VolumeBinding
and VolumeZone plugins see it (Karpenter resolves it the same way, `volumetopology.go`), and which
claims only kube-scheduler can bind.

- A bound claim: its PersistentVolume's `spec.nodeAffinity.required.nodeSelectorTerms`. Nothing is
  left to bind, so karpy binds the pod itself.
- An unbound claim whose StorageClass binds `WaitForFirstConsumer`: the class's `allowedTopologies`
  (none = anywhere); with `kubernetes.io/no-provisioner` (statically provisioned volumes) the ORed
  node affinity of the PersistentVolumes it could bind to (VolumeBinding's findMatchingVolumes),
  none = unresolved. kube-scheduler's VolumeBinding PreBind binds or provisions the volume on the
  chosen node and sets `volume.kubernetes.io/selected-node`; karpy's Binding would skip that, so
  the claim is *deferred*: karpy plans a node and leaves the bind to kube-scheduler.
- An unbound claim whose class binds `Immediate`: the class's `allowedTopologies`, deferred too
  (kube-scheduler binds the pod once the PV controller has bound the claim).
- A generic ephemeral volume whose claim does not exist yet: its template, as above.
- A missing claim or class, an unbound claim without a class, a claim or volume being deleted, a
  Lost claim, or a claim naming its volume before the bind is marked complete
  (`pv.kubernetes.io/bind-completed`): unresolved. The pod cannot schedule yet and stays
  unmodelled (reported with an Event, never planned) until that settles.

`load` lists claims, volumes and classes once per batch, only when a pod has claims.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from kubernetes import client

from extender.api import labels as wk
from extender.api.affinity import LabelSelector
from extender.api.pod import Pod, RequiredTerms, VolumeTopology
from extender.api.provisioner import Requirement
from extender.api.quantity import QuantityError, parse_quantity
from extender.cluster.watch import list_objects

DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
DEFAULT_CLASS_ANNOTATIONS = (DEFAULT_CLASS_ANNOTATION, "storageclass.beta.kubernetes.io/is-default-class")
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
#: StorageClass provisioner of statically provisioned volumes: nothing creates a volume, the claim
#: binds to an existing one.
NO_PROVISIONER = "kubernetes.io/no-provisioner"
OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
#: In-tree volume plugins migrated to CSI, as kube-scheduler's NodeVolumeLimits translates them
#: (k8s.io/csi-translation-lib v0.37 plugins/*.go): a StorageClass provisioner, and the PersistentVolume
#: source field, with the CSI driver whose attach limit the volume counts against.
IN_TREE_DRIVERS = {
    "kubernetes.io/aws-ebs": "ebs.csi.aws.com",
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/azure-file": "file.csi.azure.com",
    "kubernetes.io/vsphere-volume": "csi.vsphere.vmware.com",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}
IN_TREE_SOURCES = {
    "awsElasticBlockStore": "ebs.csi.aws.com",
    "gcePersistentDisk": "pd.csi.storage.gke.io",
    "cinder": "cinder.csi.openstack.org",
    "azureDisk": "disk.csi.azure.com",
    "azureFile": "file.csi.azure.com",
    "vsphereVolume": "csi.vsphere.vmware.com",
    "portworxVolume": "pxd.portworx.com",
}
#: CSI drivers' zone keys: labels their node plugin adds once the node runs, the zone all the same.
CSI_ZONE_KEYS = frozenset({"topology.ebs.csi.aws.com/zone"})


@dataclass(frozen=True)
class Resolution:
    """What a pod's claims need: node terms per resolved claim, the claims only kube-scheduler can
    bind, and why the others cannot be placed yet (each "spec.volumes[i]: claim X ...")."""

    topology: VolumeTopology = field(default_factory=dict)
    deferred: tuple[str, ...] = ()
    unresolved: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Claim:
    """One volume of a pod: its claim name, namespace, and the claim's spec (the PVC's, or the
    ephemeral volume's template until its PVC exists)."""

    index: int
    name: str
    namespace: str
    pvc: Mapping[str, Any] | None
    template: Mapping[str, Any] | None

    @property
    def spec(self) -> Mapping[str, Any]:
        return ((self.pvc.get("spec") or {}) if self.pvc is not None else self.template) or {}


@dataclass
class Volumes:
    #: namespace/name -> PersistentVolumeClaim
    claims: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    volumes: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    classes: dict[str, Mapping[str, Any]] = field(default_factory=dict)

    def topology(self, pod: Mapping[str, Any]) -> VolumeTopology:
        """Claim name -> ORed node terms, for the claims of `pod` that can be resolved."""
        return self.resolve(pod).topology

    def resolve(self, pod: Mapping[str, Any]) -> Resolution:
        topology: dict[str, RequiredTerms] = {}
        deferred: list[str] = []
        unresolved: list[str] = []
        for claim in self._claims(pod):
            where = f"spec.volumes[{claim.index}]: claim {claim.name}"
            terms, why = self._claim(claim)
            if terms is None:
                unresolved.append(f"{where} {why}")
                continue
            topology[claim.name] = terms
            if why:
                deferred.append(f"{where} {why}")
        return Resolution(topology, tuple(deferred), tuple(unresolved))

    def csi_claims(self, pod: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
        """(CSI driver, claim name) of each distinct claim of `pod`, as kube-scheduler's
        NodeVolumeLimits counts them: a bound claim by its PersistentVolume's CSI driver, an unbound
        one by its class's provisioner; an in-tree plugin that migrated to CSI by that driver.
        Other volumes (NFS, hostPath, emptyDir) count against no limit."""
        found: dict[str, str] = {}
        for claim in self._claims(pod):
            if claim.name not in found and (driver := self._driver(claim.spec)):
                found[claim.name] = driver
        return tuple(sorted((driver, name) for name, driver in found.items()))

    def in_use(self, pods: Iterable[Pod]) -> tuple[tuple[str, int], ...]:
        """(CSI driver, distinct volumes) the pods bound to one node hold: a claim two pods share is
        one volume (NodeVolumeLimits counts unique volumes per node)."""
        seen: set[str] = set()
        counts: dict[str, int] = {}
        for pod in pods:
            for name in pod.claims:
                key = f"{pod.namespace}/{name}"
                if key in seen or (claim := self.claims.get(key)) is None:
                    continue
                seen.add(key)
                if driver := self._driver(claim.get("spec") or {}):
                    counts[driver] = counts.get(driver, 0) + 1
        return tuple(sorted(counts.items()))

    def _driver(self, spec: Mapping[str, Any]) -> str | None:
        if volume_name := spec.get("volumeName"):
            pv_spec = (self.volumes.get(str(volume_name)) or {}).get("spec") or {}
            if driver := (pv_spec.get("csi") or {}).get("driver"):
                return str(driver)
            return next((d for source, d in IN_TREE_SOURCES.items() if pv_spec.get(source)), None)
        provisioner = str((self._class(spec.get("storageClassName")) or {}).get("provisioner") or "")
        if provisioner.startswith("kubernetes.io/"):
            return IN_TREE_DRIVERS.get(provisioner)
        return provisioner or None

    def _claims(self, pod: Mapping[str, Any]) -> Iterator[_Claim]:
        """Each persistent and generic ephemeral volume of `pod`."""
        meta = pod.get("metadata") or {}
        namespace, name = meta.get("namespace") or "default", meta.get("name") or ""
        for i, volume in enumerate((pod.get("spec") or {}).get("volumes") or ()):
            if not isinstance(volume, Mapping):
                continue
            template: Mapping[str, Any] | None = None
            if isinstance(volume.get("persistentVolumeClaim"), Mapping):
                claim = str(volume["persistentVolumeClaim"].get("claimName") or "")
            elif isinstance(volume.get("ephemeral"), Mapping):
                # Kubernetes names a generic ephemeral volume's claim <pod>-<volume>.
                claim = f"{name}-{volume.get('name') or ''}"
                template = (volume["ephemeral"].get("volumeClaimTemplate") or {}).get("spec") or {}
            else:
                continue
            yield _Claim(i, claim, namespace, self.claims.get(f"{namespace}/{claim}"), template)

    def _claim(self, claim: _Claim) -> tuple[RequiredTerms | None, str]:
        """(terms, why deferred or ""), or (None, why unresolved)."""
        if claim.pvc is None and claim.template is None:
            return None, "does not exist"
        if claim.pvc is not None and (why := _unusable(claim.pvc)):
            return None, why
        spec = claim.spec
        if volume_name := spec.get("volumeName"):
            return self._bound(claim, str(volume_name))
        class_name = spec.get("storageClassName")
        storage_class = self._class(class_name)
        if storage_class is None:
            if class_name:
                return None, f"names StorageClass {class_name}, which does not exist"
            return None, "has no StorageClass and no volume"
        if storage_class.get("volumeBindingMode") != "WaitForFirstConsumer":
            why = "waits for the PV controller to bind it (Immediate); kube-scheduler binds the pod then"
            return _allowed(storage_class), why
        why = "waits for a volume bound on the chosen node (WaitForFirstConsumer)"
        if storage_class.get("provisioner") == NO_PROVISIONER:
            terms = self._static(claim, _name(storage_class))
            if terms is None:
                return None, "has no available PersistentVolume to bind to (kubernetes.io/no-provisioner)"
            return terms, why
        return _allowed(storage_class), why

    def _bound(self, claim: _Claim, volume_name: str) -> tuple[RequiredTerms | None, str]:
        pv = self.volumes.get(volume_name)
        if pv is None:
            return None, f"names volume {volume_name}, which does not exist"
        if why := _unusable(pv):
            return None, f"names volume {volume_name}, which {why}"
        # kube-scheduler's VolumeBinding: a claim whose bind is not marked complete is not bound
        # yet (it may still be refused); wait for the PV controller rather than guess.
        annotations = ((claim.pvc or {}).get("metadata") or {}).get("annotations") or {}
        if BIND_COMPLETED not in annotations:
            return None, f"names volume {volume_name}, but the bind is not complete yet"
        terms = _node_terms(pv)
        if terms is None:
            return None, f"names volume {volume_name}, whose node affinity karpy cannot read"
        return terms, ""

    def _static(self, claim: _Claim, class_name: str) -> RequiredTerms | None:
        """The ORed node terms of the PersistentVolumes the claim can bind to (kube-scheduler
        VolumeBinding's findMatchingVolumes); () when one of them fits any node, None when none."""
        spec = claim.spec
        try:
            wanted = parse_quantity(((spec.get("resources") or {}).get("requests") or {}).get("storage") or 0)
        except QuantityError:
            return None
        modes = set(spec.get("accessModes") or ())
        mode = spec.get("volumeMode") or "Filesystem"
        selector = _selector(spec.get("selector"))
        alternatives: dict[tuple[Requirement, ...], None] = {}
        for pv in self.volumes.values():
            pv_spec = pv.get("spec") or {}
            if (
                (pv_spec.get("storageClassName") or "") != class_name
                or not _available_to(pv, claim)
                or not modes <= set(pv_spec.get("accessModes") or ())
                or (pv_spec.get("volumeMode") or "Filesystem") != mode
                or not _holds(pv_spec, wanted)
                or (selector is not None and not selector.matches(_labels(pv)))
            ):
                continue
            terms = _node_terms(pv)
            if terms is None:
                continue
            if not terms or any(not t for t in terms):
                return ()  # this volume fits any node
            alternatives.update(dict.fromkeys(terms))
        return tuple(alternatives) if alternatives else None

    def _class(self, name: Any) -> Mapping[str, Any] | None:
        if name:
            return self.classes.get(str(name))
        if name == "":
            return None  # "" asks for no class: a pre-bound volume only
        # The DefaultStorageClass admission plugin's choice (k8s pkg/volume/util GetDefaultClass):
        # the newest default class, then the first by name.
        defaults = [c for c in self.classes.values() if _is_default(c)]
        defaults.sort(key=_name)
        defaults.sort(key=_created, reverse=True)
        return defaults[0] if defaults else None


def _created(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("creationTimestamp") or "")


def _is_default(storage_class: Mapping[str, Any]) -> bool:
    annotations = (storage_class.get("metadata") or {}).get("annotations") or {}
    return any(annotations.get(key) == "true" for key in DEFAULT_CLASS_ANNOTATIONS)


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def _allowed(storage_class: Mapping[str, Any]) -> RequiredTerms | None:
    return _terms(storage_class.get("allowedTopologies") or (), "matchLabelExpressions")


def _node_terms(pv: Mapping[str, Any]) -> RequiredTerms | None:
    affinity = ((pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
    return _terms(affinity.get("nodeSelectorTerms") or (), "matchExpressions")


def _available_to(pv: Mapping[str, Any], claim: _Claim) -> bool:
    """An unbound, Available volume nobody else claims, or one pre-bound to this claim."""
    if (pv.get("metadata") or {}).get("deletionTimestamp"):
        return False
    ref = (pv.get("spec") or {}).get("claimRef")
    if ref:
        if ref.get("name") != claim.name or (ref.get("namespace") or "default") != claim.namespace:
            return False
        uid = ((claim.pvc or {}).get("metadata") or {}).get("uid")
        return not ref.get("uid") or ref.get("uid") == uid
    return (pv.get("status") or {}).get("phase") in (None, "", "Available")


def _holds(pv_spec: Mapping[str, Any], wanted: float) -> bool:
    try:
        return parse_quantity((pv_spec.get("capacity") or {}).get("storage") or 0) >= wanted
    except QuantityError:
        return False


def _selector(raw: Any) -> LabelSelector | None:
    """A claim's `spec.selector` on volume labels; None when it has none."""
    if not isinstance(raw, Mapping):
        return None
    exprs = tuple(
        Requirement(str(e.get("key")), str(e.get("operator")), tuple(str(v) for v in e.get("values") or ()))
        for e in raw.get("matchExpressions") or ()
        if isinstance(e, Mapping)
    )
    labels = tuple((str(k), str(v)) for k, v in (raw.get("matchLabels") or {}).items())
    return LabelSelector(labels, exprs)


def _unusable(obj: Mapping[str, Any]) -> str:
    """Why a claim or volume cannot be used now ("" when it can): being deleted, or Lost (a
    claim whose volume is gone) or Failed."""
    if (obj.get("metadata") or {}).get("deletionTimestamp"):
        return "is being deleted"
    phase = (obj.get("status") or {}).get("phase")
    return f"is {phase}" if phase in ("Lost", "Failed") else ""


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


def parse_pod(manifest: Mapping[str, Any], volumes: Volumes | None) -> tuple[Pod, tuple[str, ...]]:
    """The pending pod as karpy plans it, with why its claims cannot be placed yet (the pod is then
    not planned). Its claims resolved to node terms, the claims kube-scheduler binds added to
    `deferred`, its CSI claims to `csi_claims`; without `volumes` a pod with claims is unmodelled.
    The controller and `karpy plan` both parse through here. Raises PodError."""
    if volumes is None:
        return Pod.from_manifest(manifest), ()
    resolved = volumes.resolve(manifest)
    pod = Pod.from_manifest(manifest, resolved.topology)
    if resolved.unresolved:
        return pod, resolved.unresolved
    # kube-scheduler's VolumeBinding binds (or provisions) these claims as it binds the pod: karpy
    # plans the node and leaves the bind to it.
    return replace(
        pod, deferred=(*pod.deferred, *resolved.deferred), csi_claims=volumes.csi_claims(manifest)
    ), ()


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
