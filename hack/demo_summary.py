"""The demo's summary: figures from what the Observer saw, as a dict (for --json-summary) and as text."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hack.demo_timeline import Observations

#: karpy log phrases counted in the summary (Karpenter 0.5's wording).
KARPY_PHRASES = (
    "provisionable pod",
    "Computed packing",
    "Launched instance",
    "Bound",
    "Added TTL",
    "Cordoned node",
    "Deleted node",
)
#: Polling granularity: a node may look deleted up to this much early relative to its TTL.
TTL_SLACK_SECONDS = 1.0


def build_summary(
    seen: Observations,
    *,
    phases: Mapping[str, Mapping[str, Any]],
    problems: list[str],
    ttl: int,
    wall: float,
    cluster_ready: float | None,
    log_counts: Mapping[str, int],
    processes: Sequence[Mapping[str, Any]],
) -> dict[str, Any]:
    """Appends to `problems` any node terminated sooner than the TTL after it emptied."""
    nodes = sorted(seen.nodes.values(), key=lambda n: n.seen)
    rows = []
    for node in nodes:
        emptied = None
        if node.deleted is not None and node.empty_since is not None:
            emptied = round(node.deleted - node.empty_since, 1)
            if emptied < ttl - TTL_SLACK_SECONDS:
                problems.append(f"{node.name} was terminated {emptied}s after it emptied (TTL {ttl}s)")
        rows.append(
            {
                "name": node.name,
                "instance_type": node.instance_type,
                "zone": node.zone,
                "capacity_type": node.capacity_type,
                "owner": node.owner,
                "price_per_hour": node.price,
                "price_source": node.price_source,
                "max_pods": node.pods_max,
                "empty_to_deleted_seconds": emptied,
            }
        )
    return {
        "ok": not problems,
        "problems": problems,
        "wall_seconds": round(wall, 1),
        "cluster_ready_seconds": cluster_ready,
        "ttl_seconds": ttl,
        "nodes_launched": len(nodes),
        "nodes": rows,
        "price_per_hour_launched": round(sum(n.price for n in nodes), 4),
        "pods_bound": sum(1 for p in seen.pods.values() if p.bound is not None),
        "nodes_terminated": sum(1 for n in nodes if n.deleted is not None),
        "empty_to_deleted_seconds": [
            r["empty_to_deleted_seconds"] for r in rows if r["empty_to_deleted_seconds"]
        ],
        "phases": {name: dict(phase) for name, phase in phases.items()},
        "karpy_log_lines": dict(log_counts),
        "processes_started": [dict(p) for p in processes],
    }


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value}s"


def render_summary(summary: Mapping[str, Any]) -> str:
    nodes = summary["nodes"]
    launched = ", ".join(f"{n['instance_type']} {n['capacity_type']}" for n in nodes)
    sources = ", ".join(sorted({n["price_source"] for n in nodes})) or "-"
    emptied = ", ".join(f"{s}s" for s in summary["empty_to_deleted_seconds"]) or "-"
    rows = [
        ("nodes launched", f"{summary['nodes_launched']} ({launched or 'none'})"),
        ("$/h launched", f"${summary['price_per_hour_launched']:.4f}/h (priced by: {sources})"),
    ]
    rows += [
        (
            "pending -> bound",
            f"{phase['pending_to_bound_seconds']:.2f}s for {phase['pods_bound']} pods ({name})",
        )
        for name, phase in summary["phases"].items()
    ]
    rows += [
        ("pods bound", str(summary["pods_bound"])),
        (
            "nodes terminated",
            f"{summary['nodes_terminated']} (empty -> deleted: {emptied}; TTL {summary['ttl_seconds']}s)",
        ),
        (
            "wall time",
            f"{summary['wall_seconds']}s (cluster ready in {_seconds(summary['cluster_ready_seconds'])})",
        ),
        ("result", "OK" if summary["ok"] else "PROBLEMS: " + "; ".join(summary["problems"])),
    ]
    return "\n".join(["", "SUMMARY", *(f"  {label:<18}  {value}" for label, value in rows)])
