"""The subcommands ``estimate``, ``plan``, ``presets`` and ``gpus``, and the request they build
from ``--request``, ``--hf-config`` and the field flags."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..config_import.cli import add_config_warnings
from ..errors import CalcError, InputError
from ..fields import BY_KEY, with_changes
from ..jsontypes import JsonObject
from ..languages import LANGS
from . import io
from ..fields import FieldSpec, field_specs
from .flags import add_field_flags, flag_overrides, parse_number
from .helptext import api_url, behaviour_help, field_help, field_sentences, usage
from .messages import Messages
from .registry import Command, Context, RequestSource, REQUEST_SOURCES, register, register_source
from .table import render_estimate, render_gpus, render_plan, render_presets

if TYPE_CHECKING:  # annotations only: the catalogue is imported when a verdict is asked
    from ..gpus import Gpu


# --- request sources ------------------------------------------------------------------------------


def _add_request_option(group: argparse._ArgumentGroup, msg: Messages) -> None:
    group.add_argument("--request", metavar="FILE", help=msg.text("opt.request"))


def _load_request_option(args: argparse.Namespace) -> object:
    path = getattr(args, "request", None)
    return None if path is None else io.read_request(path)


register_source(RequestSource("request", _add_request_option, _load_request_option))


def add_request_arguments(
    parser: argparse.ArgumentParser,
    msg: Messages,
    specs: list[FieldSpec],
    help_for: Callable[[FieldSpec], str] | None = None,
) -> None:
    """The sources of a request, then one flag per key: estimate's, plan's, and last the
    library behaviours that ``--framework`` sets (one short line each)."""
    from ..frameworks import profile_keys

    source = parser.add_argument_group(msg.text("group.output"))
    for src in REQUEST_SOURCES:
        src.add_arguments(source, msg)
    source.add_argument("--hf-config", metavar="FILE", help=msg.text("opt.hf_config"))
    add_output_arguments(source, msg)
    behaviours = set(profile_keys())
    for table in ("estimate", "plan"):
        mine = [s for s in specs if s.table == table and s.key not in behaviours]
        if mine:
            group = parser.add_argument_group(msg.text("group." + table))
            add_field_flags(group, mine, help_for or (lambda spec: field_help(spec, msg)))
    mine = [s for s in specs if s.key in behaviours]
    if mine:
        group = parser.add_argument_group(
            msg.text("group.behaviours"),
            msg.text(
                "group.behaviours_text",
                url=api_url(msg),
                framework=str(BY_KEY["framework"].default),
            ),
        )
        add_field_flags(group, mine, lambda spec: behaviour_help(spec, msg))


def add_output_arguments(group: argparse._ArgumentGroup, msg: Messages) -> None:
    group.add_argument("--json", action="store_true", help=msg.text("opt.json"))
    group.add_argument("--table", action="store_true", help=msg.text("opt.table"))
    group.add_argument("--lang", choices=LANGS, help=msg.text("opt.lang"))


def build_request(args: argparse.Namespace, specs: list[FieldSpec]) -> object:
    """The request: the sources merged in order, then the flags on top. With no flag, a
    source's request goes to calc untouched (so its response is byte for byte today's)."""
    base: object = None
    for source in REQUEST_SOURCES:
        loaded = source.load(args)
        if loaded is None:
            continue
        base = (
            with_changes(base, loaded)
            if isinstance(base, dict) and isinstance(loaded, dict)
            else loaded
        )
    overrides = flag_overrides(args, specs)
    hf_path = getattr(args, "hf_config", None)
    if hf_path is not None:
        if "model" in overrides:
            raise InputError("bad_arguments", "model", None, "--model and --hf-config together")
        config = io.read_request(hf_path, "hf_config")
        overrides["model"] = {"hf_config": config}
    if base is None:
        return overrides
    if not overrides or not isinstance(base, dict):
        return base  # a request that is not an object: calc names the problem
    return with_changes(base, overrides)


# --- estimate -------------------------------------------------------------------------------------


def _configure_estimate(parser: argparse.ArgumentParser, msg: Messages) -> None:
    parser.usage = usage("estimate", parser.prog)
    add_request_arguments(parser, msg, field_specs("estimate"))
    add_verdict_arguments(parser, msg)


class PlanDefault:
    """The default of a plan key (:data:`calc.fields.FIELDS`), read when used or shown
    (``%(default)s`` in a help text); its type tells a margin left out from one given."""

    def __init__(self, key: str) -> None:
        self.key = key

    def value(self) -> object:
        return BY_KEY[self.key].default

    def __str__(self) -> str:
        return str(self.value())


def add_verdict_arguments(parser: argparse.ArgumentParser, msg: Messages) -> None:
    group = parser.add_argument_group(msg.text("table.verdict"))
    group.add_argument(
        "--gpu", dest="show_gpu", metavar="ID[,ID...]", help=msg.text("opt.show_gpu")
    )
    margin = next(spec for spec in field_specs("plan") if spec.key == "safety_margin")
    text = " ".join([msg.text("opt.show_margin"), *field_sentences(margin, msg)[1:]])
    group.add_argument(
        "--safety-margin",
        dest="show_margin",
        metavar="P",
        default=PlanDefault("safety_margin"),
        help=text.replace("%", "%%"),
    )


def verdict_cards(args: argparse.Namespace) -> tuple[list[Gpu], float]:
    """The cards of ``--gpu`` (checked against the catalogue) and the margin of the verdict."""
    ids = [
        part.strip() for part in (getattr(args, "show_gpu", None) or "").split(",") if part.strip()
    ]
    margin = getattr(args, "show_margin", None)
    if isinstance(margin, PlanDefault) or margin is None:
        default = PlanDefault("safety_margin").value()
        assert isinstance(default, float), default  # the plan's default margin
        margin = default if ids else 0.0
    else:
        from ..request import check_number

        margin = float(check_number("safety_margin", parse_number(margin), 0.0, 1.0))
    if not ids:
        return [], margin
    from .. import gpus

    if ids == ["all"]:
        return list(gpus.all_gpus()), margin
    return [gpus.get_gpu(i, "gpu") for i in ids], margin


def estimate_verdicts(est: JsonObject, cards: list[Gpu], margin: float) -> dict[str, JsonObject]:
    """Each card against the estimate: the one verdict plan gives its cards
    (:func:`calc.recommend.judge` of what the estimate needs, :func:`calc.recommend.need_of`)."""
    from .. import recommend

    need = recommend.need_of(est)
    return {card.id: recommend.judge(need, card.memory_bytes, margin).to_dict() for card in cards}


def _computed(command: str, compute: Callable[[object], JsonObject], request: object) -> JsonObject:
    """``compute(request)``; a coded error keeps the request and the command so the JSON
    report can list every bad field at once (:func:`calc.field_errors.error_response`)."""
    try:
        return compute(request)
    except CalcError as err:
        err.request_context = (command, request)
        raise


def _run_estimate(args: argparse.Namespace, ctx: Context) -> int:
    from ..memory import estimate_dict

    cards, margin = verdict_cards(args)
    est = _computed("estimate", estimate_dict, build_request(args, field_specs("estimate")))
    add_config_warnings(est, args)
    if ctx.mode == "json":
        io.emit_json(est)
    else:
        io.write(render_estimate(est, ctx.msg, estimate_verdicts(est, cards, margin), margin))
    return 0


# --- plan -----------------------------------------------------------------------------------------


def _configure_plan(parser: argparse.ArgumentParser, msg: Messages) -> None:
    parser.usage = usage("plan", parser.prog)
    add_request_arguments(parser, msg, field_specs("plan"))


def _run_plan(args: argparse.Namespace, ctx: Context) -> int:
    from ..plan import plan_dict

    result = _computed("plan", plan_dict, build_request(args, field_specs("plan")))
    add_config_warnings(result, args)
    if ctx.mode == "json":
        io.emit_json(result)
    else:
        io.write(render_plan(result, ctx.msg))
    return 0


# --- listings -------------------------------------------------------------------------------------


def _configure_listing(parser: argparse.ArgumentParser, msg: Messages) -> None:
    parser.add_argument("--json", action="store_true", help=msg.text("opt.json"))
    parser.add_argument("--table", action="store_true", help=msg.text("opt.table"))
    parser.add_argument("--lang", choices=LANGS, help=msg.text("opt.lang"))


def _run_presets(args: argparse.Namespace, ctx: Context) -> int:
    """The presets: a table on a terminal, today's JSON piped or with ``--json``."""
    from ..presets import presets_listing

    if ctx.mode == "json":
        io.emit_json(presets_listing())
    else:
        io.write(render_presets(presets_listing(), ctx.msg))
    return 0


def _run_gpus(args: argparse.Namespace, ctx: Context) -> int:
    """The GPU catalogue: a table on a terminal, today's JSON piped or with ``--json``."""
    from ..gpus import gpus_listing

    if ctx.mode == "json":
        io.emit_json(gpus_listing())
    else:
        io.write(render_gpus(gpus_listing(), ctx.msg))
    return 0


def _configure_schema(parser: argparse.ArgumentParser, msg: Messages) -> None:
    parser.add_argument(
        "request_kind", choices=("estimate", "plan"), help=msg.text("opt.schema_kind")
    )
    parser.add_argument(
        "--json", action="store_true", help=msg.text("opt.json")
    )  # it is JSON anyway
    parser.add_argument("--lang", choices=LANGS, help=msg.text("opt.lang"))


def _run_schema(args: argparse.Namespace, ctx: Context) -> int:
    from ..schema import FILE_NAMES, schema_files

    io.write(schema_files()[FILE_NAMES[args.request_kind]])
    return 0


register(Command("estimate", "cmd.estimate", _configure_estimate, _run_estimate, order=10))
register(Command("plan", "cmd.plan", _configure_plan, _run_plan, order=20))
register(Command("presets", "cmd.presets", _configure_listing, _run_presets, order=40))
register(Command("gpus", "cmd.gpus", _configure_listing, _run_gpus, order=50))
register(Command("schema", "cmd.schema", _configure_schema, _run_schema, json_only=True, order=60))
