"""The oracle's libraries (torch, transformers, peft; tools/requirements-measure.txt) for the
oracle's test modules: a module without them is skipped, unless ``REQUIRE_ORACLE=1`` (set by
``.ci/run`` after it installs them), where a missing one fails instead of hiding the tier."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def need(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        if os.environ.get("REQUIRE_ORACLE") == "1":
            pytest.fail(f"REQUIRE_ORACLE=1 but {name} is not importable: {exc}")
        pytest.skip(
            f"the oracle needs {name} (pip install -r tools/requirements-measure.txt)",
            allow_module_level=True,
        )


def need_oracle_stack() -> ModuleType:
    """torch (returned), transformers and peft."""
    torch = need("torch")
    need("transformers")
    need("peft")
    return torch
