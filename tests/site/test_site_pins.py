"""Dependencies are pinned exactly: Python in requirements.txt, Pyodide in npm."""

from __future__ import annotations

import json
import re
from importlib.metadata import version

import pytest

from conftest import REPO_ROOT

REQUIREMENT = re.compile(r"^([A-Za-z0-9_.\-]+)==([0-9][A-Za-z0-9_.\-+]*)$")


def requirement_lines() -> list[str]:
    text = (REPO_ROOT / "requirements.txt").read_text(encoding="utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def test_every_python_requirement_is_pinned_exactly():
    lines = requirement_lines()
    assert [line for line in lines if not REQUIREMENT.match(line)] == []
    names = [REQUIREMENT.match(line).group(1).lower() for line in lines]
    assert len(names) == len(set(names)), "a package is listed twice"


@pytest.mark.parametrize(
    ("package", "major_minor"),
    [
        ("mkdocs", "1.6"),  # 1.x: MkDocs 2 breaks Material and its plugins
        ("mkdocs-material", "9."),
        ("mkdocs-static-i18n", "1.3"),
        ("mkdocs-macros-plugin", "1.5"),
    ],
)
def test_site_toolchain_versions(package, major_minor):
    pins = dict(REQUIREMENT.match(line).groups() for line in requirement_lines())
    assert pins[package].startswith(major_minor)
    # The environment the tests run in is the pinned one.
    assert version(package) == pins[package]


def test_pyodide_pinned_exactly_and_installed_as_locked():
    declared = json.loads((REPO_ROOT / "package.json").read_text())["dependencies"]["pyodide"]
    lock = json.loads((REPO_ROOT / "package-lock.json").read_text())
    locked = lock["packages"]["node_modules/pyodide"]["version"]
    installed = json.loads((REPO_ROOT / "node_modules/pyodide/package.json").read_text())["version"]
    assert re.fullmatch(r"314\.\d+\.\d+", declared), "exact 314.x, no range"
    assert declared == locked == installed
