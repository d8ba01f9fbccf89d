"""The Python API: ``from calc import estimate, plan_setup``."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import REPO_ROOT

ROOT = REPO_ROOT
REQUEST = {"model": "llama-3.1-8b", "method": "qlora", "dataset_tokens": 1e7, "gpu": "l4"}


@pytest.mark.parametrize(
    "first",
    [
        "from calc import estimate, plan_setup",
        "import calc; estimate, plan_setup = calc.estimate, calc.plan_setup",
        "import calc.plan; from calc import estimate, plan_setup",
        "import calc; calc.run('plan', {}); from calc import estimate, plan_setup",
    ],
)
def test_the_api_works_whatever_was_imported_first(first):
    code = (
        f"{first}\nimport calc, json\nfrom calc import plan\n"
        f"r = {REQUEST!r}\n"
        "assert plan_setup(r) == calc.run('plan', r)['result']\n"
        "assert not callable(plan) and plan.PlanOptions.__name__ == 'PlanOptions'\n"
        "e = estimate({'model': 'llama-3.1-8b'}); assert e['peak_allocated_bytes'] > 0\n"
        "print('ok')"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, timeout=60)
    assert proc.stdout.decode().strip() == "ok", proc.stderr.decode()


def test_errors_are_coded():
    from calc import InputError, estimate, plan_setup

    with pytest.raises(InputError) as err:
        plan_setup({**REQUEST, "gpu": "nope"})
    assert err.value.code == "unknown_gpu" and err.value.field == "gpu"
    with pytest.raises(InputError) as err:
        estimate({"model": "llama-3.1-8b", "seq_len": 0})
    assert err.value.to_dict() == {
        "code": "not_positive",
        "field": "seq_len",
        "value": 0,
        "integer": True,
        "minimum": 1,
        "maximum": 4_194_304,
    }


def test_doctest_of_estimate():
    import doctest
    import calc

    assert doctest.testmod(calc).failed == 0
