"""How accurate ``calc`` is: its predictions against the published measurements.

The measurements live in ``validation/`` (CSV files, the only source of truth; see its
README). This package reads them, maps each row onto a ``calc`` request, and computes the
comparisons, the fits of ``calc``'s fitted constants, the leave-one-source-out refits and
the statistics. Its users print or render what it returns, and compute nothing themselves:

- ``benchmarks/validate_memory.py`` and ``benchmarks/validate_throughput.py`` print it;
- ``macros/`` renders it on the methodology and guides pages;
- ``tests/`` check it.

Modules: :mod:`accuracy.memory` (peak memory, row by row, and the two constant fits),
:mod:`accuracy.memory_loso` (the memory model's constants refitted without each source, and
the calibrated bands of ``calc``'s ranges), :mod:`accuracy.throughput` (the time model,
in-sample and leave-one-source-out), :mod:`accuracy.stats` (percentiles).

It is not part of ``calc``: ``calc`` stays the standard-library engine that also runs in
the browser, and never reads the measurements it was checked against.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "validation"
