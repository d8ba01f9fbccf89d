"""``python -m calc`` (and the ``gpu-finetune-calc`` entry point of the wheel).

Output: a short table on a terminal; JSON when piped or with ``--json`` (today's bytes, so
scripts keep working). Bad input: exit 2 with ``{"error": {code, field, value}}`` on stdout in
JSON mode, or one line on stderr in the reader's language on a terminal (every command's,
``import`` and the listings too, unless ``--json``): the field, the value and what is accepted
(:mod:`calc.cli.error_line`); never a traceback.
"""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any, NoReturn

from ..errors import CalcError, InputError
from . import io
from .messages import LANGS, Messages, default_lang
from .registry import COMMANDS, Context

PROG = "python -m calc"
_NEGATIVE_NUMBER = re.compile(r"^-[\d_]*(\d\.?\d*|\.\d+)([eE][+-]?\d+)?$")
DIST_NAME = "gpu-finetune-calc"  # the wheel's distribution and console command (packaging/calc)


class _Parser(argparse.ArgumentParser):
    """argparse prints usage and exits 2; keep the exit, but as a coded error. No abbreviated
    options: a prefix that works today would break the day a flag with the same start is added."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)
        # a value that reads as a number (-1e8, -.5, -2_048) is a value, not an option, as
        # the flags' own number pattern reads it; argparse alone knows only -5 and -0.5
        self._negative_number_matcher = _NEGATIVE_NUMBER

    def error(self, message: str) -> NoReturn:
        raise InputError("bad_arguments", "argv", None, message)


def _prescan(argv: list[str]) -> tuple[str, str]:
    """The language and output mode, read before parsing so that ``--help`` and argument
    errors already speak the chosen language in the chosen form."""
    lang = default_lang()
    for i, arg in enumerate(argv):
        value = (
            arg.split("=", 1)[1]
            if arg.startswith("--lang=")
            else (argv[i + 1] if arg == "--lang" and i + 1 < len(argv) else None)
        )
        if value in LANGS:
            lang = value
    command = _command_name(argv)
    if "--json" in argv or any(c.json_only for c in COMMANDS if c.name == command):
        mode = "json"
    elif "--csv" in argv:
        mode = "csv"
    elif "--table" in argv or _is_terminal():
        mode = "table"
    else:
        mode = "json"
    return lang, mode


def _command_name(argv: list[str]) -> str | None:
    """The subcommand: the first argument not an option (top-level options take no value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def _is_terminal() -> bool:
    try:
        return sys.stdout.isatty()
    except (AttributeError, ValueError):
        return False


def build_parser(
    msg: Messages, prog: str = PROG, only: str | None = None
) -> argparse.ArgumentParser:
    """The parser; with ``only``, just that subcommand gets its options (the others are listed
    but not configured: building every flag of every command would cost start-up time)."""
    from .helptext import HelpFormatter, epilog

    parser = _Parser(
        prog=prog,
        description=msg.text("description"),
        epilog=epilog(msg, prog),
        formatter_class=HelpFormatter,
        add_help=False,
    )
    _add_help(parser, msg)
    from .. import __version__

    parser.add_argument(
        "--version",
        action="version",
        version=version_text(__version__, prog),
        help=msg.text("opt.version"),
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for command in sorted(COMMANDS, key=lambda c: c.order):
        cmd = sub.add_parser(
            command.name,
            help=msg.text(command.help_key),
            description=msg.text(command.help_key),
            epilog=epilog(msg, prog, command.name),
            formatter_class=HelpFormatter,
            add_help=False,
        )
        _add_help(cmd, msg)
        if only is None or command.name == only:
            command.configure(cmd, msg)
    return parser


def version_text(version: str, prog: str) -> str:
    """``gpu-finetune-calc 0.1.0``: the distribution's name, which ``pip`` knows; run other than
    as the console command (``python -m calc``), that way of running it too."""
    return f"{DIST_NAME} {version}" if prog == DIST_NAME else f"{DIST_NAME} {version} ({prog})"


def _add_help(parser: argparse.ArgumentParser, msg: Messages) -> None:
    parser.add_argument("-h", "--help", action="help", help=msg.text("opt.help"))


def _option_strings(parser: argparse.ArgumentParser, command: str | None) -> list[str]:
    """The long options of ``command`` (for "did you mean" on a mistyped one)."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction) and command in action.choices:
            parser = action.choices[command]
    return [o for a in parser._actions for o in a.option_strings if o.startswith("--")]


def _allowed(err: CalcError) -> list[str] | None:
    """The values a closed-set field takes, for an error about an unknown one."""
    if err.code not in ("unknown_value", "unknown_gpu", "unknown_preset") or not err.field:
        return None
    if err.code == "unknown_preset":
        from ..presets import presets_listing

        return [p["id"] for p in presets_listing()]
    if err.code == "unknown_gpu":
        from ..gpus import gpus_listing

        return [g["id"] for g in gpus_listing()["gpus"]]
    from ..fields import spec_by_key

    spec = spec_by_key("plan").get(err.field)
    return list(spec.choices) if spec is not None and spec.choices else None


def _errors_as_json(argv: list[str], mode: str) -> bool:
    """Errors as JSON where the output is JSON, except a listing's or ``import``'s (JSON
    whatever the terminal) on a terminal without ``--json``: there a person reads the line."""
    return mode == "json" and ("--json" in argv or not _is_terminal())


def _report(err: CalcError, ctx: Context, as_json: bool | None = None) -> None:
    out = err.to_dict()
    allowed = _allowed(err)
    if allowed is not None and err.code == "unknown_value":
        out["allowed"] = allowed  # additive: today's keys are unchanged
    if as_json is None:
        as_json = ctx.mode == "json"
    if as_json:
        context = getattr(err, "request_context", None)
        if context is None:
            io.emit_json({"error": out})
            return
        from ..field_errors import error_response  # adds "errors": every bad field at once

        response = error_response(context[0], context[1], err)
        response["error"] = out
        response["errors"][0] = out
        io.emit_json(response)
        return
    from .error_line import error_line

    shown = dict(out)
    if allowed is not None and err.code != "unknown_preset":
        shown.setdefault("allowed", allowed)
    line = error_line(err, shown, ctx.msg, ctx.flags)
    io.write(line + "\n", sys.stderr)


def main(argv: list[str] | None = None, prog: str = PROG) -> int:
    from . import commands, sweep  # noqa: F401  (they register themselves)
    from ..config_import.cli import register_cli  # import and --config (calc.config_import)

    register_cli()

    argv = list(sys.argv[1:] if argv is None else argv)
    lang, mode = _prescan(argv)
    if mode != "json" and hasattr(sys.stdout, "reconfigure"):
        # a terminal in a non-UTF-8 locale: "×" or "–" become "?" rather than a traceback
        sys.stdout.reconfigure(errors="replace")
    ctx = Context(Messages(lang), mode, prog)
    try:
        name = _command_name(argv)
        known = name in {c.name for c in COMMANDS}
        parser = build_parser(ctx.msg, prog, only=name if known else None)
        ctx.flags = _option_strings(parser, name if known else None)
        args = parser.parse_args(argv)
        command = next(c for c in COMMANDS if c.name == args.command)
        return command.run(args, ctx)
    except CalcError as err:
        _report(err, ctx, _errors_as_json(argv, mode))
        return 2
    except RecursionError:  # absurdly nested JSON
        _report(InputError("request_too_deep", "request", None), ctx, _errors_as_json(argv, mode))
        return 2
