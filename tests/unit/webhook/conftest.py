"""Fixtures for the webhook unit tests: an app whose Provisioner list the test controls."""

from __future__ import annotations

import pytest
from flask import Flask
from flask.testing import FlaskClient

from extender.api.provisioner import Provisioner
from webhook.app import create_app
from webhook.config import WebhookConfig


@pytest.fixture
def known_provisioners() -> list[Provisioner]:
    return []


@pytest.fixture
def app(known_provisioners: list[Provisioner]) -> Flask:
    config = WebhookConfig(cluster_name="demo", cluster_endpoint="https://10.0.0.1", read_provisioners=False)
    return create_app(config, provisioners=lambda: known_provisioners)


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    return app.test_client()
