#!/usr/bin/env bash
# The linters, each once on its whole tree; run by scripts/test.sh before pytest, so a lint
# failure fails the test command (and CI) before the long tests start. tests/test_lint.py
# does not run them again: it checks their settings and that each catches a broken file.
#   ruff   all Python                   (rules: [tool.ruff.lint] in pyproject.toml;
#          the layout: `ruff format`, [tool.ruff.format])
#   mypy   calc/ and calc_view/, strict ([tool.mypy] in pyproject.toml)
#   eslint the front end's JS           (eslint.config.mjs)
# Needs what scripts/setup.sh installs (.venv, node_modules). Runs all three, then fails
# if any failed, so one run shows every finding.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

failed=()
run() {
    local name="$1"; shift
    if "$@"; then
        printf '[lint] %s: ok\n' "$name" >&2
    else
        printf '[lint] %s: FAILED (run alone: %s)\n' "$name" "$*" >&2
        failed+=("$name")
    fi
}
run ruff .venv/bin/ruff check --quiet .
run ruff-format .venv/bin/ruff format --check --quiet .
run mypy .venv/bin/python -m mypy
run eslint node_modules/.bin/eslint .
if (( ${#failed[@]} )); then
    printf '[lint] error: %s failed; see the findings above\n' "${failed[*]}" >&2
    exit 1
fi
