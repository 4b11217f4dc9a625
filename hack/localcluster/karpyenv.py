"""How a `karpy controller` process is configured for a local cluster (its state.json): shared by the
integration tests and the benchmarks that start the real entry point, so neither imports the other."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

#: The built-in on-demand table shipped in the package (what karpy uses without the Pricing API).
PRICES = Path(__file__).resolve().parents[2] / "extender" / "data" / "ec2-on-demand-prices.json"


def controller_env(state: dict[str, Any], bind: str) -> dict[str, str]:
    """The environment of a `karpy controller` for the local cluster described by state.json."""
    seed = state["aws"]
    env = {
        **os.environ,
        # moto accepts any key; boto3 must find one, and never a real one.
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "KARPY_KUBECONFIG": state["kubeconfig"],
        "KARPY_CLUSTER_NAME": state.get("cluster_name", seed["cluster_name"]),
        "KARPY_CLUSTER_ENDPOINT": state["apiserver_url"],
        "KARPY_AWS_REGION": seed["region"],
        "KARPY_AWS_ENDPOINT_URL": seed["endpoint_url"],
        "KARPY_AWS_SSM_PREFIX": seed["ssm_prefix"],
        "KARPY_AWS_PRICING_API": "false",
        "KARPY_AWS_PRICE_FILE": str(PRICES),
        "KARPY_AWS_DEFAULT_INSTANCE_PROFILE": "karpy-node",
        "KARPY_EXTENDER_BIND": bind,
        "KARPY_EXTENDER_METRICS_BIND": bind,
        "KARPY_LEADER_ELECTION_ENABLED": "false",
    }
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
        env.pop(name, None)
    return env
