"""Catalog from moto's DescribeInstanceTypes JSON: overhead formula, max pods, GPUs, offerings, prices."""

import pytest

from extender.scheduling.catalog import build_catalog
from extender.scheduling.instancetypes import MIB, eni_max_pods, kube_reserved_cpu
from extender.scheduling.pricing import SPOT_FRACTION, PriceBook, Shape, estimate
from tests.unit.scheduling.builders import raw_types


def by_name(types):
    return {t.name: t for t in types}


def test_m5_large_overhead_matches_the_documented_formula():
    m5 = by_name(build_catalog(raw_types(), offerings=None, zones=["z"], prices=PriceBook()))["m5.large"]
    assert m5.max_pods == eni_max_pods(3, 10) == 29
    assert m5.capacity.memory == pytest.approx(8192 * MIB * 0.925)
    assert m5.overhead.memory == (11 * 29 + 255 + 100 + 100) * MIB
    assert m5.overhead.cpu == pytest.approx(0.1 + 0.06 + 0.01)
    assert m5.allocatable.cpu == pytest.approx(2 - 0.17)


def test_kube_reserved_cpu_tiers():
    assert kube_reserved_cpu(1) == pytest.approx(0.06)
    assert kube_reserved_cpu(4) == pytest.approx(0.06 + 0.01 + 0.01)
    assert kube_reserved_cpu(8) == pytest.approx(0.08 + 4 * 0.0025)


def test_metal_excluded_gpus_counted_arm_mapped():
    types = by_name(build_catalog(raw_types(), offerings=None, zones=["z"], prices=PriceBook()))
    assert "m5.metal" not in types
    assert types["g4dn.xlarge"].gpus.get("nvidia.com/gpu") == 1
    assert types["m6g.large"].arch == "arm64" and types["m5.large"].arch == "amd64"


def test_offerings_restrict_zones():
    offerings = [{"InstanceType": "m5.large", "LocationType": "availability-zone", "Location": "a"}]
    types = by_name(build_catalog(raw_types(), offerings=offerings, zones=["a", "b"], prices=PriceBook()))
    assert list(types) == ["m5.large"]
    assert {o.zone for o in types["m5.large"].offerings} == {"a"}


def test_prices_record_their_source_and_spot_falls_back_to_a_fraction():
    book = PriceBook.from_dict({"onDemand": {"m5.large": 0.096}}, origin="test.json")
    shape = Shape(cpu=2, memory_gib=8)
    assert book.on_demand_price("m5.large", shape).source == "on-demand test.json"
    spot = book.spot_price("m5.large", shape)
    assert spot.value == pytest.approx(0.096 * SPOT_FRACTION) and "spot =" in spot.source
    unknown = book.on_demand_price("zz9.large", shape)
    assert unknown.source == "estimate" and unknown.value > 0


def test_estimate_is_close_to_m5_and_never_zero():
    assert estimate("m5.large", Shape(cpu=2, memory_gib=8)) == pytest.approx(0.096, rel=0.05)
    assert estimate("x.nano", Shape(cpu=0, memory_gib=0)) > 0
    assert estimate("m6g.large", Shape(cpu=2, memory_gib=8, arch="arm64")) < estimate("m5.large", Shape(2, 8))


def test_bad_price_file_raises_value_error(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"onDemand": {"m5.large": "cheap"}}')
    with pytest.raises(ValueError, match=r"m5\.large"):
        PriceBook.from_file(path)
