"""The linters that scripts/test.sh runs (scripts/lint.sh, once each, on the whole tree):
their settings cover the tree, and each one fails on a file broken on purpose, so a
configuration that lints nothing cannot pass.

ruff and mypy read their settings from pyproject.toml, eslint from eslint.config.mjs; the
broken files are linted with those same settings (eslint through --stdin-filename, as if
the file sat at a path its globs cover).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO_ROOT

RUFF = [sys.executable, "-m", "ruff"]
MYPY = [sys.executable, "-m", "mypy"]
ESLINT = REPO_ROOT / "node_modules" / ".bin" / "eslint"


def run(cmd: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, cwd=REPO_ROOT, input=stdin, capture_output=True, text=True, timeout=300
    )


def eslint(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert ESLINT.exists(), "ESLint is not installed: run scripts/setup.sh (npm ci)"
    return run([str(ESLINT), *args], stdin)


def eslint_messages(source: str, as_path: str) -> list[dict[str, object]]:
    """ESLint's findings for ``source`` linted as if it were the file ``as_path``."""
    out = eslint("--format", "json", "--stdin", "--stdin-filename", as_path, stdin=source)
    assert out.returncode in (0, 1), out.stderr
    messages: list[dict[str, object]] = json.loads(out.stdout)[0]["messages"]
    return messages


# --- the configuration covers the tree ---------------------------------------------------
# scripts/lint.sh runs each linter once on the whole tree (scripts/test.sh runs it before
# pytest); these checks only make sure its settings leave nothing out.


def _pyproject() -> dict:
    import tomllib

    with (REPO_ROOT / "pyproject.toml").open("rb") as f:
        return tomllib.load(f)


def test_mypy_checks_every_package_that_runs_in_the_browser_strictly():
    mypy = _pyproject()["tool"]["mypy"]
    # calc (subpackages included: mypy walks a package) and calc_view run in Pyodide
    assert {"calc", "calc_view"} <= set(mypy["packages"])
    assert mypy["strict"] is True and mypy["warn_unreachable"] is True
    assert "exclude" not in mypy and "overrides" not in mypy


def test_ruff_format_fails_on_a_file_it_would_rewrite(tmp_path: Path):
    path = tmp_path / "layout.py"
    path.write_text("x = {'a':1}\n")
    out = run([*RUFF, "format", "--check", str(path)])
    assert out.returncode == 1 and "would be reformatted" in out.stdout, out.stdout + out.stderr
    path.write_text('x = {"a": 1}\n')
    assert run([*RUFF, "format", "--check", str(path)]).returncode == 0


def test_ruff_format_shares_ruff_checks_settings():
    ruff = _pyproject()["tool"]["ruff"]
    assert "line-length" in ruff  # one length for `ruff check` and `ruff format`
    assert "line-length" not in ruff.get("format", {})


ESLINT_IGNORED_JS = """
import { ESLint } from "eslint";
const eslint = new ESLint();
const files = JSON.parse(process.argv[1]);
const ignored = [];
for (const f of files) if (await eslint.isPathIgnored(f)) ignored.push(f);
console.log(JSON.stringify(ignored));
"""


def test_eslint_lints_every_javascript_file_of_the_repository():
    # no ignore pattern swallows a project file: the page, workers, hooks, Node tests
    tracked = subprocess.run(
        ["git", "ls-files", "*.js", "*.mjs"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert tracked
    out = run(["node", "--input-type=module", "-e", ESLINT_IGNORED_JS, json.dumps(tracked)])
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == []


# --- each linter catches a broken file ---------------------------------------------------


@pytest.mark.parametrize(
    "source, code",
    [
        pytest.param("import os\n", "F401", id="unused-import"),
        # bugbear (B023) is in the rule set, not only pyflakes
        pytest.param(
            "fs = []\nfor i in range(3):\n    fs.append(lambda: i)\n",
            "B023",
            id="loop-variable-closure",
        ),
        # a suppression left after its finding went away is itself a finding (RUF100)
        pytest.param("import os  # noqa: F401\n\nprint(os.sep)\n", "RUF100", id="stale-noqa"),
    ],
)
def test_ruff_fails_on_a_broken_file(tmp_path: Path, source: str, code: str):
    bad = tmp_path / "bad.py"
    bad.write_text(source, encoding="utf-8")
    out = run(
        [*RUFF, "check", "--config", str(REPO_ROOT / "pyproject.toml"), "--no-cache", str(bad)]
    )
    assert out.returncode == 1
    assert code in out.stdout


def test_mypy_is_strict(tmp_path: Path):
    # an unannotated function passes plain mypy; the project's settings reject it
    bad = tmp_path / "bad.py"
    bad.write_text("def double(x):\n    return 2 * x\n", encoding="utf-8")
    out = run(
        [*MYPY, "--config-file", str(REPO_ROOT / "pyproject.toml"), "--no-incremental", str(bad)]
    )
    assert out.returncode == 1
    assert "[no-untyped-def]" in out.stdout


@pytest.mark.parametrize(
    "path",
    [
        "docs/assets/calculator/_probe.js",  # a new front-end module
        "hooks/_probe.mjs",
        "tests/js/_probe.test.mjs",
    ],
)
def test_eslint_fails_on_an_unused_variable(path: str):
    messages = eslint_messages("const unused = 1;\nexport {};\n", path)
    assert [m["ruleId"] for m in messages] == ["no-unused-vars"]


@pytest.mark.parametrize(
    ("path", "defined", "undefined"),
    [
        # the page has `document`, not Node's `process`
        ("docs/assets/calculator/_probe.js", "document", "process"),
        # a worker has `importScripts`, not `document`
        ("docs/assets/calculator/worker.js", "importScripts", "document"),
        # Node has `process`, not `document`
        ("hooks/_probe.mjs", "process", "document"),
    ],
)
def test_eslint_globals_follow_where_the_file_runs(path: str, defined: str, undefined: str):
    source = f"export const a = typeof {defined};\nexport const b = {undefined};\n"
    messages = eslint_messages(source, path)
    assert [(m["ruleId"], m["line"]) for m in messages] == [("no-undef", 2)]


# --- the linters are pinned ---------------------------------------------------------------


def test_eslint_pinned_exactly_and_installed_as_locked():
    declared = json.loads((REPO_ROOT / "package.json").read_text(encoding="utf-8"))[
        "devDependencies"
    ]
    lock = json.loads((REPO_ROOT / "package-lock.json").read_text(encoding="utf-8"))["packages"]
    assert {"eslint", "@eslint/js", "globals"} <= set(declared)
    for name, version in declared.items():
        assert re.fullmatch(r"\d+\.\d+\.\d+", version), f"{name}: exact version, no range"
        installed = json.loads(
            (REPO_ROOT / "node_modules" / name / "package.json").read_text(encoding="utf-8")
        )
        assert version == lock[f"node_modules/{name}"]["version"] == installed["version"], name


@pytest.mark.parametrize("package", ["ruff", "mypy"])
def test_python_linters_run_at_their_pins(package: str):
    from importlib.metadata import version

    pins = dict(
        line.split("==")
        for line in (REPO_ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines()
        if "==" in line and not line.startswith("#")
    )
    assert version(package) == pins[package]
