"""JSON text read strictly: an object that names a key twice is refused.

Python's ``json`` keeps the last of two equal keys, so ``{"seq_len": 512, "seq_len": 4096}``
would silently run with 4096. A request or a config.json that repeats a key is a slip (a
pasted block, a merge), so it is refused with ``InputError("duplicate_key", field, key)``:
``field`` says where the text came from (``"request"``, ``"hf_config"``), ``value`` the key.
"""

from __future__ import annotations

import json

from .errors import InputError


TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: typing costs milliseconds of start-up
    from typing import Callable


def _object(field: str) -> Callable[[list[tuple[str, object]]], dict[str, object]]:
    """A ``json`` ``object_pairs_hook`` that refuses a key seen twice in one object."""

    def build(pairs: list[tuple[str, object]]) -> dict[str, object]:
        out: dict[str, object] = {}
        for key, value in pairs:
            if key in out:
                raise InputError("duplicate_key", field, key)
            out[key] = value
        return out

    return build


def loads(text: str, field: str = "request") -> object:
    """``json.loads(text)``, refusing a repeated key in any object. Other errors are
    ``json``'s own (``ValueError``, ``RecursionError``): the caller codes them."""
    return json.loads(text, object_pairs_hook=_object(field))


__all__ = ["loads"]
