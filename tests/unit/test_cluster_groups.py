"""tests/cluster_groups.py: how `make test` splits the integration files over its workers."""

from __future__ import annotations

from tests.cluster_groups import SECONDS, ClusterGroups, _groups, cluster_group

FILE = "tests/integration/{}.py"


def test_the_groups_are_balanced_by_measured_seconds() -> None:
    for workers in (2, 3, 4):
        load = [0] * workers
        for name, group in _groups(workers).items():
            load[group] += SECONDS[name]
        # Longest file first to the lightest group: no group exceeds another by more than its
        # longest file (the LPT bound).
        assert max(load) - min(load) <= max(SECONDS.values()), (workers, load)


def test_a_files_group_stays_when_surplus_workers_shut_down() -> None:
    """xdist asks each finished test's scope again after it shut the workers it did not need
    (one file on three workers); a group named from the new count was unknown (KeyError
    'cluster-1', INTERNALERROR)."""
    name = next(n for n, g in _groups(3).items() if g != 0)
    scheduler = ClusterGroups.__new__(ClusterGroups)
    scheduler.assigned_work = {object(): {}, object(): {}, object(): {}}  # type: ignore[dict-item]
    before = scheduler._split_scope(f"{FILE.format(name)}::test")
    assert before != "cluster-1"
    scheduler.assigned_work.popitem()
    scheduler.assigned_work.popitem()
    assert scheduler._split_scope(f"{FILE.format(name)}::test") == before


def test_files_outside_the_shared_clusters_go_anywhere() -> None:
    assert cluster_group("tests/unit/test_api_pod.py", 3) is None
    assert cluster_group(FILE.format("test_demo"), 3) is None
    assert cluster_group("tests/integration/aws/test_launch.py", 3) is None
    assert cluster_group(FILE.format("test_image"), 3) == FILE.format("test_image")
    assert cluster_group(FILE.format("test_not_measured_yet"), 3) == "cluster-1"
