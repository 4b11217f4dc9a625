"""The scheduling tests' fixture catalog, and a shorthand for tests/builders.py's Provisioners."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from extender.api.provisioner import Provisioner
from extender.api.provisioner_schema import load_provisioner
from extender.scheduling.catalog import build_catalog
from extender.scheduling.instancetypes import InstanceType
from extender.scheduling.pricing import PriceBook, built_in
from tests.builders import provisioner_manifest

DATA = Path(__file__).resolve().parents[2] / "data"
ZONES = ("us-west-2a", "us-west-2b", "us-west-2c")


@cache
def raw_types() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads((DATA / "instance-types.json").read_text())["InstanceTypes"])


@cache
def catalog() -> tuple[InstanceType, ...]:
    # PriceBook(): the built-in us-east-1 table shipped in the package, the estimate for the rest.
    return tuple(build_catalog(raw_types(), offerings=None, zones=ZONES, prices=PriceBook()))


@cache
def spot_discounted_catalog() -> tuple[InstanceType, ...]:
    """The catalog with spot at 35 % of on-demand: rules about moving to or between spot need a spot
    market cheaper than on-demand, and the built-in table carries no spot history."""
    spot = {name: price * 0.35 for name, price in built_in().on_demand.items()}
    return tuple(build_catalog(raw_types(), offerings=None, zones=ZONES, prices=PriceBook(spot=spot)))


def make_provisioner(name: str = "default", **spec: Any) -> Provisioner:
    """A v1alpha5 Provisioner whose spec fields are given as written (limits={"resources": ...})."""
    return load_provisioner(provisioner_manifest(name) | {"spec": spec})


@cache
def moto_raw_types() -> tuple[dict[str, Any], ...]:
    """moto's whole DescribeInstanceTypes catalog (1,395 items), read from the file moto serves it from."""
    import gzip

    import moto

    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    with gzip.open(path) as handle:
        return tuple(json.load(handle).values())


@cache
def moto_catalog() -> tuple[InstanceType, ...]:
    return tuple(build_catalog(moto_raw_types(), offerings=None, zones=ZONES, prices=PriceBook()))
