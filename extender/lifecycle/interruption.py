"""Interruption handling: EventBridge events delivered to SQS, parsed and acted on.

`parse` is pure: an SQS body -> `Message(kind, instance_ids, time)` or `MalformedMessage`.
Kinds follow Karpenter: spot_interrupted, rebalance_recommendation, scheduled_change,
instance_stopped, instance_terminated, no_op. A message is deleted only after its action was
taken; malformed and unknown ones are logged, counted and deleted so they never poison the queue.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from extender.api import labels
from extender.api.meta import parse_time
from extender.api.node import Node
from extender.cloud.types import OfferingKey
from extender.cluster.cordon import cordon
from extender.cluster.nodes import instance_id
from extender.heartbeat import no_tick
from extender.lifecycle import metrics, nodepatch
from extender.lifecycle.context import Context
from extender.loops import is_expected, run_forever
from extender.retry import LoopBackoff

SPOT_INTERRUPTED = "spot_interrupted"
REBALANCE = "rebalance_recommendation"
SCHEDULED_CHANGE = "scheduled_change"
INSTANCE_STOPPED = "instance_stopped"
INSTANCE_TERMINATED = "instance_terminated"
NO_OP = "no_op"
MALFORMED = "malformed"
#: A follower checks this often whether it has become the leader.
FOLLOWER_POLL_SECONDS = 1.0

DISRUPTIVE = frozenset({SPOT_INTERRUPTED, SCHEDULED_CHANGE, INSTANCE_STOPPED, INSTANCE_TERMINATED})
EVENT_REASONS = {
    SPOT_INTERRUPTED: "SpotInterrupted",
    REBALANCE: "SpotRebalanceRecommendation",
    SCHEDULED_CHANGE: "InstanceScheduledChange",
    INSTANCE_STOPPED: "InstanceStopping",
    INSTANCE_TERMINATED: "InstanceTerminating",
}
_STOPPED_STATES = {
    "stopping": INSTANCE_STOPPED,
    "stopped": INSTANCE_STOPPED,
    "shutting-down": INSTANCE_TERMINATED,
    "terminated": INSTANCE_TERMINATED,
}


class MalformedMessage(ValueError):
    pass


@dataclass(frozen=True)
class Message:
    kind: str
    instance_ids: tuple[str, ...]
    time: datetime | None = None
    id: str = ""
    detail_type: str = ""


def _scalar(value: Any) -> str:
    """A string or number field as text; anything else (lists, objects, null) as "". Never str() of
    a container: a deeply nested one would recurse past Python's limit."""
    return str(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else ""


def parse(body: str) -> Message:
    """Raises MalformedMessage for anything that is not a well-formed EventBridge envelope."""
    try:
        envelope = json.loads(body)
    except RecursionError as err:
        raise MalformedMessage("not JSON: nested too deeply") from err
    except ValueError as err:
        raise MalformedMessage(f"not JSON: {err}") from err
    if not isinstance(envelope, dict):
        raise MalformedMessage("not a JSON object")
    source, detail_type = envelope.get("source"), envelope.get("detail-type")
    detail = envelope.get("detail")
    if not isinstance(source, str) or not isinstance(detail_type, str) or not isinstance(detail, dict):
        raise MalformedMessage("missing source, detail-type or detail")
    raw_time = envelope.get("time")
    if raw_time is not None and not isinstance(raw_time, str):
        raise MalformedMessage(f"bad time: expected an RFC 3339 string, got {type(raw_time).__name__}")
    try:
        when = parse_time(raw_time)
    except (ValueError, TypeError) as err:
        raise MalformedMessage(f"bad time: {err}") from err
    envelope_id = _scalar(envelope.get("id"))

    def message(kind: str, instance_ids: tuple[str, ...] = ()) -> Message:
        return Message(kind, instance_ids, time=when, id=envelope_id, detail_type=detail_type)

    if _scalar(envelope.get("version", "0")) != "0":
        return message(NO_OP)
    if source == "aws.ec2":
        instance = detail.get("instance-id")
        kind = {
            "EC2 Spot Instance Interruption Warning": SPOT_INTERRUPTED,
            "EC2 Instance Rebalance Recommendation": REBALANCE,
        }.get(detail_type)
        if detail_type == "EC2 Instance State-change Notification":
            kind = _STOPPED_STATES.get(_scalar(detail.get("state")), NO_OP)
        if kind is None:
            return message(NO_OP)
        if not isinstance(instance, str) or not instance.startswith("i-"):
            raise MalformedMessage(f"{detail_type} without a valid instance-id")
        return message(kind, () if kind == NO_OP else (instance,))
    if source == "aws.health" and detail_type == "AWS Health Event":
        if detail.get("service") != "EC2" or detail.get("eventTypeCategory") != "scheduledChange":
            return message(NO_OP)
        entities = detail.get("affectedEntities")
        if not isinstance(entities, list):
            raise MalformedMessage("AWS Health Event without affectedEntities")
        ids = tuple(
            e["entityValue"]
            for e in entities
            if isinstance(e, dict)
            and isinstance(e.get("entityValue"), str)
            and e["entityValue"].startswith("i-")
        )
        return message(SCHEDULED_CHANGE, ids)
    return message(NO_OP)


def karpy_nodes_by_instance(nodes: Sequence[Node]) -> dict[str, Node]:
    by_instance = {}
    for node in nodes:
        iid = instance_id(node.provider_id)
        if iid and node.is_karpy:
            by_instance[iid] = node
    return by_instance


class InterruptionHandler:
    """Acts on one parsed message; raises to leave the message in the queue for redelivery."""

    def __init__(self, ctx: Context, list_nodes: Callable[[], Sequence[Node]]) -> None:
        self.ctx = ctx
        self.list_nodes = list_nodes

    def handle(self, message: Message) -> str:
        """Returns the action taken (metric label)."""
        ctx = self.ctx
        if message.kind == NO_OP:
            return "no_op"
        nodes = karpy_nodes_by_instance(self.list_nodes())
        targets = [nodes[i] for i in message.instance_ids if i in nodes]
        if not targets:
            ctx.log.debug(
                "Ignoring %s message for non-karpy instance(s) %s", message.kind, message.instance_ids
            )
            return "ignored"
        replace = message.kind in DISRUPTIVE or (
            message.kind == REBALANCE and ctx.settings.lifecycle.rebalance_action == "replace"
        )
        for node in targets:
            node_name = node.name
            ctx.recorder.node(
                node,
                EVENT_REASONS[message.kind],
                f"{message.detail_type} for instance of node {node_name}",
                warning=message.kind != REBALANCE,
            )
            if not replace:
                continue
            self._replace(node, message)
        return "cordon_and_drain" if replace else "event"

    def _replace(self, node: Node, message: Message) -> None:
        ctx = self.ctx
        if node.deleting:
            return  # already terminating; the finalizer carries on
        if message.kind == SPOT_INTERRUPTED and ctx.unavailable is not None:
            ctx.unavailable(
                OfferingKey(
                    instance_type=node.labels.get(labels.INSTANCE_TYPE, ""),
                    zone=node.labels.get(labels.ZONE, ""),
                    capacity_type=labels.CAPACITY_TYPE_SPOT,
                )
            )
        cordon_and_drain(ctx, node, message.kind, doing="interrupted", reason="interruption")


def cordon_and_drain(ctx: Context, node: Node, kind: str, *, doing: str, reason: str) -> None:
    """Karpenter's CordonAndDrain for a node the cloud is taking back: mark and cordon it, ask for
    replacements of its workload, delete it (the termination finalizer drains it). `kind` is the
    removal mark's reason, `doing` what is happening to the node for the log ("interrupted",
    "expiring"), `reason` the `karpenter_nodes_terminated` reason. Every such removal counts as
    `karpy_disruption_decisions{reason="interrupted"}`: the cloud takes the capacity back."""
    node_name = node.name
    ctx.mark(node_name, kind)
    if cordon(ctx.kube, node_name):
        ctx.log.info("Cordoned node %s", node_name)
    workload = nodepatch.workload(nodepatch.pods_on_node(ctx.kube, node_name))
    if workload and ctx.provisioning is not None:
        replacements = ctx.provisioning.provision_replacements(workload)
        ctx.log.info(
            "Launched %d replacement node(s) %s for %s node %s",
            len(replacements),
            replacements,
            doing,
            node_name,
        )
    ctx.log.info("Triggering termination for %s node %s (%s)", doing, node_name, kind)
    metrics.NODES_TERMINATED.labels(reason=reason).inc()
    with metrics.disrupting("interrupted"):
        nodepatch.delete_node(ctx.kube, node_name)


class InterruptionPoller:
    """Long-polls the queue while this replica leads; a follower leaves messages to the leader."""

    def __init__(
        self, ctx: Context, sqs: Any, queue: str, handler: InterruptionHandler, *, parallelism: int = 10
    ) -> None:
        self.ctx = ctx
        self.sqs = sqs
        self.queue = queue
        self.handler = handler
        self.parallelism = parallelism
        self._url: str | None = None

    def queue_url(self) -> str:
        if self._url is None:
            self._url = (
                self.queue
                if self.queue.startswith(("http://", "https://"))
                else self.sqs.get_queue_url(QueueName=self.queue)["QueueUrl"]
            )
        return self._url

    def poll_once(self, wait_seconds: int | None = None) -> int:
        """Receive up to 10 messages, handle them in parallel; returns how many were received."""
        s = self.ctx.settings.lifecycle
        self._read_depth()
        resp = self.sqs.receive_message(
            QueueUrl=self.queue_url(),
            MaxNumberOfMessages=10,
            WaitTimeSeconds=s.sqs_wait_seconds if wait_seconds is None else wait_seconds,
            VisibilityTimeout=s.sqs_visibility_seconds,
            AttributeNames=["SentTimestamp"],
        )
        messages = resp.get("Messages") or []
        if messages:
            with ThreadPoolExecutor(max_workers=min(self.parallelism, len(messages))) as pool:
                list(pool.map(self._one, messages))
        return len(messages)

    def run(
        self, stop: threading.Event, *, tick: Callable[[], None] = no_tick, backoff: LoopBackoff | None = None
    ) -> None:
        """Poll while leading, until `stop`; a failed receive (queue missing, endpoint down) is retried
        after backoff with the queue URL looked up again."""

        def one_pass() -> float | None:
            if not self.ctx.is_leader():
                return FOLLOWER_POLL_SECONDS
            try:
                self.poll_once()
            except Exception:
                self._url = None
                raise
            return None

        run_forever(
            one_pass,
            stop,
            doing=f"polling interruption queue {self.queue}",
            tick=tick,
            backoff=backoff,
            logger=self.ctx.log,
        )

    def _read_depth(self) -> None:
        """The queue's backlog, for the backing-up alert: one GetQueueAttributes per poll (a long
        poll waits up to sqs_wait_seconds, so this is at most a few calls a minute)."""
        try:
            attrs = (
                self.sqs.get_queue_attributes(
                    QueueUrl=self.queue_url(), AttributeNames=["ApproximateNumberOfMessages"]
                ).get("Attributes")
                or {}
            )
            depth = float(attrs.get("ApproximateNumberOfMessages", 0))
        except Exception as err:  # a gauge must not stop the handling of interruptions
            self.ctx.log.debug("Reading the depth of interruption queue %s failed, %s", self.queue, err)
            return
        metrics.INTERRUPTION_QUEUE_MESSAGES.set(depth)

    def _one(self, sqs_message: Mapping[str, Any]) -> None:
        """Never raises: a message that cannot be parsed is deleted, one whose action failed stays
        for redelivery, and one bad message never holds up the rest of the batch."""
        ctx = self.ctx
        try:
            message = parse(str(sqs_message.get("Body", "")))
        except Exception as err:  # MalformedMessage, or whatever else garbage may raise
            ctx.log.warning(
                "Dropping malformed interruption message %s, %s", sqs_message.get("MessageId"), err
            )
            metrics.INTERRUPTION_RECEIVED.labels(message_type=MALFORMED).inc()
            self._delete(sqs_message)
            return
        metrics.INTERRUPTION_RECEIVED.labels(message_type=message.kind).inc()
        if message.time is not None:
            metrics.INTERRUPTION_LATENCY.observe(max((ctx.clock() - message.time).total_seconds(), 0.0))
        try:
            action = self.handler.handle(message)
        except Exception as err:
            # API server or AWS trouble is retried by redelivery; anything else is a bug to look at.
            expected = is_expected(err)
            ctx.log.log(
                logging.WARNING if expected else logging.ERROR,
                "Failed handling %s message %s, it will be redelivered, %s",
                message.kind,
                message.id,
                err,
                exc_info=not expected,
            )
            return
        metrics.INTERRUPTION_ACTIONS.labels(action=action).inc()
        self._delete(sqs_message)

    def _delete(self, sqs_message: Mapping[str, Any]) -> None:
        try:
            self.sqs.delete_message(QueueUrl=self.queue_url(), ReceiptHandle=sqs_message["ReceiptHandle"])
        except Exception as err:  # it comes back after the visibility timeout and is handled again
            self.ctx.log.warning(
                "Failed deleting interruption message %s, %s", sqs_message.get("MessageId"), err
            )
            return
        metrics.INTERRUPTION_DELETED.inc()
