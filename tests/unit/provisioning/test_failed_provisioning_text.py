"""FailedProvisioning's words: explain's summary within 1,024 characters, most relevant pools
first, "+N more" naming the rest, never cut mid-word; the status REASON column and the bounded
pending-reason codes read from it."""

from __future__ import annotations

from extender.cli.status import karpy_reasons
from extender.provisioning import pending
from extender.provisioning.report import words
from extender.scheduling import explain as rules
from extender.scheduling.explain import World, explain, summary
from tests import builders
from tests.unit.scheduling.builders import catalog, make_provisioner


def many_pools(count: int):
    return [
        make_provisioner(
            f"team-{i:02d}-with-a-rather-long-pool-name",
            taints=[{"key": f"dedicated-{i}", "value": "x", "effect": "NoSchedule"}],
        )
        for i in range(count)
    ] + [
        make_provisioner(
            "small",
            requirements=[
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]}
            ],
        )
    ]


def test_long_pool_list_loses_no_pool_name():
    pools = many_pools(20)
    found = explain(builders.pod("p", cpu="8"), World(pools, catalog()))
    text = summary(found)
    full = "; ".join(v.line() for v in found.verdicts)
    assert len(full) > 1024 and len(text) <= 1024
    for pool in pools:
        assert pool.name in text
    # The most relevant (too big on `small`, a later check than a taint) leads, in full words.
    assert text.startswith(
        "no Provisioner or NodePool can launch a node for the pod: Provisioner small: requests 8 CPU"
    )
    assert "+20 more: taint: team-00-with-a-rather-long-pool-name, team-01" in text


def test_past_what_names_fit_it_counts_whole_names():
    found = explain(builders.pod("p", cpu="8"), World(many_pools(60), catalog()))
    text = summary(found)
    assert len(text) <= 1024 and text.endswith(" more")
    named = [v.pool.name for v in found.verdicts if v.pool.name in text]
    # Every name shown is whole; the count covers the rest exactly.
    shown = text.count("(taint)") + text.count("(too_big)")
    assert shown == len(named) and f"+{61 - shown} more" in text


def test_words_never_cuts_inside_a_word():
    text = words("alpha " * 300)
    assert len(text) <= 1024 and text.endswith("alpha ...")


def test_status_reason_is_karpys_first_pool_reason():
    event = {
        "reason": "FailedProvisioning",
        "involvedObject": {"uid": "u1"},
        "message": "no Provisioner or NodePool can launch a node for the pod: NodePool arm: the pod requires"
        " kubernetes.io/arch=amd64; NodePool arm allows only arm64; NodePool b: taint x:NoSchedule",
    }
    assert karpy_reasons([event, {"reason": "Scheduled", "involvedObject": {"uid": "u2"}}]) == {
        "u1": "NodePool arm: the pod requires kubernetes.io/arch=amd64"
    }


def test_pending_reason_codes_are_a_fixed_set():
    assert pending.code(rules.TAINT) == "taint" and pending.code(rules.LIMIT) == pending.OVER_LIMIT
    assert pending.code("made-up") == pending.WAITING
    assert set(pending.REASONS) >= set(rules.RULES) - {rules.LIMIT} and len(pending.REASONS) < 20
