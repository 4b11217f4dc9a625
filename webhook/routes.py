"""The admission blueprint: /mutate/provisioner, /validate/provisioner, /validate/awsnodetemplate,
/validate/nodepool, /validate/nodeoverlay, /validate/ec2nodeclass, /mutate/pod.

Every handler answers a well-formed AdmissionReview; a body that is not one gets HTTP 400. An
unexpected exception in a handler is logged and answered per the resource's failure policy:
pods are admitted unchanged (karpy must never block a Deployment), Provisioners,
AWSNodeTemplates, NodePools, NodeOverlays and EC2NodeClasses are denied.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from flask import Blueprint, Response, jsonify, request

from webhook import nodepool, nodetemplate, pod, provisioner
from webhook.admission import (
    MAX_OBJECT_DEPTH,
    AdmissionRequest,
    BadReview,
    Verdict,
    build_response,
    parse_review,
)
from webhook.state import state

log = logging.getLogger(__name__)
bp = Blueprint("admission", __name__)

Handler = Callable[[AdmissionRequest], Verdict]


def _result(verdict: Verdict) -> str:
    if not verdict.allowed:
        return "denied"
    return "patched" if verdict.patch else "allowed"


def _answer(handler: Handler, *, fail_open: bool) -> tuple[Response, int]:
    started = time.perf_counter()
    try:
        review = parse_review(request.get_data(cache=False))
    except BadReview as err:
        state().metrics.observe(request.path, "bad_request", time.perf_counter() - started)
        return jsonify(code=400, message=str(err)), 400
    try:
        if review.too_deep:
            message = f"{review.too_deep}: nested deeper than {MAX_OBJECT_DEPTH} levels"
            verdict = Verdict(warnings=(f"karpy: {message}, admitted unchanged",))
            if not fail_open:
                verdict = Verdict.deny(400, message)
        else:
            verdict = handler(review)
        result = _result(verdict)
    except RecursionError:
        # Not a bug to page anyone about: the object is absurdly deep. One line, no traceback.
        log.warning("Admission request %s uid %s is nested too deeply to handle", request.path, review.uid)
        verdict = Verdict(warnings=("karpy: object nested too deeply, admitted unchanged",))
        if not fail_open:
            verdict = Verdict.deny(400, "karpy: object nested too deeply")
        result = "error"
    except Exception:
        log.exception("Admission handler failed for %s uid %s", request.path, review.uid)
        if fail_open:
            verdict = Verdict(warnings=("karpy: internal error, admitted unchanged",))
        else:
            verdict = Verdict.deny(500, "karpy: internal error")
        result = "error"
    state().metrics.observe(request.path, result, time.perf_counter() - started)
    return jsonify(build_response(review.uid, verdict)), 200


@bp.post("/mutate/provisioner")
def mutate_provisioner() -> tuple[Response, int]:
    return _answer(lambda r: provisioner.mutate(r, state().config), fail_open=False)


@bp.post("/validate/provisioner")
def validate_provisioner() -> tuple[Response, int]:
    return _answer(provisioner.validate, fail_open=False)


@bp.post("/validate/awsnodetemplate")
def validate_node_template() -> tuple[Response, int]:
    return _answer(lambda r: nodetemplate.validate(r, state().config), fail_open=False)


@bp.post("/validate/nodepool")
def validate_nodepool() -> tuple[Response, int]:
    return _answer(nodepool.validate_nodepool, fail_open=False)


@bp.post("/validate/nodeoverlay")
def validate_nodeoverlay() -> tuple[Response, int]:
    return _answer(nodepool.validate_nodeoverlay, fail_open=False)


@bp.post("/validate/ec2nodeclass")
def validate_ec2nodeclass() -> tuple[Response, int]:
    return _answer(lambda r: nodepool.validate_ec2nodeclass(r, state().config), fail_open=False)


@bp.post("/mutate/pod")
def mutate_pod() -> tuple[Response, int]:
    app_state = state()
    return _answer(lambda r: pod.mutate(r, app_state.config, app_state.provisioners), fail_open=True)
