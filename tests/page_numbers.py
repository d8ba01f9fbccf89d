"""What calc says for a number printed on a page: the response a cell's ``data-source``
names, recomputed here, and the number its ``data-field`` points at. Shared by the guides'
browser test and the reference-setup tests (a test module imports no other test module)."""

from __future__ import annotations

import calc
from calc import gpus


def response_for(source: dict) -> tuple[dict, dict]:
    """``(response, request)`` for a cell's ``data-source``, recomputed here."""
    command = source["command"]
    request = source.get("request", {})
    if command == "estimate":
        return calc.estimate(request), request
    if command == "plan":
        return calc.plan_setup(request), request
    if command == "gpu":
        listing = {g["id"]: g for g in gpus.gpus_listing()["gpus"]}
        return listing[source["id"]], request
    if command == "request":
        return {}, request
    if command == "instance":
        from calc import comm

        inst = next(i for i in gpus.instances() if i.instance == source["id"])
        network = comm.NETWORKS[inst.network]
        return {**inst.to_dict(), "step_latency_us": network.step_latency_s * 1e6}, request
    if command == "preset":
        from calc import presets

        return next(p for p in presets.presets_listing() if p["id"] == source["id"]), request
    if command == "plan_default":
        from calc.fields import BY_KEY

        return {"value": BY_KEY[source["key"]].default * source["scale"]}, request
    if command in ("validation_memory", "validation_memory_summary"):
        from accuracy import memory as v

        results = v.compare_rows()
        if command == "validation_memory":
            row = next(r for r in results if r.row_id == source["row"])
            return vars(row), request
        method = source["method"]
        keep = (
            (lambda r: r.metric != "model_states" and (method is None or r.method == method))
            if command == "validation_memory_summary" and source.get("measured")
            else (lambda r: method is None or r.method == method)
        )
        s = v.summary(results, keep)
        return vars(s), request
    if command == "framework_profile":
        from calc.frameworks import PROFILES, Framework

        return {"value": PROFILES[Framework(source["framework"])][source["key"]]}, request
    if command in (
        "validation_memory_loso",
        "validation_memory_bands",
        "validation_memory_coverage",
        "validation_memory_above_point",
    ):
        from macros import validation_loso as vl

        if command == "validation_memory_above_point":
            return {"value": vl.range_above_point(source["method"])}, request

        if command == "validation_memory_loso":
            return vl.report()[source["group"]], request
        if command == "validation_memory_bands":
            key = source["key"]
            method = key.split("/")[0]
            return {**vl.bands()[key], "coverage": vl.coverage()[method]["share"]}, request
        return vl.coverage()[source["group"]], request
    if command == "validation_memory_first_contact":
        from accuracy import first_contact as fc

        return fc.summary()[source["source"]], request
    if command == "validation_memory_first_contact_today":
        from accuracy import first_contact as fc

        now = fc.now_beside_first()[source["source"]]
        recorded = fc.summary()[source["source"]]
        return {**recorded, "today_median": now["median"], "today_p90": now["p90"]}, request
    if command == "validation_time_first_contact":
        from macros.validation_time_first_contact import summary

        return summary()[source["source"]], request
    if command == "validation_time_multi_gpu":
        from macros.validation_time_first_contact import multi_gpu

        return multi_gpu()[source["group"]], request
    if command == "validation_time_first_contact_card":
        from macros.validation_time_first_contact import cards

        return cards()[source["card"]], request
    if command == "validation_time_first_contact_attention":
        from macros.validation_time_first_contact import attention

        return attention()[source["group"]], request
    if command == "constant":
        import importlib

        value = getattr(importlib.import_module(source["module"]), source["name"])
        if "key" in source:
            key = source["key"]
            value = value[tuple(key) if isinstance(key, list) else key]
        return {"value": value}, request
    if command in ("oracle_sweep_summary", "oracle_sweep_miss", "oracle_sweep_stack"):
        from macros.oracle_sweep import load_summary

        summary = load_summary()
        if command == "oracle_sweep_stack":
            return summary["stacks"][source["stack"]]["profiles"][source["profile"]], request
        if command == "oracle_sweep_summary" and "family" in source:
            return summary["per_family"][source["family"]], request
        if command == "oracle_sweep_summary":
            return (summary["groups"][source["group"]] if "group" in source else summary), request
        return next(m for m in summary["beyond_2pct"] if m["id"] == source["id"]), request
    if command.startswith("validation_throughput") or command == "validation_qlora_ratio":
        from accuracy import throughput as vt

        result = vt.compare()
        if command == "validation_throughput":
            return next(r for r in result["rows"] if r["row_id"] == source["row"]), request
        if command == "validation_throughput_summary":
            return result["summary"][source["group"]], request
        if command == "validation_throughput_fit":
            return result["constant_basis"][source["constant"]], request
        return next(c for c in result["qlora_ratio_check"] if c["rows"] == source["rows"]), request
    raise AssertionError(f"unknown source command {command!r}")


def expected_raw(field: str, response: dict, request: dict) -> float:
    """The number a ``data-field`` names (independent of the macros' own resolver):
    ``a.b`` paths, ``x+y/z`` sums over a divisor (``-y`` subtracted), ``pct:`` for percent,
    ``request.*``."""
    pct = field.startswith("pct:")  # stored as a fraction, shown in percent
    num, _, den = field.removeprefix("pct:").partition("/")

    def get(path: str) -> float:
        if path.startswith("request."):
            return request[path.split(".", 1)[1]]
        node = response
        for part in path.split("."):
            if isinstance(node, list):
                node = node[int(part)]
            elif path.startswith("components.") and part not in node:
                return 0  # calc reports no such component: the table shows 0
            else:
                node = node[part]
        return node

    value = sum(-get(p[1:]) if p.startswith("-") else get(p) for p in num.split("+"))
    if den:
        value /= get(den)
    return value * 100 if pct else value
