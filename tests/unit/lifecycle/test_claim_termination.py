"""Deleting a NodeClaim terminates its node (lifecycle/nodeclaim_deletion.py), on plain data. The steps are
Karpenter v1's nodeclaim termination controller (kubernetes-sigs/karpenter
pkg/controllers/nodeclaim/termination/controller.go `Finalize`): delete the claim's nodes not yet
deleting, wait for them to go, then delete the instance and lift the finalizer."""

from __future__ import annotations

from extender.api import labels
from extender.api.nodeclaim import Record
from extender.lifecycle.nodeclaim_deletion import Action, ClaimTerminator, decide, nodes_of
from tests.builders import T0, node

from .test_with_fake_cloud import World


def claim(*, deleting: bool = True, finalized: bool = True, node_name: str = "n1") -> Record:
    return Record("general-0001", "aws:///us-west-2a/i-0001", node_name, T0, deleting, finalized)


def manifest(*, deleting: bool = True, finalizers: tuple[str, ...] = (labels.TERMINATION_FINALIZER,)) -> dict:
    meta: dict = {"name": "general-0001", "finalizers": list(finalizers)}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T12:00:00Z"
    return {"metadata": meta, "status": {"providerID": "aws:///us-west-2a/i-0001", "nodeName": "n1"}}


def test_a_deleted_claim_deletes_its_live_node_first() -> None:
    assert decide(claim(), [node("n1", instance="i-0001")]) is Action.DELETE_NODES


def test_a_claim_waits_while_its_node_terminates() -> None:
    assert decide(claim(), [node("n1", instance="i-0001", deleting=True)]) is Action.WAIT


def test_a_claim_without_a_node_is_finished_at_once() -> None:
    # Its launch never wrote a Node, or the node went without karpy's finalizer.
    assert decide(claim(), []) is Action.FINALIZE


def test_a_live_claim_or_one_karpy_does_not_hold_is_left_alone() -> None:
    live = node("n1", instance="i-0001")
    assert decide(claim(deleting=False), [live]) is Action.NONE
    assert decide(claim(finalized=False), [live]) is Action.NONE


def test_a_claims_nodes_are_matched_by_name_or_provider_id() -> None:
    # AllNodesForNodeClaim matches the provider id; karpy also names the node in status.nodeName.
    by_name, by_id = node("n1", instance="i-9999"), node("x", instance="i-0001")
    other = node("y", instance="i-7")
    assert nodes_of(claim(), [by_name, by_id, other]) == [by_name, by_id]
    assert nodes_of(claim(node_name=""), [node("n1", instance="i-5")]) == []


def test_record_reads_deletion_and_finalizer() -> None:
    record = Record.from_manifest(manifest())
    assert record.deleting and record.finalized
    assert not Record.from_manifest(manifest(deleting=False, finalizers=())).finalized


def test_the_informer_queues_claims_being_deleted_and_remembers_them_for_a_new_leader(monkeypatch) -> None:
    terminator = ClaimTerminator(World(monkeypatch).ctx)
    terminator.on_claim("ADDED", manifest(deleting=False))
    assert len(terminator.queue) == 0
    terminator.on_claim("MODIFIED", manifest())
    assert terminator.queue.pop_due() == "general-0001"
    terminator.queue.done("general-0001")
    assert terminator.enqueue_all() == 1
    terminator.on_claim("DELETED", manifest())
    assert terminator.enqueue_all() == 0
