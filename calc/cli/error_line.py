"""The one line a bad input gets on a terminal, in the reader's language.

``error [code]: Label (field): what is wrong 'value'; what is accepted``: the catalogue's
``error.<code>`` text, then what would have been valid, read from the error itself (its
``extra``: a range with the field's unit, the allowed values, the closest ids) so that the
line says what the JSON says. Every command's errors (``estimate``, ``plan``, ``sweep``,
``import``, ``schema``...) print through :func:`error_line`.
"""

from __future__ import annotations

import difflib
import re

from ..errors import CalcError
from ..jsontypes import JsonObject
from .messages import Messages

# the codes whose value is a number outside what the field accepts
RANGE_CODES = ("out_of_range", "not_positive", "not_integer", "not_number")
# the codes whose message names a file and whose detail says why (a parser's message)
DETAIL_CODES = (
    "bad_arguments",
    "request_not_json",
    "request_unreadable",
    "config_unreadable",
    "config_invalid_values",
    "config_format_mismatch",
)
# codes whose value is a list the detail spells out key by key
LISTED_IN_DETAIL = ("config_invalid_values",)
# more values than fit in a line: the closest ones and where to see them all
MAX_LISTED = 12


def _num(value: object, lang: str) -> str:
    """A bound as the tables write numbers (``4 194 304`` in Spanish, ``4,194,304`` in English)."""
    from ..numfmt import format_number as number

    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    if float(value).is_integer() and abs(value) < 1e18:
        return number(float(value), 0, lang)
    text = repr(float(value))
    if "e" in text:
        return text
    return number(float(value), len(text.partition(".")[2]), lang)


def accepted_range(out: JsonObject, msg: Messages, field: str | None) -> str | None:
    """``accepted: a whole number, at least 1, at most 4,194,304 (tokens)``, from the error's
    ``integer`` / ``minimum`` / ``maximum`` keys; ``None`` when it has none."""
    parts = []
    if out.get("integer"):
        parts.append(msg.text("error.whole_number"))
    if "minimum" in out:
        key = "error.more_than" if out.get("minimum_exclusive") else "error.at_least"
        parts.append(msg.text(key, value=_num(out["minimum"], msg.lang)))
    if "maximum" in out:
        key = "error.less_than" if out.get("maximum_exclusive") else "error.at_most"
        parts.append(msg.text(key, value=_num(out["maximum"], msg.lang)))
    if not parts:
        return None
    text = ", ".join(parts)
    unit = msg.unit(field) if field else None
    if unit and f"({unit})" not in msg.label(field or ""):  # "Sequence length (tokens)" says it
        text += f" ({unit})"
    return msg.text("error.accepted", range=text)


def _field_text(field: str | None, msg: Messages) -> str:
    """``Label (field): ``; a key inside another (``hf_config.model_type``) takes the outer
    key's label; a field with no label is shown as it is."""
    if not field or field == "argv":
        return ""
    label = msg.message("label." + field, "")
    if not label and "." in field:
        label = msg.message("label." + field.split(".", 1)[0], "")
    return f"{label} ({field}): " if label else f"{field}: "


def _model_ids() -> list[str]:
    """Every name a ``model`` string may take: preset ids and their Hugging Face ids."""
    from ..presets import presets_listing

    ids: list[str] = []
    for preset in presets_listing():
        ids += [preset["id"], preset["hf_repo"], *preset.get("aliases", [])]
    return list(dict.fromkeys(ids))


def closest(value: object, candidates: list[str], n: int = 3) -> list[str]:
    """The candidates nearest to ``value`` (case aside), best first."""
    if not isinstance(value, str) or not value.strip():
        return []
    lowered = {c.lower(): c for c in reversed(candidates)}  # the first spelling of each wins
    found = difflib.get_close_matches(value.strip().lower(), list(lowered), n=n, cutoff=0.6)
    return [lowered[f] for f in found]


def _argv_text(detail: str, msg: Messages) -> str:
    """argparse's English message as the reader's words, for the messages it has; else as is."""
    patterns = (
        (r"unrecognized arguments: (.+)", "error.argv_unknown", "values"),
        (r"argument ([^:]+): expected one argument", "error.argv_needs_value", "flag"),
        (r"the following arguments are required: (.+)", "error.argv_required", "values"),
    )
    for pattern, key, name in patterns:
        match = re.fullmatch(pattern, detail.strip())
        if match:
            return msg.text(key, **{name: match.group(1)})
    match = re.fullmatch(
        r"argument ([^:]+): invalid choice: (.+?) \(choose from (.+)\)", detail.strip()
    )
    if match:
        return msg.text(
            "error.argv_choice",
            flag=match.group(1),
            value=match.group(2),
            values=match.group(3).replace("'", ""),
        )
    return detail


def error_line(err: CalcError, out: JsonObject, msg: Messages, flags: list[str]) -> str:
    """The terminal's line for ``err`` (``out``: its JSON form, with ``allowed`` where known)."""
    text = msg.message("error." + err.code, err.code)
    field = _field_text(err.field, msg)
    if text.endswith(":") and err.field and "." in err.field:
        line = f"{field}{text} " + err.field.rsplit(".", 1)[1]  # the key the message ends by naming
        if err.value is not None:
            line += f" = {out['value']!r}"
    elif err.code == "duplicate_key":
        line = f"{field}{text} {out['value']!r}"
    elif err.code == "bad_arguments" and err.detail:
        line = f"{field}{text} ({_argv_text(err.detail, msg)})"
    elif err.value is not None and err.code not in LISTED_IN_DETAIL:
        # the value beside its field: "Sequence length (seq_len) = 1000000000: Value out of ..."
        line = f"{field[:-2]} = {out['value']!r}: {text}" if field else f"{out['value']!r}: {text}"
    else:
        line = f"{field}{text}"
    line = f"{msg.text('error.prefix')} [{err.code}]: {line}"
    if err.detail and err.code in DETAIL_CODES and err.code != "bad_arguments":
        line += f" ({err.detail})"
    hints: list[str] = []
    if err.code == "bad_arguments":
        near = _near_flags(err.detail, flags)
        if near:
            hints.append(msg.text("error.near", values=", ".join(near)))
    if err.code in RANGE_CODES:
        accepted = accepted_range(out, msg, err.field)
        if accepted:
            hints.append(accepted)
    hints += _allowed_hints(err, out, msg)
    if hints and line.endswith("."):
        line = line[:-1]  # the hints continue the sentence
    return "; ".join([line, *hints])


def _allowed_hints(err: CalcError, out: JsonObject, msg: Messages) -> list[str]:
    allowed = out.get("allowed")
    if err.code == "unknown_preset":
        near = closest(err.value, _model_ids()) or [str(s) for s in out.get("suggestions", [])]
        hints = [msg.text("error.near", values=", ".join(near))] if near else []
        return hints + [msg.text("error.see_presets"), msg.text("error.hf_config_hint")]
    if not isinstance(allowed, list) or not allowed:
        return []
    names = ["true" if a is True else "false" if a is False else str(a) for a in allowed]
    if len(names) <= MAX_LISTED:
        return [msg.text("error.allowed", values=", ".join(names))]
    near = closest(err.value, names, n=5)
    hint = msg.text(
        "error.see_gpus" if err.code == "unknown_gpu" else "error.allowed_many", count=len(names)
    )
    return ([msg.text("error.near", values=", ".join(near))] if near else []) + [hint]


def _near_flags(detail: str, flags: list[str]) -> list[str]:
    near: list[str] = []
    for word in detail.split():
        if word.startswith("--"):
            typed = word.split("=")[0]
            near += [
                f for f in difflib.get_close_matches(typed, flags, n=2, cutoff=0.75) if f != typed
            ]
    return list(dict.fromkeys(near))


__all__ = ["accepted_range", "closest", "error_line"]
