"""Benchmark (prints figures, asserts nothing about speed): catalog build and launch latency on moto.

Run: `python -m tests.integration.aws.bench_fleet [--launches 50]` from the repo root. Starts its own
moto server on loopback (hack.localcluster.awsseed), seeds it, then measures
- the first catalog build (DescribeInstanceTypes + offerings + build_catalog with the built-in prices),
- the CreateFleet call alone (time between botocore's before-call and after-call events),
- AWSCloudProvider.create end to end (launch-id lookup, cached catalog/subnets/template, fleet, describe).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

from hack.localcluster import awsseed


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--launches", type=int, default=50)
    args = parser.parse_args()
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")

    from extender.api.provisioner import Provisioner
    from extender.cloud.aws.provider import AWSCloudProvider
    from extender.cloud.types import LaunchRequest
    from extender.settings import Settings

    server = awsseed.start_moto(Path(tempfile.mkdtemp()) / "moto.log")
    try:
        seed = awsseed.seed(server.endpoint_url)
        settings = Settings(
            cluster_name=seed.cluster_name,
            aws=seed.aws_settings(interruption_queue=""),  # prices: the built-in table
        )
        provider = AWSCloudProvider(settings=settings)
        started = time.perf_counter()
        catalog = provider.get_instance_types()
        catalog_seconds = time.perf_counter() - started

        fleet_seconds: list[float] = []
        call_started: dict[str, float] = {}
        events = provider.clients.ec2.meta.events
        events.register("before-call.ec2.CreateFleet", lambda **_: call_started.update(t=time.perf_counter()))
        events.register(
            "after-call.ec2.CreateFleet",
            lambda **_: fleet_seconds.append(time.perf_counter() - call_started["t"]),
        )
        create_seconds: list[float] = []
        options = ["m5.large", "m5.xlarge", "c5.xlarge", "m6i.large", "r5.large"]
        for index in range(args.launches):
            request = LaunchRequest(
                provisioner=Provisioner(name="default"),
                instance_types=options,
                zones=sorted(seed.subnets),
                capacity_types=["spot", "on-demand"],
                count=1 + index % 3,
                labels={},
                taints=(),
                launch_id=str(uuid.uuid4()),
            )
            started = time.perf_counter()
            result: Any = provider.create(request)
            create_seconds.append(time.perf_counter() - started)
            assert len(result.instances) == request.count
        print(f"load average at end: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(f"catalog: {len(catalog)} instance types, first build {catalog_seconds:.2f}s")
        for name, values in (("CreateFleet call", fleet_seconds), ("provider.create", create_seconds)):
            print(
                f"{name}: n={len(values)} p50={statistics.median(values) * 1000:.1f}ms "
                f"p95={percentile(values, 0.95) * 1000:.1f}ms max={max(values) * 1000:.1f}ms"
            )
    finally:
        server.stop()


if __name__ == "__main__":
    main()
