"""AWSCloudProvider: the CloudProvider interface over EC2, SSM and the Pricing API.

Wires the small aws/ modules together: catalog (instance types, offerings, prices), subnets and
security groups by selector, AMIs from SSM, launch templates by hash, CreateFleet, instances by
tag. It keeps one piece of state of its own: offerings EC2 recently refused for lack of capacity
(3 min), which it reports as unavailable in the catalog and skips in launches.
"""

from __future__ import annotations

import builtins
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import Any

from cachetools import TTLCache

from extender import retry
from extender.api.capacity_reservations import CapacityReservation, ReservationTerm
from extender.api.labels import (
    ARCH,
    CAPACITY_TYPE,
    CAPACITY_TYPE_ON_DEMAND,
    CAPACITY_TYPE_RESERVED,
    CAPACITY_TYPE_SPOT,
    LAUNCH_ID_TAG,
)
from extender.api.nodeclass import AL2023, RAID0, NodeClass, Selector
from extender.api.provisioner import Provisioner
from extender.api.resources import EFA
from extender.cloud.aws import bootstrap, fleet, instances
from extender.cloud.aws.amifamily import AMIResolver
from extender.cloud.aws.capacityreservations import CapacityReservationProvider
from extender.cloud.aws.instancetypes import CatalogProvider
from extender.cloud.aws.launchtemplates import LaunchTemplateProvider, LaunchTemplateSpec, ReservationTarget
from extender.cloud.aws.pricing import PricingProvider
from extender.cloud.aws.ratelimit import TokenBucket
from extender.cloud.aws.securitygroups import SecurityGroupProvider
from extender.cloud.aws.selectors import cluster_selector
from extender.cloud.aws.session import Clients, make_clients
from extender.cloud.aws.subnets import SubnetProvider
from extender.cloud.types import (
    CloudError,
    Instance,
    InstanceNotFoundError,
    InsufficientCapacityError,
    LaunchRequest,
    LaunchResult,
    OfferingKey,
)
from extender.scheduling.instancetypes import InstanceType, NodeSettings
from extender.scheduling.overlays import overlaid
from extender.scheduling.poddensity import PodDensity
from extender.scheduling.reservations import with_reservations
from extender.settings import Settings

log = logging.getLogger(__name__)

#: How long an offering EC2 refused for capacity is left out (modern Karpenter's UnavailableOfferingsTTL).
UNAVAILABLE_TTL_SECONDS = 180.0
#: DescribeInstances right after CreateFleet may not show the instance (or its DNS name) yet: it is
#: read again this many times in all, with the retry module's SETTLE backoff in between.
DESCRIBE_ATTEMPTS = 3
#: The codes of a selector that found nothing: the node class's status says so, part by part.
NOTHING_FOUND = frozenset({"NoSubnets", "NoSecurityGroups"})


class _NotSettled(Exception):
    """DescribeInstances does not show every launched instance with its DNS name yet."""

    def __init__(self, found: list[Instance]) -> None:
        super().__init__(f"{len(found)} instance(s) described")
        self.found = found


def choose_capacity_type(
    options: Sequence[InstanceType], allowed: Sequence[str], zones: Sequence[str]
) -> str:
    """Spot when allowed and some option has an available spot offering in an allowed zone, else on-demand."""
    allowed = tuple(allowed) or (CAPACITY_TYPE_ON_DEMAND,)
    if CAPACITY_TYPE_SPOT in allowed and any(
        o.capacity_type == CAPACITY_TYPE_SPOT and o.available and o.zone in zones
        for option in options
        for o in option.offerings
    ):
        return CAPACITY_TYPE_SPOT
    return CAPACITY_TYPE_ON_DEMAND if CAPACITY_TYPE_ON_DEMAND in allowed else allowed[0]


def reservation_target(
    node_class: NodeClass, reservation: CapacityReservation | None
) -> ReservationTarget | None:
    """What a launch template says about capacity reservations (Karpenter's targeted launch mode,
    `launchtemplate/types.go`): a reserved launch only into its reservation; an on-demand or spot
    launch of a NodeClass that selects reservations into none, so it never takes a slot by chance
    (a NodeClass without terms leaves EC2's default, as karpy did before)."""
    if reservation is not None:
        return ReservationTarget(reservation.id, capacity_block=reservation.is_block)
    if node_class.capacity_reservation_selector:
        return ReservationTarget("")
    return None


def without_unavailable(
    catalog: list[InstanceType], unavailable: Iterable[OfferingKey]
) -> list[InstanceType]:
    """The catalog with the given offerings marked available=False."""
    by_type: dict[str, set[tuple[str, str]]] = {}
    for key in unavailable:
        by_type.setdefault(key.instance_type, set()).add((key.zone, key.capacity_type))
    if not by_type:
        return catalog
    return [
        item.with_offerings(
            replace(o, available=False) if (o.zone, o.capacity_type) in by_type[item.name] else o
            for o in item.offerings
        )
        if item.name in by_type
        else item
        for item in catalog
    ]


class AWSCloudProvider:
    name = "aws"

    def __init__(
        self,
        *,
        settings: Settings,
        timer: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        clients: Clients | None = None,
        catalog: CatalogProvider | None = None,
        kubernetes_version: Callable[[], str] | None = None,
    ) -> None:
        aws = settings.aws
        self._settings = settings
        self._cluster = settings.cluster_name
        self._sleep = sleep
        self.clients = clients or make_clients(aws)
        ec2 = self.clients.ec2
        self.pricing = PricingProvider(ec2=ec2, pricing=self.clients.pricing, settings=aws, timer=timer)
        self.catalog = catalog or CatalogProvider(
            ec2,
            price_book=self.pricing.price_book,
            timer=timer,
            density=PodDensity(reserved_enis=aws.reserved_enis, prefix_delegation=aws.prefix_delegation),
        )
        self.subnets = SubnetProvider(ec2, timer=timer)
        self.security_groups = SecurityGroupProvider(ec2, cluster=self._cluster, timer=timer)
        self.amis = AMIResolver(
            self.clients.ssm,
            ec2,
            ssm_root=aws.ssm_root,
            kubernetes_version=kubernetes_version or self._configured_kubernetes_version,
            timer=timer,
        )
        self.launch_templates = LaunchTemplateProvider(ec2, cluster=self._cluster, timer=timer)
        self.reservations = CapacityReservationProvider(
            ec2, declared=aws.capacity_reservations, cluster=self._cluster, timer=timer
        )
        self.limiter = TokenBucket(timer=timer, sleep=sleep)
        self._unavailable: TTLCache[OfferingKey, bool] = TTLCache(
            maxsize=100_000, ttl=UNAVAILABLE_TTL_SECONDS, timer=timer
        )
        self._unavailable_lock = threading.Lock()

    # -- catalog -------------------------------------------------------------------------------

    def get_instance_types(self, provisioner: Provisioner | None = None) -> list[InstanceType]:
        zones = list(self.subnets.by_zone(self._subnet_selector(provisioner)))
        catalog = self.catalog.get(zones)
        if provisioner is not None and provisioner.provider.capacity_reservation_selector:
            found = self.capacity_reservations(provisioner.provider.capacity_reservation_selector)
            catalog = with_reservations(catalog, found)
        return without_unavailable(catalog, self.unavailable_offerings())

    def capacity_reservations(self, terms: Sequence[ReservationTerm]) -> list[CapacityReservation]:
        return self.reservations.find(terms)

    def unavailable_offerings(self) -> list[OfferingKey]:
        with self._unavailable_lock:
            return list(self._unavailable.keys())

    def mark_unavailable(self, offerings: Iterable[OfferingKey]) -> None:
        with self._unavailable_lock:
            for key in offerings:
                log.info(
                    "InsufficientInstanceCapacity for offering "
                    "{ instanceType: %s, zone: %s, capacityType: %s }, avoiding for %ds",
                    key.instance_type,
                    key.zone,
                    key.capacity_type,
                    UNAVAILABLE_TTL_SECONDS,
                )
                self._unavailable[key] = True

    # -- launch --------------------------------------------------------------------------------

    def create(self, request: LaunchRequest) -> LaunchResult:
        launched = self.find_launch(request.launch_id)
        if launched:
            log.info("Found %d instance(s) of launch %s already running", len(launched), request.launch_id)
            return LaunchResult(instances=launched)
        options, capacity_type, subnets, templates = self._resolve(request)
        overrides = fleet.plan_overrides(
            options, capacity_type=capacity_type, zones=request.zones, subnets=subnets, templates=templates
        )
        if not overrides:
            raise InsufficientCapacityError(
                f"no available {capacity_type} offering of {list(request.instance_types)} in zones "
                f"{list(request.zones)} with a subnet",
                code="NoAvailableOffering",
            )
        reservation = self._reservation(request)
        self.limiter.acquire()
        response = fleet.create_fleet(
            self.clients.ec2,
            fleet.fleet_request(
                overrides,
                capacity_type=capacity_type,
                count=request.count,
                tags={**self.instance_tags(request), **(reservation.node_labels() if reservation else {})},
                client_token=request.launch_id,
                target_capacity_type=fleet.target_capacity_type(capacity_type, reservation),
            ),
        )
        outcome = fleet.parse_fleet_response(
            response, capacity_type=capacity_type, zones_by_subnet={v: k for k, v in subnets.items()}
        )
        if reservation is not None:
            # Refused for capacity (an empty fleet without errors is that too, see _launch_result).
            if outcome.unavailable or not (outcome.instance_ids or outcome.errors):
                self.reservations.mark_unavailable(reservation.id)
            self.reservations.mark_launched(reservation.id, len(outcome.instance_ids))
        return self._launch_result(request, outcome, overrides, capacity_type)

    def _reservation(self, request: LaunchRequest) -> CapacityReservation | None:
        """The reservation a reserved launch targets (CloudError if its NodeClass no longer selects it)."""
        if not request.capacity_reservation_id:
            return None
        for reservation in self.capacity_reservations(
            request.provisioner.provider.capacity_reservation_selector
        ):
            if reservation.id == request.capacity_reservation_id:
                return reservation
        raise InsufficientCapacityError(
            f"capacity reservation {request.capacity_reservation_id} is no longer selected or active",
            offerings=[
                OfferingKey(name, zone, CAPACITY_TYPE_RESERVED)
                for name in request.instance_types
                for zone in request.zones
            ],
            code="ReservationNotFound",
        )

    def prepare(self, requests: Sequence[LaunchRequest]) -> None:
        """Resolve what `create` would for these requests (options, subnets, security groups, AMIs,
        launch templates) without launching: the warm-up before the first batch. Each resolver
        caches what it found, so a launch soon after reads it from memory."""
        for request in requests:
            self._resolve(request)
            self.amis.resolve_all(request.provisioner.provider, self.get_instance_types(request.provisioner))

    def _resolve(
        self, request: LaunchRequest
    ) -> tuple[list[InstanceType], str, dict[str, str], dict[str, str]]:
        """The request's options, capacity type, subnet per zone and launch template per option."""
        # Priced as the plan priced them (the pool's NodeOverlays): the fleet ranks its overrides so.
        types = overlaid(self.get_instance_types(request.provisioner), request.provisioner)
        catalog = {item.name: item for item in types}
        options = [catalog[name] for name in request.instance_types if name in catalog]
        capacity_type = choose_capacity_type(options, request.capacity_types, request.zones)
        if request.capacity_reservation_id:
            # Only that reservation's offering: one fleet override per zone it is in.
            capacity_type = CAPACITY_TYPE_RESERVED
            options = [
                o.with_offerings(
                    x for x in o.offerings if x.reservation_id == request.capacity_reservation_id
                )
                for o in options
            ]
        subnets = {
            zone: s["SubnetId"] for zone, s in self.subnets.by_zone(self._subnet_selector(request)).items()
        }
        templates = self._launch_templates(request, options, capacity_type, self._reservation(request))
        return options, capacity_type, subnets, templates

    def _launch_result(
        self,
        request: LaunchRequest,
        outcome: fleet.FleetOutcome,
        overrides: Sequence[fleet.Override],
        capacity_type: str,
    ) -> LaunchResult:
        unavailable = list(outcome.unavailable)
        if not outcome.instance_ids and not outcome.errors:
            # An empty instant fleet without a reason is EC2 saying "none of these, right now".
            unavailable = [OfferingKey(o.instance_type, o.zone, capacity_type) for o in overrides]
        self.mark_unavailable(unavailable)
        if not outcome.instance_ids:
            reasons = "; ".join(outcome.errors) or "no instances launched"
            message = f"creating fleet, with fleet error(s), {reasons}"
            if unavailable:
                raise InsufficientCapacityError(message, offerings=unavailable)
            raise CloudError(message, code=outcome.errors[0].split(":", 1)[0])
        if len(outcome.instance_ids) < request.count:
            log.error(
                "Failed to launch %d EC2 instances out of the %d EC2 instances requested: %s",
                request.count - len(outcome.instance_ids),
                request.count,
                "; ".join(outcome.errors),
            )
        launched = self._describe_launched(outcome.instance_ids)
        for item in launched:
            log.info(
                "Launched instance: %s, hostname: %s, type: %s, zone: %s, capacityType: %s",
                item.id,
                item.private_dns_name,
                item.instance_type,
                item.zone,
                item.capacity_type,
            )
        return LaunchResult(instances=launched, unavailable=tuple(unavailable), errors=outcome.errors)

    def _describe_launched(self, instance_ids: Sequence[str]) -> list[Instance]:
        """The launched instances once EC2 shows all of them with DNS names; after the last attempt,
        what it shows (InstanceNotFoundError if it still knows none of them)."""

        def complete() -> list[Instance]:
            found = instances.describe(self.clients.ec2, instance_ids)
            if len(found) == len(instance_ids) and all(i.private_dns_name for i in found):
                return found
            raise _NotSettled(found)

        try:
            return retry.call(
                complete,
                retry_on=lambda err: isinstance(err, _NotSettled | InstanceNotFoundError),
                attempts=DESCRIBE_ATTEMPTS,
                policy=retry.SETTLE,
                doing="describing launched instances",
                sleep=self._sleep,
            )
        except _NotSettled as err:
            return err.found

    def _launch_templates(
        self,
        request: LaunchRequest,
        options: Sequence[InstanceType],
        capacity_type: str,
        reservation: CapacityReservation | None = None,
    ) -> dict[str, str]:
        """instance type -> launch template name: one template per (AMI, maxPods, EFA interfaces)
        the options need, as Karpenter AWS groups them (`amifamily/resolver.go` Resolve). The
        user data always carries the type's maxPods; EFA interfaces only when the pods ask for EFA."""
        node_class = request.provisioner.provider
        if node_class.launch_template:
            return {option.name: node_class.launch_template for option in options}
        security_groups = self.security_groups.ids(
            node_class.security_group_selector or cluster_selector(self._cluster)
        )
        images = self.amis.resolve_all(node_class, options)
        node_settings = NodeSettings.of(request.provisioner.kubelet, node_class)
        groups: dict[tuple[str, int, int], list[str]] = {}
        for option in options:
            efa = int(option.extended.get(EFA)) if request.efa else 0
            key = (images[option.name], option.for_node(node_settings).max_pods, efa)
            groups.setdefault(key, []).append(option.name)
        by_type: dict[str, str] = {}
        for (image, max_pods, efa), names in sorted(groups.items()):
            spec = LaunchTemplateSpec.of(
                image_id=image,
                security_group_ids=security_groups,
                instance_profile=node_class.launch_profile(self._settings.aws.default_instance_profile),
                user_data=self.user_data(request, capacity_type, max_pods=max_pods, reservation=reservation),
                tags={f"karpenter.sh/cluster/{self._cluster}": "owned", **node_class.tags},
                block_device_mappings=node_class.block_devices(),
                metadata_options=node_class.metadata_options,
                detailed_monitoring=node_class.detailed_monitoring,
                associate_public_ip_address=node_class.associate_public_ip_address,
                efa_interfaces=efa,
                reservation=reservation_target(node_class, reservation),
            )
            template = self.launch_templates.ensure(spec)
            by_type.update(dict.fromkeys(names, template))
        return by_type

    def user_data(
        self,
        request: LaunchRequest,
        capacity_type: str,
        *,
        max_pods: int | None = None,
        reservation: CapacityReservation | None = None,
    ) -> str:
        """The user data of the request's AMI family: it joins the node with the Provisioner's labels,
        taints and kubelet settings (clusterDNS defaults to the configured cluster DNS; `max_pods`,
        the node type's pod capacity, replaces the kubelet's own ENI-limited guess)."""
        provisioner = request.provisioner
        kubelet = provisioner.kubelet
        if not kubelet.cluster_dns and self._settings.cluster_dns:
            kubelet = replace(kubelet, cluster_dns=(self._settings.cluster_dns,))
        if max_pods is not None:
            kubelet = replace(kubelet, max_pods=max_pods)
        node = bootstrap.NodeBootstrap(
            cluster_name=self._cluster,
            endpoint=self._settings.cluster_endpoint,
            ca_bundle=self._settings.cluster_ca_bundle,
            cluster_cidr=self._settings.cluster_cidr,
            kubelet=kubelet,
            labels={
                **request.labels,
                provisioner.owner_label: provisioner.name,
                CAPACITY_TYPE: capacity_type,
                **(reservation.node_labels() if reservation else {}),
            },
            taints=tuple(request.taints),
            user_data=provisioner.provider.user_data,
            instance_store_raid0=provisioner.provider.instance_store_policy == RAID0,
        )
        if provisioner.provider.family == AL2023 and not node.cluster_cidr:
            log.warning("AL2023 nodes need the cluster's service CIDR to join: set KARPY_CLUSTER_CIDR")
        try:
            return bootstrap.render(provisioner.provider.family, node)
        except ValueError as err:
            raise CloudError(f"rendering user data, {err}", code="InvalidUserData") from err

    def instance_tags(self, request: LaunchRequest) -> dict[str, str]:
        """Provider tags may replace Name; the identity tags karpy finds its instances by always win."""
        return {
            "Name": f"karpenter.sh/cluster/{self._cluster}/provisioner/{request.provisioner.name}",
            **request.provisioner.provider.tags,
            f"kubernetes.io/cluster/{self._cluster}": "owned",
            f"karpenter.sh/cluster/{self._cluster}": "owned",
            request.provisioner.owner_label: request.provisioner.name,
            LAUNCH_ID_TAG: request.launch_id,
        }

    def image_id(self, provisioner: Provisioner, instance_type: InstanceType) -> str:
        """The AMI a node of `instance_type` for `provisioner` boots now (amifamily.AMIResolver)."""
        return self.amis.resolve(provisioner.provider, instance_type)

    def node_class_status(self, node_class: NodeClass) -> dict[str, Any]:
        """What an EC2NodeClass reports (Karpenter v1 `status`): the subnets, security groups,
        AMIs and capacity reservations its selectors find now, and the instance profile its nodes
        launch with (no reservation found is fine: its nodes launch on-demand or spot). A selector
        that finds nothing leaves its list empty and says why under `unresolved` (status key ->
        message): Karpenter's node class controller sets each part's condition apart, so a missing
        security group does not hide the subnets. Any other CloudError (throttling, no answer) is
        raised."""
        unresolved: dict[str, str] = {}

        def part(key: str, resolve: Callable[[], Any], empty: Any) -> Any:
            try:
                return resolve()
            except CloudError as err:
                if err.code not in NOTHING_FOUND:
                    raise
                unresolved[key] = str(err)
                return empty

        subnets = part(
            "subnets",
            lambda: self.subnets.get(node_class.subnet_selector or cluster_selector(self._cluster)),
            [],
        )
        groups = part(
            "securityGroups",
            lambda: self.security_groups.ids(
                node_class.security_group_selector or cluster_selector(self._cluster)
            ),
            [],
        )
        amis = self.amis.by_arch(node_class)
        if not amis:
            unresolved["amis"] = f"resolving AMIs, {self.amis.missing(node_class)}"
        return {
            "subnets": [
                {
                    "id": s["SubnetId"],
                    "zone": s["AvailabilityZone"],
                    **({"zoneID": s["AvailabilityZoneId"]} if s.get("AvailabilityZoneId") else {}),
                }
                for s in sorted(subnets, key=lambda s: s["SubnetId"])
            ],
            "securityGroups": [{"id": group} for group in sorted(groups)],
            "amis": [
                {"id": image, "requirements": [{"key": ARCH, "operator": "In", "values": [arch]}]}
                for arch, image in sorted(amis.items())
            ],
            "instanceProfile": node_class.launch_profile(self._settings.aws.default_instance_profile),
            **self._reservation_status(node_class),
            **({"unresolved": unresolved} if unresolved else {}),
        }

    def _reservation_status(self, node_class: NodeClass) -> dict[str, Any]:
        if not node_class.capacity_reservation_selector:
            return {}
        found = self.reservations.find(node_class.capacity_reservation_selector)
        return {"capacityReservations": [r.status() for r in sorted(found, key=lambda r: r.id)]}

    # -- instances -----------------------------------------------------------------------------

    def delete(self, instance_id: str) -> None:
        instances.terminate(self.clients.ec2, instances.parse_provider_id(instance_id))

    def get(self, provider_id: str) -> Instance:
        found = instances.describe(self.clients.ec2, [instances.parse_provider_id(provider_id)])
        if not found:
            raise InstanceNotFoundError(
                f"getting instance {provider_id}, not found", code="InvalidInstanceID.NotFound"
            )
        return found[0]

    def list(self) -> list[Instance]:
        return instances.find_by_tags(self.clients.ec2, self._cluster_tag())

    def find_launch(self, launch_id: str) -> builtins.list[Instance]:
        """Live instances of one launch (by its tag), so a retried or restarted launch is not repeated."""
        return instances.find_by_tags(self.clients.ec2, {**self._cluster_tag(), LAUNCH_ID_TAG: launch_id})

    # -- helpers -------------------------------------------------------------------------------

    def _cluster_tag(self) -> dict[str, str]:
        return {f"karpenter.sh/cluster/{self._cluster}": "owned"}

    def _subnet_selector(self, source: Provisioner | LaunchRequest | None) -> Selector:
        provisioner = source.provisioner if isinstance(source, LaunchRequest) else source
        selector = provisioner.provider.subnet_selector if provisioner else ()
        return selector or cluster_selector(self._cluster)

    def _configured_kubernetes_version(self) -> str:
        if not self._settings.aws.kubernetes_version:
            raise CloudError(
                "resolving AMI, no Kubernetes version: set KARPY_AWS_KUBERNETES_VERSION",
                code="NoKubernetesVersion",
            )
        return self._settings.aws.kubernetes_version
