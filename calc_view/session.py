"""The worker's one entry: a request in, the answer and its results tree out, as JSON.

A :class:`Session` holds what one page gave its worker (language, strings); nothing is
kept at module level, so two sessions (two languages in one test run) cannot mix.

Three kinds of answer, kept apart all the way to the page:

- ``{"result", "view"}``: calc's response and its results tree; the worker asks for them
  ``lean``: ``{"view", "pending"}``, the tree and whether the allocator's replay is still to
  come (:meth:`Session.complete`), since the page shows the tree and reads nothing else of the
  response (three quarters of the text: 157 of 221 KB for the default plan);
- ``{"error", "errors"}``: bad input, as :func:`calc.run` reports it (the contract's
  ``error`` object, plus every bad field in ``errors``); the page marks those fields;
- ``{"internal_error": {...}}``: anything else that raised, a bug in ``calc`` or in this
  package, never the reader's input. It carries the exception's type, where it was raised
  (one ``file:line`` of ``calc``/``calc_view``, not a traceback) and the version, so a
  reader can report it; never the exception's message, which may quote the input.
"""

from __future__ import annotations

import json

from .render import JsonObject, Strings, render_results

# The packages whose frames may name where a bug is (the only paths a report shows).
_OWN_PACKAGES = ("calc/", "calc_view/")


class Session:
    """One page's worker: its language and its strings, fixed when the worker starts."""

    def __init__(self, lang: str, strings: Strings) -> None:
        self.lang = lang
        self.strings = strings
        # the last answer given without the allocator's replay (defer=True): what
        # :meth:`complete` finishes
        self._deferred: tuple[str, object, JsonObject] | None = None

    @classmethod
    def from_json(cls, lang: str, strings_json: str) -> Session:
        """What the worker calls, with the page's strings as JSON text."""
        return cls(lang, json.loads(strings_json))

    def answer(self, command: str, request: object, defer: bool = False) -> JsonObject:
        """The answer to one request as a dict (see the module's docstring). ``defer``: without
        the caching allocator's replay, which :meth:`complete` adds (the response says
        ``min_device_pending`` where it is left out)."""
        import calc
        from calc.memory import allocator_deferred

        stage = "calc"
        self._deferred = None
        try:
            with allocator_deferred(defer):
                out = calc.run(command, request)
            if "result" in out:
                if _pending(out["result"]):
                    self._deferred = (command, request, out["result"])
                stage = "view"
                out["view"] = render_results(out["result"], self.lang, self.strings)
            return out
        except RecursionError:  # a request nested too deep for Python to walk
            return {"error": {"code": "request_too_deep", "field": None, "value": None}}
        except Exception as exc:  # a bug, not bad input: see internal_error
            return internal_error(stage, exc)

    def complete(self, lean: bool = False) -> str:
        """The last deferred answer with the allocator's replay (``allocator``,
        ``min_device_bytes``), as JSON text ``{"result", "view"}`` (``lean``: ``{"view",
        "pending": false}``, see :func:`lean_answer`); ``{"none": true}`` when no answer waits
        for one. Never raises."""
        if self._deferred is None:
            return json.dumps({"none": True})
        command, request, result = self._deferred
        self._deferred = None
        stage = "calc"
        try:
            from calc.memory import with_allocator

            if command == "plan":
                from calc.plan import parse_plan_request

                req = parse_plan_request(request)[0]
                memory = {k: v for k, v in result["memory"].items() if k != "min_device_pending"}
                result = {**result, "memory": with_allocator(req, memory)}
            else:
                from calc.request import parse_estimate_request

                req = parse_estimate_request(request)
                bare = {k: v for k, v in result.items() if k != "min_device_pending"}
                result = with_allocator(req, bare)
            stage = "view"
            out = {"result": result, "view": render_results(result, self.lang, self.strings)}
            return json.dumps(lean_answer(out) if lean else out, allow_nan=False)
        except Exception as exc:  # a bug, as in answer
            return json.dumps(internal_error(stage, exc))

    def warm(self, command: str, request_json: str) -> None:
        """Answer ``request_json`` (as the page's first request would be answered: deferred)
        and drop the answer. A fresh worker's first answer also pays for the modules it
        imports and the tables calc reads and keeps (catalogue, presets, strings): run before
        the reader's first change, that cost is not theirs to wait for. The caching
        allocator's replay, which only a request with ``length_stats`` runs, is imported too
        (its modules are a fifth of the replay's first run). Leaves the deferred answer as it
        was; never raises."""
        kept = self._deferred
        self.handle(command, request_json, True, lean=True)
        self._deferred = kept
        import calc.step_events  # noqa: F401  (imported for its side effect: loaded once)

    def handle(
        self, command: str, request_json: str, defer: bool = False, lean: bool = False
    ) -> str:
        """:meth:`answer` for JSON text in and out (``lean``: a result as :func:`lean_answer`
        gives it); never raises."""
        from calc.errors import InputError
        from calc.strict_json import loads

        try:
            request = loads(request_json)
        except InputError as err:  # a key named twice: refused, not the last one kept
            return json.dumps({"error": err.to_dict(), "errors": [err.to_dict()]})
        except RecursionError:
            return json.dumps({"error": {"code": "request_too_deep", "field": None, "value": None}})
        except ValueError as exc:  # the page sends JSON.stringify's text: not the reader's doing
            return json.dumps(internal_error("decode", exc))
        out = self.answer(command, request, defer)
        try:
            return json.dumps(lean_answer(out) if lean else out, allow_nan=False)
        except (ValueError, TypeError) as exc:  # NaN or a non-JSON value in calc's response
            return json.dumps(internal_error("encode", exc))


def lean_answer(out: JsonObject) -> JsonObject:
    """What the page reads of an answer: a result as ``{"view", "pending"}`` (the results tree,
    and whether the allocator's replay follows as a second answer), without calc's response,
    which the worker would serialise, the browser copy between threads and the page drop
    unread; errors and internal errors as they are."""
    if "result" not in out:
        return out
    return {"view": out["view"], "pending": _pending(out["result"])}


def _pending(result: JsonObject) -> bool:
    """Whether an answer left the allocator's replay for later (``min_device_pending``)."""
    memory = result.get("memory", result)
    return isinstance(memory, dict) and memory.get("min_device_pending") is True


def internal_error(stage: str, exc: BaseException) -> JsonObject:
    """``{"internal_error": {code, stage, exception, where, calc_version}}`` for an
    unexpected exception: ``stage`` is what was running (``decode``, ``calc``, ``view``,
    ``encode``)."""
    version: str | None
    try:
        from calc import __version__ as version
    except Exception:  # calc itself fails to import: still answer
        version = None
    return {
        "internal_error": {
            "code": "internal_error",
            "stage": stage,
            "exception": type(exc).__name__,
            "where": _where(exc),
            "calc_version": version,
        }
    }


def _where(exc: BaseException) -> str | None:
    """The innermost frame of ``calc`` or ``calc_view`` the exception passed through, as
    ``calc/plan.py:123`` (a path relative to the bundle, no line of code, no values)."""
    import traceback  # a bug's report only: not on a first start's way

    found = None
    for frame in traceback.extract_tb(exc.__traceback__):
        path = frame.filename.replace("\\", "/")
        for package in _OWN_PACKAGES:
            at = path.rfind("/" + package)
            if at >= 0 or path.startswith(package):
                found = f"{path[at + 1 if at >= 0 else 0 :]}:{frame.lineno}"
                break
    return found
