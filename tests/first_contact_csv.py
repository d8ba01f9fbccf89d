"""A copy of a first-contact CSV with one judged row made unjudged again: what the memory and
time first-contact modules' ``record`` tests give them to fill. Both modules share the shape
used here (``CSV_PATH``, ``JUDGED_COLUMNS``, ``columns()``, ``load_rows``, ``record``)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path
from types import ModuleType


def copy_with_one_row_unjudged(fc: ModuleType, rows: list[dict], tmp_path: Path):
    """``(path, row id, original text)``: ``fc.CSV_PATH`` copied under ``tmp_path`` with the
    judged columns of its first judged row emptied."""
    path = tmp_path / "fc.csv"
    shutil.copy(fc.CSV_PATH, path)
    target = next(r["id"] for r in rows if r["first_contact_error"])
    text = path.read_text(encoding="utf-8")
    with open(path, newline="", encoding="utf-8") as handle:
        copy = list(csv.DictReader(handle))
    for r in copy:
        if r["id"] == target:
            for col in fc.JUDGED_COLUMNS:
                r[col] = ""
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fc.columns(), lineterminator="\n")
        writer.writeheader()
        writer.writerows(copy)
    return path, target, text
