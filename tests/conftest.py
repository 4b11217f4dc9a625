"""Shared pytest fixtures for every karpy test (shared helpers live here as fixtures only).

Fixtures:

- ``aws`` (session): a moto server on 127.0.0.1 seeded like an EKS account by
  ``hack.localcluster.awsseed.seed`` — no Kubernetes needed. It yields an
  ``hack.localcluster.awsseed.AwsSeed`` with ``endpoint_url``, ``region``, ``cluster_name``,
  ``ssm_root``, ``k8s_version``, ``subnets`` (zone -> subnet id), ``subnet_ids``,
  ``security_group_id``, ``amis`` (amd64/arm64/gpu -> ami id), ``ssm_parameters``, ``queue_url``,
  ``queue_arn``, ``rules`` and ``client(service)`` (a boto3 client with dummy credentials).
  The server is shared by the whole session: never call ``/moto-api/reset``, and give what you
  create unique names. If ``KARPY_CLUSTER_STATE`` points at a running local cluster's state file,
  its moto (already seeded) is reused instead of starting a new one.
- ``aws_settings`` (function): an ``extender.settings.AWSSettings`` pointing at that moto
  (endpoint, region, SSM prefix, interruption queue, no Pricing API, and the seeded Kubernetes
  version, so AMI lookups find the seeded SSM parameters).

Integration fixtures (``cluster``, ``namespace``) live in tests/integration/conftest.py.

Parallel runs (pytest-xdist, ``-n 3 --dist loadgroup`` from pyproject's addopts): session fixtures
are per worker, so a worker that runs a test needing ``cluster`` brings up its own control plane;
tests/cluster_groups.py keeps the integration files on it in one group per worker.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hack.localcluster import awsseed

STATE_ENV = "KARPY_CLUSTER_STATE"


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist") != "loadgroup":
        return None
    from tests.cluster_groups import ClusterGroups

    return ClusterGroups(config, log)


@pytest.fixture(scope="session")
def aws(tmp_path_factory: pytest.TempPathFactory) -> Iterator[awsseed.AwsSeed]:
    with pytest.MonkeyPatch.context() as env:
        # Code under test that builds its own boto3 session must never find real credentials.
        env.setenv("AWS_ACCESS_KEY_ID", "testing")
        env.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        env.delenv("AWS_SESSION_TOKEN", raising=False)
        env.delenv("AWS_PROFILE", raising=False)
        state_file = os.environ.get(STATE_ENV)
        if state_file:
            state = json.loads(Path(state_file).read_text())
            yield awsseed.AwsSeed.from_dict(state["aws"])
            return
        log_path = tmp_path_factory.mktemp("moto") / "moto.log"
        server = awsseed.start_moto(log_path, die_with_parent=True)
        try:
            seeded = awsseed.seed(server.endpoint_url)
            env.setenv("AWS_DEFAULT_REGION", seeded.region)
            yield seeded
        finally:
            server.stop()


@pytest.fixture
def aws_settings(aws: awsseed.AwsSeed):  # -> extender.settings.AWSSettings
    return aws.aws_settings()
