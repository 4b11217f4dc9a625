"""What the `karpy explain` commands read besides the cluster: the instance-type catalog (files as
`karpy plan` reads them, or the EC2 endpoint) and the pods DaemonSets put on every node."""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

from extender.api.pod import Pod, PodError
from extender.cli import plan as plan_cli
from extender.cli.main import UsageError
from extender.scheduling.catalog import CatalogError, build_catalog
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.pricing import PriceBook


def catalog(args: argparse.Namespace) -> list[InstanceType]:
    """From `--instance-types`/`--offerings` files, else the EC2 endpoint; `--zones`, `--prices`."""
    types, offerings = _types(args)
    zones = [z.strip() for z in args.zones.split(",") if z.strip()]
    try:
        prices = PriceBook.from_file(args.prices) if args.prices else PriceBook()
        return build_catalog(types, offerings=offerings, zones=zones, prices=prices)
    except (OSError, ValueError, CatalogError) as err:
        raise UsageError(str(err)) from err


def _types(args: argparse.Namespace) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
    if args.instance_types:
        types = plan_cli._json_file(args.instance_types, "InstanceTypes")
        offerings = plan_cli._json_file(args.offerings, "InstanceTypeOfferings") if args.offerings else None
        return types, offerings
    return plan_cli._from_ec2()


def daemon_pods(items: Sequence[Mapping[str, Any]]) -> list[Pod]:
    """The pod each DaemonSet (API JSON) puts on a node."""
    found = []
    for item in items:
        try:
            found.append(Pod.from_manifest(plan_cli._from_template({**item, "kind": "DaemonSet"}, 0)))
        except PodError:
            continue  # the controller leaves an unreadable DaemonSet's overhead out as well
    return found
