"""The kubernetes ApiClient karpy uses, and the one way objects cross into karpy: API JSON dicts.

Reads use `_preload_content=False` and parse the body as JSON: the same camelCase dicts
`ApiClient.sanitize_for_serialization` gives for a typed object, without building (and then
discarding) thousands of pydantic models per list.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes import client, config

from extender.settings import Settings

#: Sockets to the apiserver: parallel binds (32) plus the watch, launches and events.
POOL_SIZE = 64


def load(settings: Settings) -> client.ApiClient:
    """An ApiClient from settings.kubeconfig, else in-cluster config, else the default kubeconfig."""
    configuration = client.Configuration()
    if settings.kubeconfig:
        config.load_kube_config(config_file=settings.kubeconfig, client_configuration=configuration)
    else:
        try:
            config.load_incluster_config(client_configuration=configuration)
        except config.ConfigException:
            config.load_kube_config(client_configuration=configuration)
    configuration.connection_pool_maxsize = POOL_SIZE
    return client.ApiClient(configuration)


def to_json(kube: client.ApiClient, obj: Any) -> Any:
    """A typed client object as API JSON (camelCase dicts)."""
    return kube.sanitize_for_serialization(obj)


def call_json(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a generated API method and return its body as API JSON; ApiException on HTTP errors."""
    response = func(*args, _preload_content=False, **kwargs)
    try:
        data = response.data
    finally:
        response.release_conn()
    return json.loads(data) if data else {}
