"""The bad-input list (``tests/data/bad_inputs.json``) run against every way in: the CLI (its
JSON, and its one line on a terminal in the reader's language), the Python API
(``calc.estimate`` / ``calc.plan_setup``, and the worker's JSON entry ``calc_view.session``) and
the calculator's form (``form-state.js`` under Node builds the request from the URL, then
``calc.run`` answers it, as the page's worker does). Each case names the error (code, field,
value), the warning, or the values the response must echo; see the file's ``about``."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cli_run import run_main

import calc
from calc.errors import CalcError
from calc.request import parse_estimate_request
from conftest import REPO_ROOT

ROOT = REPO_ROOT
CASES = json.loads((ROOT / "tests" / "data" / "bad_inputs.json").read_text(encoding="utf-8"))[
    "cases"
]
BY_ID = {case["id"]: case for case in CASES}


def _ids(key: str) -> list[str]:
    return [case["id"] for case in CASES if key in case]


def _argv(case: dict, tmp_path: Path) -> list[str]:
    """The case's CLI words, ``{file}`` written with its ``file_text``."""
    path = tmp_path / "input.json"
    if "file_text" in case:
        path.write_text(case["file_text"], encoding="utf-8")
    return [case["command"], *(str(path) if a == "{file}" else a for a in case["argv"])]


def _request_text(case: dict) -> str:
    return case["request_text"] if "request_text" in case else json.dumps(case["request"])


def _check_response(case: dict, response: dict) -> None:
    """A response that must hold the case's warning or echo (no error)."""
    memory = response.get("memory", response)  # plan nests the estimate
    if "warning" in case:
        assert case["warning"] in response["warnings"], response["warnings"]
    for key, value in case.get("echo", {}).items():
        echoed = memory["request"][key]
        assert echoed == value and type(echoed) is type(value), (key, echoed)


def _check_error(case: dict, error: dict) -> None:
    want = case["error"]
    assert (error["code"], error["field"]) == (want["code"], want["field"]), error
    if "value" in want:
        assert error["value"] == want["value"], error


def test_the_list_is_whole():
    """Every case says what must come of it, and can be run somewhere."""
    assert len(CASES) >= 20 and len(BY_ID) == len(CASES)
    for case in CASES:
        assert sum(k in case for k in ("error", "warning", "echo")) == 1, case["id"]
        assert any(k in case for k in ("argv", "request", "request_text", "url")), case["id"]
        assert case["command"] in ("estimate", "plan", "import"), case["id"]


# --------------------------------------------------------------------- the CLI


@pytest.mark.parametrize("case_id", _ids("argv"))
def test_cli_flags_json(case_id, tmp_path):
    case = BY_ID[case_id]
    rc, out, err = run_main(_argv(case, tmp_path), tty=False)
    assert "Traceback" not in err
    if "error" in case:
        assert rc == 2
        _check_error(case, json.loads(out)["error"])
    else:
        assert rc == 0, err
        _check_response(case, json.loads(out))


@pytest.mark.parametrize("case_id", sorted(set(_ids("request")) | set(_ids("request_text"))))
def test_cli_request_json(case_id):
    case = BY_ID[case_id]
    rc, out, err = run_main(
        [case["command"], "--request", "-"], tty=False, stdin=_request_text(case).encode()
    )
    assert "Traceback" not in err
    if "error" in case:
        assert rc == 2
        _check_error(case, json.loads(out)["error"])
    else:
        assert rc == 0, err
        _check_response(case, json.loads(out))


@pytest.mark.parametrize("case_id", _ids("terminal"))
def test_cli_terminal_words(case_id, tmp_path):
    """On a terminal: an error is one line on stderr in the case's language, naming the value
    and what is accepted; a warning is in the table."""
    case = BY_ID[case_id]
    if "argv" in case:
        rc, out, err = run_main([*_argv(case, tmp_path), "--lang", case["lang"]], tty=True)
    else:
        rc, out, err = run_main(
            [case["command"], "--request", "-", "--lang", case["lang"]],
            tty=True,
            stdin=_request_text(case).encode(),
        )
    if "error" in case:
        assert rc == 2 and out == ""
        assert err.count("\n") == 1 and err.endswith("\n"), err
        assert err.startswith(f"error [{case['error']['code']}]: "), err
        text = err
    else:
        assert rc == 0 and err == ""
        text = out
    for words in case["terminal"]:
        assert words in text, (words, text)


# --------------------------------------------------------------------- the Python API


@pytest.mark.parametrize("case_id", _ids("request"))
def test_python_api(case_id):
    case = BY_ID[case_id]
    call = calc.estimate if case["command"] == "estimate" else calc.plan_setup
    if "error" in case:
        with pytest.raises(CalcError) as raised:
            call(case["request"])
        _check_error(case, raised.value.to_dict())
    else:
        _check_response(case, call(case["request"]))
    answer = calc.run(case["command"], case["request"])  # the worker's entry: never raises
    if "error" in case:
        _check_error(case, answer["error"])
    else:
        _check_response(case, answer["result"])


@pytest.mark.parametrize("case_id", sorted(set(_ids("request")) | set(_ids("request_text"))))
def test_worker_json_entry(case_id):
    """``calc_view.session``: the page's JSON text in, the answer out."""
    from calc_view.session import Session

    from macros.calculator import load_strings

    case = BY_ID[case_id]
    answer = json.loads(
        Session("en", load_strings()["en"]).handle(case["command"], _request_text(case))
    )
    if "error" in case:
        _check_error(case, answer["error"])
    else:
        _check_response(case, answer["result"])


# --------------------------------------------------------------------- the form


def _form_controls() -> list[dict]:
    """The page's form controls (macros/calculator.py) as plain objects, with their defaults."""
    from calc.gpus import gpus_listing
    from macros import calculator as page

    values = page.default_request()
    controls = []
    for key, spec in page.request_fields().items():
        name = page.input_kind(spec)
        page_default = page.PAGE_DEFAULTS.get(key, spec.default)
        dataset = {
            "kind": name,
            "default": "" if page_default is None else page.url_text(page_default),
        }
        if spec.percent:
            dataset["percent"] = "true"
        value = values.get(key)
        control = {
            "name": key,
            "tagName": "INPUT",
            "type": "text",
            "dataset": dataset,
            "options": [],
            "value": "" if value is None else page.url_text(value),
            "checked": False,
        }
        if name == "bool":
            control.update(type="checkbox", value="on", checked=bool(value))
        elif name == "enum":
            if key == "gpu":
                choices = [g["id"] for g in gpus_listing()["gpus"]]
            else:
                choices = list(spec.choices or ())
            control.update(tagName="SELECT", type=None, options=[{"value": c} for c in choices])
        controls.append(control)
    for name in ("examples", "example_tokens"):
        controls.append(
            {
                "name": name,
                "tagName": "INPUT",
                "type": "text",
                "value": "",
                "checked": False,
                "dataset": {"kind": "helper", "default": ""},
                "options": [],
            }
        )
    controls.append(
        {
            "name": "hf_config",
            "tagName": "TEXTAREA",
            "type": None,
            "value": "",
            "checked": False,
            "dataset": {"kind": "config"},
            "options": [],
        }
    )
    return controls


@pytest.fixture(scope="module")
def form_requests(tmp_path_factory) -> dict:
    """{case id: {request, errors}} as form-state.js builds them from each case's URL."""
    from macros import calculator as page

    node = shutil.which("node")
    assert node, "Node 20+ is required (README: requirements)"
    data = {
        "controls": _form_controls(),
        "profileKeys": list(page.profile_keys()),
        "lang": "en",
        "cases": [{"id": c["id"], "url": c["url"]} for c in CASES if "url" in c],
    }
    path = tmp_path_factory.mktemp("form") / "input.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    run = subprocess.run(
        [node, str(ROOT / "tests" / "js" / "form_requests.mjs"), str(path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return json.loads(run.stdout)


@pytest.mark.parametrize("case_id", _ids("url"))
def test_calculator_form(case_id, form_requests):
    """The form's request for the URL, answered by calc as the worker answers it; an error the
    form finds itself (a config that is not JSON, or names a key twice) comes first."""
    from macros import calculator as page

    case = BY_ID[case_id]
    built = form_requests[case_id]
    if built["errors"]:
        _check_error(case, next(iter(built["errors"].values())))
        return
    answer = calc.run(page.COMMAND, built["request"])
    if "error" in case:
        _check_error(case, answer["error"])
    else:
        _check_response(case, answer["result"])


def test_a_rank_at_the_hidden_size_and_a_dataset_of_one_step_warn_of_nothing():
    """The two warnings start just past their limits."""
    base = {
        "model": "llama-3.1-8b",
        "gpu": "l4",
        "seq_len": 1024,
        "micro_batch_size": 2,
        "gradient_accumulation_steps": 4,
    }
    assert (
        "lora_rank_above_hidden"
        not in calc.estimate({"model": "llama-3.1-8b", "lora_rank": 4096})["warnings"]
    )
    assert (
        "lora_rank_above_hidden"
        in calc.estimate({"model": "llama-3.1-8b", "lora_rank": 4097})["warnings"]
    )
    assert (
        "lora_rank_above_hidden"
        not in calc.estimate({"model": "llama-3.1-8b", "method": "full", "lora_rank": 65536})[
            "warnings"
        ]
    )
    assert (
        "dataset_tokens_below_one_step"
        not in calc.plan_setup({**base, "dataset_tokens": 8192})["warnings"]
    )
    assert (
        "dataset_tokens_below_one_step"
        in calc.plan_setup({**base, "dataset_tokens": 8191})["warnings"]
    )


def test_fsdp1_and_fsdp2_together_is_a_coded_error():
    """FSDP1's flat parameters and FSDP2's fully_shard: a loop runs one of them."""
    out = calc.run(
        "estimate",
        {
            "model": "llama-2-7b",
            "num_gpus": 8,
            "sharding": "zero3",
            "fsdp_flat_parameters": True,
            "fsdp_fully_shard": True,
        },
    )
    assert (out["error"]["code"], out["error"]["field"]) == (
        "fsdp_versions_conflict",
        "fsdp_fully_shard",
    )


@pytest.mark.parametrize(
    ("framework", "given", "profile_key"),
    [
        ("torchtune", "fsdp_flat_parameters", "fsdp_fully_shard"),
        ("litgpt", "fsdp_fully_shard", "fsdp_flat_parameters"),
    ],
)
def test_profile_fsdp_version_yields_to_the_one_the_request_names(framework, given, profile_key):
    """A profile's FSDP version is its default, not a second choice: the request's own wins
    (CI's schema property test drew torchtune with fsdp_flat_parameters)."""
    request = {"model": "llama-2-7b", "num_gpus": 2, "sharding": "zero3", "framework": framework}
    assert parse_estimate_request(request).to_dict()[profile_key] is True
    parsed = parse_estimate_request({**request, given: True}).to_dict()
    assert (parsed[given], parsed[profile_key]) == (True, False)
