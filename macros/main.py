"""mkdocs-macros entry point (``module_name: macros/main`` in mkdocs.yml).

The plugin loads this file by path, once per language build. ``define_env``
registers each module of the ``macros`` package: to add one, import it below
and call its ``register(env)`` in ``define_env`` (one import, one call).
"""

from __future__ import annotations

import sys
from pathlib import Path

# The plugin imports this file by path, so neither the repository root (for
# ``calc``) nor the ``macros`` package is importable unless we say so.
_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

# The plugin re-runs this file on every build (one per language, and on each
# change under `mkdocs serve`): drop the cached engine and glue modules so a
# rebuild sees edits to calc/ and macros/ without restarting the server. The
# validation library (accuracy/) goes too: kept, it would hold the previous
# build's calc modules while calc's lazy imports reach the new ones, and its
# figures on the second language's pages would mix the two.
for _name in [n for n in sys.modules if n.split(".")[0] in ("calc", "macros", "accuracy")]:
    del sys.modules[_name]

import calc  # noqa: E402
from macros import (  # noqa: E402
    calculator,
    card_advice,
    charts,
    cli_docs,
    config_import_docs,
    guides,
    methodology,
    oracle_sweep,
    plan_tables,
    reference_pages,
    source_notes,
    validation_first_contact,
    validation_fit_boundaries,
    validation_variable_length,
    validation_loso,
    validation_min_device,
    validation_time_first_contact,
)


def _register_core(env) -> None:
    """Variables and macros every page may use."""
    env.variables["pyodide"] = env.conf["extra"]["pyodide"]

    @env.macro
    def calc_version() -> str:
        """Version of the ``calc`` package the numbers on this page come from."""
        return calc.__version__


def define_env(env) -> None:
    """Called by mkdocs-macros once per language build."""
    _register_core(env)
    guides.register(env)
    plan_tables.register(env)
    methodology.register(env)
    oracle_sweep.register(env)
    calculator.register(env)
    validation_loso.register(env)
    validation_first_contact.register(env)
    validation_fit_boundaries.register(env)
    validation_variable_length.register(env)
    validation_min_device.register(env)
    validation_time_first_contact.register(env)
    cli_docs.register(env)
    config_import_docs.register(env)
    source_notes.register(env)
    card_advice.register(env)
    charts.register(env)
    reference_pages.register(env)
