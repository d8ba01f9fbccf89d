"""One error hierarchy for every bad input.

Each error carries a stable ``code`` (translated by the site and the UI), the
``field`` it concerns (a dotted path into the request, or ``None``) and the
offending ``value``. ``calc`` holds no prose for users: ``str(err)`` is a short
English line for developers and logs only.

An error may carry ``extra``: more JSON-safe keys for ``to_dict()`` that tell what would
have been valid, so a form can say it (``allowed``: the accepted values of an enum field;
``minimum`` / ``maximum``: a number's range, with ``minimum_exclusive`` /
``maximum_exclusive`` when the bound itself is refused; ``integer``: whole numbers only;
``suggestions``: presets near an unknown model id). Additive: the three keys stay.
"""

from __future__ import annotations

from .jsontypes import JsonObject


class CalcError(Exception):
    """Base class: ``code``, ``field`` and ``value`` describe what was wrong."""

    code = "calc_error"
    # (command, request) of the CLI run that raised it, for its JSON report (calc.cli)
    request_context: tuple[str, object] | None = None

    def __init__(
        self,
        code: str | None = None,
        field: str | None = None,
        value: object = None,
        detail: str = "",
        *,
        extra: JsonObject | None = None,
    ) -> None:
        self.code = code or type(self).code
        self.field = field
        self.value = value
        self.detail = detail
        # Additional JSON-able keys for the error object (e.g. ``suggestions`` for an
        # unknown model); they never replace code, field, value or detail.
        self.extra = dict(extra) if extra else {}
        super().__init__(f"{self.code}: field={field!r} value={_short(value)!r} {detail}".rstrip())

    def to_dict(self) -> JsonObject:
        """JSON-safe description, as printed by the CLI under ``"error"``."""
        out = {"code": self.code, "field": self.field, "value": _jsonable(self.value)}
        if self.detail:
            out["detail"] = self.detail
        for key, val in self.extra.items():  # lists whole: "allowed" may be long
            out.setdefault(
                key, [_jsonable(v) for v in val] if isinstance(val, list) else _jsonable(val)
            )
        return out


class InputError(CalcError, ValueError):
    """A request value is out of range, of the wrong type or unknown."""

    code = "invalid_value"


class ConfigError(CalcError, ValueError):
    """A Hugging Face config is malformed, lacks a key or is unsupported."""

    code = "invalid_config"


def _short(value: object, limit: int = 80) -> object:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _jsonable(value: object) -> object:
    """Keep JSON scalars; summarise anything else so the output is always valid JSON."""
    if value is None or isinstance(value, (bool, int, float)):
        if isinstance(value, float) and value != value:  # NaN is not JSON
            return "NaN"
        if isinstance(value, float) and value in (float("inf"), float("-inf")):
            return str(value)
        return value
    if isinstance(value, str):
        return value if len(value) <= 200 else value[:200] + "..."
    if isinstance(value, (list, tuple)) and len(value) <= 20:
        return [_jsonable(v) for v in value]
    return _short(value, 200)
