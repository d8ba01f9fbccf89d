"""The calculator's view package (``calc_view/``) in CPython: number formatting, the results
tree, its HTML, the worker's entry (bad input apart from internal errors), the translated
codes and the bundle hook that ships it. (The browser side is in test_calculator_browser.py.)"""

from __future__ import annotations

import io
import json
import math
import re
import subprocess
import sys
import zipfile

import pytest
from calculator_page import STRINGS, tree_outputs
from hypothesis import given, strategies as st

from hooks import calc_bundle
import calc
import calc_view as view
from macros import calculator
from conftest import REPO_ROOT

ROOT = REPO_ROOT


@pytest.mark.parametrize(
    ("value", "decimals", "lang", "expected"),
    [
        (0, 1, "es", "0,0"),
        (1.25, 2, "es", "1,25"),
        (9999.94, 1, "es", "9999,9"),  # no grouping below 10 000 in Spanish
        (10000, 1, "es", "10\u202f000,0"),
        (1234567.891, 2, "es", "1\u202f234\u202f567,89"),
        (-12345, 0, "es", "-12\u202f345"),
        (999, 0, "en", "999"),
        (1000, 0, "en", "1,000"),
        (9999.94, 1, "en", "9,999.9"),
        (1234567.891, 2, "en", "1,234,567.89"),
        (-0.04, 1, "en", "0.0"),  # rounds to zero: no "-0.0"
        (16 * 2**30 / 2**30, 1, "en", "16.0"),
    ],
)
def test_format_number(value, decimals, lang, expected):
    assert view.format_number(value, decimals, lang) == expected


@pytest.mark.parametrize(
    ("key", "value", "lang", "expected"),
    [
        ("peak_allocated_bytes", 17_179_869_184, "es", "16,0 GiB"),
        ("peak_allocated_bytes", 17_179_869_184, "en", "16.0 GiB"),
        ("host_bytes", 16_106_127_360_000, "es", "15\u202f000,0 GiB"),
        ("time_hours", 3.25, "es", "3,2 h"),  # round half to even, as Python and toFixed agree here
        ("time_hours", 1234.56, "en", "1,234.6 h"),
        ("cost_usd", 1234.5, "es", "1234,50 USD"),
        ("cost_usd", 1234.5, "en", "1,234.50 USD"),
        ("params_total", 8_030_261_248, "es", "8\u202f030\u202f261\u202f248"),
        ("params_total", 8_030_261_248, "en", "8,030,261,248"),
        ("headroom_fraction", 0.2093, "en", "20.9%"),
        ("fits", True, "es", "sí"),
        ("safety_margin", 0.25, "es", "25,0 %"),
        ("total_gb", 46.96, "en", "47.0 GB"),
    ],
)
def test_format_value(key, value, lang, expected):
    assert view.format_value(key, value, lang, STRINGS[lang]) == expected


@given(st.floats(min_value=-1e15, max_value=1e15, allow_nan=False), st.integers(0, 3))
def test_format_number_reads_back(value, decimals):
    """Both spellings parse back to the value rounded to the shown decimals."""
    rounded = float(f"{value:.{decimals}f}")
    for lang, group, point in (("es", "\u202f", ","), ("en", ",", ".")):
        text = view.format_number(value, decimals, lang)
        assert float(text.replace(group, "").replace(point, ".")) == pytest.approx(rounded, abs=0)


HOSTILE = '<script>alert("x")</script>\'"&'


def test_to_html_escapes_text_and_attributes():
    html = view.to_html(["div", {"title": HOSTILE}, HOSTILE, ["span", {}, "<b>"]])
    assert "<script>" not in html and "<b>" not in html
    assert html == (
        '<div title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;\'&quot;&amp;">'
        '&lt;script&gt;alert("x")&lt;/script&gt;\'"&amp;<span>&lt;b&gt;</span></div>'
    )


def test_script_content_cannot_close_the_element():
    html = view.to_html(["script", {"type": "application/json"}, json.dumps({"a": "</script><x>"})])
    assert html.count("</script>") == 1
    assert json.loads(html[html.index(">") + 1 : html.rindex("<")]) == {"a": "</script><x>"}


def test_element_builder_the_guides_share():
    """``el`` leaves out an attribute that is None or False and writes True bare (``=""``);
    ``svg_number`` writes a coordinate with two decimals at most."""
    from calc_view.html import el, svg_number

    node = el("details", {"open": True, "hidden": False, "id": None, "class": "x"}, "a", el("br"))
    assert view.to_html(node) == '<details open="" class="x">a<br></details>'
    assert [svg_number(x) for x in (0, 1.0, 2.345, 10.5, 3.10)] == ["0", "1", "2.35", "10.5", "3.1"]


CHANGES = [
    {},
    {"method": "qlora"},
    {"method": "full", "optimizer": "adamw-8bit"},
    {"num_gpus": 4, "sharding": "zero3"},
    {"seq_len": 200_000},
    {"gpu": "rtx-3090"},
    {"gpu": "mi300x", "method": "qlora", "attention": "flash", "interruptible": True},
    {"model": "llama-3.1-405b", "method": "full", "gpu": "l4"},
    {
        "gradient_accumulation_steps": 4,
        "num_gpus": 2,
        "sharding": "zero3",
        "lora_dropout": 0.1,
        "frozen_weight_grads": True,
        "sync_each_micro_batch": True,
    },
    {"method": "qlora", "qlora_unchunked_quantization": True, "attention_keeps_fused_qkv": True},
    # evaluations and saves: their hours, counts and a checkpoint's size
    {"eval_steps": 0.2, "eval_tokens": 1e6, "save_steps": 100, "num_gpus": 16, "gpus_per_node": 4},
    {
        "method": "qlora",
        "qlora_keeps_inputs": True,
        "optimizer": "paged-adamw-8bit",
        "cpu_offload": "optimizer",
        "activation_offload": True,
        "gradient_checkpointing": False,
    },
]


def _plan(changes: dict) -> dict:
    return calc.run(calculator.COMMAND, calculator.default_request() | changes)["result"]


@pytest.mark.parametrize("lang", ["es", "en"])
@pytest.mark.parametrize("changes", CHANGES)
def test_every_shown_number_is_the_response_value(lang, changes):
    response = _plan(changes)
    pairs = tree_outputs(view.render_results(response, lang, STRINGS[lang]))
    for path, raw in pairs:
        assert raw == view.raw_value(view.resolve(response, path)), path
    paths = {p for p, _ in pairs}
    memory = response["memory"]
    # memory fields keep the estimate's names, as the data-output contract says
    assert {
        "peak_allocated_bytes",
        "peak_reserved_bytes",
        "device_total_bytes",
        "params_total",
        "params_trainable",
        "time_hours",
        "cost_usd.total",
        "fits_selected_gpu",
    } <= paths
    assert {f"components.{k}" for k, v in memory["components"].items() if v} <= paths
    for gpu, fit in response["fits"].items():  # a share, or the GiB a too-small card lacks
        key = "headroom_fraction" if fit["headroom_bytes"] >= 0 else "headroom_bytes"
        assert f"fits.{gpu}.{key}" in paths
    assert {f"suggestions.{i}.saved_bytes" for i in range(len(response["suggestions"]))} <= paths
    evaluating = bool(response["time"]["run_phases"]["evaluations"])
    for key in response["cost_usd"]["breakdown"]:
        # evaluation's hours and cost only where the run evaluates (not a zero for everyone)
        shown = key != "evaluation" or evaluating
        assert (f"cost_usd.breakdown.{key}" in paths) == shown, key
    assert ("time.schedule.eval_hours" in paths) == evaluating


def test_a_setup_that_does_not_fit_gets_suggestions_with_their_changes():
    """Each change after which it fits gets an apply button; a change that is not enough on
    its own (the 8-bit optimizer saving a tenth of a GiB) is no fix: it is named below, with
    what it saves and its verdict, and has no button."""
    response = _plan({"gpu": "rtx-3090"})
    assert not response["fits_selected_gpu"] and response["suggestions"]
    html = view.to_html(view.render_results(response, "en", STRINGS["en"]))
    fixes = [s for s in response["suggestions"] if s["verdict"] == "fits"]
    others = [s for s in response["suggestions"] if s["verdict"] != "fits"]
    assert fixes and "optimizer_8bit" in {s["action"] for s in others}
    for item in response["suggestions"]:
        attr = view.to_html(["b", {"data-changes": json.dumps(item["changes"])}])
        assert (attr[len("<b") : -len("></b>")] in html) == (item in fixes), item["action"]
    for item in others:
        assert f'data-suggestion="{item["action"]}"' in html
    assert STRINGS["en"]["ui"]["suggestions_not_enough_heading"] in html


@pytest.mark.parametrize("lang", ["es", "en"])
def test_suggested_changes_are_shown_in_words_not_codes(lang):
    """A suggestion reads "Optimizer = 8-bit AdamW (bitsandbytes)", "... = yes": no Python
    ``True`` and no raw enum code reaches the reader."""
    response = _plan(
        {
            "model": "llama-3.1-8b",
            "method": "full",
            "gpu": "rtx-4090",
            "gradient_checkpointing": False,
            "micro_batch_size": 4,
        }
    )
    s = STRINGS[lang]
    html = view.to_html(view.render_results(response, lang, s))
    changed = [(k, v) for item in response["suggestions"] for k, v in item["changes"].items()]
    assert ("gradient_checkpointing", True) in changed and ("optimizer", "adamw-8bit") in changed
    for key, value in changed:
        shown = (
            s["enums"][key][value]
            if isinstance(value, str)
            else view.format_value(key, value, lang, s)
        )
        assert f"{view.label(key, s)} = {shown}" in html
    assert "= True" not in html and "= adamw-8bit" not in html
    assert f"= {s['ui']['yes']}" in html


@pytest.mark.parametrize("lang", ["es", "en"])
def test_every_choice_of_every_list_has_a_name(lang):
    """The form's lists show names (pure bf16, paged 8-bit AdamW), never a bare code, in
    both languages."""
    from calc.fields import field_specs

    codes = {
        (spec.key, code)
        for spec in field_specs("estimate")
        if spec.enum is not None
        for code in spec.choices or ()
    }
    assert {
        ("precision", "bf16-true"),
        ("optimizer", "paged-adamw-8bit"),
        ("attention", "flash"),
        ("sharding", "zero3"),
        ("cpu_offload", "none"),
    } <= codes
    missing = {
        (key, code) for key, code in codes if code not in STRINGS[lang]["enums"].get(key, {})
    }
    assert not missing


@pytest.mark.parametrize("changes", CHANGES)
def test_every_code_in_a_response_is_translated(changes):
    response = _plan(changes)
    for lang in ("es", "en"):
        s = STRINGS[lang]
        assert set(response["warnings"]) <= set(s["warnings"])
        assert set(response["notes"]) <= set(s["notes"])
        assert {i["action"] for i in response["suggestions"]} <= set(s["actions"])
        assert response["memory"]["peak_phase"] in s["phases"]
        assert set(response["memory"]["components"]) <= set(s["components"])


@pytest.mark.parametrize("gpu", ["l40s", "rtx-3090", "h100-sxm"])
def test_components_stack_to_the_allocated_peak_in_the_chart(gpu):
    """Widths are to scale against the larger of the device total and the card's memory."""
    response = _plan({"gpu": gpu})
    chart = view.Renderer(response, "en", STRINGS["en"]).memory_chart()
    rects = [n for n in chart[2][2:] if n[0] == "rect"]
    memory = response["memory"]
    capacity = response["fits"][gpu]["memory_bytes"]
    scale = 600.0 / max(memory["device_total_bytes"], capacity)
    segments = [n for n in rects if "calc-seg" in n[1]["class"]]
    assert sum(float(n[1]["width"]) for n in segments) == pytest.approx(
        scale * memory["device_total_bytes"], abs=0.05
    )
    components = [
        float(n[1]["width"])
        for n in segments
        if "calc-comp-reserved-extra" not in n[1]["class"]
        and "calc-comp-context-extra" not in n[1]["class"]
    ]
    assert sum(components) == pytest.approx(scale * memory["peak_allocated_bytes"], abs=0.05)
    (marker,) = [n for n in rects if n[1]["class"] == "calc-capacity"]
    assert float(marker[1]["x"]) + 1.5 == pytest.approx(scale * capacity, abs=0.01)


@pytest.mark.parametrize(
    ("changes", "code", "field"),
    [
        ({"model": "no-such-model"}, "unknown_preset", "model"),
        ({"seq_len": -1}, "not_positive", "seq_len"),
        ({"seq_len": 1_000_000_000}, "out_of_range", "seq_len"),
        ({"bogus": 1}, "unknown_key", "bogus"),
        ({"gpu": "gtx-480"}, "unknown_gpu", "gpu"),
        (
            {"model": {"hf_config": {"model_type": "t5"}}},
            "unsupported_architecture",
            "hf_config.model_type",
        ),
    ],
)
def test_worker_entry_answers_bad_input_with_a_code(changes, code, field):
    session = view.Session.from_json("es", json.dumps(STRINGS["es"]))
    request_json = json.dumps(calculator.default_request() | changes)
    out = json.loads(session.handle(calculator.COMMAND, request_json))
    assert out["error"]["code"] == code
    assert out["error"]["field"] == field
    assert "internal_error" not in out and "result" not in out


def test_worker_entry_survives_absurd_nesting():
    session = view.Session("en", STRINGS["en"])
    out = json.loads(session.handle(calculator.COMMAND, "[" * 100_000 + "]" * 100_000))
    assert out["error"]["code"] == "request_too_deep"


def test_worker_entry_renders_the_result():
    session = view.Session.from_json("en", json.dumps(STRINGS["en"]))
    request = calculator.default_request()
    out = json.loads(session.handle(calculator.COMMAND, json.dumps(request)))
    expected = calc.run(calculator.COMMAND, request)["result"]
    assert out["result"] == json.loads(json.dumps(expected))
    assert out["view"] == json.loads(json.dumps(view.render_results(expected, "en", STRINGS["en"])))


def test_two_sessions_keep_their_own_language():
    """No state at module level: a second session does not change the first one's words."""
    request_json = json.dumps(calculator.default_request())
    spanish = view.Session("es", STRINGS["es"])
    english = view.Session("en", STRINGS["en"])
    first = json.loads(spanish.handle(calculator.COMMAND, request_json))["view"]
    json.loads(english.handle(calculator.COMMAND, request_json))
    again = json.loads(spanish.handle(calculator.COMMAND, request_json))["view"]
    assert first == again
    assert STRINGS["es"]["ui"]["memory_heading"] in json.dumps(again, ensure_ascii=False)


HOSTILE_MESSAGE = '<img src=x onerror="alert(1)">'


def _raise(exc):
    def broken(*args, **kwargs):
        raise exc

    return broken


@pytest.mark.parametrize(
    ("target", "stage"),
    [
        ("calc.plan.plan_dict", "calc"),
        ("calc_view.session.render_results", "view"),
    ],
)
def test_a_bug_is_an_internal_error_not_bad_input(monkeypatch, target, stage):
    """An exception that is not calc's input error (a bug in calc or in the view) comes back
    as ``internal_error``, apart from ``error``: the page must not blame a field for it. It
    names the exception's type and where it was raised, never its message (which may quote
    the input)."""
    import calc.plan
    import calc_view.session

    module, _, name = target.rpartition(".")
    owner = calc.plan if module == "calc.plan" else calc_view.session
    monkeypatch.setattr(owner, name, _raise(ZeroDivisionError(HOSTILE_MESSAGE)))
    out = json.loads(
        view.Session("en", STRINGS["en"]).handle(
            calculator.COMMAND, json.dumps(calculator.default_request())
        )
    )
    assert set(out) == {"internal_error"}
    found = out["internal_error"]
    assert found["code"] == "internal_error"
    assert found["stage"] == stage
    assert found["exception"] == "ZeroDivisionError"
    assert found["calc_version"] == calc.__version__
    assert re.fullmatch(r"(calc|calc_view)/[\w/]+\.py:\d+", found["where"]), found["where"]
    assert "onerror" not in json.dumps(out) and "alert" not in json.dumps(out)


def test_a_response_json_cannot_encode_is_an_internal_error(monkeypatch):
    import calc_view.session

    monkeypatch.setattr(
        calc_view.session, "render_results", lambda result, lang, strings: ["span", {}, math.nan]
    )
    out = json.loads(
        view.Session("en", STRINGS["en"]).handle(
            calculator.COMMAND, json.dumps(calculator.default_request())
        )
    )
    assert out["internal_error"]["stage"] == "encode"
    assert out["internal_error"]["exception"] == "ValueError"


def test_text_that_is_not_json_is_an_internal_error():
    """The page sends JSON.stringify's text: anything else is the page's bug, not input."""
    out = json.loads(view.Session("en", STRINGS["en"]).handle(calculator.COMMAND, "{model:"))
    assert out["internal_error"]["stage"] == "decode"
    # the strict decoder (duplicate keys refused) is calc's: the frame named is where it raised
    assert out["internal_error"]["where"].startswith("calc/strict_json.py:")


def test_the_package_needs_only_the_standard_library_and_calc():
    """calc_view runs in Pyodide next to calc: importing it (and rendering) in a bare
    interpreter pulls in nothing but the standard library, calc and itself."""
    code = (
        "import json, sys\n"
        "import calc_view, calc_view.session\n"
        "s = calc_view.Session('en', {})\n"
        "stdlib = set(sys.stdlib_module_names)\n"
        "outside = sorted({m.split('.')[0] for m in sys.modules} - stdlib"
        " - {'calc', 'calc_view', '__main__'})\n"
        "print(json.dumps(outside))\n"
    )
    run = subprocess.run(
        [
            sys.executable,
            "-I",
            "-S",
            "-c",
            f"import sys; sys.path.insert(0, {str(ROOT)!r})\n" + code,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == []


def test_the_package_keeps_no_state_at_module_level():
    """Nothing assignable at module level but constants (UPPER_CASE), functions, classes,
    type aliases and imports: the language and strings travel with the call or the session."""
    import ast

    for path in sorted((ROOT / "calc_view").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in tree.body:
            if isinstance(node, ast.AnnAssign) and ast.unparse(node.annotation) == "TypeAlias":
                continue  # a name for a type (Node, Strings), not a value
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    assert isinstance(target, ast.Name), (path.name, ast.dump(target))
                    if target.id in ("__all__", "format_number"):  # the exports; an alias
                        continue
                    assert target.id.lstrip("_").isupper(), (path.name, target.id)


# ---------------------------------------------------------------- strings


def _codes_raised_in_calc() -> set[str]:
    codes = set()
    for path in (ROOT / "calc").rglob("*.py"):
        codes |= set(
            re.findall(
                r'(?:Input|Config|Calc)Error\(\s*"([a-z0-9_]+)"', path.read_text(encoding="utf-8")
            )
        )
    return codes


# Codes that only the CLI raises (about files and argv): the page never sees them.
CLI_ONLY = {
    "bad_arguments",
    "request_unreadable",
    "request_not_utf8",
    "request_not_json",
    "bad_sweep_range",
    "sweep_needs_one_field",
}  # the last two: python -m calc sweep


@pytest.mark.parametrize("lang", ["es", "en"])
def test_every_error_code_calc_raises_is_translated(lang):
    missing = _codes_raised_in_calc() - CLI_ONLY - set(STRINGS[lang]["errors"])
    assert not missing


def test_both_languages_have_the_same_keys():
    def keys(tree, prefix=""):
        out = set()
        for key, value in tree.items():
            out.add(prefix + key)
            if isinstance(value, dict):
                out |= keys(value, prefix + key + ".")
        return out

    assert keys(STRINGS["es"]) == keys(STRINGS["en"])


def test_every_request_field_has_a_label_in_both_languages():
    for lang in ("es", "en"):
        assert set(calculator.request_fields()) <= set(STRINGS[lang]["labels"])


# ---------------------------------------------------------------- page and bundle


@pytest.mark.parametrize(
    ("url", "root"),
    [
        ("calculator/", "../"),
        ("en/calculator/", "../../"),
        ("", ""),
        ("a/b/c/", "../../../"),
    ],
)
def test_relative_root(url, root):
    assert calculator.relative_root(url) == root


def test_bundle_is_deterministic_and_holds_the_package_and_the_renderer():
    members = calc_bundle.bundle_members()
    names = [name for name, _ in members]
    assert {
        "calc/__init__.py",
        "calc_view/__init__.py",
        "calc_view/render.py",
        "calc/numfmt.py",
        "calc_view/session.py",
    } <= set(names)
    assert any(name.startswith("calc/data/") for name in names)
    assert not any("__pycache__" in name or name.endswith(".pyc") for name in names)
    first = calc_bundle.build_bundle(members)
    assert first == calc_bundle.build_bundle(calc_bundle.bundle_members())
    with zipfile.ZipFile(io.BytesIO(first)) as archive:
        assert archive.read("calc/__init__.py") == (ROOT / "calc" / "__init__.py").read_bytes()
    name = calc_bundle.bundle_name(members, calc_bundle.calc_version())
    assert re.fullmatch(r"calc-\d+\.\d+\.\d+[\w.]*-[0-9a-f]{12}\.zip", name)
    import calc

    assert name.startswith(f"calc-{calc.__version__}-")


def test_bundle_name_changes_with_any_byte():
    members = calc_bundle.bundle_members()
    name = calc_bundle.bundle_name(members, "1.0")
    changed = [(n, d + b" ") if n == "calc/__init__.py" else (n, d) for n, d in members]
    assert calc_bundle.bundle_name(changed, "1.0") != name
    assert calc_bundle.bundle_name(members, "1.1") != name


def test_a_setup_larger_than_the_card_shows_what_is_missing():
    """-2,942 % of headroom means nothing to a reader; the missing GiB do."""
    import calc

    response = calc.plan_setup(
        {
            "model": "llama-3.1-70b",
            "method": "full",
            "gpu": "rtx-4090",
            "dataset_tokens": 1_000_000,
            "epochs": 1,
        }
    )
    fit = response["fits"]["rtx-4090"]
    assert fit["headroom_bytes"] < 0
    for lang in ("es", "en"):
        _, _, label, value = view.Renderer(response, lang, STRINGS[lang]).headroom_kpi(
            "rtx-4090", fit
        )
        assert label[2] == STRINGS[lang]["labels"]["shortfall_bytes"]
        assert value[1]["data-output"] == "fits.rtx-4090.headroom_bytes"
        assert float(value[1]["data-value"]) == fit["headroom_bytes"]
        assert value[2] == view.format_value("x_bytes", -fit["headroom_bytes"], lang, STRINGS[lang])


def test_recommended_configurations_carry_their_caveats():
    """An AMD card named cheapest for QLoRA shows the ROCm caveat next to its name."""
    import calc

    response = calc.plan_setup(
        {
            "model": "llama-3.1-8b",
            "method": "qlora",
            "gpu": "l40s",
            "dataset_tokens": 100_000_000,
            "epochs": 1,
        }
    )
    amd = next(c for c in response["recommendations"]["configs"] if c["gpu"] == "mi300x")
    assert any(w.startswith("rocm_") for w in amd["warnings"])
    for lang in ("es", "en"):
        renderer = view.Renderer(response, lang, STRINGS[lang])
        (note,) = renderer.config_caveats(amd, brief=True)
        rocm = [w for w in amd["warnings"] if w.startswith("rocm_")]
        assert note[1]["data-warnings"].split() == [
            w for w in amd["warnings"] if w.startswith(("rocm_", "price_is_"))
        ]
        assert all(STRINGS[lang]["warnings"][w] in note[2] for w in rocm)


def test_the_first_view_carries_no_warning():
    """The page's default setup is priced like for like: no warning greets a first visit."""
    response = calculator.compute(calculator.default_request())
    assert response["warnings"] == []
    assert response["fits_selected_gpu"] is True


def _handle(request: dict) -> dict:
    return json.loads(
        view.Session("en", STRINGS["en"]).handle(calculator.COMMAND, json.dumps(request))
    )


def test_every_bad_field_is_named_at_once():
    """calc stops at the first bad field; the worker names them all, the first one first."""
    bad = {"micro_batch_size": -3, "lora_rank": "abc", "price_per_gpu_hour": -1}
    out = _handle(calculator.default_request() | bad)
    assert out["error"] == out["errors"][0]
    assert {e["field"] for e in out["errors"]} == set(bad)
    assert {e["code"] for e in out["errors"]} == {"not_positive", "not_integer", "out_of_range"}


@pytest.mark.parametrize(
    ("bad", "fields"),
    [
        ({"dataset_tokens": 0, "seq_len": 0}, ["dataset_tokens", "seq_len"]),
        # the other fields are checked next to a bad model (the LoRA targets need a model)
        ({"model": "no-such-model", "seq_len": 0, "lora_targets": "nope"}, ["model", "seq_len"]),
        (
            {"method": "bogus", "gpu": "gtx-480", "safety_margin": 2, "colour": 1},
            ["colour", "method", "gpu", "safety_margin"],
        ),
    ],
)
def test_every_bad_field_is_named_by_calc_in_one_pass(bad, fields):
    out = _handle(calculator.default_request() | bad)
    found = [e["field"] for e in out["errors"]]
    assert found[0] == out["error"]["field"]
    assert sorted(found) == sorted(fields)
    assert out["error"] == out["errors"][0]


@pytest.mark.parametrize(
    ("bad", "valid"),
    [
        ({"seq_len": 0}, {"minimum": 1, "maximum": 4_194_304, "integer": True}),
        ({"lora_dropout": 1.0}, {"minimum": 0.0, "maximum": 1.0, "maximum_exclusive": True}),
        ({"safety_margin": 2}, {"minimum": 0.0, "maximum": 1.0}),
        ({"dataset_tokens": 0.5}, {"minimum": 1.0}),  # less than one token: a typo
        ({"method": "bogus"}, {"allowed": ["full", "lora", "qlora"]}),
        ({"price_tier": "cheap"}, {"allowed": ["marketplace", "managed"]}),
        ({"gradient_checkpointing": "maybe"}, {"allowed": [True, False]}),
    ],
)
def test_every_field_error_says_what_is_valid(bad, valid):
    error = _handle(calculator.default_request() | bad)["error"]
    for key, value in valid.items():
        assert error[key] == value, (key, error)


def test_an_unknown_card_lists_the_catalogue():
    error = _handle(calculator.default_request() | {"gpu": "gtx-480"})["error"]
    assert "rtx-4090" in error["allowed"] and "l40s" in error["allowed"]


def test_a_good_request_has_no_error_list():
    out = _handle(calculator.default_request())
    assert "result" in out and "errors" not in out and "error" not in out


@pytest.mark.parametrize("lang", ["es", "en"])
def test_a_setup_that_does_not_fit_says_its_time_and_cost_are_hypothetical(lang):
    s = STRINGS[lang]
    fits = view.to_html(view.render_results(_plan({}), lang, s))
    too_big = view.to_html(
        view.render_results(_plan({"model": "llama-3.1-70b", "method": "full"}), lang, s)
    )
    note = view.to_html(["p", {}, s["ui"]["not_fit_note"]])[3:-4]
    assert note not in fits and note in too_big


@pytest.mark.parametrize("lang", ["es", "en"])
def test_one_unsharded_card_reads_no_sharding(lang):
    s = STRINGS[lang]
    html = view.to_html(view.render_results(_plan({}), lang, s))
    assert f"× 1 · {s['enums']['sharding']['none']}" in html


@pytest.mark.parametrize("lang", ["es", "en"])
def test_a_card_too_small_shows_the_gib_it_lacks_not_a_negative_share(lang):
    response = _plan({"model": "llama-3.1-70b", "method": "full"})
    s = STRINGS[lang]
    html = view.to_html(view.render_results(response, lang, s))
    small = [g for g, f in response["fits"].items() if f["headroom_bytes"] < 0]
    assert small
    for gpu in small:
        lacking = -response["fits"][gpu]["headroom_bytes"] / view.GIB
        assert s["units"]["short_gib"].replace("{}", view.format_number(lacking, 1, lang)) in html
    assert not re.search(r">-\d[\d\s\u202f.,]*\s?%<", html)


@pytest.mark.parametrize("lang", ["es", "en"])
def test_fractions_shown_as_percentages_drop_the_typing_hint(lang):
    """MFU and multi-GPU efficiency are typed as 0–1 but shown as percentages; the result
    rows name them without "(0–1)"."""
    s = STRINGS[lang]
    response = _plan({"num_gpus": 2, "sharding": "zero3"})
    html = view.to_html(view.render_results(response, lang, s))
    factors = response["time"]["factors"]
    for key in ("mfu", "scaling_efficiency"):
        shown = view.format_value(key, factors[key], lang, s)
        assert shown.endswith("%") and shown in html
        assert s["labels"][key + "_shown"] in html and "0–1" not in s["labels"][key + "_shown"]


# ---------------------------------------------------------------- verdict


@pytest.mark.parametrize(
    ("value", "unit", "lang", "expected"),
    [
        (33.0936, "usd", "en", "33 USD"),
        (33.0936, "usd", "es", "33 USD"),
        (1234.5, "usd", "en", "1,200 USD"),
        (0.437, "usd", "es", "0,44 USD"),
        (20.139, "hours", "en", "20 h"),
        (9.24, "hours", "es", "9,2 h"),
        (0, "usd", "en", "0 USD"),
    ],
)
def test_estimates_show_two_significant_figures(value, unit, lang, expected):
    assert view.format_estimate(value, unit, lang, STRINGS[lang]) == expected


def _verdict_text(result: dict, lang: str) -> str:
    strings = dict(STRINGS[lang], gpus={"rtx-4090": "RTX 4090", "l40s": "L40S"})
    node = view.Renderer(result, lang, strings).verdict()
    return re.sub(r"<[^>]+>", "", view.to_html(node))


def test_verdict_line_names_the_card_and_answers_first():
    request = dict(calculator.default_request(), gpu="l40s")
    result = calc.run("plan", request)["result"]
    tree = view.render_results(result, "en", STRINGS["en"])
    assert tree[2][1]["class"].startswith("calc-verdict")  # first child of the results
    text = _verdict_text(result, "en")
    fit = result["fits"]["l40s"]
    low, high = (view.format_number(b / view.GIB, 1, "en") for b in fit["device_range_bytes"])
    assert text.startswith(f"1 × L40S: fits ({low}–{high} of ")  # the range the verdict judged
    cost = view.format_estimate(result["cost_usd"]["total"], "usd", "en", STRINGS["en"])
    # then what it assumes: method, precision, library and data, as calc used them
    assert text.endswith(
        f" · {cost} · LoRA · pure bf16 · library: Hugging Face Trainer · 2,048 tokens per sequence"
    )
    assert "margin" not in text  # no margin set: none named


@pytest.mark.parametrize(
    ("extra", "lang", "expected"),
    [
        (
            {"length_stats": {"mean": 900, "p90": 2000}},
            "en",
            "samples of 900 tokens on average, each batch padded to its longest (up to 2,048)",
        ),
        (
            {"length_stats": {"mean": 700, "p90": 1500, "max": 1800}, "seq_len": 4096},
            "es",
            "muestras de 700 tokens de media, cada lote rellenado hasta su muestra más larga"
            " (hasta 1800)",
        ),
        (
            {"length_stats": {"mean": 900}, "batching": "pad-max"},
            "en",
            "samples of 900 tokens on average, each padded to 2,048",
        ),
        (
            {"length_stats": {"mean": 900}, "batching": "packed"},
            "en",
            "samples packed into rows of 2,048 tokens",
        ),
    ],
)
def test_verdict_line_with_a_length_distribution_names_the_data_not_the_cap(extra, lang, expected):
    """With length_stats the line says what calc drew: the reader's mean and the padded length
    of the longest micro-batch, not seq_len (a cap no sample may reach: 4096 here, the
    longest 1800)."""
    request = dict(calculator.default_request(), gpu="l40s", **extra)
    text = _verdict_text(calc.run("plan", request)["result"], lang)
    assert text.endswith(" · " + expected)
    assert "4096" not in text and "4,096" not in text


def test_verdict_line_with_padding_free_batching_names_the_longest_row():
    """Padding-free batching puts a micro-batch's samples end to end in one row: the line says
    so, and gives the longest row (the memory peak's), not a padded sample length."""
    request = dict(
        calculator.default_request(),
        gpu="l40s",
        micro_batch_size=4,
        length_stats={"mean": 900, "p90": 2000},
        batching="padding-free",
    )
    result = calc.run("plan", request)["result"]
    row = result["memory"]["data"]["peak_batch_tokens"]
    assert row > result["memory"]["data"]["peak_sample_tokens"]
    for lang, expected in (
        ("en", "samples of 900 tokens on average, each batch's samples end to end in one row,"),
        ("es", "muestras de 900 tokens de media, las de cada lote seguidas en una sola fila,"),
    ):
        text = _verdict_text(result, lang)
        assert " · " + expected in text
        assert text.endswith(view.format_number(row, 0, lang) + " tokens)")
        assert "rellenado hasta" not in text and "padded to its longest" not in text


def test_verdict_line_names_the_margin_only_when_set():
    request = dict(calculator.default_request(), gpu="l40s", safety_margin=0.1)
    text = _verdict_text(calc.run("plan", request)["result"], "en")
    assert "with your 10.0% margin" in text


@pytest.mark.parametrize(
    ("fits", "without_margin", "engine", "expected"),
    [
        (True, True, None, "fits"),
        (False, True, None, "borderline"),  # fits only without the safety margin
        (False, False, None, "does_not_fit"),
        (True, True, "borderline", "borderline"),  # the engine's calibrated verdict wins
        (False, False, "fits", "fits"),
        (True, True, "not-a-verdict", "fits"),
    ],
)
def test_verdict_state_from_the_engine_else_from_the_booleans(
    fits, without_margin, engine, expected
):
    result = calc.run("plan", dict(calculator.default_request(), gpu="rtx-4090"))["result"]
    fit = result["fits"]["rtx-4090"]
    fit.update(fits=fits, fits_without_margin=without_margin)
    fit.pop("verdict", None)  # the engine's, when it has one
    if engine is not None:
        fit["verdict"] = engine
    renderer = view.Renderer(result, "es", STRINGS["es"])
    assert renderer.verdict_state() == expected
    assert STRINGS["es"]["ui"]["verdict_" + expected] in _verdict_text(result, "es")


# ---------------------------------------------------------------- recommendations


def test_recommendations_show_one_row_per_card_with_equal_shardings_merged():
    ranked = [
        {"gpu": "a", "num_gpus": 2, "sharding": "ddp", "time_hours": 10.01, "cost_usd": 20.02},
        {"gpu": "a", "num_gpus": 2, "sharding": "zero2", "time_hours": 10.04, "cost_usd": 20.04},
        {"gpu": "b", "num_gpus": 1, "sharding": "none", "time_hours": 12.0, "cost_usd": 21.0},
        {"gpu": "a", "num_gpus": 2, "sharding": "zero3", "time_hours": 14.0, "cost_usd": 28.0},
        {"gpu": "a", "num_gpus": 4, "sharding": "ddp", "time_hours": 10.0, "cost_usd": 20.0},
    ]
    rows = view.Renderer.best_per_card(ranked)
    assert [(c["gpu"], same) for c, same in rows] == [("a", ["ddp", "zero2"]), ("b", ["none"])]


def test_ranking_tables_have_one_row_per_card_and_a_cuda_filter():
    request = dict(calculator.default_request(), gpu="mi300x", method="qlora")
    result = calc.run("plan", request)["result"]
    strings = dict(STRINGS["en"], gpu_stacks={"mi300x": "rocm", "mi250x": "rocm"})
    html = view.to_html(view.Renderer(result, "en", strings).recommendations())
    assert 'class="calc-cuda-only-box"' in html
    for table in re.findall(r"<tbody>(.*?)</tbody>", html):
        cards = re.findall(r'<tr data-stack="(\w+)"><td>.*?</td><td>(.*?) ×', table)
        assert len({name for _, name in cards}) == len(cards) > 0
    assert 'data-stack="rocm"' in html


# ---------------------------------------------------------------- one verdict everywhere

# Models around the 24, 48 and 80 GB boundaries, every method, cards of three classes: the
# grid holds each verdict state (checked below), so every agreement is tested on each.
VERDICT_GRID = [
    (model, method, gpu)
    for model in ("qwen3-4b", "llama-3.1-8b", "qwen3-14b")
    for method in ("full", "lora", "qlora")
    for gpu in ("rtx-4090", "l40s", "h100-sxm")
]
WORDS = {
    lang: {
        state: STRINGS[lang]["ui"]["verdict_" + state]
        for state in ("fits", "borderline", "does_not_fit")
    }
    for lang in ("es", "en")
}


def _walk(node):
    if isinstance(node, list):
        yield node
        for child in node[2:]:
            yield from _walk(child)


def _text(node) -> str:
    return node if isinstance(node, str) else "".join(_text(c) for c in node[2:])


def _find(tree, pred):
    return [n for n in _walk(tree) if isinstance(n[1], dict) and pred(n[1])]


def _grid_plan(model, method, gpu, **more):
    request = dict(calculator.default_request(), model=model, method=method, gpu=gpu, **more)
    request["precision"] = calculator.METHOD_DEFAULTS["precision"][method]
    return calc.run("plan", request)["result"]


def test_the_grid_holds_every_verdict():
    states = {_grid_plan(*cell)["fits"][cell[2]]["verdict"] for cell in VERDICT_GRID}
    assert states == {"fits", "borderline", "does_not_fit"}


@pytest.mark.parametrize(("model", "method", "gpu"), VERDICT_GRID)
def test_headline_body_cards_table_and_solvers_say_one_verdict(model, method, gpu):
    """The headline, the "fits the chosen card?" figure, the notes and warnings of the body,
    the cards table's row of the chosen card and the max micro-batch all say the verdict
    calc's plan gives the chosen card, in both languages; no margin is named when none is set."""
    result = _grid_plan(model, method, gpu)
    state = result["fits"][gpu]["verdict"]
    mb = result["memory"]["request"]["micro_batch_size"]
    for lang in ("es", "en"):
        tree = view.render_results(result, lang, STRINGS[lang])
        words = WORDS[lang]
        headline = _find(tree, lambda a: "calc-verdict" in a.get("class", "").split())
        assert [h[1]["data-verdict"] for h in headline] == [state]
        word = _find(headline[0], lambda a: a.get("class") == "calc-verdict-word")
        assert _text(word[0]) == words[state]
        kpi = _find(tree, lambda a: a.get("data-output") == "fits_selected_gpu")
        assert [_text(k) for k in kpi] == [words[state]]
        row = _find(tree, lambda a: a.get("data-output") == f"fits.{gpu}.fits")
        assert [r[1]["data-verdict"] for r in row] == [state] and _text(row[0]) == words[state]
        # the body: the note under the plan and the warning say the same state
        codes = result["warnings"]
        assert ("does_not_fit_selected_gpu" in codes) == (state == "does_not_fit")
        assert ("borderline_selected_gpu" in codes) == (state == "borderline")
        notes = _find(tree, lambda a: "calc-not-fit-note" in a.get("class", ""))
        expected_note = {
            "fits": [],
            "borderline": [STRINGS[lang]["ui"]["borderline_note"]],
            "does_not_fit": [STRINGS[lang]["ui"]["not_fit_note"]],
        }[state]
        assert [_text(n) for n in notes] == expected_note
        # the max micro-batch agrees with the request's own micro-batch
        solver = result["solvers"]["max_micro_batch_size"]
        fits_up_to = solver["value"] if solver["found"] else 0
        possible_up_to = solver.get("borderline_value", fits_up_to)
        assert (fits_up_to >= mb) == (state == "fits")
        assert (possible_up_to >= mb) == (state != "does_not_fit")
        label = view.label("solver_max_micro_batch_size", STRINGS[lang])
        kpi = [
            k for k in _find(tree, lambda a: a.get("class") == "calc-kpi") if _text(k[2]) == label
        ]
        shown = _text(kpi[0][3])
        assert (STRINGS[lang]["ui"]["not_found"] in shown) == (possible_up_to == 0)
        # no "safety margin" wording: the margin is 0
        text = _text(tree).lower()
        assert "margen de seguridad" not in text and "safety margin" not in text


@pytest.mark.parametrize(
    ("model", "method", "gpu"),
    [("llama-3.1-8b", "lora", "rtx-4090"), ("llama-3.1-8b", "full", "h100-sxm")],
)
def test_what_to_change_says_what_the_changed_setup_gets(model, method, gpu):
    """Each suggestion's verdict is the verdict calc gives the request with its changes
    applied (what the calculator shows after "apply")."""
    result = _grid_plan(model, method, gpu)
    assert result["suggestions"]
    base = dict(
        result["memory"]["request"],
        model=model,
        gpu=gpu,
        dataset_tokens=calculator.PAGE_DEFAULTS["dataset_tokens"],
    )
    base.pop("profile_keys", None)
    for item in result["suggestions"][:4]:
        applied = calc.run("plan", dict(base, **item["changes"]))["result"]
        assert item["verdict"] == applied["fits"][gpu]["verdict"], item["action"]
        assert item["fits"] == (item["verdict"] == "fits")


@pytest.mark.parametrize(
    ("model", "method", "gpu"),
    [("llama-3.1-8b", "lora", "rtx-4090"), ("qwen3-4b", "full", "l40s")],
)
def test_judged_on_min_device_the_page_still_says_one_verdict(model, method, gpu, monkeypatch):
    """With every estimate judged on the replayed allocator's smallest card
    (``calc.memory.SIMULATED_VERDICT``), the headline, body, cards table and solvers still say
    one verdict, the memory section shows that figure and the cards table says it judged it."""
    from calc import memory

    monkeypatch.setattr(memory, "SIMULATED_VERDICT", True)
    test_headline_body_cards_table_and_solvers_say_one_verdict(model, method, gpu)
    result = _grid_plan(model, method, gpu)
    assert result["fits"][gpu]["verdict_basis"] == "min_device_bytes"
    for lang in ("es", "en"):
        tree = view.render_results(result, lang, STRINGS[lang])
        shown = _find(tree, lambda a: a.get("data-output") == "min_device_bytes")
        assert [s[1]["data-value"] for s in shown] == [
            view.raw_value(result["memory"]["min_device_bytes"])
        ]
        assert STRINGS[lang]["ui"]["verdict_basis_min_device"] in _text(tree)


def test_with_length_stats_the_smallest_card_is_shown_and_what_is_judged_is_said():
    """Switch off: the plan's own estimate shows min_device_bytes (length_stats), and the
    cards table says the range judged is the device total's."""
    result = _grid_plan("llama-3.1-8b", "lora", "rtx-4090", length_stats={"mean": 600, "p90": 1500})
    assert result["memory"]["verdict_basis"] == "device_total_bytes"
    tree = view.render_results(result, "en", STRINGS["en"])
    shown = _find(tree, lambda a: a.get("data-output") == "min_device_bytes")
    assert [s[1]["data-value"] for s in shown] == [
        view.raw_value(result["memory"]["min_device_bytes"])
    ]
    text = _text(tree)
    assert STRINGS["en"]["ui"]["verdict_basis_device_total"] in text
    assert STRINGS["en"]["ui"]["verdict_basis_min_device"] not in text
    plain = view.render_results(_grid_plan("llama-3.1-8b", "lora", "rtx-4090"), "en", STRINGS["en"])
    assert STRINGS["en"]["ui"]["verdict_basis_device_total"] not in _text(plain)


def test_the_reported_contradictions_are_gone():
    """Llama 3.1 8B LoRA on an RTX 4090: borderline in the headline, the body, the cards
    table and the max micro-batch (not "does not fit ... even with 1")."""
    result = _grid_plan("llama-3.1-8b", "lora", "rtx-4090")
    assert result["fits"]["rtx-4090"]["verdict"] == "borderline"
    tree = view.render_results(result, "es", STRINGS["es"])
    text = _text(tree)
    assert "no cabe ni con 1" not in text
    assert "al límite hasta" in text
    assert "No cabe en la tarjeta elegida" not in text


# ---------------------------------------------------------------- prices and stacks


def _plan_view(lang: str = "en", **changes):
    from calc.gpus import gpus_listing

    request = dict(calculator.default_request(), **changes)
    result = calc.run("plan", request)["result"]
    strings = calculator.results_strings(lang, gpus_listing()["gpus"])
    return result, view.Renderer(result, lang, strings)


@pytest.mark.parametrize("lang", ["es", "en"])
def test_a_card_without_rental_price_shows_no_rental_price_instead_of_a_cost(lang):
    result, r = _plan_view(lang, gpu="rtx-4060-ti-16gb", method="qlora")
    assert result["cost_usd"]["priced"] is False
    words = STRINGS[lang]["ui"]["no_rental_price"]
    unit = STRINGS[lang]["units"]["usd"].replace("{}", "")
    verdict = view.to_html(r.verdict())
    assert words in verdict and unit.strip() not in verdict
    summary = view.to_html(r.plan_summary())
    for path in ("cost_usd.total", "cost_usd.final_run", "cost_usd.per_hour", "cost_usd.per_month"):
        cell = re.search(rf'data-output="{re.escape(path)}"[^>]*>([^<]*)<', summary)
        assert cell and cell.group(1) == words, path
    # in the rankings, every unpriced configuration's cost and hourly rate are words
    html = view.to_html(r.recommendations())
    configs = result["recommendations"]["configs"]
    unpriced = [i for i, c in enumerate(configs) if not c["priced"]]
    assert unpriced
    for i in unpriced:
        for key in ("cost_usd", "per_hour_usd"):
            for text in re.findall(
                rf'data-output="recommendations\.configs\.{i}\.{key}"[^>]*>([^<]*)<', html
            ):
                assert text == words
    # a priced card shows its cost
    _, priced = _plan_view(lang, gpu="rtx-4090", method="qlora")
    assert words not in view.to_html(priced.verdict())


def test_recommendations_name_cheapest_and_fastest_per_stack_and_rank_within_the_stack():
    result, r = _plan_view("en", model="llama-3.1-8b", method="lora")
    rec = result["recommendations"]
    assert {c["stack"] for c in rec["configs"]} == {"cuda", "rocm"}
    html = view.to_html(r.recommendations())
    picks = re.findall(r'<li data-pick="(\w+)" data-stack="(\w+)"><strong>([^<]*)</strong>', html)
    assert ("cheapest", "cuda", "Cheapest · CUDA (NVIDIA): ") in picks
    assert ("fastest", "rocm", "Fastest · ROCm (AMD): ") in picks
    assert all(stack in ("cuda", "rocm") for _, stack, _ in picks)
    # the CUDA line names the CUDA pick
    cuda_cheapest = next(
        c for c in rec["configs"] if c["id"] == rec["by_stack"]["cuda"]["cheapest"]
    )
    line = re.search(r'<li data-pick="cheapest" data-stack="cuda">(.*?)</li>', html).group(1)
    assert r.config_text(cuda_cheapest) in line
    # each table's CUDA rows carry their rank within CUDA: 1, then increasing
    for table in re.findall(r"<tbody>(.*?)</tbody>", html):
        ranks = [
            int(x)
            for x in re.findall(
                r'<tr data-stack="cuda"[^>]*><td><span>.*?calc-rank-stack"[^>]*>(\d+)<', table
            )
        ]
        assert ranks and ranks[0] == 1 and ranks == sorted(ranks)


def _calculator_page(lang):
    from calc.gpus import gpus_listing
    from calc.presets import presets_listing

    return calculator.calculator_html(
        lang,
        {k: k for k in calculator.URL_KEYS},
        presets_listing(),
        gpus_listing()["gpus"],
    )


def _picker_groups(html):
    select = re.search(r'<select id="calc-model-pick"[^>]*>(.*?)</select>', html, re.S).group(1)
    return [
        (label, re.findall(r'<option value="([^"]+)"', body))
        for label, body in re.findall(r'<optgroup label="([^"]+)">(.*?)</optgroup>', select, re.S)
    ]


@pytest.mark.parametrize("lang", ["es", "en"])
def test_the_model_list_is_grouped_by_family_newest_first(lang):
    from calc import reference
    from calc.catalogue import catalogue
    from calc.presets import presets_listing

    html = _calculator_page(lang)
    rows = {p["id"]: p for p in presets_listing()}
    groups = _picker_groups(html)
    # every preset once, under its family's display name from the catalogue
    assert sorted(i for _, ids in groups for i in ids) == sorted(rows)
    for label, ids in groups:
        assert {rows[i]["series"] for i in ids} == {rows[ids[0]]["series"]}
        assert label == catalogue(lang).message("ui.family." + rows[ids[0]]["series"]), label
    # families by their newest release, newest first
    newest = [max(rows[i]["released"] for i in ids) for _, ids in groups]
    assert newest == sorted(newest, reverse=True)
    # within a family: newest release first, then by size
    for _, ids in groups:
        keys = [(rows[i]["released"], -rows[i]["params_total"]) for i in ids]
        assert keys == sorted(keys, reverse=True), ids
    qwen = dict(groups)[catalogue(lang).message("ui.family.qwen")]
    assert qwen[:4] == ["qwen3.6-27b", "qwen3.5-4b", "qwen3.5-9b", "qwen3.5-35b-a3b"]
    assert qwen.index("qwen3-0.6b") < qwen.index("qwen3-8b") < qwen.index("qwen3-235b-a22b")
    assert qwen.index("qwen3-next-80b-a3b") < qwen.index("qwen3-0.6b")  # 2025-09 before 2025-04
    # the picker has no name (the model field alone is the request's and the URL's); the
    # page's model is the one shown
    assert re.search(r'<select id="calc-model-pick"[^>]*\bname=', html) is None
    assert re.search(rf'<option value="{reference.MODELS["small"]}" selected', html)
    # the type-ahead list keeps every preset id as its value, in the same order
    datalist = re.search(r'<datalist id="calc-model-list">(.*?)</datalist>', html, re.S).group(1)
    assert re.findall(r'<option value="([^"]+)"', datalist) == [i for _, ids in groups for i in ids]


@pytest.mark.parametrize("lang", ["es", "en"])
def test_mfu_names_the_achieved_utilisation_only(lang):
    """ "MFU" is the step's achieved share of the peak (effective utilisation, 36 % on an L40S),
    never the fitted large-step matmul efficiency beside it (1.0 for GDDR cards): a row reading
    "MFU 100 %" next to "effective utilisation 36 %" contradicts itself."""
    response = _plan({})
    html = view.to_html(view.render_results(response, lang, STRINGS[lang]))

    def row_label(path: str) -> str:
        found = re.search(
            r'<th scope="row">([^<]*)</th><td><span class="calc-num" data-output="'
            + re.escape(path)
            + '"',
            html,
        )
        assert found, path
        return found.group(1)

    factors = response["time"]["factors"]
    assert factors["mfu"] > factors["effective_utilisation"]
    assert "MFU" in row_label("time.factors.effective_utilisation")
    assert "MFU" not in row_label("time.factors.mfu")


@pytest.mark.parametrize("lang", ["es", "en"])
def test_an_owned_card_is_priced_as_electricity_in_the_result(lang):
    """The verdict line says the cost is electricity; the price row names the board power and
    the price per kWh; the board power field shows the catalogue's figure as its placeholder
    and the price field none (an owned card has no rate to type)."""
    response, renderer = _plan_view(lang, owned=True, electricity_price_per_kwh=0.2)
    html = view.to_html(renderer.render())
    ui = renderer.s["ui"]
    verdict = html[html.index("calc-verdict") : html.index("</p>", html.index("calc-verdict"))]
    assert ui["cost_electricity"] in verdict
    assert renderer.electricity_text(response["cost_usd"]["price"]) in html
    assert "350" in renderer.electricity_text(response["cost_usd"]["price"])  # the L40S's
    defaults = renderer.defaults_used()
    assert defaults["board_power_w"] == "350.0" and "price_per_gpu_hour" not in defaults
    _, rented = _plan_view(lang)
    assert ui["cost_electricity"] not in view.to_html(rented.render())


def test_tables_that_scroll_sideways_are_named_regions_a_keyboard_can_reach():
    """On a phone the result's wide tables scroll in their box: each box is focusable (so the
    keyboard scrolls it, axe's scrollable-region-focusable) and named."""
    _, renderer = _plan_view("es", gpu="rtx-3090")
    html = view.to_html(renderer.render())
    boxes = re.findall(r'<div class="calc-table-wrap"[^>]*>', html)
    assert len(boxes) >= 3
    for box in boxes:
        assert 'role="region"' in box and 'tabindex="0"' in box
        assert re.search(r'aria-label="[^"]+"', box), box


def test_the_multi_node_note_gives_the_rate_of_the_network_the_request_names():
    """Across servers the note quotes the rate the time used: the named network's, not the
    card's reference server's."""
    changes = {"gpu": "a100-80gb-sxm", "num_gpus": 16, "sharding": "zero3", "method": "full"}
    default = view.Renderer(_plan(changes), "en", STRINGS["en"]).multi_node_note()
    efa = view.Renderer(_plan({**changes, "network": "efa-400"}), "en", STRINGS["en"])
    # 8 x 200 Gb/s HDR: 200 GB/s per server; 400 Gb/s of EFA: 50; both at LINK_EFFICIENCY
    assert "150 GB/s" in default[2] and "38 GB/s" in efa.multi_node_note()[2]


@pytest.mark.parametrize("lang", ["es", "en"])
def test_a_power_limit_shows_the_clock_it_leaves_the_card(lang):
    """With ``power_limit_w`` the time section says the clock the time was priced at, and the
    limit beside it; without one, no such row (the catalogue's clock is on the GPU page)."""
    response, renderer = _plan_view(lang, gpu="h100-sxm", power_limit_w=500)
    outputs = dict(tree_outputs(renderer.render()))
    assert outputs["time.sustained_clock_mhz"] == str(response["time"]["sustained_clock_mhz"])
    assert response["time"]["sustained_clock_mhz"] == 1636
    html = view.to_html(renderer.render())
    note = str(renderer.s["ui"]["power_limit_note"]).replace("{}", "500")
    assert "MHz" in html and note in html
    _, free = _plan_view(lang, gpu="h100-sxm")
    assert "time.sustained_clock_mhz" not in dict(tree_outputs(free.render()))


@pytest.mark.parametrize("command", ["plan", "estimate"])
def test_the_replayed_reserved_peak_is_shown_beside_the_fitted_one(command):
    """With ``length_stats`` the memory section shows the allocator's replayed reserved peak
    (``allocator.simulated_reserved_bytes``, which fragmentation over the data's steps can take
    far above ``peak_reserved_bytes``) as its own figure: "coming" in the deferred answer, the
    response's value once replayed, and nothing without a length distribution."""
    from calc_view.session import Session

    request = {"model": "qwen2.5-0.5b", "micro_batch_size": 4, "seq_len": 1024}
    request["length_stats"] = {"mean": 468, "max": 1022}
    if command == "plan":
        request.update(gpu="rtx-4090", dataset_tokens=1e7)
    session = Session("en", STRINGS["en"])
    quick = json.loads(session.handle(command, json.dumps(request), True))
    assert '"data-pending": "simulated_reserved_bytes"' in json.dumps(quick["view"])
    done = json.loads(session.complete())
    result = done["result"]
    memory = result["memory"] if command == "plan" else result
    replayed = memory["allocator"]["simulated_reserved_bytes"]
    assert replayed > memory["peak_reserved_bytes"]  # this setup fragments
    tree = view.render_results(result, "en", STRINGS["en"])
    shown = _find(tree, lambda a: a.get("data-output") == "allocator.simulated_reserved_bytes")
    assert [s[1]["data-value"] for s in shown] == [view.raw_value(replayed)]
    assert STRINGS["en"]["labels"]["simulated_reserved_bytes"] in _text(tree)
    plain = {k: v for k, v in request.items() if k != "length_stats"}
    out = json.loads(Session("en", STRINGS["en"]).handle(command, json.dumps(plain)))
    assert "simulated_reserved_bytes" not in json.dumps(out["view"])


@pytest.mark.parametrize("lang", ["en", "es"])
def test_a_smallest_card_that_is_a_bound_reads_at_most(lang):
    """Where the allocator walk's budget ran out before the exact threshold
    (``allocator.min_allocator_exact`` false), the smallest card is shown as "at most" that
    figure, with why in its title; where the walk is exact, as the figure alone. The figure
    itself (``data-output``, ``data-value``) is the response's either way."""
    request = {"model": "llama-3.1-8b", "length_stats": {"mean": 900, "p90": 2000}}
    bounded = calc.run("estimate", request)["result"]
    assert bounded["allocator"]["min_allocator_exact"] is False
    exact = json.loads(json.dumps(bounded))
    exact["allocator"]["min_allocator_exact"] = True
    ui = STRINGS[lang]["ui"]
    for result, marked in ((bounded, True), (exact, False)):
        tree = view.render_results(result, lang, STRINGS[lang])
        shown = _find(tree, lambda a: a.get("data-output") == "min_device_bytes")
        assert [s[1]["data-value"] for s in shown] == [view.raw_value(result["min_device_bytes"])]
        marks = _find(tree, lambda a: a.get("data-bound") == "true")
        assert len(marks) == (1 if marked else 0)
        if marked:
            assert marks[0][1]["title"] == ui["walk_bound"]
            assert _text(marks[0]).startswith(ui["at_most"] + " ")
            assert shown[0] in marks[0]


@pytest.mark.parametrize("command", ["plan", "estimate"])
def test_the_workers_lean_answers_carry_the_view_and_whether_a_replay_follows(command):
    """The worker asks for lean answers: the results tree the page shows and whether the
    allocator's replay follows, without calc's response (the page reads nothing else of it).
    The tree is the full answer's, first and completed; errors come as they are."""
    from calc_view.session import Session

    request = {"model": "llama-3.2-1b", "length_stats": {"mean": 611, "p90": 1500}}
    if command == "plan":
        request.update(gpu="rtx-4090", dataset_tokens=1e7)
    text = json.dumps(request)
    full = Session("en", STRINGS["en"])
    lean = Session("en", STRINGS["en"])
    quick = json.loads(lean.handle(command, text, True, lean=True))
    assert quick == {"view": json.loads(full.handle(command, text, True))["view"], "pending": True}
    done = json.loads(lean.complete(lean=True))
    assert done == {"view": json.loads(full.complete())["view"], "pending": False}
    assert json.loads(lean.complete(lean=True)) == {"none": True}
    plain = json.dumps({k: v for k, v in request.items() if k != "length_stats"})
    assert json.loads(lean.handle(command, plain, True, lean=True)) == {
        "view": json.loads(full.handle(command, plain, True))["view"],
        "pending": False,
    }
    bad = json.dumps({**request, "seq_len": -1})
    assert json.loads(lean.handle(command, bad, lean=True)) == json.loads(full.handle(command, bad))


@pytest.mark.parametrize("command", ["plan", "estimate"])
def test_a_deferred_answer_then_its_replay_equal_the_whole_answer(command):
    """The page asks for the answer without the caching allocator's replay (``defer``), shows
    it, then asks the session to complete it: what it then shows is the whole answer, result
    and view, figure for figure; the first view says the figure is coming, not a number."""
    from calc_view.session import Session

    request = {"model": "llama-3.2-1b", "length_stats": {"mean": 611, "p90": 1500}}
    if command == "plan":
        request.update(gpu="rtx-4090", dataset_tokens=1e7)
    text = json.dumps(request)
    session = Session("en", STRINGS["en"])
    quick = json.loads(session.handle(command, text, True))
    memory = quick["result"]["memory"] if command == "plan" else quick["result"]
    assert memory["min_device_pending"] is True and "min_device_bytes" not in memory
    assert "data-pending" in json.dumps(quick["view"])
    done = json.loads(session.complete())
    whole = json.loads(Session("en", STRINGS["en"]).handle(command, text))
    assert done == whole
    assert json.loads(session.complete()) == {"none": True}  # once
    # a newer answer drops the replay of the one before
    session.handle(command, text, True)
    session.handle(command, json.dumps({**request, "seq_len": 4096}))
    assert json.loads(session.complete()) == {"none": True}
    # nothing to defer without a length distribution
    plain = {k: v for k, v in request.items() if k != "length_stats"}
    out = json.loads(session.handle(command, json.dumps(plain), True))
    assert "min_device_pending" not in json.dumps(out["result"])
    assert json.loads(session.complete()) == {"none": True}


def test_warming_a_session_leaves_its_answers_as_they_were():
    """``Session.warm`` (the worker's warm-up with the page's build-time request) answers and
    drops the answer: a deferred answer waiting for its replay still gets it, a warm-up of a
    request with lengths leaves no replay of its own, a bad request raises nothing, and the
    answers after it are those of a session never warmed."""
    from calc_view.session import Session

    request = {"model": "llama-3.2-1b", "gpu": "rtx-4090", "dataset_tokens": 1e7}
    lengths = {**request, "length_stats": {"mean": 611, "p90": 1500}}
    session = Session("en", STRINGS["en"])
    session.warm("plan", json.dumps(lengths))
    assert json.loads(session.complete()) == {"none": True}
    session.warm("plan", "{not json")
    session.warm("plan", json.dumps({**request, "seq_len": -1}))
    # a replay that waits survives a warm-up
    session.handle("plan", json.dumps(lengths), True)
    session.warm("plan", json.dumps(request))
    done = json.loads(session.complete())
    assert done == json.loads(Session("en", STRINGS["en"]).handle("plan", json.dumps(lengths)))
    assert json.loads(session.handle("plan", json.dumps(request))) == json.loads(
        Session("en", STRINGS["en"]).handle("plan", json.dumps(request))
    )


def test_warming_a_fresh_session_loads_the_replay_without_running_it():
    """In a fresh interpreter, ``Session.warm`` of a request without lengths leaves the caching
    allocator's replay imported (what a first request with ``length_stats`` would otherwise
    load while the reader waits), and no replay waiting."""
    script = (
        "import json, sys\n"
        "from calc_view.session import Session\n"
        "from macros import calculator\n"
        "s = Session('en', calculator.load_strings()['en'])\n"
        "assert 'calc.step_events' not in sys.modules\n"
        "s.warm('plan', json.dumps(calculator.default_request()))\n"
        "assert 'calc.step_events' in sys.modules\n"
        "assert json.loads(s.complete()) == {'none': True}\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
