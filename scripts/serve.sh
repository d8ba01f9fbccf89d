#!/usr/bin/env bash
# Set up (idempotent) and serve the site with live reload:
#   http://127.0.0.1:8000/     Spanish (default)
#   http://127.0.0.1:8000/en/  English
# Extra arguments go to `mkdocs serve` (e.g. --dev-addr 127.0.0.1:8001).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/setup.sh
export NO_MKDOCS_2_WARNING=1
exec .venv/bin/mkdocs serve --strict --dev-addr 127.0.0.1:8000 "$@"
