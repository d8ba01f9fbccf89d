"""calc: GPU memory, time and cost of fine-tuning a large language model.

Pure Python, standard library only: the same package runs in CPython (CLI,
site build) and in the browser through Pyodide. Entry points take and return
plain JSON-compatible dicts:

- :func:`estimate` — peak memory per GPU (``python -m calc estimate``)
- :func:`plan_setup` — time, cost, cards that fit and recommendations (``python -m calc plan``;
  the arithmetic is in :mod:`calc.plan`)

Bad input raises :class:`InputError` / :class:`ConfigError` (both :class:`CalcError`,
with ``code``, ``field`` and ``value``). The request keys are described by
:data:`calc.fields.FIELDS` (one registry of every key), and as JSON Schema
by :func:`calc.schema.request_schema`.
"""

from __future__ import annotations

from .errors import CalcError, ConfigError, InputError

__version__ = "0.1.0"

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing typing costs milliseconds, in Pyodide too
    from typing import Any, Mapping


def estimate(request: Mapping[str, Any] | object) -> dict[str, Any]:
    """Peak memory per GPU for one training setup (see ``calc.memory``).

    >>> from calc import estimate
    >>> estimate({"model": "llama-3.1-8b", "method": "qlora"})["peak_phase"]
    'forward_end'
    """
    from .memory import estimate_dict

    return estimate_dict(request)


def plan_setup(request: Mapping[str, Any] | object) -> dict[str, Any]:
    """Time, cost, the cards that fit and recommendations for a plan request (the keys of
    ``estimate`` plus those of group ``plan`` in :data:`calc.fields.FIELDS`; see ``calc.plan``)."""
    from .plan import plan_dict

    return plan_dict(request)


def run(command: str, request: object) -> dict[str, Any]:
    """One entry for the browser worker: ``{"result": ...}`` or ``{"error": ...}``, never raises
    for bad input."""
    try:
        if command == "estimate":
            return {"result": estimate(request)}
        if command == "plan":
            return {"result": plan_setup(request)}
        raise InputError("unknown_command", "command", command)
    except CalcError as err:
        from .field_errors import error_response  # every bad field, for forms

        return error_response(command, request, err)


__all__ = ["CalcError", "ConfigError", "InputError", "__version__", "estimate", "plan_setup", "run"]
