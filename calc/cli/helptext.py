"""``--help`` that teaches: each key's meaning, unit, default and allowed values, from the
field tables (:mod:`calc.fields`) and the message catalogue; examples; where the method is."""

from __future__ import annotations

import argparse
from dataclasses import replace
from functools import cache

from ..numfmt import format_number as number
from ..fields import BY_KEY, FieldSpec, defaults
from ..frameworks import Framework, apply_profile
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
        return msg.text(
            "help.int_range",
            min=_number(spec.minimum, msg.lang),
            max=_number(spec.maximum, msg.lang),
        )
    if spec.kind in ("number", "fraction"):
        return msg.text("help.number_range", range=range_text(spec, msg.lang))
    if spec.kind == "model":
        return msg.text("help.preset_or_json")
    if spec.kind == "gpu":
        return msg.text("help.catalogue_id")
    if spec.kind == "targets":
        return msg.text("help.targets")
    if spec.kind == "stats":
        assert spec.minimum is not None and spec.maximum is not None and spec.parts, spec
        return msg.text(
            "help.stats",
            parts=", ".join(spec.parts),
            min=_number(spec.minimum, msg.lang),
            max=_number(spec.maximum, msg.lang),
        )
    return None


def _choice(field: str, value: str, msg: Messages, short: bool = False) -> str:
    """``adamw-8bit (8-bit AdamW (bitsandbytes))``: the value and the site's name for it (its
    short form with ``short``, as ``--help`` shows it)."""
    name = msg.short_option(field, value) if short else msg.option(field, value)
    return value if name.lower() == value.lower() else f"{value} ({name})"


def default_text(spec: FieldSpec, msg: Messages) -> str:
    if spec.required:
        return msg.text("help.required")
    # a key whose absence means something of its own (required with one value of another key,
    # ignored otherwise) says so instead of the generic "none"
    own = msg.message("cli.help.default_of." + spec.key, "")
    if own:
        return own
    if spec.default is None:
        return msg.text("help.empty")
    if isinstance(spec.default, bool):
        return ("--" if spec.default else "--no-") + spec.flag[2:]
    if isinstance(spec.default, (int, float)):
        return _number(spec.default, msg.lang)
    return str(spec.default)


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def field_sentences(
    spec: FieldSpec, msg: Messages, name_values: bool = True, short_names: bool = False
) -> list[str]:
    """What a key is (the site's label when the CLI has no text for a newer key), then its
    unit, default and allowed values, one sentence each (the values' short names with
    ``short_names``)."""
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
        allowed = ", ".join(_choice(spec.key, value, msg, short_names) for value in spec.choices)
    if allowed:
        parts.append(f"{_cap(msg.text('help.allowed'))}: {allowed}.")
    return parts


# --help keeps a key's explanation to its first clause above this length (the API page has it all)
LONG_HELP_CHARS = 400


def brief(text: str, msg: Messages) -> str:
    """``text``, or for a long one its first clause (up to the first ``": "``) and where the
    rest is."""
    cut = text.find(": ")
    if len(text) <= LONG_HELP_CHARS or not 0 < cut < LONG_HELP_CHARS // 2:
        return text
    return f"{text[:cut]} ({msg.text('help.more', url=api_url(msg))})."


def field_help(spec: FieldSpec, msg: Messages) -> str:
    """One flag's ``--help`` text: brief where the explanation is long, the values' short names
    (the API page has the whole text and the long names)."""
    parts = field_sentences(spec, msg, short_names=True)
    return " ".join([brief(parts[0], msg), *parts[1:]]).replace(
        "%", "%%"
    )  # argparse formats help with %


@cache
def _default_request_values() -> dict[str, object]:
    """An estimate request that gives no key, once the default ``framework``'s profile has
    filled it (every parser build asks for it, once per behaviour flag)."""
    framework = Framework(str(BY_KEY["framework"].default))
    return apply_profile(dict(defaults("estimate")), (), framework)


def default_library_value(spec: FieldSpec) -> object:
    """The value a request that gives no key gets: the default ``framework``'s profile entry
    where that profile sets the key for the default setup, else the key's own default."""
    return _default_request_values().get(spec.key, spec.default)


def behaviour_help(spec: FieldSpec, msg: Messages) -> str:
    """A library behaviour's ``--help``: one short line, its name and, for a switch, only when
    the default library turns it on (off is what every other switch is; what it does in detail
    is on the API page; ``--framework`` sets it anyway)."""
    parts = [msg.label(spec.key) + "."]
    value = default_library_value(spec)
    if spec.kind == "bool":
        if value:
            parts.append(f"{_cap(msg.text('help.default'))}: {msg.text('help.on')}.")
    else:
        parts += field_sentences(replace(spec, default=value), msg, name_values=False)[1:]
    return " ".join(parts).replace("%", "%%")


# keys a sweep does without: with them it runs plan or judges a card, without them estimate
SWEEP_OPTIONAL = {"gpu": "help.sweep_gpu", "dataset_tokens": "help.sweep_dataset_tokens"}


def sweep_field_help(spec: FieldSpec, msg: Messages) -> str:
    """``sweep --help``: as ``plan``'s, except that ``--gpu`` and ``--dataset-tokens`` are not
    required there, and the line says what each one changes."""
    if spec.key not in SWEEP_OPTIONAL:
        return field_help(spec, msg)
    required = _cap(msg.text("help.required")) + "."
    parts = [
        msg.text(SWEEP_OPTIONAL[spec.key]) if part == required else part
        for part in field_sentences(spec, msg, short_names=True)
    ]
    parts[0] = brief(parts[0], msg)
    return " ".join(parts).replace("%", "%%")


def usage(command: str, prog: str) -> str:
    """Three lines of usage: argparse's own lists all ~60 flags (45 lines). ``--KEY VALUE``
    stands for any key's flag."""
    keys = {
        "estimate": "[--model ID] [--KEY VALUE ...] [--gpu ID[,ID...]]",
        "plan": "[--model ID] [--dataset-tokens N] [--gpu ID] [--KEY VALUE ...]",
        "sweep": "[--model ID] --KEY A,B,C|A..B[:STEP] [--KEY VALUE ...]",
    }[command]
    output = "[--json | --table | --csv]" if command == "sweep" else "[--json | --table]"
    indent = " " * len(f"usage: {prog} ")
    return (
        f"%(prog)s [--request FILE | --config FILE] [--hf-config FILE]\n"
        f"{indent}{keys}\n{indent}{output} [--lang {{es,en}}]"
    )


def api_url(msg: Messages) -> str:
    return "/api/" if msg.lang == "es" else "/en/api/"


# Each subcommand's own examples: (message id of what it shows, arguments after the program).
# ``FILE.yml`` stands for the reader's training config (the tests run them on one of theirs).
EXAMPLES: dict[str, list[tuple[str, str]]] = {
    "estimate": [
        (
            "epilog.example_qlora",
            "estimate --model llama-2-7b --method qlora --seq-len 2048 --gpu rtx-4090",
        ),
        (
            "epilog.example_zero3",
            "estimate --model llama-3.1-70b --method full --num-gpus 8 --sharding zero3 "
            "--gpu h100-sxm",
        ),
        (
            "epilog.example_hf_id",
            "estimate --model Qwen/Qwen3-8B --framework hf-trainer --gpu l4,rtx-4090",
        ),
    ],
    "plan": [
        (
            "epilog.example_cheapest",
            "plan --model llama-3.1-8b --method qlora --dataset-tokens 50e6 --gpu rtx-4090",
        ),
        (
            "epilog.example_plan_multi",
            "plan --model qwen2.5-14b --method lora --dataset-tokens 2e8 --epochs 2 "
            "--gpu a100-80gb-sxm --num-gpus 4 --sharding zero2",
        ),
    ],
    "sweep": [
        (
            "epilog.example_sweep",
            "sweep --model llama-3.1-8b --method qlora --seq-len 1024,2048,4096,8192 "
            "--gpu rtx-4090",
        ),
        ("epilog.example_sweep_csv", "sweep --model llama-3.1-8b --micro-batch-size 1..16 --csv"),
    ],
    "import": [
        ("epilog.example_import", "import FILE.yml"),
        ("epilog.example_import_export", "import --export torchtune FILE.yml"),
        ("epilog.example_import_estimate", "estimate --config FILE.yml --gpu rtx-4090"),
    ],
    "presets": [
        ("epilog.example_presets", "presets"),
        ("epilog.example_listing_json", "presets --json"),
    ],
    "gpus": [
        ("epilog.example_gpus", "gpus --lang es"),
        ("epilog.example_listing_json", "gpus --json"),
    ],
    "schema": [
        ("epilog.example_schema", "schema estimate"),
    ],
}
# the program's own --help: one example of each kind of question
OVERVIEW = [
    EXAMPLES["estimate"][0],
    EXAMPLES["plan"][0],
    EXAMPLES["sweep"][0],
    EXAMPLES["import"][2],
]
# subcommands whose answer is a table on a terminal and JSON otherwise
_TABLES = ("estimate", "plan", "sweep", "presets", "gpus")


def epilog(msg: Messages, prog: str, command: str | None = None) -> str:
    """``--help``'s closing part: the examples of ``command`` (of the program: ``None``), how
    the output comes, and where the method is."""
    lines = [msg.text("epilog.examples") + ":"]
    for key, args in EXAMPLES.get(command or "", OVERVIEW):
        lines += ["  " + msg.text(key), f"    {prog} {args}"]
    lines.append("")
    if command == "sweep":
        lines.append(msg.text("help.sweep"))
    if command is None or command in _TABLES:
        lines.append(msg.text("epilog.output"))
    lines.append(msg.text("epilog.methodology", url=msg.methodology_url()))
    return "\n".join(lines)


def examples(command: str | None = None) -> list[str]:
    """The example command lines (tests run them), without the program name: ``command``'s,
    or every subcommand's."""
    commands = [command] if command else list(EXAMPLES)
    return [args for name in commands for _, args in EXAMPLES.get(name, [])]


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """argparse's layout with a wider flag column, and a yes/no key as one ``--[no-]key``
    instead of ``--key, --no-key`` (half the width: most of the keys are yes/no)."""

    def __init__(
        self,
        prog: str,
        indent_increment: int = 2,
        max_help_position: int = 34,
        width: int | None = None,
    ) -> None:
        super().__init__(prog, indent_increment, max_help_position, width)

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        """Descriptions and the epilog: prose lines wrapped to the width, indented lines (the
        example commands) kept as written, so that they can be copied."""
        import textwrap

        return "\n".join(
            textwrap.fill(line, width, initial_indent=indent, subsequent_indent=indent)
            if line and not line.startswith(" ")
            else indent + line
            for line in text.splitlines()
        )

    def _format_action_invocation(self, action: argparse.Action) -> str:
        if isinstance(action, argparse.BooleanOptionalAction) and len(action.option_strings) == 2:
            return "--[no-]" + action.option_strings[0][2:]
        return super()._format_action_invocation(action)
