"""Regenerate tests/data/instance-types.json: a DescribeInstanceTypes response for ~60 types, from moto.

Run: python tests/data/generate_instance_types.py  (needs moto; no network).
"""

from __future__ import annotations

import json
from pathlib import Path

import boto3
from moto import mock_aws

TYPES = [
    *(
        f"m5.{s}"
        for s in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge", "24xlarge")
    ),
    *(
        f"c5.{s}"
        for s in ("large", "xlarge", "2xlarge", "4xlarge", "9xlarge", "12xlarge", "18xlarge", "24xlarge")
    ),
    *(f"c5a.{s}" for s in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge")),
    *(f"r5.{s}" for s in ("large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge")),
    *(f"t3.{s}" for s in ("micro", "small", "medium", "large", "xlarge", "2xlarge")),
    *(f"m6g.{s}" for s in ("medium", "large", "xlarge", "2xlarge", "4xlarge", "8xlarge")),
    *(f"c6g.{s}" for s in ("medium", "large", "xlarge", "2xlarge", "4xlarge")),
    *(f"g4dn.{s}" for s in ("xlarge", "2xlarge", "4xlarge", "12xlarge")),
    "p3dn.24xlarge",
    "p4d.24xlarge",  # moto has no p3 below 24xlarge
    "m5.metal",
    "inf1.xlarge",
    "a1.large",
]


def main() -> None:
    with mock_aws():
        ec2 = boto3.client("ec2", region_name="us-west-2")
        items = ec2.describe_instance_types(InstanceTypes=TYPES)["InstanceTypes"]
    items.sort(key=lambda i: i["InstanceType"])
    out = Path(__file__).with_name("instance-types.json")
    out.write_text(json.dumps({"InstanceTypes": items}, indent=1, default=str) + "\n")
    print(f"wrote {len(items)} types to {out}")


if __name__ == "__main__":
    main()
