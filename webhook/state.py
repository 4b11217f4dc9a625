"""Per-app state (config, metrics, Provisioner source), kept in `app.extensions` as Flask recommends."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from flask import current_app

from extender.api.provisioner import Provisioner
from webhook.config import WebhookConfig
from webhook.metrics import WebhookMetrics

EXTENSION = "karpy.webhook"


@dataclass(frozen=True)
class AppState:
    config: WebhookConfig
    metrics: WebhookMetrics
    #: The Provisioners to choose from; None when they cannot be listed right now.
    provisioners: Callable[[], Sequence[Provisioner] | None]


def state() -> AppState:
    return current_app.extensions[EXTENSION]
