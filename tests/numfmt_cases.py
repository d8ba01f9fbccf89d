"""The table the page's JavaScript copies of calc are checked on (``tests/js/numfmt.test.mjs``):
numbers written by :func:`calc.numfmt.format_shortest` in each language, text that
:data:`calc.numfmt.NUMBER_RE` accepts or not, and the config import's limits
(``calc.config_import``). Python writes it; ``tests/calc_view/test_numfmt.py`` fails when the file
differs from what this writes now. Rewrite it with ``.venv/bin/python tests/numfmt_cases.py``."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PATH = ROOT / "tests" / "js" / "numfmt_cases.json"

# bounds of calc's fields, their shares in percent, and the edges of the format: grouping
# from five digits in Spanish, twelve significant figures (ties away from zero, carries),
# no negative zero, float noise
FIXED = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    0.9,
    90.0,
    16.0,
    1000.0,
    9999.0,
    10000.0,
    1234.5,
    12345.5,
    -1000000.0,
    131072.0,
    1e15,
    1e20,
    1e-6,
    2.5e-5,
    0.1 + 0.2,
    1 / 3,
    -2 / 3,
    99999.99,
    12345.678901234,
    1234567890125.0,
    9999999999995.0,
    -1234567890125.0,
    0.30000000000005,
    4.127,
    2**53,
    123456789012345678.0,
]
NUMBER_TEXT = [
    "0",
    "16",
    "-3",
    "+2.5",
    "2.",
    ".5",
    "1e3",
    "1E-3",
    "2.5e+10",
    "0007",
    "",
    ".",
    "e3",
    "1e",
    "1,5",
    "1.2.3",
    "--1",
    "1 000",
    "0x10",
    "Infinity",
    "NaN",
    "1_000",
    "１２",
]


def _random_values(count: int = 300) -> list[float]:
    """Numbers of every magnitude the format writes without an exponent, both signs."""
    rng = random.Random(20261201)
    out = []
    for _ in range(count):
        value = rng.random() * 10 ** rng.randint(-6, 20)
        digits = rng.randint(1, 17)  # short decimals too, as typed bounds are
        value = float(f"{value:.{digits}g}")
        if value and abs(value) >= 1e-6:
            out.append(-value if rng.random() < 0.3 else value)
    return out


def cases() -> dict:
    from calc.config_import.export import FORMATS
    from calc.config_import.loading import MAX_BYTES
    from calc.languages import LANGS
    from calc.numfmt import NUMBER_RE, format_shortest

    values = [float(v) for v in FIXED] + _random_values()
    return {
        "about": "Written by tests/numfmt_cases.py from calc; do not edit by hand.",
        "numbers_columns": ["value", "lang", "style", "text"],
        "numbers": [
            [v, lang, "shortest", format_shortest(v, lang)] for v in values for lang in LANGS
        ],
        "number_re_pattern": NUMBER_RE.pattern,
        "number_re_cases": [[t, NUMBER_RE.fullmatch(t) is not None] for t in NUMBER_TEXT],
        "config_import_max_bytes": MAX_BYTES,
        "config_import_formats": list(FORMATS),
    }


def text() -> str:
    """The JSON text, one case a line."""
    parts = [
        f" {json.dumps(key)}: "
        + (
            "[\n" + ",\n".join(f"  {json.dumps(row, ensure_ascii=False)}" for row in value) + "\n ]"
            if isinstance(value, list) and value and isinstance(value[0], (list, dict))
            else json.dumps(value, ensure_ascii=False)
        )
        for key, value in cases().items()
    ]
    return "{\n" + ",\n".join(parts) + "\n}\n"


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    PATH.write_text(text(), encoding="utf-8")
    print(f"wrote {PATH.relative_to(ROOT)}")
