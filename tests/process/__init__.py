"""Tests that need a real process or the wall clock: gunicorn servers on loopback, subprocesses
(the static checkers, the webhook CLI) and waits measured in seconds. `make test` runs them with
the rest (`pytest tests`); `pytest tests/unit` stays in-process and clock-free for these."""
