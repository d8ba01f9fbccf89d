"""The calculator form's fieldsets: every key of a training setup sits in a named group; only
cost and time assumptions (group "plan" of calc.fields) fall into the advanced catch-all."""

from __future__ import annotations

from calc.fields import BY_KEY, PLAN
from macros.calculator import GROUPS, behaviour_order, request_fields


def _left_for_advanced() -> list[str]:
    placed = {key for _, names in GROUPS for key in names} | set(behaviour_order())
    return [key for key in request_fields() if key not in placed]


def test_only_plan_assumptions_fall_into_the_advanced_group():
    left = _left_for_advanced()
    assert left, "the advanced group is the place of the plan's assumptions"
    assert [key for key in left if BY_KEY[key].group != PLAN] == []


def test_liger_sits_beside_the_chunked_loss():
    names = dict(GROUPS)["legend_batch"]
    assert names.index("liger_kernel") == names.index("chunked_loss") + 1
