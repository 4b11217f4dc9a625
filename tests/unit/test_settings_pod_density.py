"""KARPY_AWS_RESERVED_ENIS / KARPY_AWS_PREFIX_DELEGATION: read from the environment, a bad value
stops `karpy controller` with a usage error naming the setting."""

from __future__ import annotations

import argparse

import pytest

from extender.cli.controller import settings_from
from extender.cli.main import UsageError


def test_pod_density_settings_are_read_from_the_environment() -> None:
    env = {"KARPY_AWS_RESERVED_ENIS": "1", "KARPY_AWS_PREFIX_DELEGATION": "true"}
    aws = settings_from(argparse.Namespace(), env=env).aws
    assert (aws.reserved_enis, aws.prefix_delegation) == (1, True)
    default = settings_from(argparse.Namespace(), env={}).aws
    assert (default.reserved_enis, default.prefix_delegation) == (0, False)


def test_negative_reserved_enis_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match=r"KARPY_AWS_RESERVED_ENIS\) cannot be negative"):
        settings_from(argparse.Namespace(), env={"KARPY_AWS_RESERVED_ENIS": "-1"})
