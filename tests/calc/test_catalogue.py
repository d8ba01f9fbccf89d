"""The message catalogue (``calc/data/messages/{es,en}.json``, read through ``calc.catalogue``):
both languages hold the same entries, every entry is read by something, every value of a
closed request field has its name, and option names depend on their field."""

from __future__ import annotations

import csv
import importlib
import io
import json
import re
from enum import Enum

import pytest

from calc.catalogue import LANGS, Catalogue, load, pick
from conftest import REPO_ROOT

ROOT = REPO_ROOT
CATALOGUE_DIR = ROOT / "calc" / "data" / "messages"

# Where the words are asked for: code, templates, the front end, and the data whose codes
# they name (the catalogue itself is not scanned: an entry cannot vouch for itself).
CODE_DIRS = ("calc", "calc_view", "accuracy", "macros", "hooks", "benchmarks", "tools")
FRONT_END = ROOT / "docs" / "assets"
DATA_DIRS = (ROOT / "validation", ROOT / "calc" / "data")


def _entries(lang: str) -> dict[str, object]:
    """Every entry as ``{"m:<id>" | "o:<field>:<code>": text}``."""
    data = load(lang)
    out = {f"m:{key}": v for key, v in data["messages"].items()}
    out.update({f"o:{field}:{code}": v for field, codes in data["options"].items()
                for code, v in codes.items()})
    return out


def closed_fields() -> dict[str, set[str]]:
    """Every request key of ``estimate`` and ``plan`` with a closed set of values."""
    from calc.gpus import TIERS
    from calc.request import ESTIMATE_FIELDS

    fields = dict(ESTIMATE_FIELDS)
    fields.update(importlib.import_module("calc.plan").PLAN_FIELDS)
    out = {}
    for key, (_default, kind, _extra) in fields.items():
        if isinstance(kind, type) and issubclass(kind, Enum):
            out[key] = {m.value for m in kind}
        elif kind == "tier":
            out[key] = set(TIERS)
    return out


# --------------------------------------------------------------------- the scan

_STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"|\'((?:[^\'\\\n]|\\.)*)\'|`([^`\n]*)`')
# a placeholder of an f-string or a JS template literal: ``{group}``, ``${error.minimum}``
_PLACEHOLDER = re.compile(r"\$?\{[^{}]*\}")
_JS_ATTR = re.compile(r"\.([A-Za-z_][A-Za-z0-9_]*)")


def _source_files():
    for name in CODE_DIRS:
        for path in (ROOT / name).rglob("*.py"):
            if "__pycache__" not in path.parts:
                yield path
    yield from FRONT_END.rglob("*.js")
    yield from (ROOT / "docs").rglob("*.md")


def _json_strings(value) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set(value) | {s for v in value.values() for s in _json_strings(v)}
    if isinstance(value, list):
        return {s for v in value for s in _json_strings(v)}
    return set()


def _literals(text: str) -> set[str]:
    """The string literals of ``text``, those nested in an f-string's placeholders too; a
    ``"key|n"`` argument of ``labels.text`` also counts as its ``key``."""
    out = set()
    for match in _STRING.finditer(text):
        literal = next(g for g in match.groups() if g is not None)
        out |= {literal, literal.partition("|")[0]}
        if "'" in literal or '"' in literal:
            out |= _literals(literal)
    return out


def scan() -> set[str]:
    """String literals of the code and templates, attribute names of the front end (it reads
    ``strings.ui.status_ready``), and the cells and values of the data files."""
    found: set[str] = set()
    for path in _source_files():
        text = path.read_text(encoding="utf-8")
        found |= _literals(text)
        if path.suffix == ".js":
            found |= set(_JS_ATTR.findall(text))
    for folder in DATA_DIRS:
        for path in folder.rglob("*"):
            if CATALOGUE_DIR in path.parents:
                continue
            if path.suffix == ".csv":
                rows = csv.reader(io.StringIO(path.read_text(encoding="utf-8")))
                # a notes cell holds "; "-separated ids, each ``id`` or ``id:argument``
                parts = {p.strip() for row in rows for cell in row for p in cell.split("; ")}
                found |= parts | {p.partition(":")[0] for p in parts}
            elif path.suffix == ".json":
                found |= _json_strings(json.loads(path.read_text(encoding="utf-8")))
    return {s for s in found if s}


def templates(literals: set[str]) -> list[list[str]]:
    """f-strings and template literals as their static parts (``f"caption.constants_{group}"``
    -> ``["caption.constants_", ""]``), those with at least three letters of their own:
    ``f"{a}.{b}"`` says nothing."""
    out = []
    for literal in literals:
        if not _PLACEHOLDER.search(literal):
            continue
        static = _PLACEHOLDER.split(literal)
        if sum(c.isalpha() for part in static for c in part) >= 3:
            out.append(static)
    return out


def _fills(name: str, static: list[str], literals: set[str]) -> bool:
    """``name`` is the template ``static`` with every placeholder filled by a literal, or by
    nothing (``${flag ? "_above" : ""}``)."""
    def rest_fills(rest: str, i: int) -> bool:
        if not rest.startswith(static[i]):
            return False
        rest = rest[len(static[i]):]
        if i == len(static) - 1:
            return rest == ""
        return any((k == 0 or rest[:k] in literals) and rest_fills(rest[k:], i + 1)
                   for k in range(len(rest) + 1))
    return rest_fills(name, 0)


def _built(name: str, literals: set[str], affixes: list[str], patterns: list[list[str]]) -> bool:
    """``name`` is a literal, or a literal prefix (``"verdict_" + state``) or suffix
    (``order + "_heading"``) joined to another literal, or a template filled with literals."""
    if name in literals or any(_fills(name, p, literals) for p in patterns):
        return True
    for affix in affixes:
        if name.startswith(affix) and name[len(affix):] in literals:
            return True
        if name.endswith(affix) and name[:-len(affix)] in literals:
            return True
    return False


def unused_entries(entries: dict[str, object], literals: set[str]) -> list[str]:
    """The entries nothing asks for. A message ``ns.rest`` is read where its id or ``rest``
    is written, or built from a written prefix or suffix and a written code; an option
    ``(field, code)`` where ``code`` is allowed for the request field ``field``, or where
    ``field`` is named and ``code`` is written (in code or in the data)."""
    affixes = sorted({s for s in literals if len(s) > 1 and (s[-1] in "._:" or s[0] in "._+")
                      and re.fullmatch(r"[\w.:/+-]+", s)}, key=len, reverse=True)
    patterns = templates(literals)
    closed = closed_fields()
    unused = []
    for key in entries:
        kind, _, rest = key.partition(":")
        if kind == "m":
            # the whole id, or what follows any of its dots (``import.notes.file_read``: the
            # front end reads ``t.notes[code]`` with the code calc wrote)
            parts = rest.split(".")
            names = [".".join(parts[i:]) for i in range(len(parts))]
            if not any(_built(n, literals, affixes, patterns) for n in names):
                unused.append(rest)
        else:
            field, _, code = rest.partition(":")
            if code in closed.get(field, ()):
                continue
            if field not in literals or not _built(code, literals, affixes, patterns):
                unused.append(f"{field}={code}")
    return unused


# --------------------------------------------------------------------- the tests


def test_both_languages_hold_the_same_entries():
    """Same ids and (field, code) pairs; each entry a text, or exactly a short and a long one
    (a language may need one form where the other needs two)."""
    es, en = _entries("es"), _entries("en")
    assert len(es) > 500
    assert sorted(set(es) ^ set(en)) == [], "entries missing in one language"
    for key in es:
        for lang, value in (("es", es[key]), ("en", en[key])):
            assert isinstance(value, str) or sorted(value) == ["long", "short"], (lang, key)
            for form in ("short", "long"):
                assert pick(value, form).strip(), f"{key} is empty in {lang}"


def test_every_entry_is_read_somewhere():
    literals = scan()
    assert {"status_ready", "unknown_preset", "sharding_on_single_gpu"} <= literals
    unused = unused_entries(_entries("en"), literals)
    assert unused == [], f"entries nothing reads (remove them from calc/data/messages): {unused}"


def test_the_unused_check_catches_an_unread_entry():
    """The scan is not a tautology: an entry whose id and code appear nowhere is reported,
    as is an option of a field nothing names, and a value a closed field does not allow."""
    literals = scan()
    probe = {"m:ui.never_asked_for_anywhere": "x", "o:sharding:zero9": "x",
             "o:nowhere_field:generic": "x", "m:api.estimate.no_such_response_key": "x",
             "m:ui.status_ready": "x", "o:cpu_offload:none": "x",
             "m:api.estimate.peak_allocated_bytes": "x", "m:ui.valid_range_above_below": "x"}
    assert unused_entries(probe, literals) == ["ui.never_asked_for_anywhere", "sharding=zero9",
                                               "nowhere_field=generic",
                                               "api.estimate.no_such_response_key"]


def test_every_value_of_every_closed_request_field_has_a_name():
    closed = closed_fields()
    assert {"method", "precision", "optimizer", "attention", "sharding", "cpu_offload",
            "lora_adapter_dtype", "framework", "price_tier"} <= set(closed)
    for lang in LANGS:
        options = load(lang)["options"]
        missing = [(f, c) for f, codes in closed.items() for c in sorted(codes)
                   if c not in options.get(f, {})]
        assert missing == [], f"{lang}: values without a name: {missing}"


def test_every_message_the_guides_name_by_its_whole_id_exists():
    """A literal id in the site's macros (a column header, a caption, ``labels.text("...")``)
    is in the catalogue: the build would stop on it, this says which one."""
    namespaces = {key.split(".", 1)[0] for key in load("en")["messages"]}
    asked = set()
    for path in (ROOT / "macros").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        # ``check="loso.max_abs_pct"`` is a path in a response, not a message
        paths = set(re.findall(r'check=f?"([^"]*)"', text))
        for literal in _literals(text) - paths:
            head, dot, rest = literal.partition(".")
            if dot and head in namespaces and re.fullmatch(r"[\w.:/+-]*[A-Za-z0-9]", rest):
                asked.add(literal)
    assert len(asked) > 100
    for lang in LANGS:
        missing = sorted(k for k in asked if not Catalogue(lang).has(k))
        assert missing == [], f"{lang}: {missing}"


@pytest.mark.parametrize("lang", LANGS)
def test_an_option_is_named_by_its_field(lang):
    """``cpu_offload: none`` is no offload, ``sharding: none`` no sharding; neither is "one
    GPU" (the guides once said so, looking the code up without its field)."""
    from macros import labels

    offload = labels.value("cpu_offload", "none", lang)
    sharding = labels.value("sharding", "none", lang)
    assert offload != sharding
    assert {offload, sharding}.isdisjoint({"one GPU", "una GPU"})
    # lora_adapter_dtype fp32 is the adapters' dtype, not the whole model in 32 bits
    assert Catalogue(lang).option("lora_adapter_dtype", "fp32", "long") == "fp32"
    assert Catalogue(lang).option("precision", "fp32", "long") != "fp32"


def test_the_page_the_guides_and_the_cli_say_the_same_words():
    """One catalogue: the calculator's option names, the CLI's and the guides' long forms
    are the same strings."""
    from calc.cli.messages import Messages
    from macros.calculator import page_strings

    for lang in LANGS:
        page, msg, cat = page_strings(lang), Messages(lang), Catalogue(lang)
        for field, codes in closed_fields().items():
            for code in codes:
                assert page["enums"][field][code] == msg.option(field, code) \
                    == cat.option(field, code, "long")
        assert page["labels"]["num_gpus"] == msg.label("num_gpus")


def test_a_validation_note_is_an_id_worded_in_each_language():
    """The throughput CSV holds note ids, not prose: a wording is fixed in the catalogue."""
    from macros.methodology_text import translate_note

    note = "tensor_parallelism:FSDP 8 × TP 8; long_context"
    assert translate_note(note, "en") == ("tensor parallelism (FSDP 8 × TP 8) is not a calc "
                                          "sharding; long context")
    assert translate_note(note, "es").startswith("paralelismo de tensor (FSDP 8 × TP 8)")
    with pytest.raises(KeyError):
        translate_note("tensor parallelism (FSDP 8 × TP 8) is not a calc sharding", "en")
