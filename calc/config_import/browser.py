"""The calculator's entry for a pasted config (called by the worker): JSON text in, JSON
text out, never raises for bad input.

``handle("import", '{"text": ..., "format": "auto"}')`` -> the import result plus
``form``: every estimate field (calc's default where the file sets none, so a setup
pasted over another does not inherit it) and the plan keys the file gives.
``handle("export", '{"request": {...}, "format": "axolotl"}')`` -> ``{"text": ...}``.
"""

from __future__ import annotations

import json

from ..errors import CalcError, InputError
from ..request import ESTIMATE_FIELDS


def _form(result: dict) -> dict:
    form = {}
    for key, (default, _kind, _extra) in ESTIMATE_FIELDS.items():
        if key == "model":
            continue
        form[key] = default
    form.update(result["request"])
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
            result["form"] = _form(result)
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
