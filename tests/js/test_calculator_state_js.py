"""The calculator's DOM-free modules (``docs/assets/calculator/``: the state machine
``state.js``, the form's state ``form-state.js``, the messages ``messages.js`` and
``format.js``, the worker's client ``worker-client.js``), tested under Node's built-in test
runner (``tests/js/*.test.mjs``; ``numfmt.test.mjs`` checks the page's copies of calc's number
format and limits on a table Python writes); this test runs each file so that the project's one test
command covers them, and fails when any of them fails."""

from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
from conftest import REPO_ROOT

JS_TESTS = sorted((REPO_ROOT / "tests" / "js").glob("*.test.mjs"))


def test_js_tests_exist():
    assert JS_TESTS, "no tests/js/*.test.mjs"


@pytest.mark.parametrize("path", JS_TESTS, ids=lambda p: p.name)
def test_node_test_runner_passes(path, tmp_path):
    from macros.calculator import load_strings

    node = shutil.which("node")
    assert node, "Node 20+ is required (README: requirements)"
    # the page's strings, built from the message catalogue as the page embeds them
    strings = tmp_path / "page-strings.json"
    strings.write_text(json.dumps(load_strings(), ensure_ascii=False), encoding="utf-8")
    env = {**os.environ, "CALC_PAGE_STRINGS": str(strings)}
    run = subprocess.run(
        [node, "--test", str(path)],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout and "# pass " in run.stdout
