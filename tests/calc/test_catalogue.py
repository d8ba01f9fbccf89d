"""The message catalogue (``calc/data/messages/{es,en}.json``, read through ``calc.catalogue``):
both languages hold the same entries, every entry is read by something, every value of a
closed request field has its name, option names depend on their field, every constant of calc
is described, and the site, the CLI and the catalogue list the same languages."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest

from calc.catalogue import LANGS, Catalogue, load, pick
from conftest import REPO_ROOT

ROOT = REPO_ROOT
CATALOGUE_DIR = ROOT / "calc" / "data" / "messages"

# Where the words are asked for: code, templates, the front end, and the data whose codes
# they name (the catalogue itself is not scanned: an entry cannot vouch for itself).
CODE_DIRS = ("calc", "calc_view", "accuracy", "macros", "hooks", "benchmarks", "tools")
FRONT_END = ROOT / "docs" / "assets"
THEME = ROOT / "overrides"  # the theme's templates: ``message("site.not_found_title", ...)``
DATA_DIRS = (ROOT / "validation", ROOT / "calc" / "data")


def _entries(lang: str) -> dict[str, object]:
    """Every entry as ``{"m:<id>" | "o:<field>:<code>" | "c:<constant>": text}``."""
    data = load(lang)
    out = {f"m:{key}": v for key, v in data["messages"].items()}
    out.update(
        {
            f"o:{field}:{code}": v
            for field, codes in data["options"].items()
            for code, v in codes.items()
        }
    )
    out.update({f"c:{key}": v for key, v in data["constants"].items()})
    return out


def closed_fields() -> dict[str, set[str]]:
    """Every request key of ``estimate`` and ``plan`` with a closed set of values."""
    from calc.fields import field_specs

    return {spec.key: set(spec.choices) for spec in field_specs("plan") if spec.choices is not None}


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
    yield from THEME.rglob("*.html")


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
                cells = [cell for row in rows for cell in row]
                # a notes cell holds "; "-separated ids, each ``id`` or ``id:argument``
                parts = {p.strip() for cell in cells for p in cell.split("; ")}
                found |= parts | {p.partition(":")[0] for p in parts}
                # a source's label, "name (remark)": the remark and the name are worded
                labelled = filter(None, (re.fullmatch(r"(.*?)\s*\((.*)\)", c) for c in cells))
                found |= {part for match in labelled for part in match.groups() if part}
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
        rest = rest[len(static[i]) :]
        if i == len(static) - 1:
            return rest == ""
        return any(
            (k == 0 or rest[:k] in literals) and rest_fills(rest[k:], i + 1)
            for k in range(len(rest) + 1)
        )

    return rest_fills(name, 0)


def _built(name: str, literals: set[str], affixes: list[str], patterns: list[list[str]]) -> bool:
    """``name`` is a literal, or a literal prefix (``"verdict_" + state``) or suffix
    (``order + "_heading"``) joined to another literal, or a template filled with literals."""
    if name in literals or any(_fills(name, p, literals) for p in patterns):
        return True
    for affix in affixes:
        if name.startswith(affix) and name[len(affix) :] in literals:
            return True
        if name.endswith(affix) and name[: -len(affix)] in literals:
            return True
    return False


def unused_entries(entries: dict[str, object], literals: set[str]) -> list[str]:
    """The entries nothing asks for. A message ``ns.rest`` is read where its id or ``rest``
    is written, or built from a written prefix or suffix and a written code; an option
    ``(field, code)`` where ``code`` is allowed for the request field ``field``, or where
    ``field`` is named and ``code`` is written (in code or in the data)."""
    affixes = sorted(
        {
            s
            for s in literals
            if len(s) > 1 and (s[-1] in "._:" or s[0] in "._+") and re.fullmatch(r"[\w.:/+-]+", s)
        },
        key=len,
        reverse=True,
    )
    patterns = templates(literals)
    closed = closed_fields()
    unused = []
    for key in entries:
        kind, _, rest = key.partition(":")
        if kind == "c":
            continue  # a constant's description: checked against calc's constants below
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
            if key.startswith("c:"):  # a constant: what it means and its source
                assert isinstance(value, dict) and sorted(value) == ["source", "text"], (lang, key)
                assert all(isinstance(v, str) and v.strip() for v in value.values()), (lang, key)
                continue
            assert isinstance(value, str) or sorted(value) == ["long", "short"], (lang, key)
            for form in ("short", "long"):
                assert pick(value, form).strip(), f"{key} is empty in {lang}"


def test_an_entry_missing_in_one_language_is_caught():
    """The comparison above is a set difference per kind of entry: a constant, a message and
    an option missing in English are each found."""
    es, en = _entries("es"), _entries("en")
    for probe in ("c:calc.states.FP32_BYTES", "m:ui.status_ready", "o:sharding:none"):
        assert probe in es and probe in en
        shorter = {k: v for k, v in en.items() if k != probe}
        assert sorted(set(es) ^ set(shorter)) == [probe]


def test_every_entry_is_read_somewhere():
    literals = scan()
    assert {"status_ready", "unknown_preset", "sharding_on_single_gpu"} <= literals
    # a source many constants share is a ``source.*`` message, read through the constant
    literals |= {entry["source"] for entry in load("en")["constants"].values()}
    unused = unused_entries(_entries("en"), literals)
    assert unused == [], f"entries nothing reads (remove them from calc/data/messages): {unused}"


def test_the_unused_check_catches_an_unread_entry():
    """The scan is not a tautology: an entry whose id and code appear nowhere is reported,
    as is an option of a field nothing names, and a value a closed field does not allow."""
    literals = scan()
    probe = {
        "m:ui.never_asked_for_anywhere": "x",
        "o:sharding:zero9": "x",
        "o:nowhere_field:generic": "x",
        "m:api.estimate.no_such_response_key": "x",
        "m:ui.status_ready": "x",
        "o:cpu_offload:none": "x",
        "m:api.estimate.peak_allocated_bytes": "x",
        "m:ui.valid_range_above_below": "x",
    }
    assert unused_entries(probe, literals) == [
        "ui.never_asked_for_anywhere",
        "sharding=zero9",
        "nowhere_field=generic",
        "api.estimate.no_such_response_key",
    ]


def test_every_value_of_every_closed_request_field_has_a_name():
    closed = closed_fields()
    assert {
        "method",
        "precision",
        "optimizer",
        "attention",
        "sharding",
        "cpu_offload",
        "lora_adapter_dtype",
        "framework",
        "price_tier",
    } <= set(closed)
    for lang in LANGS:
        options = load(lang)["options"]
        missing = [
            (f, c)
            for f, codes in closed.items()
            for c in sorted(codes)
            if c not in options.get(f, {})
        ]
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
                assert (
                    page["enums"][field][code]
                    == msg.option(field, code)
                    == cat.option(field, code, "long")
                )
        assert page["labels"]["num_gpus"] == msg.label("num_gpus")


def test_a_validation_note_is_an_id_worded_in_each_language():
    """The throughput CSV holds note ids, not prose: a wording is fixed in the catalogue."""
    from macros.labels import translate_note

    note = "tensor_parallelism:FSDP 8 × TP 8; long_context"
    assert translate_note(note, "en") == (
        "tensor parallelism (FSDP 8 × TP 8) is not a calc sharding; long context"
    )
    assert translate_note(note, "es").startswith("paralelismo de tensor (FSDP 8 × TP 8)")
    with pytest.raises(KeyError):
        translate_note("tensor parallelism (FSDP 8 × TP 8) is not a calc sharding", "en")


# --------------------------------------------------------------------- constants


def described_constants() -> dict[str, set[str]]:
    """What must be described (calc's numeric constants, ``default:<field>`` for each number a
    plan request defaults to) and what the catalogue describes, per language."""
    from calc.fields import BY_KEY, PLAN, keys
    from macros.methodology import numeric_constants

    wanted = set(numeric_constants()) | {
        f"default:{k}"
        for k in keys(PLAN)
        if isinstance(BY_KEY[k].default, (int, float)) and not isinstance(BY_KEY[k].default, bool)
    }
    return {"wanted": wanted, **{lang: set(load(lang)["constants"]) for lang in LANGS}}


def constant_gaps(wanted: set[str], described: set[str]) -> tuple[list[str], list[str]]:
    """(constants without a description, descriptions of constants calc does not have)."""
    return sorted(wanted - described), sorted(described - wanted)


def test_every_constant_of_calc_is_described_once_in_each_language():
    """The methodology page renders every constant from the catalogue: each has its meaning
    and its source in both languages, and no description is left for a constant calc no
    longer has."""
    found = described_constants()
    assert len(found["wanted"]) > 70, "the scan of calc's constants found too little"
    for lang in LANGS:
        assert constant_gaps(found["wanted"], found[lang]) == ([], []), lang
    for key in found["wanted"]:
        (es_text, es_source), (en_text, en_source) = (
            Catalogue(lang).constant(key) for lang in LANGS
        )
        assert es_text != en_text, key
        assert not es_source.startswith("source.") and not en_source.startswith("source."), key


def test_a_constant_without_a_description_is_caught():
    """A new constant of calc that nobody described: the check names it, and the
    methodology page's build stops on it."""
    from macros import methodology

    found = described_constants()
    new = "calc.memory.A_CONSTANT_NOBODY_DESCRIBED"
    assert constant_gaps(found["wanted"] | {new}, found["en"]) == ([new], [])
    assert constant_gaps(found["wanted"] - {"calc.states.FP32_BYTES"}, found["en"]) == (
        [],
        ["calc.states.FP32_BYTES"],
    )
    assert methodology.undescribed(["calc.states.FP32_BYTES", new]) == [new]
    with pytest.raises(KeyError, match="no 'es' description"):
        Catalogue("es").constant(new)


# --------------------------------------------------------------------- languages


def _mkdocs_languages() -> list[tuple[str, bool]]:
    """(locale, default) of ``plugins.i18n.languages`` in mkdocs.yml, in its order."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_multi_constructor("!", lambda loader, suffix, node: None)  # !ENV and friends
    config = yaml.load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"), Loader=Loader)
    i18n = next(p["i18n"] for p in config["plugins"] if isinstance(p, dict) and "i18n" in p)
    return [(lang["locale"], bool(lang.get("default"))) for lang in i18n["languages"]]


def test_the_site_the_cli_and_the_catalogue_list_the_same_languages():
    """One list (``calc.languages.LANGS``, the default first): the catalogue files, the number
    format, the macros and the CLI's ``--lang`` read it; mkdocs.yml cannot, so it is compared."""
    from cli_run import run_main

    from calc import numfmt
    from macros import site

    assert _mkdocs_languages() == [(lang, i == 0) for i, lang in enumerate(LANGS)]
    assert sorted(p.stem for p in CATALOGUE_DIR.glob("*.json")) == sorted(LANGS)
    assert numfmt.LANGS is site.LANGS is LANGS
    for command in (["estimate"], ["import", "-"]):
        code, out, _err = run_main([*command, "--lang", "xx"])
        detail = json.loads(out)["error"]["detail"]
        assert code == 2 and "--lang" in detail, detail
        assert re.findall(r"\w+", detail.partition("choose from")[2]) == list(LANGS), detail


@pytest.mark.parametrize("name", ["gpus.csv", "prices.csv", "instances.csv", "models.json"])
def test_every_data_column_is_described_in_each_language(name):
    """The data page lists every column of each ``calc/data`` file with its meaning: a column
    added without its ``data_column.<file>:<column>`` message would break the site's build."""
    from macros import methodology

    for lang in LANGS:
        for column in methodology.data_file_columns(name):
            assert Catalogue(lang).has(f"data_column.{name}:{column}"), (lang, column)
