"""boto3 clients built from AWSSettings; the only place karpy configures botocore.

Called once by AWSCloudProvider. Clients are thread-safe, sessions are not, so every client is
created here up front and then shared by the provisioning and lifecycle threads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

from extender.settings import AWSSettings

# Throttling is per account; adaptive mode adds client-side rate limiting on top of retries.
_AWS_CONFIG = Config(
    retries={"mode": "adaptive", "total_max_attempts": 5}, connect_timeout=5, read_timeout=30
)
# Pricing is an optimisation with fallbacks behind it: fail fast (moto answers 500 to everything).
_PRICING_CONFIG = Config(
    retries={"mode": "standard", "total_max_attempts": 1}, connect_timeout=3, read_timeout=10
)


def pricing_region(region: str) -> str:
    """The Price List API is served from a few regions only; pick the one that serves `region`."""
    if region.startswith("cn-"):
        return "cn-northwest-1"
    if region.startswith(("ap-", "me-", "af-")):
        return "ap-south-1"
    if region.startswith("eu-"):
        return "eu-central-1"
    return "us-east-1"


@dataclass(frozen=True)
class Clients:
    ec2: Any
    ssm: Any
    pricing: Any
    #: The interruption queue's client (lifecycle's SQS poller).
    sqs: Any


def make_clients(settings: AWSSettings, *, session: boto3.session.Session | None = None) -> Clients:
    session = session or boto3.session.Session()
    endpoint = settings.endpoint_url or None

    def client(service: str, region: str, config: Config) -> Any:
        return session.client(service, region_name=region, endpoint_url=endpoint, config=config)

    return Clients(
        ec2=client("ec2", settings.region, _AWS_CONFIG),
        ssm=client("ssm", settings.region, _AWS_CONFIG),
        pricing=client("pricing", pricing_region(settings.region), _PRICING_CONFIG),
        sqs=client("sqs", settings.region, _AWS_CONFIG),
    )
