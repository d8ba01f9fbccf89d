#!/usr/bin/env bash
# Idempotent setup shared by scripts/serve.sh and scripts/test.sh.
#
# 1. .venv with the pinned Python dependencies (requirements.txt)
# 2. node_modules with the pinned Pyodide and ESLint (package-lock.json, `npm ci`)
# 3. a Chromium for Playwright: the system one when present, Debian's
#    `chromium` package when running as root on Debian, Playwright's own
#    download elsewhere (with its system libraries on GitHub Actions).
#
# Each step records a hash of its inputs in a stamp file and is skipped on
# the next run while the inputs are unchanged, so a second run is fast.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

PYTHON="${PYTHON:-python3}"
VENV="$ROOT/.venv"
# SYSTEM_CHROMIUM="" means: never use or install a system Chromium (use
# Playwright's own); SETUP_BROWSER=0 skips the browser (building only).
SYSTEM_CHROMIUM="${SYSTEM_CHROMIUM-/usr/bin/chromium}"
SETUP_BROWSER="${SETUP_BROWSER:-1}"

log() { printf '[setup] %s\n' "$*" >&2; }
die() { printf '[setup] error: %s\n' "$*" >&2; exit 1; }

# Hash of the given files plus extra strings (tool versions), one line.
inputs_hash() {
    local extra="$1"; shift
    { cat "$@"; printf '%s\n' "$extra"; } | sha256sum | cut -d' ' -f1
}

stamp_ok() { [[ -f "$1" && "$(cat "$1")" == "$2" ]]; }

# --- 1. Python -------------------------------------------------------------
command -v "$PYTHON" >/dev/null || die "$PYTHON not found (Python 3.11+ is required)"
"$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' \
    || die "Python 3.11+ is required, found $("$PYTHON" --version 2>&1)"

if [[ -e "$VENV" ]] && ! "$VENV/bin/python" -c '' 2>/dev/null; then
    log "removing a broken .venv"
    rm -rf "$VENV"
fi
if [[ ! -x "$VENV/bin/python" ]]; then
    log "creating .venv with $("$PYTHON" --version 2>&1)"
    "$PYTHON" -m venv "$VENV"
fi
py_stamp="$VENV/.setup-requirements.sha256"
py_hash="$(inputs_hash "$("$VENV/bin/python" --version 2>&1)" requirements.txt)"
if stamp_ok "$py_stamp" "$py_hash"; then
    log "python dependencies up to date"
else
    log "installing python dependencies (requirements.txt)"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
        --no-input -r requirements.txt
    echo "$py_hash" > "$py_stamp"
fi

# --- 2. Node (Pyodide, ESLint) ---------------------------------------------
command -v npm >/dev/null || die "npm not found (Node 20+ is required)"
node_stamp="node_modules/.setup-package-lock.sha256"
node_hash="$(inputs_hash "$(node --version)" package-lock.json)"
if stamp_ok "$node_stamp" "$node_hash" && [[ -f node_modules/pyodide/package.json ]] \
        && [[ -x node_modules/.bin/eslint ]]; then
    log "node modules up to date"
else
    log "installing node modules (npm ci)"
    npm ci --no-audit --no-fund --loglevel=error
    echo "$node_hash" > "$node_stamp"
fi

# --- 3. Browser for Playwright ---------------------------------------------
browser_stamp="$VENV/.setup-browser"
pw_version="$("$VENV/bin/python" -c 'from importlib.metadata import version; print(version("playwright"))')"
if [[ "$SETUP_BROWSER" == 0 ]]; then
    log "browser: skipped (SETUP_BROWSER=0)"
elif [[ -n "$SYSTEM_CHROMIUM" && -x "$SYSTEM_CHROMIUM" ]]; then
    log "browser: system chromium at $SYSTEM_CHROMIUM"
elif [[ -n "$SYSTEM_CHROMIUM" && "$(id -u)" == 0 && -f /etc/debian_version ]] \
        && command -v apt-get >/dev/null; then
    log "browser: installing Debian's chromium package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get -o DPkg::Lock::Timeout=600 update -qq
    apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends chromium >/dev/null
    [[ -x "$SYSTEM_CHROMIUM" ]] || die "chromium package installed but $SYSTEM_CHROMIUM is missing"
elif stamp_ok "$browser_stamp" "playwright-$pw_version"; then
    log "browser: playwright chromium up to date"
else
    log "browser: installing Playwright's chromium"
    if [[ "${GITHUB_ACTIONS:-}" == true ]]; then
        "$VENV/bin/python" -m playwright install --with-deps chromium
    else
        "$VENV/bin/python" -m playwright install chromium
    fi
    echo "playwright-$pw_version" > "$browser_stamp"
fi

log "ready"
