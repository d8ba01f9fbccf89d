"""``python -m calc import --format F FILE`` and ``--config FILE`` of ``estimate``/``plan``.

The import prints ``{"format", "request", "keys", ...}`` (see :mod:`calc.config_import`).
``FILE`` ``-`` reads standard input. A file with a value its tool would refuse (a key
reported ``invalid``) is refused: ``estimate``/``plan --config`` exit 2 with one coded error,
``config_invalid_values``, that lists every such key (key, value, reason, what is accepted);
``import`` prints its report with that error added and exits 2 too, so a script notices. With
``--lenient`` calc uses the tool's default in place of each refused value and says so: the
import exits 0, and ``estimate``/``plan`` add the warning ``config_values_replaced`` and the
list ``config_warnings`` to their JSON and to the table. A ``--format``/``--config-format``
that the file's own keys contradict is refused (``config_format_mismatch``, naming the
detected format).
A DeepSpeed file that a config names by path is read when it exists next to the config
(or at the path as given), at most :data:`calc.config_import.loading.MAX_BYTES`; else its
stage and offload are read from its name and the key says so.
"""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING

from ..errors import InputError
from ..jsontypes import JsonObject
from ..languages import LANGS
from . import import_config
from .export import FORMATS
from .loading import MAX_BYTES, load_text

if TYPE_CHECKING:  # annotations only: the CLI's modules load when the CLI runs
    import argparse

    from ..cli.messages import Messages
    from ..cli.registry import Context
    from .common import ReadFile


STDIN = "-"


def read_bytes(path: str) -> bytes:
    """At most MAX_BYTES + 1 bytes of ``path`` (``-``: standard input): the loader refuses more."""
    try:
        if path == STDIN:
            return sys.stdin.buffer.read(MAX_BYTES + 1)
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except OSError as err:
        raise InputError("config_unreadable", "config", path, type(err).__name__) from None
    return raw


def _file_reader(config_path: str) -> ReadFile:
    base = os.getcwd() if config_path == STDIN else os.path.dirname(os.path.abspath(config_path))

    def read_file(name: str) -> JsonObject | None:
        for candidate in (name, os.path.join(base, name)):
            if os.path.isfile(candidate):
                try:
                    return load_text(read_bytes(candidate))
                except InputError:
                    return None
        return None

    return read_file


def import_file(path: str, fmt: str = "auto", model: object = None) -> JsonObject:
    if fmt != "auto" and fmt not in FORMATS:
        raise InputError("unknown_config_format", "format", fmt)
    return import_config(read_bytes(path), fmt, model=model, read_file=_file_reader(path))


# what a launch config (accelerate, DeepSpeed) decides over the training file it launches:
# the GPUs and how they share the states; the rest (precision above all: the Trainer's
# bf16/fp16 override accelerate's mixed_precision) is the training file's
LAUNCH_FORMATS = ("accelerate", "deepspeed")
LAUNCH_FIELDS = (
    "num_gpus",
    "sharding",
    "cpu_offload",
    "frozen_weight_grads",
    "sync_each_micro_batch",
    "sharding_engine",
)


def combine(results: list[JsonObject]) -> JsonObject:
    """One request from several imports: the keys each file sets explicitly (training files
    first, then launch configs for :data:`LAUNCH_FIELDS` and for keys still unset), then the
    tools' defaults where no file set the field."""
    training = [r for r in results if r["format"] not in LAUNCH_FORMATS]
    launch = [r for r in results if r["format"] in LAUNCH_FORMATS]

    def explicit(result: JsonObject) -> JsonObject:
        defaulted = {d["field"] for d in result["defaults"]}
        return {k: v for k, v in result["request"].items() if k not in defaulted}

    request: JsonObject = {}
    for result in training:
        request.update(explicit(result))
    for result in launch:
        for key, value in explicit(result).items():
            if key in LAUNCH_FIELDS or key not in request:
                request[key] = value
    for result in training + launch:
        for key, value in result["request"].items():
            request.setdefault(key, value)
    return request


def invalid_entries(results: list[JsonObject], paths: list[str]) -> list[JsonObject]:
    """Every key reported ``invalid`` in the imports, with its file when there are several."""
    out = []
    for path, result in zip(paths, results, strict=True):
        for entry in result["keys"]:
            if entry["status"] == "invalid":
                out.append({**entry, "file": path} if len(paths) > 1 else dict(entry))
    return out


class InvalidValuesError(InputError):
    """``config_invalid_values``: ``value`` the refused keys' names, ``invalid`` their
    entries (key, value, reason, accepted, ...) whole in the JSON."""

    def __init__(self, entries: list[JsonObject], detail: str = "") -> None:
        super().__init__("config_invalid_values", "config", [e["key"] for e in entries], detail)
        self.entries = entries

    def to_dict(self) -> JsonObject:
        out = super().to_dict()
        out["invalid"] = self.entries
        return out


def invalid_error(entries: list[JsonObject], msg: Messages | None = None) -> InputError:
    """One coded error for every refused key, with ``detail`` one clause per key in the
    reader's language when ``msg`` is given."""
    detail = "; ".join(invalid_text(entry, msg) for entry in entries) if msg is not None else ""
    return InvalidValuesError(entries, detail)


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def accepted_text(accepted: JsonObject, msg: Messages) -> str:
    """``from 1 to 65536``, ``more than 0``, ``true, false, yes, no``..."""
    if "allowed" in accepted:
        allowed = [_json(v) for v in accepted["allowed"]]
        return ", ".join(allowed[:16]) + (", …" if len(allowed) > 16 else "")
    low, high = accepted.get("minimum"), accepted.get("maximum")
    if high is None:
        key = "above" if accepted.get("minimum_exclusive") else "at_least"
    else:
        key = "below" if accepted.get("maximum_exclusive") else "range"
    return msg.message("import.accepted." + key, "{low} {high}").format(
        low=_json(low), high=_json(high)
    )


def invalid_text(entry: JsonObject, msg: Messages, replaced: bool = False) -> str:
    """``lora_r = -5: out of range (accepted: from 1 to 65536)``; with ``replaced``, what calc
    used instead."""
    reason = msg.message("import.invalid." + str(entry["reason"]), str(entry["reason"]))
    text = msg.message("import.invalid_key", "{key} = {value}: {reason} ({accepted})").format(
        key=entry["key"],
        value=_json(entry.get("value")),
        reason=reason,
        accepted=accepted_text(entry.get("accepted") or {}, msg),
    )
    if "file" in entry:
        text = f"{entry['file']}: {text}"
    if replaced and "used_instead" in entry:
        source = str(entry.get("source"))
        source = (
            msg.message("import.source." + source, source) if source in ("file", "calc") else source
        )
        text += "; " + msg.message("import.used_instead", "{value} ({source})").format(
            value=_json(entry["used_instead"]), source=source
        )
    return text


def import_files(
    paths: list[str], fmt: str = "auto", model: object = None, msg: Messages | None = None
) -> list[JsonObject]:
    """Each file imported; a format the file contradicts is refused with the detected format
    named in the reader's language when ``msg`` is given."""
    try:
        return [import_file(one, fmt, model=model) for one in paths]
    except InputError as err:
        if err.code == "config_format_mismatch" and msg is not None:
            err.detail = msg.message("import.format_detected", "{detected}").format(
                detected=err.extra.get("detected")
            )
        raise


def request_from_config_file(
    path: str | list[str],
    fmt: str = "auto",
    plan: bool = False,
    model: object = None,
    lenient: bool = True,
    msg: Messages | None = None,
) -> JsonObject:
    """The request a config file gives (with ``epochs`` / ``dataset_tokens`` for a plan).
    ``path`` may be a list of files: a training file and the accelerate or DeepSpeed config
    it is launched with (see :func:`combine`). ``model``: the model given separately (a
    preset id or ``{"hf_config": ...}``). Not ``lenient``: a key reported ``invalid`` raises
    ``config_invalid_values`` (:func:`invalid_error`)."""
    paths = [path] if isinstance(path, str) else list(path)
    results = import_files(paths, fmt, model=model, msg=msg)
    invalid = invalid_entries(results, paths)
    if invalid and not lenient:
        raise invalid_error(invalid, msg)
    request = combine(results)
    if plan:
        for result in results:
            for key, value in result.get("plan", {}).items():
                request.setdefault(key, value)
    if model is not None:
        request["model"] = model
    if "model" not in request:
        raise InputError(
            "config_model_unknown",
            "model",
            None,
            "the config's model is not a preset: give it with --model or --hf-config",
        )
    return request


# --- the CLI: the ``import`` subcommand and the ``--config`` request source -------------------


def _configure_import(parser: argparse.ArgumentParser, msg: Messages) -> None:
    parser.add_argument(
        "--format", default="auto", choices=("auto",) + FORMATS, help=msg.text("opt.import_format")
    )
    parser.add_argument(
        "--export", choices=FORMATS, default=None, help=msg.text("opt.import_export")
    )
    parser.add_argument("--lang", choices=LANGS, help=msg.text("opt.lang"))
    parser.add_argument("--lenient", action="store_true", help=msg.text("opt.lenient"))
    parser.add_argument("file", metavar="FILE", help=msg.text("opt.import_file"))


def _messages(args: argparse.Namespace) -> Messages:
    from ..cli.messages import Messages, default_lang

    return Messages(getattr(args, "lang", None) or default_lang())


def run_import(args: argparse.Namespace, ctx: Context | None = None) -> int:
    """``python -m calc import [--format F] [--export F] [--lenient] FILE``: the key-by-key
    JSON (``{"format", "request", "keys", ...}``), or with ``--export`` the setup in that
    format. Refused values: the report plus ``error`` (``config_invalid_values``), exit 2,
    unless ``--lenient``."""
    from ..cli import io

    msg = ctx.msg if ctx is not None else _messages(args)
    result = import_files([args.file], args.format, msg=msg)[0]
    invalid = invalid_entries([result], [args.file])
    if invalid and not args.lenient:
        if args.export:
            raise invalid_error(invalid, msg)
        io.emit_json({**result, "error": invalid_error(invalid, msg).to_dict()})
        return 2
    if args.export:
        from . import export_config

        request = dict(result["request"])
        request.update({k: v for k, v in result.get("plan", {}).items() if k == "epochs"})
        io.write(export_config(request, args.export))
    else:
        io.emit_json(result)
    return 0


def _add_config_option(group: argparse._ArgumentGroup, msg: Messages) -> None:
    group.add_argument("--config", metavar="FILE", action="append", help=msg.text("opt.config"))
    group.add_argument(
        "--config-format",
        default="auto",
        choices=("auto",) + FORMATS,
        help=msg.text("opt.config_format"),
    )
    group.add_argument("--lenient", action="store_true", help=msg.text("opt.lenient"))


def _load_config_option(args: argparse.Namespace) -> JsonObject | None:
    paths = getattr(args, "config", None)
    if not paths:
        return None
    if paths.count(STDIN) + (getattr(args, "request", None) == STDIN) > 1:
        raise InputError("bad_arguments", "config", STDIN, "standard input can be read once")
    msg = _messages(args)
    results = import_files(paths, args.config_format, msg=msg)
    invalid = invalid_entries(results, paths)
    if invalid and not args.lenient:
        raise invalid_error(invalid, msg)
    args.config_warnings = invalid  # shown by add_config_warnings
    # a model given another way (--model, --hf-config, --request) stands in for a file's
    # model that is not a preset: calc then names whatever is still missing
    given = any(getattr(args, name, None) is not None for name in ("model", "hf_config", "request"))
    request = combine(results)
    if getattr(args, "command", None) == "plan":
        for result in results:
            for key, value in result.get("plan", {}).items():
                request.setdefault(key, value)
    if "model" not in request and not given:
        raise InputError(
            "config_model_unknown",
            "model",
            None,
            "the config's model is not a preset: give it with --model or --hf-config",
        )
    return request


def config_warning_lines(args: argparse.Namespace, msg: Messages) -> str:
    """With ``--lenient``, the replaced values as lines for a terminal (``sweep``'s table and
    CSV go to stdout, these to stderr); empty otherwise."""
    entries = getattr(args, "config_warnings", None)
    if not entries:
        return ""
    lines = [msg.message("warning.config_values_replaced", "config_values_replaced")]
    lines += [f"  {invalid_text(entry, msg, replaced=True)}" for entry in entries]
    return "\n".join(lines) + "\n"


def add_config_warnings(result: JsonObject, args: argparse.Namespace) -> None:
    """With ``--lenient``: the warning ``config_values_replaced`` and ``config_warnings``
    (each refused key, what calc used instead) in an estimate's or plan's response."""
    entries = getattr(args, "config_warnings", None)
    if entries:
        result["warnings"] = [*result.get("warnings", []), "config_values_replaced"]
        result["config_warnings"] = entries


def register_cli() -> None:
    """Called by :func:`calc.cli.app.main`: the subcommand, and ``--config`` as the first
    request source (so ``--request`` and the field flags override what the file says)."""
    from ..cli.registry import REQUEST_SOURCES, Command, RequestSource, register, register_source

    register(
        Command("import", "cmd.import", _configure_import, run_import, json_only=True, order=35)
    )
    register_source(RequestSource("config", _add_config_option, _load_config_option))
    REQUEST_SOURCES.sort(key=lambda source: source.name != "config")  # stable: config first
