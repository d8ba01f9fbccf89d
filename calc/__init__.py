"""calc: GPU memory, time and cost of fine-tuning a large language model.

Pure Python, standard library only: the same package runs in CPython (CLI,
site build) and in the browser through Pyodide. Entry points take and return
plain JSON-compatible dicts:

- :func:`estimate` — peak memory per GPU (``python -m calc estimate``)
- :func:`plan_setup` — time, cost, cards that fit and recommendations (``python -m calc plan``)
"""

from __future__ import annotations

from .errors import CalcError, ConfigError, InputError

__version__ = "0.1.0"


def estimate(request: dict) -> dict:
    """Peak memory per GPU for one training setup (see ``calc.memory``)."""
    from .memory import estimate_dict

    return estimate_dict(request)


def plan_setup(request: dict) -> dict:
    """Time, cost, fits and recommendations (see ``calc.plan.plan_dict``).

    Not named ``plan``: the submodule ``calc.plan`` would replace such a
    function on the package as soon as it is imported."""
    from .plan import plan_dict

    return plan_dict(request)


def run(command: str, request: object) -> dict:
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
