"""MIME multi-part user data: split the user's user data into parts, and build the archive.

cloud-init and nodeadm both read `multipart/mixed` archives; each family appends its own part
after the user's, so the user's scripts run first and karpy's settings win where they merge.
"""

from __future__ import annotations

import email
from email.message import Message

import yaml

BOUNDARY = "//"
SHELL_SCRIPT = 'text/x-shellscript; charset="us-ascii"'
NODE_CONFIG = "application/node.eks.aws"

Part = tuple[str, str]  # (Content-Type header value, body)


def _is_node_config(text: str) -> bool:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return False
    return isinstance(doc, dict) and str(doc.get("apiVersion", "")).startswith("node.eks.aws/")


def _part(message: Message) -> Part:
    payload = message.get_payload(decode=True)
    body = payload.decode() if isinstance(payload, bytes) else str(message.get_payload())
    return str(message.get("Content-Type", SHELL_SCRIPT)), body


def split(user_data: str | None, *, node_config: bool = False) -> list[Part]:
    """The user's user data as parts: a MIME document's own parts; else (`node_config`) a
    NodeConfig YAML document as one `application/node.eks.aws` part; else one shell-script part."""
    if not user_data or not user_data.strip():
        return []
    text = user_data.replace("\r\n", "\n")
    if text.lstrip().startswith(("MIME-Version:", "Content-Type:")):
        message = email.message_from_string(text.lstrip())
        if message.is_multipart():
            return [_part(p) for p in message.get_payload() if isinstance(p, Message)]
        return [_part(message)]
    if node_config and _is_node_config(text):
        return [(NODE_CONFIG, text)]
    return [(SHELL_SCRIPT, text)]


def archive(parts: list[Part]) -> str:
    """A multipart/mixed document of `parts`, in order."""
    lines = ["MIME-Version: 1.0", f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"', ""]
    for content_type, body in parts:
        lines += [f"--{BOUNDARY}", f"Content-Type: {content_type}", "", body.rstrip("\n"), ""]
    lines += [f"--{BOUNDARY}--", ""]
    return "\n".join(lines)
