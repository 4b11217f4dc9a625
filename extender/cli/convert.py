"""`karpy convert`: v1alpha5 Provisioners and AWSNodeTemplates -> v1 NodePools and EC2NodeClasses.

Reads YAML files (`-f`, repeatable), writes the converted YAML stream to stdout and, on stderr, one
line per field with no v1 counterpart or whose value changed on the way (extender/api/migrate.py).
The defaults the controller applies (cluster selectors, instance profile, requirement defaults)
come from the same KARPY_* settings; `--ignore-defaults` leaves the requirements as written, as
karpenter-convert's flag does.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from extender.cli.main import UsageError


def register(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "convert", help="convert v1alpha5 Provisioners/AWSNodeTemplates to v1 NodePools/EC2NodeClasses"
    )
    parser.add_argument("-f", "--filename", action="append", required=True, help="YAML file (repeatable)")
    parser.add_argument(
        "--ignore-defaults",
        action="store_true",
        help="do not write the v1alpha5 default requirements (arch, capacity type) into the NodePools",
    )
    parser.set_defaults(func=run)


def _load(paths: list[str]) -> list[dict[str, Any]]:
    import yaml

    docs = []
    for path in paths:
        try:
            with open(path, encoding="utf-8") as handle:
                docs += [d for d in yaml.safe_load_all(handle) if d]
        except (OSError, yaml.YAMLError) as err:
            raise UsageError(f"{path}: {err}") from err
    for doc in docs:
        if doc.get("kind") == "List":
            raise UsageError("a List: give the items as a YAML stream")
    return docs


def run(args: argparse.Namespace) -> int:
    import yaml

    from extender.api.migrate import ConvertError, convert
    from extender.settings import from_env

    settings = from_env()
    try:
        result = convert(
            _load(args.filename),
            cluster_name=settings.cluster_name,
            instance_profile=settings.aws.default_instance_profile,
            ignore_defaults=args.ignore_defaults,
        )
    except ConvertError as err:
        raise UsageError(str(err)) from err
    for note in result.notes:
        print(f"karpy convert: {note}", file=sys.stderr)
    sys.stdout.write(yaml.safe_dump_all(result.objects, sort_keys=False, explicit_start=True))
    return 0
