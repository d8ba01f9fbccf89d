"""The key-by-key report an importer builds while it maps a config onto a request.

Every key of the file ends in exactly one entry (nested keys by dotted path, e.g.
``zero_optimization.offload_optimizer.device``):

- ``used``: it set a request field (``field``; a key that sets several lists them in
  ``fields``), with the value the request holds for it (``value``; ``values`` by field
  when there are several);
- ``invalid``: the tool itself would refuse the value (a rank of -5, ``micro_batch_size:
  two``, ``bf16: "yes please"``): ``value`` as written, a coded ``reason``
  (``not_an_integer``, ``not_a_number``, ``not_a_boolean``, ``out_of_range``,
  ``not_allowed``, ``not_a_list_of_names``), what is ``accepted`` (``type``,
  ``minimum``/``maximum``, ``allowed``), the request field it was meant for (``target``)
  and what calc uses instead
  (``used_instead``, with its ``source``). The CLI refuses such a file unless told
  ``--lenient``;
- ``ignored``: understood, and it changes neither memory nor time (learning rate,
  logging, output paths);
- ``unknown``: not understood, or understood but not modelled (listed, never dropped).

Fields no key set take the tool's own default at a stated version; each is listed under
``defaults`` with that source, so the user sees which numbers rest on a default.
"""

from __future__ import annotations

from ..jsontypes import JsonObject

USED, IGNORED, UNKNOWN, INVALID = "used", "ignored", "unknown", "invalid"


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
        elif entry["status"] == INVALID:
            return entry  # a refused value sets nothing, whatever the importer does next
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
        if self.status(key) == INVALID:
            return
        if value is None:  # the file leaves the key unset (``torch_compile:``)
            self._entry(key, IGNORED, [], "not_set")
            return
        self.request[field] = value
        self._entry(key, USED, [field], note)

    def use_plan(self, key: str, field: str, value: object, note: str | None = None) -> None:
        if self.status(key) == INVALID:
            return
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

    def invalid(
        self, key: str, value: object, reason: str, accepted: JsonObject, target: str | None = None
    ) -> None:
        """``key``'s ``value`` is one the tool refuses: ``reason`` says why, ``accepted`` what
        it takes; ``target``: the request field it was meant to set. Final: the key then sets
        nothing, and the field keeps the tool's default (named in :meth:`result`)."""
        entry = self._entry(key, INVALID, [], None)
        for name in ("fields", "note"):
            entry.pop(name, None)
        entry.update(status=INVALID, field=None, value=value, reason=reason, accepted=accepted)
        if target is not None:
            entry["target"] = target

    def invalid_keys(self) -> list[JsonObject]:
        return [entry for entry in self.keys if entry["status"] == INVALID]

    def status(self, key: str) -> str | None:
        entry = self._seen.get(key)
        return entry["status"] if entry else None

    # -- defaults -----------------------------------------------------------------------
    def default(
        self, field: str, value: object, source: str | None = None, plan: bool = False
    ) -> None:
        """Fill ``field`` with the tool's default when no key set it."""
        target = self.plan if plan else self.request
        if field in target:
            return
        target[field] = value
        self.defaults.append({"field": field, "value": value, "source": source or self.tool})

    def note(self, code: str) -> None:
        if code not in self.notes:
            self.notes.append(code)

    def _finish_entries(self) -> None:
        """The value each used key left in the request, and for each refused one what calc
        uses in its place (the tool's default named in ``defaults``, or calc's own)."""
        values = {**self.request, **self.plan}
        sources = {d["field"]: d["source"] for d in self.defaults}
        for entry in self.keys:
            if entry["status"] == USED:
                fields = entry.get("fields") or [entry["field"]]
                if fields[0] in values:
                    entry["value"] = values[fields[0]]
                if len(fields) > 1:
                    entry["values"] = {f: values[f] for f in fields if f in values}
            elif entry["status"] == INVALID and entry.get("target"):
                target = entry["target"]
                if target in values:
                    entry["used_instead"] = values[target]
                    entry["source"] = sources.get(target, "file")
                else:
                    default = _calc_default(target)
                    if default is not None:
                        entry["used_instead"], entry["source"] = default, "calc"

    def result(self) -> JsonObject:
        self._finish_entries()
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


def _calc_default(field: str) -> object:
    """calc's own default of a request field (the importer filled none)."""
    from ..fields import spec_by_key

    spec = spec_by_key("estimate").get(field)
    return spec.default if spec is not None else None
