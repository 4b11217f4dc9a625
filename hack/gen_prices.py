"""Regenerate karpy's built-in price table from the AWS Price List API.

    .venv/bin/python -m hack.gen_prices [--region us-east-1] [--output PATH]

The output defaults to the package's table, extender/data/ec2-on-demand-prices.json.

Needs AWS credentials allowed `pricing:GetProducts` (the Price List API answers in us-east-1 for
every region). Writes `{"region", "currency", "unit", "snapshot", "onDemand": {type: USD/h}}`, on-demand
Linux shared-tenancy prices, the same query the controller makes (extender/cloud/aws/pricing.py
`fetch_on_demand`), so the shipped table and a live answer agree. Karpenter regenerates its
`zz_generated.pricing.go` the same way. Tests never run this; they run `table_document` on a
recorded-shape answer.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

OUTPUT = Path(__file__).resolve().parents[1] / "extender" / "data" / "ec2-on-demand-prices.json"


def table_document(prices: Mapping[str, float], region: str, snapshot: str) -> dict[str, Any]:
    """The file's content: metadata first, prices sorted by type so regenerations diff cleanly."""
    return {
        "region": region,
        "currency": "CNY" if region.startswith("cn-") else "USD",
        "unit": "per instance-hour, on-demand, Linux",
        "snapshot": snapshot,
        "onDemand": {name: prices[name] for name in sorted(prices)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--region", default="us-east-1", help="region whose prices to fetch")
    parser.add_argument("--output", type=Path, default=OUTPUT, help="where to write the table")
    args = parser.parse_args(argv)

    import boto3

    from extender.cloud.aws.pricing import fetch_on_demand

    client = boto3.client("pricing", region_name="us-east-1")
    prices = fetch_on_demand(client, args.region)
    if not prices:
        print(
            f"the Price List API returned no prices for {args.region}; table left as it is", file=sys.stderr
        )
        return 1
    snapshot = datetime.now(UTC).date().isoformat()
    document = table_document(prices, args.region, snapshot)
    args.output.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {len(prices)} prices for {args.region} ({snapshot}) to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
