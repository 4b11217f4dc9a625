"""The dashboards and alerts proven on live metrics (issue 26).

`karpy controller` and `karpy webhook` run as users run them, against the local control plane and
moto. The test drives a scale-up (three pods onto nodes karpy launches, kwok makes them Ready), a
Provisioner whose launches fail (no security group matches), webhook and extender traffic with a bad
request each, then a scale-down by consolidation. It scrapes both /metrics during the scale-up and
after the scale-down, and then:

- renders the chart with dashboards and alerts on (`helm template`), reads every PromQL expression
  of every dashboard panel and alert with Prometheus's own parser (hack/promql.py builds it from
  github.com/prometheus/prometheus), and checks that each selector matches at least one scraped
  series and every label the expression groups by is on one;
- runs every alert with `promtool test rules` on the scraped series, with thresholds set so each
  alert's condition is met by this run (and KarpyNoLeader, with a leader, not met);
- installs the Prometheus Operator's CRDs and applies the chart's ServiceMonitors, PodMonitors,
  PrometheusRule and dashboard ConfigMaps on the API server.

About 90 s: the controller's start, the launches, consolidation's validation delay.
"""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import boto3
import pytest
import requests
import yaml
from prometheus_client.parser import text_string_to_metric_families

from extender.api import labels as wk
from extender.cli.webhook import local_command
from hack import helm as helm_build
from hack import monitoring_crds, promql
from hack.localcluster.karpyenv import install_crd, running_controller
from tests import builders
from tests.integration.helpers import (
    controller_env,
    create_pods,
    free_port,
    guarded,
    pod_manifest,
    unique,
    wait_for,
)

pytestmark = pytest.mark.integration

CHART = Path(__file__).resolve().parents[2] / "charts" / "karpy"
MONITORING_ON = (
    "monitoring.dashboards.enabled=true",
    "monitoring.prometheusRule.enabled=true",
    "monitoring.serviceMonitor.enabled=true",
    "monitoring.podMonitor.enabled=true",
)
#: Thresholds this run crosses, so promtool sees each alert fire on live data.
TRIPPED = (
    "monitoring.prometheusRule.pendingMinutes=0",
    "monitoring.prometheusRule.limitRatio=0.01",
    "monitoring.prometheusRule.launchErrors=0",
    "monitoring.prometheusRule.interruptionQueueMessages=-1",
)
#: Grafana's variables, as it interpolates them for a query over everything.
GRAFANA_VARIABLES = {"$__rate_interval": "5m", "$provisioner": ".*"}

Series = tuple[str, tuple[tuple[str, str], ...]]


@dataclass
class Run:
    during: dict[Series, float]  # scraped while the nodes were up
    after: dict[Series, float]  # scraped after the scale-down
    live: str  # the Provisioner that scaled up and down
    broken: str  # the Provisioner whose launches fail
    status: dict[str, Any]  # `karpy status --metrics URL -o json` beside the `during` scrape

    def union(self) -> dict[Series, float]:
        return {**self.during, **self.after}


def parse_scrape(text: str) -> dict[Series, float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def helm_render(*sets: str) -> list[dict[str, Any]]:
    argv = [str(helm_build.binary()), "template", "karpy", str(CHART), "--namespace", "karpy"]
    for value in ("clusterName=live-metrics", *sets):
        argv += ["--set", value]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def dashboard_expressions(docs: list[dict[str, Any]]) -> dict[str, str]:
    found = {}
    for doc in docs:
        if doc["kind"] != "ConfigMap" or not doc["metadata"]["name"].endswith("-dashboard"):
            continue
        for file, text in doc["data"].items():
            board = json.loads(text)
            for panel in board["panels"]:
                for target in panel["targets"]:
                    found[f"{file}: {panel['title']} [{target['refId']}]"] = target["expr"]
    return found


def alert_rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    (rule,) = [d for d in docs if d["kind"] == "PrometheusRule"]
    return [r for group in rule["spec"]["groups"] for r in group["rules"]]


def interpolate(expr: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        expr = expr.replace(variable, value)
    return expr


def matches(labels: Mapping[str, str], matcher: Mapping[str, str]) -> bool:
    value, want = labels.get(matcher["label"], ""), matcher["value"]
    return {
        "=": lambda: value == want,
        "!=": lambda: value != want,
        "=~": lambda: re.fullmatch(want, value) is not None,
        "!~": lambda: re.fullmatch(want, value) is None,
    }[matcher["type"]]()


# --- the run ------------------------------------------------------------------------------------


@contextmanager
def _webhook(cluster: Any, folder: Path) -> Iterator[str]:
    """`karpy webhook --self-signed` on a free port; yields its URL."""
    port = free_port()
    argv = local_command(
        port=port,
        cert_dir=folder,
        extra=["--kubeconfig", cluster.kubeconfig, "--cluster-name", "demo", "--namespace", "karpy"],
    )
    log = folder / "webhook.log"
    with log.open("wb") as out:
        process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    try:
        url = f"https://127.0.0.1:{port}"

        def ready() -> bool:
            try:
                context = ssl.create_default_context(cafile=str(folder / "ca.crt"))
                with urllib.request.urlopen(f"{url}/readyz", context=context, timeout=2):
                    return True
            except (OSError, ssl.SSLError):
                assert process.poll() is None, log.read_text()[-2000:]
                return False

        wait_for(ready, 30, "the webhook to serve")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=20)


def _review(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    group, version = ("karpenter.sh", "v1alpha5") if kind == "Provisioner" else ("", "v1")
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": unique("uid"),
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
            "operation": "CREATE",
            "namespace": obj["metadata"].get("namespace", ""),
            "object": obj,
        },
    }


def _drive_webhook(webhook: str, ca: str, namespace: str) -> None:
    """A Provisioner admitted (mutate, validate), a pod defaulted, one malformed review."""
    provisioner = {"apiVersion": wk.API_VERSION, "kind": "Provisioner", "metadata": {"name": "x"}, "spec": {}}
    pod = pod_manifest("p", "1") | {"metadata": {"name": "p", "namespace": namespace}}
    for path, body in (
        ("/mutate/provisioner", _review(provisioner, "Provisioner")),
        ("/validate/provisioner", _review(provisioner, "Provisioner")),
        ("/mutate/pod", _review(pod, "Pod")),
    ):
        assert requests.post(f"{webhook}{path}", json=body, verify=ca, timeout=10).status_code == 200
    malformed = requests.post(f"{webhook}/validate/provisioner", data=b"{", verify=ca, timeout=10)
    assert malformed.status_code == 400


def _provisioner(kube: Any, name: str, spec: dict[str, Any]) -> None:
    from kubernetes import client

    body = builders.provisioner_manifest(name) | {"spec": spec}
    client.CustomObjectsApi(kube).create_cluster_custom_object(
        "karpenter.sh", "v1alpha5", "provisioners", body
    )


@pytest.fixture(scope="module")
def run(cluster: Any, provisioner_crd: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Run]:
    from kubernetes import client

    folder = tmp_path_factory.mktemp("live-metrics")
    seed = cluster.aws
    sqs = boto3.client(
        "sqs",
        region_name=seed.region,
        endpoint_url=seed.endpoint_url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )
    queue = sqs.create_queue(QueueName=unique("live-metrics"))["QueueUrl"]
    metrics_port = free_port()
    env = {
        **controller_env(cluster.state, f"127.0.0.1:{cluster.extender_port}"),
        "KARPY_EXTENDER_METRICS_BIND": f"127.0.0.1:{metrics_port}",
        "KARPY_AWS_INTERRUPTION_QUEUE": queue,
        "KARPY_LIFECYCLE_SQS_WAIT_SECONDS": "1",
        "KARPY_LIFECYCLE_CONSOLIDATION_INTERVAL_SECONDS": "2",
        "KARPY_LIFECYCLE_CONSOLIDATION_VALIDATION_SECONDS": "2",
        "KARPY_LIFECYCLE_CONSOLIDATION_MIN_NODE_AGE_SECONDS": "5",
    }
    live, broken = unique("live"), unique("broken")
    namespace = unique("live-metrics")
    scrape_url = f"http://127.0.0.1:{metrics_port}/metrics"
    with cluster.api_client() as kube:
        core = client.CoreV1Api(kube)
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
        try:
            wait_for(
                lambda: _has_default_account(core, namespace), 30, "the namespace's default ServiceAccount"
            )
            spot = [{"key": wk.CAPACITY_TYPE, "operator": "In", "values": ["spot"]}]
            _provisioner(
                kube,
                live,
                {
                    "requirements": spot,
                    "limits": {"resources": {"cpu": "100"}},
                    "consolidation": {"enabled": True},
                },
            )
            _provisioner(
                kube,
                broken,
                {
                    "requirements": spot,
                    "provider": {"securityGroupSelector": {"Name": "karpy-no-such-group"}},
                },
            )
            with (
                running_controller(
                    env, f"{cluster.extender_url}readyz", folder / "controller.log", ready_seconds=180
                ),
                _webhook(cluster, folder) as webhook,
            ):
                ca = str(folder / "ca.crt")
                # Scale-up: three 1-CPU pods for `live`, one pod whose Provisioner cannot launch.
                create_pods(
                    core,
                    namespace,
                    [pod_manifest(f"up-{i}", "1", selector={wk.PROVISIONER_NAME: live}) for i in range(3)]
                    + [pod_manifest("stuck", "1", selector={wk.PROVISIONER_NAME: broken})],
                )
                wait_for(
                    lambda: _ready_pods(core, namespace) >= 3, 120, "3 pods bound and Ready on karpy's nodes"
                )
                # A pod that fits on karpy's nodes: kube-scheduler places it, asking the extender
                # (it requests karpy.sh/guarded, as the shipped config sends only such pods).
                via = guarded(pod_manifest("via-scheduler", "100m", selector={wk.PROVISIONER_NAME: live}))
                create_pods(core, namespace, [via])
                wait_for(
                    lambda: _ready_pods(core, namespace) >= 4,
                    60,
                    "kube-scheduler to place a pod on karpy's node",
                )
                # That pod may have been Unschedulable first (the startup race below): the observer's
                # pending gauge counts it until a refresh that read the pending set after its bind.
                placed_at = time.time()
                stuck = core.read_namespaced_pod("stuck", namespace)
                stuck_at = stuck.metadata.creation_timestamp.timestamp()
                # One interruption message: a spot warning for an instance karpy does not know.
                warning = {
                    "version": "0",
                    "id": unique("warning"),
                    "detail-type": "EC2 Spot Instance Interruption Warning",
                    "source": "aws.ec2",
                    "time": "2026-12-03T14:00:00Z",
                    "detail": {"instance-id": "i-0123456789abcdef0", "instance-action": "terminate"},
                }
                sqs.send_message(QueueUrl=queue, MessageBody=json.dumps(warning))
                _drive_webhook(webhook, ca, namespace)
                # A malformed extender request (kube-scheduler's own calls give the latency series).
                answer = requests.post(f"{cluster.extender_url}filter", data=b"[]", timeout=10).json()
                assert "bad request" in answer["Error"]

                def scraped_with(*names: str, ours: bool = False) -> dict[Series, float] | None:
                    scrape = parse_scrape(requests.get(scrape_url, timeout=10).text)
                    scrape.update(
                        parse_scrape(requests.get(f"{webhook}/metrics", verify=ca, timeout=10).text)
                    )
                    present = {name for name, _ in scrape}
                    # This run's own series: nodes of earlier tests in the shared cluster may give
                    # the names before the observer has refreshed with this run's nodes and pods.
                    oldest = _value(
                        scrape, "karpy_pods_pending_oldest_seconds", reason="waiting_for_capacity"
                    )
                    up = not ours or (
                        _value(scrape, "karpy_nodes", provisioner=live) >= 1
                        and _value(scrape, "karpy_provisioner_usage", provisioner=live, resource_type="cpu")
                        >= 3
                        and oldest > 0
                        # The refresh's own time (the stuck pod's creation plus its age, the observer's
                        # clock) is past the placed pod's Ready, with a second for the bind event to
                        # reach the controller's watch (an older refresh may count that pod pending: 2).
                        and stuck_at + oldest > placed_at + 1
                    )
                    return scrape if up and all(n in present for n in names) else None

                # The observer refreshes every 5 s; the failing launch retries after its backoff.
                during = wait_for(
                    lambda: scraped_with(
                        "karpy_nodes",
                        "karpy_launch_errors_total",
                        "karpy_interruption_queue_messages",
                        "karpenter_interruption_received_messages_total",
                        ours=True,
                    ),
                    60,
                    "this run's nodes, usage, waiting pod (refreshed after the placed pod's bind), "
                    "launch errors, the queue depth and the interruption message in the scrape",
                )
                shown = subprocess.run(
                    [
                        str(Path(sys.executable).with_name("karpy")),
                        "status",
                        "--metrics",
                        scrape_url,
                        "-o",
                        "json",
                    ],
                    env={**env, "KARPY_KUBECONFIG": cluster.kubeconfig},
                    capture_output=True,
                    text=True,
                    timeout=60,
                    check=True,
                )
                # Scale-down: the pods go, consolidation deletes the empty nodes.
                for name in ("up-0", "up-1", "up-2", "via-scheduler"):
                    core.delete_namespaced_pod(name, namespace, grace_period_seconds=0)
                wait_for(lambda: not _karpy_nodes(core, live), 120, "consolidation to delete the empty nodes")
                after = wait_for(
                    lambda: _scaled_down(scraped_with("karpy_disruption_decisions_total"), live),
                    30,
                    "the scale-down in the scrape",
                )
        finally:
            core.delete_namespace(namespace)
            for name in (live, broken):
                _delete_provisioner(kube, name)
            sqs.delete_queue(QueueUrl=queue)
    yield Run(during, after, live, broken, json.loads(shown.stdout))


def _has_default_account(core: Any, namespace: str) -> bool:
    return any(a.metadata.name == "default" for a in core.list_namespaced_service_account(namespace).items)


def _ready_pods(core: Any, namespace: str) -> int:
    return sum(
        1
        for p in core.list_namespaced_pod(namespace).items
        if any(c.type == "Ready" and c.status == "True" for c in p.status.conditions or ())
    )


def _karpy_nodes(core: Any, provisioner: str) -> list[Any]:
    return core.list_node(label_selector=f"{wk.PROVISIONER_NAME}={provisioner}").items


def _scaled_down(scrape: dict[Series, float] | None, provisioner: str) -> dict[Series, float] | None:
    """The scrape once it shows the scale-down: a consolidation performed, no node series left."""
    if scrape is None:
        return None
    performed = ("karpy_disruption_decisions_total", (("outcome", "performed"), ("reason", "consolidated")))
    nodes = [ls for name, ls in scrape if name == "karpy_nodes" and ("provisioner", provisioner) in ls]
    return scrape if scrape.get(performed, 0) > 0 and not nodes else None


# --- proofs -------------------------------------------------------------------------------------


def _value(scrape: dict[Series, float], name: str, **labels: str) -> float:
    return sum(v for (n, ls), v in scrape.items() if n == name and labels.items() <= dict(ls).items())


def test_the_new_metrics_carry_what_the_run_did(run: Run) -> None:
    during, after, live = run.during, run.after, run.live
    startup = "karpy_pods_startup_duration_seconds_count"
    # The 3 pods karpy bound, and the pod kube-scheduler placed on their node when the controller saw
    # it pending before its bind (a race it may lose): each once, to bound and to Ready.
    seen, counted = (_value(scrape, startup, provisioner=live, until="bound") for scrape in (during, after))
    assert 3 <= seen <= counted <= 4
    assert _value(after, startup, provisioner=live, until="ready") == counted
    assert _value(during, "karpy_nodes", provisioner=live) >= 1
    assert _value(during, "karpy_nodes_price_dollars_per_hour", provisioner=live) > 0
    assert _value(during, "karpy_provisioner_limit", provisioner=live, resource_type="cpu") == 100
    assert _value(during, "karpy_provisioner_usage", provisioner=live, resource_type="cpu") >= 3
    assert _value(during, "karpy_pods_pending", reason="waiting_for_capacity") == 1  # the stuck pod
    assert _value(during, "karpy_pods_pending_oldest_seconds", reason="waiting_for_capacity") > 0
    assert _value(during, "karpy_launch_errors_total", provisioner=run.broken, code="NoSecurityGroups") >= 1
    assert _value(during, "karpy_batch_pods_count") >= 1
    assert _value(after, "karpy_nodes", provisioner=live) == 0  # the series went with the nodes
    assert _value(after, "karpy_disruption_decisions_total", reason="consolidated", outcome="performed") >= 1
    assert _value(during, "karpy_extender_errors_total", verb="filter", reason="bad_request") >= 1
    assert _value(during, "karpy_webhook_requests_total", result="bad_request") == 1
    figures = run.status["figures"]
    assert figures["source"] == "metrics"
    bound = next(s for s in figures["startup"] if s["until"] == "bound")
    # The same counter, read between the two scrapes: the 3 or 4 above (a fixed 3 failed whenever the
    # controller also counted the pod kube-scheduler placed).
    assert seen <= bound["pods"] <= counted and 0 < bound["p50"] <= bound["p95"]
    limit = next(lim for lim in figures["limits"] if lim["provisioner"] == live)
    assert (limit["resource"], limit["limit"], limit["used"] >= 3) == ("cpu", 100, True)
    assert figures["price_per_hour"] > 0 and figures["lower_bound"] is not None


def test_every_dashboard_and_alert_expression_names_live_series(run: Run) -> None:
    docs = helm_render(*MONITORING_ON)
    expressions = dashboard_expressions(docs)
    expressions.update({f"alert {r['alert']}": r["expr"] for r in alert_rules(docs)})
    assert len(expressions) >= 40
    scrape = run.union()
    series: dict[str, list[dict[str, str]]] = {}
    for name, labels in scrape:
        series.setdefault(name, []).append(dict(labels))
    parsed = promql.analyse([interpolate(e) for e in expressions.values()])
    problems = []
    for (where, expr), result in zip(expressions.items(), parsed, strict=True):
        if result.get("error"):
            problems.append(f"{where}: {result['error']}")
            continue
        assert result["selectors"], f"{where} names no metric: {expr}"
        named = set()
        for selector in result["selectors"]:
            found = series.get(selector["name"], [])
            named.update(label for labels in found for label in labels)
            if not any(all(matches(ls, m) for m in selector["matchers"]) for ls in found):
                problems.append(f"{where}: no scraped series for {selector}")
        missing = set(result["grouping"]) - named
        if missing:
            problems.append(f"{where}: grouped by {sorted(missing)}, on none of its series")
    assert not problems, "\n".join(problems)


def _series_text(name: str, labels: tuple[tuple[str, str], ...]) -> str:
    inner = ",".join(
        f'{k}="{v.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34))}"' for k, v in labels
    )
    return f"{name}{{{inner}}}"


def _input_series(scrape: dict[Series, float]) -> list[dict[str, str]]:
    """Each scraped series over 20 minutes at 1m: a cumulative one (counter, histogram) grows from 0
    at process start to the scraped value, a gauge holds it."""
    out = []
    for (name, labels), value in sorted(scrape.items()):
        if value != value or value in (float("inf"), float("-inf")):
            continue  # promtool's series notation has no NaN/Inf steps worth testing here
        cumulative = name.endswith(("_total", "_bucket", "_count", "_sum"))
        # Explicit steps, the last exactly the scraped value (a+bxn would add rounding errors).
        steps = [value * i / 20 for i in range(20)] + [value] if cumulative else [value] * 21
        values = " ".join(repr(v) for v in steps)
        out.append({"series": _series_text(name, labels), "values": values})
    return out


def _expected(scrape: dict[Series, float], rule: dict[str, Any]) -> list[dict[str, str]]:
    """What each alert must fire with on this run's series (thresholds of TRIPPED)."""

    def where(name: str, **labels: str) -> list[tuple[dict[str, str], float]]:
        return [
            (dict(ls), v) for (n, ls), v in scrape.items() if n == name and labels.items() <= dict(ls).items()
        ]

    alert = rule["alert"]
    if alert == "KarpyPodsWaitingForCapacity":
        assert (
            max(v for _, v in where("karpy_pods_pending_oldest_seconds", reason="waiting_for_capacity")) > 0
        )
        return [{}]
    if alert == "KarpyProvisionerAtLimit":
        limits = {(ls["provisioner"], ls["resource_type"]): v for ls, v in where("karpy_provisioner_limit")}
        at = [
            {"provisioner": ls["provisioner"], "resource_type": ls["resource_type"]}
            for ls, used in where("karpy_provisioner_usage")
            if limits.get((ls["provisioner"], ls["resource_type"]), 0) > 0
            and used / limits[ls["provisioner"], ls["resource_type"]] >= 0.01
        ]
        assert at, "no Provisioner with usage against a limit in the scrape"
        return at
    if alert == "KarpyLaunchErrorsRising":
        return [
            {"provisioner": ls["provisioner"], "code": ls["code"]}
            for ls, v in where("karpy_launch_errors_total")
            if v > 0
        ]
    if alert == "KarpyNoLeader":
        assert sum(v for _, v in where("karpenter_leader_election_is_leader")) >= 1
        return []
    if alert == "KarpyInterruptionQueueBackingUp":
        assert where("karpy_interruption_queue_messages")
        return [{}]
    if alert == "KarpyWebhookErrors":
        paths = {
            ls["path"]
            for ls, v in where("karpy_webhook_requests_total")
            if ls["result"] in ("error", "bad_request") and v > 0
        }
        listing = any(v > 0 for _, v in where("karpy_webhook_provisioner_list_total", result="error"))
        return [{"path": p} for p in sorted(paths)] + ([{}] if listing else [])
    if alert == "KarpyExtenderErrors":
        return [
            {"verb": ls["verb"], "reason": ls["reason"]}
            for ls, v in where("karpy_extender_errors_total")
            if v > 0
        ]
    raise AssertionError(f"no expectation for alert {alert}: add one")


def test_every_alert_fires_on_the_scraped_series_under_promtool(run: Run, tmp_path: Path) -> None:
    rules = alert_rules(helm_render(*MONITORING_ON, *TRIPPED))
    # The annotations' templates are checked by `promtool check rules`; the test compares labels.
    bare = [{k: v for k, v in r.items() if k != "annotations"} for r in rules]
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": [{"name": "karpy", "rules": bare}]}))
    (tmp_path / "annotated.yaml").write_text(yaml.safe_dump({"groups": [{"name": "karpy", "rules": rules}]}))
    tests = []
    for rule in rules:
        expected = _expected(run.during, rule)
        labels = {"severity": rule["labels"]["severity"]}
        tests.append(
            {
                "eval_time": "20m",
                "alertname": rule["alert"],
                "exp_alerts": [{"exp_labels": {**labels, **e}} for e in expected],
            }
        )
    assert sum(1 for t in tests if t["exp_alerts"]) >= 6  # all but KarpyNoLeader fire
    # `karpy status --metrics` shows the startup quantiles the performance dashboard plots: the same
    # histogram_quantile, here evaluated by Prometheus's engine on the same series.
    same = []
    for row in run.status["figures"]["startup"]:
        if row["until"] != "bound":  # Ready may have been observed between the two scrapes
            continue
        for q, key in ((0.5, "p50"), (0.95, "p95")):
            buckets = 'karpy_pods_startup_duration_seconds_bucket{until="bound"}'
            quantile = f"histogram_quantile({q}, sum by (le) ({buckets}))"
            same.append(
                {
                    "expr": f"abs({quantile} - {row[key]!r}) < bool 1e-9",
                    "eval_time": "20m",
                    "exp_samples": [{"labels": "{}", "value": 1}],
                }
            )
    assert len(same) == 2
    suite = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": _input_series(run.during),
                "alert_rule_test": tests,
                "promql_expr_test": same,
            }
        ],
    }
    (tmp_path / "test.yaml").write_text(yaml.safe_dump(suite))
    promtool = str(promql.binary("promtool"))
    for argv in ([promtool, "check", "rules", "annotated.yaml"], [promtool, "test", "rules", "test.yaml"]):
        result = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, f"{' '.join(argv)}:\n{result.stdout}\n{result.stderr}"


def test_the_charts_monitoring_objects_are_accepted_by_the_api_server(cluster: Any) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from kubernetes.dynamic import DynamicClient

    docs = helm_render(*MONITORING_ON)
    monitoring = [
        d
        for d in docs
        if d["apiVersion"].startswith("monitoring.coreos.com/")
        or (d["kind"] == "ConfigMap" and d["metadata"]["name"].endswith("-dashboard"))
    ]
    assert sorted(d["kind"] for d in monitoring) == [
        "ConfigMap",
        "ConfigMap",
        "ConfigMap",
        "PodMonitor",
        "PodMonitor",
        "PrometheusRule",
        "ServiceMonitor",
        "ServiceMonitor",
    ]
    assert all(
        d["metadata"]["labels"].get("grafana_dashboard") == "1"
        for d in monitoring
        if d["kind"] == "ConfigMap"
    )
    with cluster.api_client() as api:
        for path in monitoring_crds.files():
            install_crd(api, path)
        try:
            client.CoreV1Api(api).create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name="karpy"))
            )
        except ApiException as err:
            if err.status != 409:
                raise
        dynamic = DynamicClient(api)

        def apply(obj: dict[str, Any]) -> Any:
            resource = dynamic.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
            return dynamic.server_side_apply(
                resource,
                body=obj,
                name=obj["metadata"]["name"],
                namespace=obj["metadata"]["namespace"],
                field_manager="karpy-live-metrics-test",
                dry_run="All",
            )

        for obj in monitoring:
            stored = apply(obj).to_dict()
            assert stored["metadata"]["name"] == obj["metadata"]["name"]
        # The CRDs' schemas are enforced: the same ServiceMonitor with an unknown scheme is refused.
        monitor = next(d for d in monitoring if d["kind"] == "ServiceMonitor")
        with pytest.raises(ApiException) as refused:
            apply(
                {
                    **monitor,
                    "spec": {**monitor["spec"], "endpoints": [{"port": "metrics", "scheme": "gopher"}]},
                }
            )
        assert refused.value.status == 422


def _delete_provisioner(kube: Any, name: str) -> None:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    try:
        client.CustomObjectsApi(kube).delete_cluster_custom_object(
            "karpenter.sh", "v1alpha5", "provisioners", name
        )
    except ApiException as err:
        if err.status != 404:
            raise
