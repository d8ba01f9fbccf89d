"""Command line: ``python -m calc {estimate,plan,presets,gpus,import}``.

Output is JSON on stdout. Bad input prints ``{"error": {code, field, value}}``
and exits 2; no traceback is ever shown for bad input.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from .errors import CalcError, InputError


class _Parser(argparse.ArgumentParser):
    """argparse prints usage and exits 2; keep that, but as a coded JSON error."""

    def error(self, message: str) -> None:  # pragma: no cover - exercised via main()
        raise InputError("bad_arguments", "argv", None, message)


def _read_request(path: str) -> object:
    # bytes, decoded here: stdin's text layer would follow the locale (a C locale
    # lets invalid bytes through as surrogates), and Windows editors add a BOM
    try:
        if path == "-":
            raw = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as handle:
                raw = handle.read()
    except OSError as err:
        raise InputError("request_unreadable", "request", path, type(err).__name__) from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError("request_not_utf8", "request", path) from None
    try:
        return json.loads(text)
    except ValueError as err:
        raise InputError("request_not_json", "request", path, str(err)[:120]) from None


def _request_from_args(args) -> object:
    """``--request``, or ``--config`` (then ``--request``, when given too, overrides keys)."""
    if args.config is None:
        if args.request is None:
            raise InputError("bad_arguments", "argv", None, "--request or --config is required")
        return _read_request(args.request)
    from .config_import.cli import request_from_config_file
    overrides = _read_request(args.request) if args.request is not None else {}
    if not isinstance(overrides, dict):
        raise InputError("request_not_object", None, type(overrides).__name__)
    request = request_from_config_file(args.config, args.format, plan=args.command == "plan",
                                       model=overrides.get("model"))
    request.update(overrides)
    return request


def _emit(obj: object) -> None:
    try:
        json.dump(obj, sys.stdout, indent=2, ensure_ascii=False, allow_nan=False)
        sys.stdout.write("\n")
        sys.stdout.flush()
    except BrokenPipeError:
        # the reader went away (`| head`): stop quietly, without a traceback at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(prog="python -m calc", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("estimate", "plan"):
        cmd = sub.add_parser(name)
        cmd.add_argument("--request", help="JSON file, or - for stdin (with --config: keys that override it)")
        cmd.add_argument("--config", action="append",
                         help="training config (axolotl, TRL, LLaMA-Factory, torchtune, DeepSpeed, "
                              "accelerate) in place of --request; repeat it to add the accelerate or "
                              "DeepSpeed config the training file is launched with")
        cmd.add_argument("--format", default="auto", help="format of --config (default: detected)")
    sub.add_parser("presets")
    sub.add_parser("gpus")
    from .config_import.cli import add_import_parser
    add_import_parser(sub)
    try:
        args = parser.parse_args(argv)
        if args.command in ("estimate", "plan"):
            request = _request_from_args(args)
        if args.command == "estimate":
            from .memory import estimate_dict
            _emit(estimate_dict(request))
        elif args.command == "plan":
            from .plan import plan_dict
            _emit(plan_dict(request))
        elif args.command == "import":
            from .config_import.cli import run_import
            out = run_import(args)
            if isinstance(out, str):
                sys.stdout.write(out)
            else:
                _emit(out)
        elif args.command == "presets":
            from .presets import presets_listing
            _emit(presets_listing())
        else:
            from .gpus import gpus_listing
            _emit(gpus_listing())
    except CalcError as err:
        _emit({"error": err.to_dict()})
        return 2
    except RecursionError:  # absurdly nested JSON
        _emit({"error": {"code": "request_too_deep", "field": "request", "value": None}})
        return 2
    return 0
