"""Catalog from moto's DescribeInstanceTypes JSON: overhead formula, max pods, GPUs, offerings, prices."""

import pytest

from extender.scheduling.catalog import build_catalog
from extender.scheduling.instancetypes import MIB, eni_max_pods, kube_reserved_cpu
from extender.scheduling.pricing import ESTIMATE, Price, PriceBook, Shape, built_in, estimate
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


def test_prices_record_their_source_and_spot_falls_back_to_the_on_demand_price():
    book = PriceBook.from_dict({"onDemand": {"m5.large": 0.5}}, origin="test.json")
    shape = Shape(cpu=2, memory_gib=8)
    assert book.on_demand_price("m5.large", shape) == Price(0.5, "on-demand test.json")
    # No spot price known: the on-demand price, not a guessed discount.
    assert book.spot_price("m5.large", shape) == Price(0.5, "spot unknown: on-demand test.json")
    unknown = book.on_demand_price("zz9.large", shape)
    assert unknown.source == ESTIMATE and unknown.value > 0
    assert book.spot_price("zz9.large", shape) == unknown


def test_types_missing_from_a_price_file_take_the_built_in_table():
    book = PriceBook.from_dict({"onDemand": {"m5.large": 0.5}}, origin="test.json")
    c5 = book.on_demand_price("c5.2xlarge", Shape(cpu=8, memory_gib=16))
    assert c5 == Price(0.34, "on-demand built-in us-east-1 table 2026-07-20")


def test_the_default_book_prices_from_the_built_in_table_and_never_ranks_c1_cheapest():
    types = by_name(build_catalog(raw_types(), offerings=None, zones=["z"], prices=PriceBook()))
    eight = [t for t in types.values() if t.cpu == 8 and not t.gpus.names() and not t.burstable]
    cheapest = min(eight, key=lambda t: t.offerings[0].price)
    assert cheapest.offerings[0].price_source == "on-demand built-in us-east-1 table 2026-07-20"
    assert not cheapest.name.startswith(("c1.", "m1.", "m2.", "m3.", "c3."))


def test_built_in_table_is_the_shipped_snapshot():
    table = built_in()
    assert len(table.on_demand) > 1000 and table.fallback is None
    assert table.on_demand["m5.large"] == 0.096


def test_estimate_is_close_to_m5_and_never_zero():
    assert estimate("m5.large", Shape(cpu=2, memory_gib=8)) == pytest.approx(0.096, rel=0.05)
    assert estimate("x.nano", Shape(cpu=0, memory_gib=0)) > 0
    assert estimate("m6g.large", Shape(cpu=2, memory_gib=8, arch="arm64")) < estimate("m5.large", Shape(2, 8))


def test_bad_price_file_raises_value_error(tmp_path):
    path = tmp_path / "p.json"
    path.write_text('{"onDemand": {"m5.large": "cheap"}}')
    with pytest.raises(ValueError, match=r"m5\.large"):
        PriceBook.from_file(path)
