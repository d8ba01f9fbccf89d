#!/usr/bin/env bash
# Set up (idempotent) and build the site into site/ (strict: any warning fails).
# Extra arguments go to `mkdocs build` (e.g. --site-dir /tmp/site).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
SETUP_BROWSER=0 bash scripts/setup.sh  # building needs no browser
export NO_MKDOCS_2_WARNING=1
exec .venv/bin/mkdocs build --strict "$@"
