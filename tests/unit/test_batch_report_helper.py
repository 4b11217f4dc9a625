"""tests/integration/helpers.batch_report finds a report that lands after the call even when the
controller's report list is at its cap (ProvisioningController keeps its last 100): by index, a count
taken at 100 never saw a new report, and the helper timed out after 10 s."""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from extender.provisioning.report import BatchReport
from tests.integration.helpers import batch_report


def test_a_report_after_the_cap_is_found() -> None:
    controller = SimpleNamespace(reports=[BatchReport(pods=1) for _ in range(100)])
    karpy: Any = SimpleNamespace(controller=controller)
    before = list(controller.reports)
    late = BatchReport(pods=7)

    def land() -> None:  # as the controller appends: the oldest dropped, the list replaced
        controller.reports = [*controller.reports[-99:], late]

    timer = threading.Timer(0.3, land)
    timer.start()
    try:
        assert batch_report(karpy, before, lambda r: r.pods > 0) is late
    finally:
        timer.cancel()
