"""One description per request key, read from the request's own field tables.

:data:`calc.request.ESTIMATE_FIELDS` and :data:`calc.plan.PLAN_FIELDS` say, for every key,
its default and its kind (``"int"`` with a maximum, ``"bool"``, an ``Enum`` of values,
``"number"`` with its bounds...). The CLI's flags, its ``--help`` and the JSON Schema
(:mod:`calc.schema`) are all generated from :func:`field_specs`, so a key added to a table
gets its flag, its help line and its schema property without another edit. A kind this module
does not know yet is described as "any JSON value" and its flag passes text through as the
URL does.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

FieldExtra = int | tuple[float, float, bool] | None  # calc.request.FieldSpec's third item


@dataclass(frozen=True)
class FieldSpec:
    key: str
    table: str  # "estimate" or "plan"
    kind: str  # int, number, fraction, bool, enum, model, targets, gpu, or the table's own name
    default: object
    required: bool = False
    optional: bool = False  # null allowed (calc picks its own value)
    choices: tuple[str, ...] | None = None
    minimum: float | None = None
    maximum: float | None = None
    exclusive_minimum: bool = False
    exclusive_maximum: bool = False

    @property
    def flag(self) -> str:
        """The URL parameter's name with dashes: ``seq_len`` -> ``--seq-len``."""
        return "--" + self.key.replace("_", "-")

    @property
    def numeric(self) -> bool:
        return self.kind in ("int", "number", "fraction")


def _estimate_spec(key: str, default: object, kind: object, extra: FieldExtra) -> FieldSpec:
    if isinstance(kind, type) and issubclass(kind, Enum):
        return FieldSpec(key, "estimate", "enum", default, choices=tuple(m.value for m in kind))
    if kind == "int":
        assert not isinstance(extra, tuple), extra  # an int's extra is its maximum
        return FieldSpec(key, "estimate", "int", default, minimum=1, maximum=extra)
    if kind == "fraction":
        return FieldSpec(key, "estimate", "fraction", default, minimum=0.0, maximum=1.0,
                         exclusive_maximum=True)
    if kind == "model":
        return FieldSpec(key, "estimate", "model", default, required=True)
    return FieldSpec(key, "estimate", str(kind), default)  # bool, targets, a kind added later


def _plan_spec(key: str, default: object, kind: object, extra: FieldExtra) -> FieldSpec:
    if kind == "gpu":
        return FieldSpec(key, "plan", "gpu", default, required=True)
    if kind == "tier":
        from ..gpus import TIERS
        return FieldSpec(key, "plan", "enum", default, choices=tuple(TIERS))
    if kind == "int":
        assert not isinstance(extra, tuple), extra  # an int's extra is its maximum
        return FieldSpec(key, "plan", "int", default, minimum=1, maximum=extra)
    if kind in ("number", "required_number", "optional_number"):
        assert isinstance(extra, tuple), extra  # a number's extra is its range
        lo, hi, allow_lo = extra
        return FieldSpec(key, "plan", "number", default, required=kind == "required_number",
                         optional=kind == "optional_number", minimum=lo, maximum=hi,
                         exclusive_minimum=not allow_lo)
    if isinstance(kind, type) and issubclass(kind, Enum):
        return FieldSpec(key, "plan", "enum", default, choices=tuple(m.value for m in kind))
    return FieldSpec(key, "plan", str(kind), default)


def field_specs(command: str) -> list[FieldSpec]:
    """The request keys of ``estimate`` or ``plan`` (estimate's, then plan's), in table order."""
    from ..request import ESTIMATE_FIELDS

    specs = [_estimate_spec(k, *v) for k, v in ESTIMATE_FIELDS.items()]
    if command == "plan":
        from ..plan import PLAN_FIELDS
        specs += [_plan_spec(k, *v) for k, v in PLAN_FIELDS.items() if k not in ESTIMATE_FIELDS]
    return specs


def spec_by_key(command: str) -> dict[str, FieldSpec]:
    return {spec.key: spec for spec in field_specs(command)}
