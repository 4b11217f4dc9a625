"""Prices per instance-hour: known tables first, then a documented estimate — never 0, never a crash.

`PriceBook` holds on-demand and spot tables (filled by the cloud layer from the AWS Pricing API and
DescribeSpotPriceHistory, or from a price file `{"onDemand": {...}, "spot": {...}}`), and answers
`price(...) -> Price(value, source)` so a plan can say where each figure came from:

- `on-demand table` / `spot table`: a known price;
- `spot = 0.35 x on-demand`: spot unknown, taken as SPOT_FRACTION of the on-demand price
  (spot has run at roughly 60-70 % off on-demand for common families);
- `estimate`: nothing known. USD/h = (0.033 x vCPU + 0.00375 x GiB + 0.75 x NVIDIA/AMD GPU
  + 0.25 x Neuron device) x arch factor (arm64 0.8: Graviton lists ~20 % below x86) x generation
  factor (<=4th gen 1.1, >=7th gen 1.05, else 1.0) x burstable factor (t-family 0.85). The vCPU and
  GiB coefficients are fitted to us-east-1 m5/c5/r5.large (0.096, 0.085, 0.126 USD/h).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from extender.api.labels import CAPACITY_TYPE_SPOT

SPOT_FRACTION = 0.35
USD_PER_VCPU = 0.033
USD_PER_GIB = 0.00375
USD_PER_GPU = 0.75
USD_PER_NEURON = 0.25
ARM64_FACTOR = 0.8
BURSTABLE_FACTOR = 0.85
MIN_PRICE = 0.001
_FAMILY = re.compile(r"^([a-z]+?)(\d+)")


@dataclass(frozen=True)
class Price:
    value: float
    source: str


@dataclass(frozen=True)
class Shape:
    """What the estimate needs to know about a type."""

    cpu: float
    memory_gib: float
    arch: str = "amd64"
    gpus: float = 0.0
    neurons: float = 0.0


def _generation_factor(name: str) -> float:
    match = _FAMILY.match(name)
    if not match:
        return 1.0
    generation = int(match.group(2))
    if generation <= 4:
        return 1.1
    return 1.05 if generation >= 7 else 1.0


def estimate(name: str, shape: Shape) -> float:
    """The documented fallback price (module docstring); always > 0."""
    base = (
        USD_PER_VCPU * shape.cpu
        + USD_PER_GIB * shape.memory_gib
        + USD_PER_GPU * shape.gpus
        + USD_PER_NEURON * shape.neurons
    )
    factor = _generation_factor(name)
    if shape.arch == "arm64":
        factor *= ARM64_FACTOR
    if name.startswith("t"):
        factor *= BURSTABLE_FACTOR
    return max(MIN_PRICE, base * factor)


@dataclass(frozen=True)
class PriceBook:
    on_demand: Mapping[str, float] = field(default_factory=dict)
    #: Spot prices by type, or by (type, zone) for per-zone history.
    spot: Mapping[str, float] = field(default_factory=dict)
    spot_by_zone: Mapping[tuple[str, str], float] = field(default_factory=dict)
    #: Names the table (e.g. "ec2-on-demand-prices.json", "pricing-api") in each Price.source.
    origin: str = "table"

    @classmethod
    def from_dict(cls, obj: Mapping[str, Any], origin: str = "table") -> PriceBook:
        def table(key: str) -> dict[str, float]:
            raw = obj.get(key) or {}
            if not isinstance(raw, Mapping):
                raise ValueError(f"{key} must be a map of instance type to USD per hour")
            result = {}
            for name, value in raw.items():
                if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
                    raise ValueError(f"{key}.{name}: price must be a positive number, got {value!r}")
                result[str(name)] = float(value)
            return result

        return cls(on_demand=table("onDemand"), spot=table("spot"), origin=origin)

    @classmethod
    def from_file(cls, path: str | Path) -> PriceBook:
        """Read `{"onDemand": {...}, "spot": {...}}` (other keys ignored); raises ValueError/OSError."""
        with open(path, encoding="utf-8") as handle:
            try:
                obj = json.load(handle)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}: not JSON: {err}") from err
        if not isinstance(obj, Mapping):
            raise ValueError(f"{path}: expected an object with onDemand/spot maps")
        return cls.from_dict(obj, origin=Path(path).name)

    def on_demand_price(self, name: str, shape: Shape) -> Price:
        if name in self.on_demand:
            return Price(self.on_demand[name], f"on-demand {self.origin}")
        return Price(estimate(name, shape), "estimate")

    def spot_price(self, name: str, shape: Shape, zone: str = "") -> Price:
        if (name, zone) in self.spot_by_zone:
            return Price(self.spot_by_zone[(name, zone)], f"spot {self.origin}")
        if name in self.spot:
            return Price(self.spot[name], f"spot {self.origin}")
        od = self.on_demand_price(name, shape)
        return Price(max(MIN_PRICE, od.value * SPOT_FRACTION), f"spot = {SPOT_FRACTION} x {od.source}")

    def price(self, name: str, capacity_type: str, shape: Shape, zone: str = "") -> Price:
        if capacity_type == CAPACITY_TYPE_SPOT:
            return self.spot_price(name, shape, zone)
        return self.on_demand_price(name, shape)
