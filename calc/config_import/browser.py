"""The calculator's entry for a pasted config (called by the worker): JSON text in, JSON
text out, never raises for bad input.

``handle("import", '{"text": ..., "format": "auto", "model": <the page's model>}')`` -> the
import result plus ``form``: every estimate field as calc uses it (so a setup pasted over
another inherits nothing from it) and the plan keys the file gives.
``handle("export", '{"request": {...}, "format": "axolotl"}')`` -> ``{"text": ...}``.
"""

from __future__ import annotations

import json

from ..errors import CalcError, InputError
from ..jsontypes import JsonObject
from ..fields import defaults


def _form(result: JsonObject, page_model: object = None) -> JsonObject:
    """Every estimate field as calc will use it: the request is validated (with the page's
    model when the file's is not a preset) so that the values a framework profile fills in
    (:mod:`calc.frameworks`) are written out too; the form sends every field, and the page
    then computes what ``python -m calc plan --config`` computes."""
    from ..request import parse_estimate_request

    request = dict(result["request"])
    if "model" not in request and page_model is not None:
        request["model"] = page_model
    try:
        form = parse_estimate_request(request).to_dict()
    except CalcError:
        form = defaults("estimate")
        form.update(result["request"])
    if "model" not in result["request"]:
        form.pop("model", None)
    form.update(result.get("plan", {}))
    return form


def handle(action: str, payload_json: str) -> str:
    from . import export_config, import_config

    try:
        try:
            payload = json.loads(payload_json)
        except (TypeError, ValueError):
            raise InputError("request_not_json", "config", None) from None
        if not isinstance(payload, dict):
            raise InputError("request_not_object", "config", None)
        fmt = payload.get("format", "auto")
        if action == "import":
            text = payload.get("text")
            if not isinstance(text, str):
                raise InputError("wrong_type", "config", None)
            result = import_config(text, fmt if isinstance(fmt, str) else "auto")
            result["form"] = _form(result, payload.get("model"))
            out = {"result": result}
        elif action == "export":
            request = payload.get("request")
            out = {"result": {"format": fmt, "text": export_config(request, fmt)}}
        else:
            raise InputError("unknown_command", "command", action)
    except CalcError as err:
        out = {"error": err.to_dict()}
    except RecursionError:
        out = {"error": {"code": "config_too_deep", "field": "config", "value": None}}
    return json.dumps(out, ensure_ascii=False, allow_nan=False)
