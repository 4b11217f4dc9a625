"""`karpy` entry point: dispatches to extender/cli/<command>.py modules.

Each command module exposes `register(subparsers)`, which adds its parser and sets `func`
(a callable taking the parsed args and returning an exit code). Modules are imported lazily
so `karpy plan` does not pay for gunicorn or boto3 imports it does not use.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

COMMANDS = ("controller", "webhook", "plan", "explain", "convert", "status", "version")


class UsageError(Exception):
    """Bad flags or unusable input: exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="karpy", description="A Kubernetes node autoscaler (Karpenter 0.5 design)."
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        try:
            module = importlib.import_module(f"extender.cli.{name}")
        except ModuleNotFoundError as err:
            if err.name != f"extender.cli.{name}":
                raise
            continue  # command not built yet
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except UsageError as err:
        print(f"karpy {args.command}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except Exception as err:  # one clear line, not a traceback, for runtime failures
        print(f"karpy {args.command}: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
