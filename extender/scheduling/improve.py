"""Local search over a packed plan: repack the worst-filled nodes together, keep the result only if cheaper.

The greedy packer (packer.py) chooses one node at a time; its last nodes take whatever is left and
are often filled poorly, or a large node was chosen where two smaller ones would have done. This
pass pools the pods of a few nodes — the worst ones by price per worth (a pod is worth its class's
cheapest $/pod on nodes of its own) — and packs them again with a wider search: every usable type
is tried for each node (WIDE_TRIALS, not only the first few), under each pod order the solver
knows, and the pool in one node of the cheapest type that holds it all. The cheapest alternative
replaces the nodes when it costs less than they do, so the pass never makes a plan dearer; one
with more nodes than the pool only when it saves more than SPLIT_SAVING of the pool's cost
(`pays_for_its_nodes`).

Hard rules stay intact because only rule-free pods move: a node takes part only if none of its
pods carries or is counted by a kubernetes.io/hostname rule (anti-affinity, affinity, spread) or
asks for host ports, and its Provisioner has no limits (their headroom is charged node by node).
The repacked nodes are made by the packer itself, so requirements and types are checked as before.

Pure: the budget is a number of repacks, passed in by the caller (it scales with the batch, see
`default_budget`); no clock is read.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

from extender.api.pod import Pod
from extender.scheduling.candidates import Candidate
from extender.scheduling.fill import Node, PodClass
from extender.scheduling.packer import TRIALS, Packer

#: Pool sizes tried, in nodes: the k worst nodes of a group are repacked together (1: split a
#: node the greedy sized for everything that was left).
POOL_SIZES = (1, 2, 4, 8, 16)
#: Pools of at most this many nodes try SMALL_POOL_TRIALS types per node; larger ones WIDE_TRIALS.
SMALL_POOL = 2
SMALL_POOL_TRIALS = 5 * TRIALS
#: Repacks per node of the plan, and the most any batch gets.
BUDGET_PER_NODE = 1
MAX_BUDGET = 8
#: Types tried per node when repacking (the greedy tries packer.TRIALS).
WIDE_TRIALS = 2 * TRIALS
#: A repack or plan with more nodes is taken only when it saves more than this share of the cost.
SPLIT_SAVING = 0.01
#: A pool costing at most this much over its pods' worth is left alone: little to gain.
GOOD_ENOUGH = 1.0
EPS = 1e-9

Price = Callable[[Node], Candidate | None]
Order = Callable[[Sequence[PodClass]], list[PodClass]]


def default_budget(nodes: int) -> int:
    """Repacks allowed for a plan of `nodes` new nodes: grows with the batch, capped."""
    return min(MAX_BUDGET, BUDGET_PER_NODE * nodes)


def _movable(node: Node) -> bool:
    if node.existing is not None or node.view is None or node.ports or node.anti or node.spread_caps:
        return False
    return all(
        not (c.matches or c.ports or c.host.anti or c.host.affinity or c.host.spread or c.host.repels)
        for c, _ in node.entries
    )


def _worth(node: Node) -> float:
    return sum(count * c.rate for c, count in node.entries)


def _cost(nodes: Sequence[Node], price: Price) -> float | None:
    total = 0.0
    for node in nodes:
        found = price(node)
        if found is None:
            return None
        total += found.offering.price
    return total


def _pool(nodes: Sequence[Node]) -> list[PodClass]:
    """Fresh classes holding the nodes' pods (entries and pods are appended in the same order)."""
    pods: dict[int, tuple[PodClass, list[Pod]]] = {}
    for node in nodes:
        start = 0
        for pod_class, count in node.entries:
            pods.setdefault(id(pod_class), (pod_class, []))[1].extend(node.pods[start : start + count])
            start += count
    return [replace(c, pods=found) for c, found in pods.values()]


def _repack(packer: Packer, classes: Sequence[PodClass], trials: int) -> list[Node] | None:
    """The packer's own greedy on these classes only, trying `trials` types per node; None if any
    pod is left over."""
    sub = Packer(packer.cache, packer.min_request, trials=trials)  # its own cursors, all pods pending
    failed: list[Pod] = []
    sub.pack(classes, lambda pod, _cause, _reason: failed.append(pod))
    return None if failed else sub.nodes


def _single(packer: Packer, classes: Sequence[PodClass], price: Price) -> list[Node] | None:
    """The whole pool on one node, if one type holds it all."""
    seed = classes[0]
    node = Node(
        capacity=(), used=tuple(0.0 for _ in seed.request), view=seed.view, reqs=seed.reqs, gpus=seed.gpus
    )
    for pod_class in classes:
        if pod_class.view is not seed.view or pod_class.gpus != seed.gpus or pod_class.reqs is None:
            return None
        merged = packer.merge_requirements(node, pod_class.reqs)
        if merged is None:
            return None
        node.reqs = merged
        node.add(pod_class, len(pod_class.pods))
        node.pods.extend(pod_class.pods)
    node.capacity = node.used
    return [node] if price(node) is not None else None


def improve(packer: Packer, orders: Sequence[Order], price: Price, budget: int) -> int:
    """Repack pools of the worst movable nodes while the budget lasts; returns repacks kept."""
    kept = 0
    spent = 0
    # Each node is priced once (a scan of its candidates); nodes are only replaced, never changed.
    prices: dict[Node, Candidate | None] = {}

    def priced(node: Node) -> Candidate | None:
        if node not in prices:
            prices[node] = price(node)
        return prices[node]

    for size in POOL_SIZES:
        groups: dict[tuple[int, frozenset[str]], list[Node]] = {}
        for node in packer.nodes:
            if _movable(node) and node.view is not None and node.view.provisioner.name not in packer.headroom:
                groups.setdefault((id(node.view), node.gpus), []).append(node)
        for members in groups.values():
            if len(members) < size or spent >= budget:
                continue

            def waste(node: Node) -> float:
                found = priced(node)
                return (found.offering.price if found else 0.0) / max(_worth(node), EPS)

            pool_nodes = sorted(members, key=waste, reverse=True)[:size]
            before = _cost(pool_nodes, priced)
            if before is None or before <= GOOD_ENOUGH * sum(_worth(n) for n in pool_nodes):
                continue
            classes = _pool(pool_nodes)
            spent += 1
            best: tuple[float, list[Node]] | None = None
            options = [_single(packer, classes, price)]
            usable = max(_usable_count(packer, c) for c in classes)
            trials = min(SMALL_POOL_TRIALS if size <= SMALL_POOL else WIDE_TRIALS, usable)
            options += [_repack(packer, order(classes), trials) for order in orders]
            for option in options:
                cost = None if option is None else _cost(option, price)
                if option is None or cost is None or cost >= before - EPS:
                    continue
                if not pays_for_its_nodes(len(option) - len(pool_nodes), before - cost, before):
                    continue
                if best is None or cost < best[0]:
                    best = (cost, option)
            if best is not None:
                chosen = set(pool_nodes)
                packer.nodes = [n for n in packer.nodes if n not in chosen] + best[1]
                for node in chosen:
                    del prices[node]
                kept += 1
    return kept


def pays_for_its_nodes(added: int, saving: float, before: float) -> bool:
    """Whether a plan with `added` more nodes than one costing `before` saves enough to be taken:
    more than SPLIT_SAVING of `before`. A node also costs what its list price does not show
    (DaemonSets, addresses, a launch that can fail), so a split must save by a real margin; a
    relative one, so that splitting a node the greedy oversized is taken on small batches too."""
    return added <= 0 or saving > SPLIT_SAVING * before


def _usable_count(packer: Packer, pod_class: PodClass) -> int:
    """How many types could hold one of the class's pods: the widest search worth trying."""
    assert pod_class.view is not None and pod_class.reqs is not None
    found = packer.cache.lookup(pod_class.view, pod_class.reqs, pod_class.gpus)
    return len(packer.cache.usable(found, pod_class.request))
