"""The test suite itself: shared helpers live in conftest.py or helper modules, never in a
test module another one imports (pytest would collect its tests twice, or run one module's
fixtures in another's scope), and an ImportError of the project's own code fails instead
of skipping."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
TEST_MODULES = sorted(TESTS.rglob("test_*.py"))
#: Where test modules live: the tree mirrors the project's packages (tests/calc/cli tests
#: calc/cli, ...), plus the built site (its pages, hooks and macros), the browser and the
#: front end's Node tests; tests/ itself holds only the suite's own checks.
TEST_FOLDERS = {"calc", "calc/cli", "calc_view", "accuracy", "tools", "site", "browser", "js"}


def _imports(path: Path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from (a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def test_tests_mirror_the_packages():
    assert len(TEST_MODULES) > 40  # rglob found the tree (48 modules)
    folders = {path.parent.relative_to(TESTS).as_posix() for path in TEST_MODULES}
    assert folders <= TEST_FOLDERS | {"."}, sorted(folders - TEST_FOLDERS)
    assert {p.name for p in TEST_MODULES if p.parent == TESTS} == {
        "test_lint.py",
        "test_suite_hygiene.py",
    }
    # a folder named after a package tests that package, which exists
    for folder in TEST_FOLDERS - {"site", "browser", "js"}:
        assert (TESTS.parent / folder / "__init__.py").is_file(), folder
    # module names are unique: pytest imports test modules by their file name alone
    names = [p.name for p in TEST_MODULES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("path", TEST_MODULES, ids=lambda p: p.name)
def test_no_test_module_imports_another(path):
    assert [m for m in _imports(path) if m.split(".")[-1].startswith("test_")] == []


@pytest.mark.parametrize("path", TEST_MODULES, ids=lambda p: p.name)
def test_own_code_is_never_importorskipped(path):
    """``pytest.importorskip("calc...")`` would turn a broken engine into a skipped test."""
    own = ("calc", "macros", "hooks", "accuracy", "benchmarks", "tools")
    skipped = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "importorskip"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and str(node.args[0].value).split(".")[0] in own
        ):
            skipped.append(node.args[0].value)
    assert skipped == []
