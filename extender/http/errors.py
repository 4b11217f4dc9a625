"""JSON errors for every karpy HTTP surface (extender, metrics, webhook): never an HTML page.

kube-scheduler and the API server read bodies as JSON; an HTML 500 from Flask's defaults shows up
in their logs as a decode error that hides what went wrong. An unexpected exception is logged once
(with its traceback: it is a bug) and answered 500 with a one-line JSON message.
"""

from __future__ import annotations

import logging

from flask import Flask, Response, jsonify
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

log = logging.getLogger("karpy.http")


def register_json_errors(app: Flask, *, max_body_bytes: int, too_large_status: int = 413) -> None:
    """Cap request bodies at `max_body_bytes` and answer every error as `{"code", "message"}`."""
    app.config["MAX_CONTENT_LENGTH"] = max_body_bytes

    @app.errorhandler(RequestEntityTooLarge)
    def too_large(_err: RequestEntityTooLarge) -> tuple[Response, int]:
        message = f"request body larger than {max_body_bytes} bytes"
        return jsonify(code=too_large_status, message=message), too_large_status

    @app.errorhandler(HTTPException)
    def http_error(err: HTTPException) -> tuple[Response, int]:
        code = err.code or 400
        return jsonify(code=code, message=err.description or err.name), code

    @app.errorhandler(Exception)
    def internal(err: Exception) -> tuple[Response, int]:
        log.error("Serving request failed, %s", err, exc_info=err)
        return jsonify(code=500, message=f"karpy: internal error ({type(err).__name__})"), 500
