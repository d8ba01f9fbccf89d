"""The key-by-key report an importer builds while it maps a config onto a request.

Every key of the file ends in exactly one entry (nested keys by dotted path, e.g.
``zero_optimization.offload_optimizer.device``):

- ``used``: it set a request field (``field``; a key that sets several lists them in
  ``fields``);
- ``ignored``: understood, and it changes neither memory nor time (learning rate,
  logging, output paths);
- ``unknown``: not understood, or understood but not modelled (listed, never dropped).

Fields no key set take the tool's own default at a stated version; each is listed under
``defaults`` with that source, so the user sees which numbers rest on a default.
"""

from __future__ import annotations

from ..jsontypes import JsonObject

USED, IGNORED, UNKNOWN = "used", "ignored", "unknown"


class Report:
    def __init__(self, fmt: str, tool: str) -> None:
        self.format = fmt
        self.tool = tool  # "axolotl 0.18.0", the version the defaults are read from
        self.request: JsonObject = {}
        self.plan: JsonObject = {}  # plan-only keys (dataset_tokens, epochs)
        self.keys: list[JsonObject] = []
        self.defaults: list[JsonObject] = []
        self.notes: list[str] = []
        self._seen: dict[str, JsonObject] = {}

    # -- key entries -------------------------------------------------------------------
    def _entry(self, key: str, status: str, fields: list[str], note: str | None) -> JsonObject:
        entry = self._seen.get(key)
        if entry is None:
            entry = {"key": key, "status": status, "field": None}
            self._seen[key] = entry
            self.keys.append(entry)
        elif entry["status"] == USED and status != USED:
            return entry  # a key that set something stays "used"
        entry["status"] = status
        if fields:
            known = entry.get("fields") or ([entry["field"]] if entry["field"] else [])
            merged = list(dict.fromkeys(known + fields))
            entry["field"] = merged[0]
            if len(merged) > 1:
                entry["fields"] = merged
        if note:
            entry["note"] = note
        return entry

    def use(self, key: str, field: str, value: object, note: str | None = None) -> None:
        """``key`` sets request field ``field`` to ``value`` (a later key may override)."""
        self.request[field] = value
        self._entry(key, USED, [field], note)

    def use_plan(self, key: str, field: str, value: object, note: str | None = None) -> None:
        self.plan[field] = value
        self._entry(key, USED, [field], note)

    def mark_used(self, key: str, fields: list[str], note: str | None = None) -> None:
        """``key`` took part in fields set elsewhere (e.g. ``bf16`` and ``fp16`` together
        decide ``precision``)."""
        self._entry(key, USED, fields, note)

    def ignore(self, key: str, note: str | None = None) -> None:
        self._entry(key, IGNORED, [], note)

    def unknown(self, key: str, note: str | None = None) -> None:
        self._entry(key, UNKNOWN, [], note)

    def status(self, key: str) -> str | None:
        entry = self._seen.get(key)
        return entry["status"] if entry else None

    # -- defaults -----------------------------------------------------------------------
    def default(self, field: str, value: object, source: str | None = None, plan: bool = False) -> None:
        """Fill ``field`` with the tool's default when no key set it."""
        target = self.plan if plan else self.request
        if field in target:
            return
        target[field] = value
        self.defaults.append({"field": field, "value": value, "source": source or self.tool})

    def note(self, code: str) -> None:
        if code not in self.notes:
            self.notes.append(code)

    def result(self) -> JsonObject:
        out = {
            "format": self.format,
            "tool": self.tool,
            "request": dict(self.request),
            "keys": list(self.keys),
            "defaults": list(self.defaults),
            "notes": list(self.notes),
        }
        if self.plan:
            out["plan"] = dict(self.plan)
        return out
