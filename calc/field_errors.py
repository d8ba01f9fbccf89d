"""Every bad field of a request at once, not only the first.

The parsers (:func:`calc.request.parse_estimate_request`, :func:`calc.plan.parse_plan_request`)
stop at the first bad value. A form wants a message next to each bad field, so after a
failure :func:`field_errors` checks every field of the request on its own, with the same
check functions, and lists each failure. Checks that need other fields (the LoRA targets
need the model) run only when those fields are valid; checks across fields (the memory
model refusing a combination) only show once every field is valid, as the first error.
"""

from __future__ import annotations

from .errors import CalcError, InputError
from .jsontypes import JsonObject


def field_errors(command: str, data: object) -> list[CalcError]:
    """The errors of each field of ``data`` checked on its own, in the order of the
    command's field table (unknown keys first)."""
    from .fields import BEHAVIOUR, BEHAVIOUR_OBJECT, BY_KEY, PLAN, migrate_request, spec_by_key
    from .request import check_estimate_field, resolve_model

    if command not in ("estimate", "plan"):
        return []
    try:
        data = migrate_request(data)
    except CalcError as err:
        return [err]
    if not isinstance(data, dict):
        return []
    fields = spec_by_key(command)
    errors: list[CalcError] = [
        InputError("unknown_key", str(key), None)
        for key in data
        if key not in fields and key != BEHAVIOUR_OBJECT
    ]
    nested = data.get(BEHAVIOUR_OBJECT, {})
    if isinstance(nested, dict):
        known = {k: v for k, v in nested.items() if k in BY_KEY and BY_KEY[k].group == BEHAVIOUR}
        errors += [
            InputError("unknown_key", f"{BEHAVIOUR_OBJECT}.{key}", None)
            for key in nested
            if key not in known
        ]
        data = {**{k: v for k, v in data.items() if k != BEHAVIOUR_OBJECT}, **known}
    else:
        errors.append(InputError("wrong_type", BEHAVIOUR_OBJECT, nested))
    arch = None
    if "model" not in data:
        errors.append(InputError("missing_field", "model", None))
    else:
        try:
            arch, _ = resolve_model(data["model"])
        except CalcError as err:
            errors.append(err)
    for key, spec in fields.items():
        if key == "model":
            continue
        value = data.get(key, spec.default)
        try:
            if spec.group == PLAN:
                from .plan import check_plan_field

                check_plan_field(key, value)
            else:
                check_estimate_field(key, value, arch)
        except CalcError as err:
            errors.append(err)
        except RecursionError:
            errors.append(InputError("request_too_deep", key, None))
    return errors


def error_response(command: str, data: object, first: CalcError) -> JsonObject:
    """``{"error": first, "errors": [first, then every other bad field]}``: ``error`` is what
    the parser found first (unchanged contract); ``errors`` is additive."""
    head = first.to_dict()
    out = [head]
    try:
        others = field_errors(command, data)
    except (CalcError, RecursionError):
        others = []
    for err in others:
        found = err.to_dict()
        if found.get("field") != head.get("field") or found.get("code") != head.get("code"):
            if all(found.get("field") != seen.get("field") for seen in out):
                out.append(found)
    return {"error": head, "errors": out}


__all__ = ["error_response", "field_errors"]
