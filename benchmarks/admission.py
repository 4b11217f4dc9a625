"""Admission cost of hostile input (issue 31): the disruption-budget schedule before and after, every
pattern the loaders apply, and whole reviews of worst-case bodies.

    .venv/bin/python -m benchmarks.admission [--budget-seconds 5]

1. schedule: a NodePool budget `schedule` of N space-separated tokens ending in two newlines (the
   shape that makes the CRD's pattern backtrack), at 10, 100, 1,000 and 10,000 tokens:
   - before: the pattern karpy matched up to f426913 (OLD_SCHEDULE_PATTERN below, copied verbatim),
     skipped at sizes where its measured growth predicts more than --budget-seconds;
   - after: `nodepool.validate_schedule` (length bound, then robfig/cron's parser), and `cron.parse`
     alone on a five-field schedule whose minute list holds N terms (linear in N, no bound).
2. patterns: every compiled pattern in extender.api, worst time over adversarial inputs per size.
3. reviews: /validate/nodepool, /validate/ec2nodeclass and /validate/provisioner on worst-case
   bodies of up to the webhook's body bound (WebhookConfig.max_body_bytes).

Figures only (no pass/fail): the webhook's goal is every review within 1 s whatever it holds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import time
from collections.abc import Callable
from typing import Any

from marshmallow import ValidationError

from extender.api import cron, ec2nodeclass, nodeclass_schema, nodepool, provisioner_schema, quantity, ranges
from extender.api.nodepool import validate_schedule
from tests.builders import nodepool_manifest
from tests.unit.api.test_admission_bounds import three_line_schedule
from tests.unit.api.test_nodepool import node_class
from tests.unit.webhook.reviews import make_review, provisioner_manifest, valid_spec
from webhook.app import create_app
from webhook.config import WebhookConfig

# "Before" reference, copied verbatim from extender/api/nodepool.py at f426913 (the CRD's pattern,
# which Go's RE2 runs in linear time and Python's backtracking engine does not).
OLD_SCHEDULE_PATTERN = re.compile(
    r"^(@(annually|yearly|monthly|weekly|daily|midnight|hourly))|((.+)\s(.+)\s(.+)\s(.+)\s(.+))$"
)
# "Before" reference, extender/api/quantity.py at f426913.
OLD_QUANTITY_PATTERN = re.compile(
    r"^[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?(?:Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?$"
)

SIZES = (10, 100, 1_000, 10_000)


def timed(action: Callable[[], Any]) -> float:
    started = time.perf_counter()
    with contextlib.suppress(ValidationError, ValueError):
        action()
    return time.perf_counter() - started


def backtracking_schedule(tokens: int) -> str:
    return " ".join(["1"] * tokens) + "\n\n"


def long_list_schedule(terms: int) -> str:
    return ",".join(["1"] * terms) + " * * * *"


def _old(tokens: int) -> float:
    return timed(lambda: OLD_SCHEDULE_PATTERN.match(backtracking_schedule(tokens)))


def schedule_section(budget: float) -> None:
    print("1. schedule: seconds to refuse N tokens ('1 1 ... 1\\n\\n')")
    print(f"{'tokens':>8} {'before (old pattern)':>34} {'after (validate_schedule)':>26} {'cron.parse':>12}")
    history: list[tuple[int, float]] = []
    for probe in (10, 20, 40):  # small sizes to measure the old pattern's growth
        history.append((probe, _old(probe)))
    for tokens in SIZES:
        (n1, t1), (n2, t2) = history[-2], history[-1]
        exponent = math.log(max(t2, 1e-7) / max(t1, 1e-7)) / math.log(n2 / n1) if n2 != n1 else 1.0
        predicted = t2 * (tokens / n2) ** exponent
        if tokens in (n for n, _ in history):
            before = f"{dict(history)[tokens]:.6f}"
        elif predicted > budget:
            before = f"skipped: ~{predicted:.3g} s predicted (~n^{exponent:.1f}, from {n1} and {n2} tokens)"
        else:
            took = _old(tokens)
            history.append((tokens, took))
            before = f"{took:.6f}"
        after = timed(lambda n=tokens: validate_schedule(backtracking_schedule(n)))
        parsed = timed(lambda n=tokens: cron.parse(long_list_schedule(n)))
        print(f"{tokens:>8} {before:>34} {after:>26.6f} {parsed:>12.6f}")
    print("(cron.parse: a five-field schedule whose minute field lists N terms, no length bound)")
    print()


def adversarial(tokens: int) -> list[str]:
    """Inputs that make backtracking patterns work: long runs of what a repeated group takes,
    then something no pattern accepts."""
    return [
        "1" * tokens + "!",
        "1 " * tokens + "\n\n",
        "a" * tokens + "!",
        "a-" * tokens + "!",
        "a." * tokens + "-",
        "1." * tokens + "x",
        "1h" * tokens + "x",
        "1.5ms" * tokens + "x",
        "subnet-" * tokens,
    ]


def patterns() -> dict[str, re.Pattern[str]]:
    found = {"before: OLD_QUANTITY_PATTERN": OLD_QUANTITY_PATTERN}
    for module in (cron, ec2nodeclass, nodeclass_schema, nodepool, provisioner_schema, quantity):
        for name, value in vars(module).items():
            if isinstance(value, re.Pattern):
                found[f"{module.__name__.rsplit('.', 1)[-1]}.{name}"] = value
    for name, (_, _, pattern) in ec2nodeclass.SELECTOR_TERMS.items():
        found[f"ec2nodeclass.SELECTOR_TERMS[{name}]"] = pattern
    return found


#: The input bound the loaders check before each pattern sees text (characters); a pattern that
#: grows faster than linearly under `search` is only ever applied to text this short.
BOUNDS = {
    "cron._INT": f"{nodepool.MAX_SCHEDULE_LENGTH} (schedule)",
    "nodeclass_schema._DURATION": str(ranges.MAX_DURATION_LENGTH),
    "nodeclass_schema._DURATION_PART": f"{ranges.MAX_DURATION_LENGTH}, after _DURATION matched",
    "nodeclass_schema._PERCENT": str(nodeclass_schema.MAX_PERCENT_LENGTH),
    "nodepool._DURATION": str(ranges.MAX_DURATION_LENGTH),
    "nodepool._DURATION_PART": f"{ranges.MAX_DURATION_LENGTH}, after _DURATION matched",
    "nodepool._BUDGET_NODES": str(ranges.MAX_DURATION_LENGTH),
    "nodepool._BUDGET_DURATION": str(ranges.MAX_DURATION_LENGTH),
    "provisioner_schema._NAME": "63",
    "provisioner_schema._DNS_SUBDOMAIN": "253",
    "provisioner_schema._INTEGER": str(provisioner_schema.MAX_INTEGER_LENGTH),
    "quantity._GRAMMAR": str(quantity.MAX_LENGTH),
}


def patterns_section(budget: float) -> None:
    print("2. patterns: worst seconds over adversarial inputs (match and search), by tokens")
    print(f"{'pattern':>56} " + " ".join(f"{n:>10}" for n in SIZES) + "  input bound before it")
    for name, pattern in patterns().items():
        cells = []
        for tokens in SIZES:
            if cells and cells[-1].startswith("skip"):
                cells.append("skip")
                continue
            worst = max(
                max(timed(lambda t=text, p=pattern: p.match(t)), timed(lambda t=text, p=pattern: p.search(t)))
                for text in adversarial(tokens)
            )
            cells.append(f"{worst:.6f}" if worst * 100 < budget else f"{worst:.2f}")
            if worst * 100 > budget:  # 10x the tokens at n^2 would pass the budget
                cells[-1] = "skip>" + cells[-1]
        print(f"{name:>56} " + " ".join(f"{c:>10}" for c in cells) + f"  {BOUNDS.get(name, '-')}")
    print()


def _pool_with(**changes: Any) -> dict[str, Any]:
    spec = {
        "requirements": [],
        "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "default"},
    }
    spec.update(changes)
    return nodepool_manifest(template_spec=spec)


def worst_bodies() -> dict[str, tuple[str, str, str, str, dict[str, Any]]]:
    """name -> (path, group, version, kind, object)."""
    np_route = ("/validate/nodepool", "karpenter.sh", "v1", "NodePool")
    nc_route = ("/validate/ec2nodeclass", "karpenter.k8s.aws", "v1", "EC2NodeClass")
    pv_route = ("/validate/provisioner", "karpenter.sh", "v1alpha5", "Provisioner")
    schedule = three_line_schedule()
    labelled = _pool_with()
    labelled["spec"]["template"]["metadata"] = {"labels": {f"k{i}": "v" for i in range(200_000)}}
    annotated = _pool_with()
    annotated["spec"]["template"]["metadata"] = {"annotations": {"a": "x" * 2**20}}
    bodies = {
        "8,011-char schedule": (
            *np_route,
            nodepool_manifest(
                disruption={"budgets": [{"nodes": "1", "schedule": schedule, "duration": "1h"}]}
            ),
        ),
        "90k requirements": (
            *np_route,
            _pool_with(requirements=[{"key": "a/b/c", "operator": "Foo"}] * 90_000),
        ),
        "100 reqs x 500 values": (
            *np_route,
            _pool_with(
                requirements=[
                    {"key": f"k{i}", "operator": "In", "values": ["v" * 63] * 500} for i in range(100)
                ]
            ),
        ),
        "1 MB annotation": (*np_route, annotated),
        "200k tags": (*nc_route, node_class(tags={f"k{i}": "v" for i in range(200_000)})),
        "3 MB userData": (*nc_route, node_class(userData="x" * 3 * 2**20)),
        "100k-key metadataOptions": (
            *nc_route,
            node_class(metadataOptions={f"k{i}": 1 for i in range(100_000)}),
        ),
        "60k block devices": (*nc_route, node_class(blockDeviceMappings=[{"deviceName": "/dev/x"}] * 60_000)),
        "200k template labels": (*np_route, labelled),
        "1M-item unknown field": (*np_route, {**_pool_with(), "status": {"x": [0] * 1_000_000}}),
        "90k provisioner reqs": (
            *pv_route,
            provisioner_manifest(
                "p", **{**valid_spec(), "requirements": [{"key": "a/b/c", "operator": "Foo"}] * 90_000}
            ),
        ),
    }
    return bodies


def reviews_section() -> None:
    config = WebhookConfig(cluster_name="demo", read_provisioners=False)
    client = create_app(config, provisioners=lambda: []).test_client()
    print(f"3. reviews: one review each, body bound {config.max_body_bytes} bytes")
    print(f"{'body':>24} {'bytes':>10} {'seconds':>9} {'status':>7} {'allowed':>8} {'message chars':>14}")
    for name, (path, group, version, kind, obj) in worst_bodies().items():
        body = json.dumps(make_review(obj, group=group, version=version, kind=kind)).encode()
        started = time.perf_counter()
        resp = client.post(path, data=body, content_type="application/json")
        took = time.perf_counter() - started
        answer = resp.get_json() or {}
        response = answer.get("response") or {}
        message = (response.get("status") or {}).get("message", answer.get("message", ""))
        print(
            f"{name:>24} {len(body):>10} {took:>9.4f} {resp.status_code:>7} "
            f"{response.get('allowed', '-')!s:>8} {len(message):>14}"
        )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--budget-seconds", type=float, default=5.0, help="skip a 'before' step predicted longer"
    )
    args = parser.parse_args()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}, {os.cpu_count()} CPUs\n")
    schedule_section(args.budget_seconds)
    patterns_section(args.budget_seconds)
    reviews_section()
    print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
