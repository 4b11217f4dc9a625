"""The cost benchmark's workloads: named families and seeded random mixes.

A workload is pods plus the capacity types its Provisioner allows. Pods are built from API JSON
(`Pod.from_manifest`) so their requests are exactly what the solver sees. The families cover the
cases issue 15 found weak (arm-only, memory-heavy, mixed web) and the ones that were already close
(tiny pods, uniform batch), plus GPU and a spot Provisioner; the random mixes vary the number of
shapes, their cpu:memory ratio, their counts and the architecture.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from extender.api import labels as wk
from extender.api.pod import Pod

ON_DEMAND = ("on-demand",)
SPOT = ("spot",)


@dataclass(frozen=True)
class Workload:
    name: str
    pods: tuple[Pod, ...]
    capacity_types: tuple[str, ...] = ON_DEMAND


def pods(name: str, count: int, cpu: str, memory: str, *, gpu: int = 0, arch: str = "") -> list[Pod]:
    """`count` pods of one shape; `arch` pins them with a nodeSelector, `gpu` asks for NVIDIA GPUs."""
    spec: dict[str, Any] = {}
    if arch:
        spec["nodeSelector"] = {wk.ARCH: arch}
    limits = {"nvidia.com/gpu": gpu} if gpu else {}
    return [
        Pod.from_manifest(
            {
                "metadata": {"name": f"{name}-{i}", "namespace": "bench", "labels": {"app": name}},
                "spec": {
                    "containers": [
                        {
                            "name": "c",
                            "resources": {"requests": {"cpu": cpu, "memory": memory}, "limits": limits},
                        }
                    ],
                    **spec,
                },
            }
        )
        for i in range(count)
    ]


def mixed_web() -> list[Pod]:
    return (
        pods("web", 200, "250m", "512Mi")
        + pods("api", 100, "1", "2Gi")
        + pods("batch", 50, "3", "6Gi")
        + pods("cache", 50, "1", "12Gi")
    )


def families() -> list[Workload]:
    return [
        Workload("cpu-heavy", (*pods("batch", 400, "2", "2Gi"), *pods("encode", 50, "4", "4Gi"))),
        Workload("uniform-2cpu", tuple(pods("batch", 400, "2", "2Gi"))),
        Workload("memory-heavy", (*pods("cache", 100, "500m", "4Gi"), *pods("db", 20, "1", "16Gi"))),
        Workload("arm-only", tuple(pods("svc", 100, "1", "2Gi", arch="arm64"))),
        Workload("tiny-pods", tuple(pods("tiny", 1000, "50m", "64Mi"))),
        Workload("mixed-web", tuple(mixed_web())),
        Workload("gpu", (*pods("train", 16, "4", "16Gi", gpu=1), *pods("web", 100, "500m", "1Gi"))),
        Workload("mixed-web-spot", tuple(mixed_web()), SPOT),
        Workload("mixed-web-spot+od", tuple(mixed_web()), (*SPOT, *ON_DEMAND)),
    ]


CPUS = ("100m", "250m", "500m", "1", "1500m", "2", "3", "4", "6", "8")
GIB_PER_CPU = (0.5, 1, 2, 4, 8, 16)


def random_mix(seed: int) -> Workload:
    """1-6 shapes with random cpu, cpu:memory ratio and count; some mixes are pinned to one arch."""
    rng = random.Random(seed)
    arch = rng.choice(("", "", "amd64", "arm64"))
    result: list[Pod] = []
    for shape in range(rng.randint(1, 6)):
        cpu = rng.choice(CPUS)
        cores = float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)
        memory = f"{max(64, int(cores * rng.choice(GIB_PER_CPU) * 1024))}Mi"
        result += pods(f"s{shape}", rng.randint(1, 200), cpu, memory, arch=arch)
    return Workload(f"random-{seed:02d}", tuple(result))


def random_mixes(count: int = 50) -> list[Workload]:
    return [random_mix(seed) for seed in range(count)]


def large(total: int = 5000, shapes: int = 20, seed: int = 5) -> Workload:
    """The speed target: `total` pods across `shapes` shapes."""
    rng = random.Random(seed)
    result: list[Pod] = []
    for shape in range(shapes):
        cpu = rng.choice(CPUS[:7])
        cores = float(cpu[:-1]) / 1000 if cpu.endswith("m") else float(cpu)
        memory = f"{max(64, int(cores * rng.choice(GIB_PER_CPU[:4]) * 1024))}Mi"
        result += pods(f"l{shape}", total // shapes, cpu, memory)
    return Workload(f"{total}-pods-{shapes}-shapes", tuple(result))
