#!/usr/bin/env bash
# Set up (idempotent) and build the site into site/ (strict: any warning fails).
# Extra arguments go to `mkdocs build` (e.g. --site-dir /tmp/site).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
export NO_MKDOCS_2_WARNING=1
exec .venv/bin/mkdocs build --strict "$@"
