"""Copy the site's translations into the CLI's message catalogue.

The CLI (``calc/cli``) ships inside the ``calc`` wheel, which holds no site files, so the
words the calculator page uses for fields, options, phases, warnings and errors are kept in
``calc/data/messages/{es,en}.json`` under ``"site"``. This script refreshes that section from
``docs/assets/calculator/i18n.json``; the CLI's own sections (``cli``, ``help``, ``unit``) are
kept. ``tests/test_cli_messages.py`` fails while the copy is stale.

    python tools/sync_cli_messages.py          # rewrite the catalogue
    python tools/sync_cli_messages.py --check  # exit 1 if it is stale
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "docs" / "assets" / "calculator" / "i18n.json"
CATALOGUE = ROOT / "calc" / "data" / "messages"
# the parts of the site's strings the CLI shows
SECTIONS = ("labels", "enums", "phases", "warnings", "errors", "components", "actions", "units", "notes")


def render(lang: str) -> str:
    site = json.loads(SITE.read_text(encoding="utf-8"))[lang]
    path = CATALOGUE / f"{lang}.json"
    data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    data["site"] = {section: site[section] for section in SECTIONS}
    return json.dumps(data, ensure_ascii=False, indent=1, sort_keys=True) + "\n"


def main(argv: list[str]) -> int:
    stale = []
    for lang in ("es", "en"):
        text = render(lang)
        path = CATALOGUE / f"{lang}.json"
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        stale.append(path)
        if "--check" not in argv:
            path.write_text(text, encoding="utf-8")
    if stale and "--check" in argv:
        print("stale: " + ", ".join(str(p.relative_to(ROOT)) for p in stale)
              + " (run python tools/sync_cli_messages.py)")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
