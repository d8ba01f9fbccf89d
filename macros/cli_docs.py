"""The API page (docs/*/api.md): the CLI's flags, a real CLI answer, the response fields and
the links to the published JSON Schemas, all generated from calc at build time.

The flags table is built from the same field specs the CLI builds its options from
(:mod:`calc.fields`), with the CLI's help texts in the page language; the example answer is
the CLI itself, run in this process with ``--table``; the response tables list every top-level
key of a real response, so a key calc adds appears here without an edit (its description falls
back to the calculator's label until it gets one below).
"""

from __future__ import annotations

import contextlib
import html
import io
import shlex

from .site import page_language

REQUEST = {"model": "llama-3.1-8b", "method": "qlora", "seq_len": 4096}
PLAN_REQUEST = {**REQUEST, "dataset_tokens": 50_000_000, "gpu": "rtx-4090"}

_TYPE = {
    dict: "object",
    list: "array",
    str: "string",
    bool: "boolean",
    int: "integer",
    float: "number",
    type(None): "null",
}
# the tables' headers, message ids of the catalogue (calc/data/messages)
_HEAD = ("api.col.flag", "api.col.meaning", "api.col.key", "api.col.type", "api.col.holds")


def _head(lang: str) -> tuple[str, ...]:
    from calc.catalogue import catalogue

    return tuple(catalogue(lang).message(key) for key in _HEAD)


def _cell(text: str) -> str:
    return html.escape(text).replace("|", "&#124;").replace("\n", " ")


def run_cli(argv: list[str]) -> str:
    """stdout of ``python -m calc *argv`` run in this process (no terminal: pass --table/--json)."""
    from calc.cli.app import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = main(list(argv))
    if status != 0:
        raise RuntimeError(f"calc {' '.join(argv)} exited {status}: {out.getvalue()[:200]}")
    return out.getvalue()


def cli_example(env, command: str) -> str:
    """A fenced block: the command, then what it prints on a terminal in the page language."""
    lang = page_language(env)
    argv = shlex.split(command)
    text = run_cli([*argv, "--table", "--lang", lang])
    # plain text: the console lexer greys the output lines below the contrast axe asks for
    return f"```text\n$ python -m calc {command}\n{text.rstrip()}\n```"


def cli_flags_table(env, command: str) -> str:
    """Every request flag of ``command`` with its meaning, default and allowed values."""
    from calc.fields import field_specs
    from calc.cli.helptext import field_sentences
    from calc.cli.messages import Messages

    lang = page_language(env)
    msg = Messages(lang)
    head = _head(lang)
    rows = [f"| {head[0]} | {head[1]} |", "|---|---|"]
    for spec in field_specs(command):
        if command == "plan" and spec.table != "plan":
            continue
        flag = f"`{spec.flag}`" + (f" / `--no-{spec.flag[2:]}`" if spec.kind == "bool" else "")
        rows.append(f"| {flag} | {_cell(' '.join(field_sentences(spec, msg)))} |")
    return "\n".join(rows)


def response_fields(env, command: str) -> str:
    """Every top-level key of a real ``command`` response, its JSON type and what it holds."""
    import calc
    from calc.cli.messages import Messages

    lang = page_language(env)
    response = calc.estimate(REQUEST) if command == "estimate" else calc.plan_setup(PLAN_REQUEST)
    msg = Messages(lang)
    head = _head(lang)
    rows = [f"| {head[2]} | {head[3]} | {head[4]} |", "|---|---|---|"]
    for key, value in response.items():
        # what the key holds (``api.estimate.<key>`` / ``api.plan.<key>``), else its name
        text = msg.message(f"api.{command}.{key}", msg.label(key))
        rows.append(f"| `{key}` | {_TYPE.get(type(value), 'value')} | {_cell(text)} |")
    return "\n".join(rows)


def response_codes(env, section: str) -> str:
    """The codes calc answers with in ``section`` (``components``, ``phases``, ``warnings``) and
    what the site calls each: every code a response can hold, with the page's words for it."""
    from calc.cli.messages import Messages

    lang = page_language(env)
    codes = _codes(section)
    msg = Messages(lang)
    head = (msg.message("api.col.code", "Code"), msg.message("api.col.code_meaning", "Meaning"))
    rows = [f"| {head[0]} | {head[1]} |", "|---|---|"]
    words = {
        "components": lambda c: msg.message("component." + c, c),
        "phases": lambda c: msg.option("phase", c),
        "warnings": lambda c: msg.message("warning." + c, c),
    }[section]
    rows += [f"| `{code}` | {_cell(words(code))} |" for code in codes]
    return "\n".join(rows)


def _codes(section: str) -> list[str]:
    """Components and phases: the keys of a real estimate; warnings: every code the site
    translates (the calculator's tests keep that list equal to what calc can answer)."""
    import calc
    from calc.catalogue import catalogue

    if section in ("components", "phases"):
        return list(calc.estimate(REQUEST)[section])
    return list(catalogue("en").namespace("warning"))


def schema_link(env, command: str) -> str:
    """A link to the published schema, relative to the page (the site may live under a sub-path)."""
    from calc.schema import FILE_NAMES

    name = FILE_NAMES[command]
    depth = env.page.url.count("/") if env.page.url else 0
    href = "../" * depth + "schema/" + name
    return f'<a href="{html.escape(href)}"><code>{html.escape(name)}</code></a>'


def api_example(env) -> str:
    """The Python example's output, computed now."""
    import calc

    est = calc.estimate(REQUEST)
    result = calc.plan_setup(PLAN_REQUEST)
    return (
        f"{est['peak_allocated_bytes']} {est['peak_phase']}\n"
        f"{result['fits_selected_gpu']} {result['recommendations']['cheapest']}"
    )


def register(env) -> None:
    for function in (
        cli_example,
        cli_flags_table,
        response_fields,
        response_codes,
        schema_link,
        api_example,
    ):

        def bound(*args, _f=function, **kwargs):
            return _f(env, *args, **kwargs)

        bound.__name__ = function.__name__
        bound.__doc__ = function.__doc__
        env.macro(bound, function.__name__)
