"""`karpy version`."""

from __future__ import annotations

import argparse
from importlib import metadata


def version() -> str:
    try:
        return metadata.version("karpy")
    except metadata.PackageNotFoundError:
        return "0.0.0+unknown"


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser("version", help="print karpy's version")
    parser.set_defaults(func=lambda _args: print(f"karpy {version()}") or 0)
