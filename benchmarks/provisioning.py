"""Pending -> bound latency (p50/p95) for 5, 100 and 1,000 pods on the local cluster + moto,
with the time split into batch wait, packing, fleet call and binds (node create is timed per
batch in ProvisioningController.reports, not exported).

Needs a running local cluster (`make cluster-up`; KARPY_CLUSTER_STATE names its state.json) with
the Provisioner CRD applied, and `karpy controller` serving the extender on the cluster's extender
port, e.g.:

    KARPY_KUBECONFIG=... KARPY_AWS_ENDPOINT_URL=... karpy controller --bind 127.0.0.1:<port> &
    .venv/bin/python -m benchmarks.provisioning --metrics http://127.0.0.1:<port>/metrics

Latency per pod = PodScheduled=True transition - creationTimestamp (both from the apiserver).
The split comes from the controller's own histograms (sum deltas per run, from /metrics).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import time
import uuid
from pathlib import Path
from typing import Any

import requests

PHASES = {
    "batch wait": "karpy_allocation_controller_batch_window_seconds_sum",
    "packing": "karpy_allocation_controller_binpacking_duration_seconds_sum",
    "fleet call": "karpy_allocation_controller_launch_duration_seconds_sum",
    "binds": "karpy_allocation_controller_bind_duration_seconds_sum",
}


def scrape(url: str) -> dict[str, float]:
    totals: dict[str, float] = {}
    for line in requests.get(url, timeout=5).text.splitlines():
        for phase, metric in PHASES.items():
            if line.startswith(metric):
                totals[phase] = totals.get(phase, 0.0) + float(line.rsplit(" ", 1)[1])
    return totals


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(core: Any, custom: Any, count: int, metrics_url: str) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    name = f"bench-{uuid.uuid4().hex[:6]}"
    custom.create_cluster_custom_object(
        "karpenter.sh",
        "v1alpha5",
        "provisioners",
        {
            "apiVersion": "karpenter.sh/v1alpha5",
            "kind": "Provisioner",
            "metadata": {"name": name},
            "spec": {},
        },
    )
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    while True:
        try:
            core.read_namespaced_service_account("default", name)
            break
        except ApiException:
            time.sleep(0.2)
    before = scrape(metrics_url)
    for i in range(count):
        core.create_namespaced_pod(
            name,
            {
                "metadata": {"name": f"p{i}"},
                "spec": {
                    "nodeSelector": {"karpenter.sh/provisioner-name": name},
                    "terminationGracePeriodSeconds": 0,
                    "containers": [
                        {
                            "name": "c",
                            "image": "pause",
                            "resources": {"requests": {"cpu": "500m", "memory": "256Mi"}},
                        }
                    ],
                },
            },
        )
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod(name).items
        if len(pods) == count and all(p.spec.node_name for p in pods):
            break
        time.sleep(0.5)
    latencies = []
    for p in pods:
        cond = next(
            (c for c in p.status.conditions or [] if c.type == "PodScheduled" and c.status == "True"), None
        )
        if cond is not None:
            latencies.append((cond.last_transition_time - p.metadata.creation_timestamp).total_seconds())
    after = scrape(metrics_url)
    split = ", ".join(f"{k} {after.get(k, 0) - before.get(k, 0):.2f}s" for k in PHASES)
    print(
        f"{count:>5} pods: bound {len(latencies)}/{count}, p50 {percentile(latencies, 0.5):.2f}s "
        f"p95 {percentile(latencies, 0.95):.2f}s; controller time: {split}"
    )
    core.delete_namespace(name)


def main() -> None:
    from kubernetes import client, config

    parser = argparse.ArgumentParser()
    parser.add_argument("--metrics", required=True, help="the controller's /metrics URL")
    parser.add_argument("--sizes", default="5,100,1000")
    args = parser.parse_args()
    state = json.loads(Path(os.environ["KARPY_CLUSTER_STATE"]).read_text())
    configuration = client.Configuration()
    config.load_kube_config(config_file=state["kubeconfig"], client_configuration=configuration)
    api = client.ApiClient(configuration)
    for size in (int(s) for s in re.split(r"[, ]+", args.sizes) if s):
        run(client.CoreV1Api(api), client.CustomObjectsApi(api), size, args.metrics)


if __name__ == "__main__":
    main()
