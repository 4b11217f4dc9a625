"""Fixtures for the AWS provider against moto in server mode (the session `aws` fixture's seed).

One priced catalog is built per session (a full DescribeInstanceTypes costs ~1.7 s) and shared by
every provider the tests create; each test gets a fresh provider otherwise, so the offerings one
test marks unavailable do not leak into another.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from extender.api.provisioner import AWSProvider, Provisioner
from extender.cloud.aws.instancetypes import CatalogProvider
from extender.cloud.aws.provider import AWSCloudProvider
from extender.cloud.aws.session import Clients, make_clients
from extender.cloud.types import LaunchRequest
from extender.scheduling.pricing import PriceBook
from extender.settings import Settings
from hack.localcluster import awsseed

pytestmark = pytest.mark.integration


class FrozenClock:
    """A monotonic clock that only moves when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def tick(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(scope="session")
def settings(aws: Any) -> Settings:
    return Settings(
        cluster_name=aws.cluster_name,
        cluster_endpoint="https://127.0.0.1:6443",
        cluster_ca_bundle="Q0EgYnVuZGxl",
        cluster_cidr=awsseed.SERVICE_CIDR,
        cluster_dns=awsseed.CLUSTER_DNS,
        aws=aws.aws_settings(interruption_queue="", price_file="", default_instance_profile="karpy-node"),
    )


@pytest.fixture(scope="session")
def shared_catalog(settings: Settings) -> CatalogProvider:
    clients = make_clients(settings.aws)
    # PriceBook(): the built-in table shipped in the package.
    return CatalogProvider(clients.ec2, price_book=PriceBook, timer=FrozenClock())


@pytest.fixture
def clients(settings: Settings) -> Clients:
    """The test's own boto3 clients, handed to the provider, so a test can hook their events."""
    return make_clients(settings.aws)


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
def provider(
    settings: Settings, clients: Clients, shared_catalog: CatalogProvider, clock: FrozenClock
) -> AWSCloudProvider:
    return AWSCloudProvider(settings=settings, clients=clients, catalog=shared_catalog, timer=clock)


@pytest.fixture
def provider_at(
    settings: Settings, clients: Clients, shared_catalog: CatalogProvider, clock: FrozenClock
) -> Callable[..., AWSCloudProvider]:
    """`provider_at("1.32")`: a provider whose nodes boot the AMIs of that Kubernetes version;
    `settings=` replaces the session's settings."""

    def build(version: str, *, settings: Settings = settings) -> AWSCloudProvider:
        return AWSCloudProvider(
            settings=settings,
            clients=clients,
            catalog=shared_catalog,
            timer=clock,
            kubernetes_version=lambda: version,
        )

    return build


@pytest.fixture
def launch(aws: Any) -> Callable[..., LaunchRequest]:
    """A LaunchRequest builder: `launch(["m5.large"], capacity_types=["spot"], count=1, ...)`."""

    def build(instance_types: list[str], **overrides: Any) -> LaunchRequest:
        fields: dict[str, Any] = {
            "provisioner": Provisioner(name="default", provider=AWSProvider(tags={"team": "karpy"})),
            "instance_types": instance_types,
            "zones": sorted(aws.subnets),
            "capacity_types": ["spot", "on-demand"],
            "count": 1,
            "labels": {"workload": "test"},
            "taints": (),
            "launch_id": f"launch-{uuid.uuid4()}",
        }
        fields.update(overrides)
        return LaunchRequest(**fields)

    return build


@pytest.fixture
def terminate_after(clients: Clients) -> Iterator[list[str]]:
    """Instance ids a test launched; terminated afterwards so the shared moto stays small."""
    launched: list[str] = []
    yield launched
    if launched:
        clients.ec2.terminate_instances(InstanceIds=launched)
