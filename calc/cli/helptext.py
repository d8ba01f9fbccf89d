"""``--help`` that teaches: each key's meaning, unit, default and allowed values, from the
field tables (:mod:`calc.cli.fields`) and the message catalogue; examples; where the method is."""

from __future__ import annotations

from ..numfmt import format_number as number
from .fields import FieldSpec
from .messages import Messages


def _number(value: float | int, lang: str) -> str:
    """As the table writes numbers; very large bounds as powers of ten (1e+15)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e12:
        value = int(value)
    if isinstance(value, int):
        return number(value, 0, lang)
    text = f"{value:g}"
    return text.replace(".", ",") if lang == "es" else text


def range_text(spec: FieldSpec, lang: str = "en") -> str:
    """``0 <= x < 1``, ``0 < x <= 10,000``..."""
    lo = "<" if spec.exclusive_minimum else "<="
    hi = "<" if spec.exclusive_maximum else "<="
    assert spec.minimum is not None and spec.maximum is not None, spec  # a bounded field
    return f"{_number(spec.minimum, lang)} {lo} x {hi} {_number(spec.maximum, lang)}"


def allowed_text(spec: FieldSpec, msg: Messages) -> str | None:
    if spec.kind == "enum" and spec.choices:
        return ", ".join(spec.choices)
    if spec.kind == "int":
        assert spec.minimum is not None and spec.maximum is not None, spec  # ints are bounded
        return msg.text("help.int_range", min=_number(spec.minimum, msg.lang),
                        max=_number(spec.maximum, msg.lang))
    if spec.kind in ("number", "fraction"):
        return msg.text("help.number_range", range=range_text(spec, msg.lang))
    if spec.kind == "model":
        return msg.text("help.preset_or_json")
    if spec.kind == "gpu":
        return msg.text("help.catalogue_id")
    if spec.kind == "targets":
        return msg.text("help.targets")
    return None


def _choice(field: str, value: str, msg: Messages) -> str:
    """``adamw-8bit (8-bit AdamW (bitsandbytes))``: the value and the site's name for it."""
    name = msg.option(field, value)
    return value if name.lower() == value.lower() else f"{value} ({name})"


def default_text(spec: FieldSpec, msg: Messages) -> str:
    if spec.required:
        return msg.text("help.required")
    if spec.default is None:
        return msg.text("help.empty")
    if isinstance(spec.default, bool):
        return ("--" if spec.default else "--no-") + spec.flag[2:]
    if isinstance(spec.default, (int, float)):
        return _number(spec.default, msg.lang)
    return str(spec.default)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def field_sentences(spec: FieldSpec, msg: Messages, name_values: bool = True) -> list[str]:
    """What a key is (the site's label when the CLI has no text for a newer key), then its
    unit, default and allowed values, one sentence each."""
    parts = [msg.help(spec.key) or msg.label(spec.key)]
    unit = msg.unit(spec.key)
    if unit:
        parts.append(f"{_cap(msg.text('help.unit'))}: {unit}.")
    if spec.required:
        parts.append(_cap(msg.text("help.required")) + ".")
    else:
        parts.append(f"{_cap(msg.text('help.default'))}: {default_text(spec, msg)}.")
    allowed = allowed_text(spec, msg)
    if spec.kind == "enum" and spec.choices and name_values:
        allowed = ", ".join(_choice(spec.key, value, msg) for value in spec.choices)
    if allowed:
        parts.append(f"{_cap(msg.text('help.allowed'))}: {allowed}.")
    return parts


def field_help(spec: FieldSpec, msg: Messages) -> str:
    """One flag's ``--help`` text."""
    return " ".join(field_sentences(spec, msg)).replace("%", "%%")  # argparse formats help with %


def _examples(prog: str) -> list[tuple[str, str]]:
    return [
        ("epilog.example_qlora",
         f"{prog} estimate --model llama-2-7b --method qlora --seq-len 2048 --gpu rtx-4090"),
        ("epilog.example_zero3",
         f"{prog} estimate --model llama-3.1-70b --method full --num-gpus 8 --sharding zero3 "
         "--gpu h100-sxm"),
        ("epilog.example_cheapest",
         f"{prog} plan --model llama-3.1-8b --method qlora --dataset-tokens 50e6 --gpu rtx-4090"),
        ("epilog.example_sweep",
         f"{prog} sweep --model llama-3.1-8b --method qlora --seq-len 1024,2048,4096,8192 "
         "--gpu rtx-4090"),
    ]


def epilog(msg: Messages, prog: str) -> str:
    lines = [msg.text("epilog.examples") + ":"]
    for key, command in _examples(prog):
        lines += ["  " + msg.text(key), "    " + command]
    lines += ["", msg.text("help.sweep"), msg.text("epilog.output"),
              msg.text("epilog.methodology", url=msg.methodology_url())]
    return "\n".join(lines)


def examples() -> list[str]:
    """The example commands (tests run them), without the program name."""
    return [command.split(" ", 1)[1] for _, command in _examples("calc")]
