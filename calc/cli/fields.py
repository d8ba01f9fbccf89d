"""The request keys as the CLI sees them: :mod:`calc.fields`, the one registry of the request's
fields, from which the flags (:mod:`calc.cli.flags`), ``--help`` (:mod:`calc.cli.helptext`) and
the JSON Schema (:mod:`calc.schema`) are built."""

from __future__ import annotations

from ..fields import FieldSpec, field_specs, spec_by_key

__all__ = ["FieldSpec", "field_specs", "spec_by_key"]
