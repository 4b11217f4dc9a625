"""`karpy webhook`: flag checking (serving: tests/process/webhook/test_webhook_serving.py)."""

from __future__ import annotations

import pytest

from extender.cli.main import main


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "choose exactly one of --tls-cert/--tls-key, --self-signed, --insecure-http"),
        (["--self-signed", "--insecure-http"], "choose exactly one"),
        (
            ["--tls-cert", "/nonexistent.pem", "--tls-key", "/nonexistent.key"],
            "no such file: /nonexistent.pem",
        ),
        (["--tls-cert", "/x.pem"], "--tls-cert and --tls-key go together"),
        (["--bind", "8443", "--insecure-http"], "--bind wants HOST:PORT"),
    ],
)
def test_usage_errors_exit_2_with_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["webhook", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("karpy webhook: ") and message in err and err.count("\n") == 1
