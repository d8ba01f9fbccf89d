"""``python -m calc import --format F FILE`` and ``--config FILE`` of ``estimate``/``plan``.

The import prints ``{"format", "request", "keys", ...}`` (see :mod:`calc.config_import`).
A DeepSpeed file that a config names by path is read when it exists next to the config
(or at the path as given), at most :data:`calc.config_import.loading.MAX_BYTES`; else its
stage and offload are read from its name and the key says so.
"""

from __future__ import annotations

import os
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


def read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            raw = handle.read(MAX_BYTES + 1)
    except OSError as err:
        raise InputError("config_unreadable", "config", path, type(err).__name__) from None
    return raw


def _file_reader(config_path: str) -> ReadFile:
    base = os.path.dirname(os.path.abspath(config_path))

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
LAUNCH_FIELDS = ("num_gpus", "sharding", "cpu_offload", "frozen_weight_grads", "sync_each_micro_batch")


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


def request_from_config_file(path: str | list[str], fmt: str = "auto", plan: bool = False,
                             model: object = None) -> JsonObject:
    """The request a config file gives (with ``epochs`` / ``dataset_tokens`` for a plan).
    ``path`` may be a list of files: a training file and the accelerate or DeepSpeed config
    it is launched with (see :func:`combine`). ``model``: the model given separately (a
    preset id or ``{"hf_config": ...}``)."""
    paths = [path] if isinstance(path, str) else list(path)
    results = [import_file(one, fmt, model=model) for one in paths]
    request = combine(results)
    if plan:
        for result in results:
            for key, value in result.get("plan", {}).items():
                request.setdefault(key, value)
    if model is not None:
        request["model"] = model
    if "model" not in request:
        raise InputError("config_model_unknown", "model", None,
                         "the config's model is not a preset: give it with --model or --hf-config")
    return request


# --- the CLI: the ``import`` subcommand and the ``--config`` request source -------------------


def _configure_import(parser: argparse.ArgumentParser, msg: Messages) -> None:
    parser.add_argument("--format", default="auto", choices=("auto",) + FORMATS,
                        help=msg.text("opt.import_format"))
    parser.add_argument("--export", choices=FORMATS, default=None, help=msg.text("opt.import_export"))
    parser.add_argument("--lang", choices=LANGS, help=msg.text("opt.lang"))
    parser.add_argument("file", metavar="FILE", help=msg.text("opt.import_file"))


def run_import(args: argparse.Namespace, ctx: Context | None = None) -> int:
    """``python -m calc import [--format F] [--export F] FILE``: the key-by-key JSON
    (``{"format", "request", "keys", ...}``), or with ``--export`` the setup in that format."""
    from ..cli import io

    result = import_file(args.file, args.format)
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
    group.add_argument("--config-format", default="auto", choices=("auto",) + FORMATS,
                       help=msg.text("opt.config_format"))


def _load_config_option(args: argparse.Namespace) -> JsonObject | None:
    paths = getattr(args, "config", None)
    if not paths:
        return None
    # a model given another way (--model, --hf-config, --request) stands in for a file's
    # model that is not a preset: calc then names whatever is still missing
    given = any(getattr(args, name, None) is not None for name in ("model", "hf_config", "request"))
    try:
        return request_from_config_file(paths, args.config_format,
                                        plan=getattr(args, "command", None) == "plan")
    except InputError as err:
        if err.code == "config_model_unknown" and given:
            return combine([import_file(p, args.config_format) for p in paths])
        raise


def register_cli() -> None:
    """Called by :func:`calc.cli.app.main`: the subcommand, and ``--config`` as the first
    request source (so ``--request`` and the field flags override what the file says)."""
    from ..cli.registry import REQUEST_SOURCES, Command, RequestSource, register, register_source

    register(Command("import", "cmd.import", _configure_import, run_import, json_only=True, order=35))
    register_source(RequestSource("config", _add_config_option, _load_config_option))
    REQUEST_SOURCES.sort(key=lambda source: source.name != "config")  # stable: config first
