#!/usr/bin/env bash
# Set up (idempotent), lint (scripts/lint.sh: ruff, mypy, eslint) and run the whole test
# suite, browser tests included, on every core (pytest-xdist, `-n auto`; the site is built
# once for all workers, see tests/conftest.py). A lint failure stops here, before the tests.
# Extra arguments go to pytest (e.g. `bash scripts/test.sh -k site -x`; `-n 0`: one process).
# "No tests collected" (pytest exit code 5) is a failure, never a pass.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
bash scripts/lint.sh
export NO_MKDOCS_2_WARNING=1
rc=0
.venv/bin/python -m pytest -n auto "$@" || rc=$?
if [[ $rc -eq 5 ]]; then
    echo "[test] error: no tests were collected" >&2
    exit 1
fi
exit "$rc"
