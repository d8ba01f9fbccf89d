"""The name of the JSON-shaped values calc reads and returns, for type annotations.

A request, a response, a parsed training config are JSON objects: string keys and values
of any JSON type. Their shapes are checked where they enter (``calc.request`` parses and
validates every field; ``calc.config_import`` narrows each config value it reads) and
fixed where they leave (the published response schema, ``tests/calc/test_schema.py``), so the
values are typed ``Any`` here rather than restated as a type per response.
"""

from __future__ import annotations

from typing import Any, TypeAlias

JsonObject: TypeAlias = dict[str, Any]
