"""calc's responses as table rows, and the names the tables give calc's ids.

Shared by every table and chart module of this package (none imports another's); the
rows go to :func:`macros.tables.render`.
"""

from __future__ import annotations

import calc
from calc.memory import COMPONENTS

from . import labels
from .tables import SOURCE, source_json

# Components in the order the tables and charts show them: calc's own order.
COMPONENT_ORDER = COMPONENTS

# Any catalogue card will do as the request's ``gpu`` when a table reads only what does
# not depend on it (fits over the whole catalogue, recommendations): this one is named.
REFERENCE_GPU = "h100-sxm"


def model_name(preset_id: str) -> str:
    """The preset's display name (``Llama 2 7B``); unknown ids fail the build."""
    from calc import presets

    names = {p["id"]: p["name"] for p in presets.presets_listing()}
    return names[preset_id]


def gpu_name(gpu_id: str) -> str:
    from calc import gpus

    return gpus.get_gpu(gpu_id).name


def config_text(config: dict | None, lang: str) -> str:
    """``2 × A10G (ZeRO-3 / FSDP FULL_SHARD)``; one unsharded card is just ``1 × A10G``;
    None (nothing fits even the largest count the plan tries) says so."""
    if config is None:
        from calc import recommend

        return labels.text(f"text.no_config|{max(recommend.GPU_COUNTS)}", lang)
    text = f"{config['num_gpus']} × {gpu_name(config['gpu'])}"
    if config["sharding"] != "none":
        text += f" ({labels.option('sharding', config['sharding'], lang)})"
    return text


def plan_source(request: dict) -> str:
    """The ``data-source`` of a plan request, for a ``ref`` that proves a model fits."""
    return source_json({"command": "plan", "request": request})


def flatten(response: dict, prefix: str = "") -> dict:
    """A response's nested objects as dotted keys (``components.weights``), which are also
    the paths the tests resolve in a response; lists stay values."""
    out: dict = {}
    for key, value in response.items():
        if isinstance(value, dict) and value:
            out |= flatten(value, f"{prefix}{key}.")
        else:
            out[prefix + key] = value
    return out


def estimate_rows(requests: list[dict]) -> list[dict]:
    """One row per request: its estimate flattened (:func:`flatten`), the request's keys as
    ``req.<key>``, the preset's name as ``model_name`` and the request as the row's source."""
    keys = sorted({k for req in requests for k in req})
    rows = []
    for req in requests:
        row = flatten(calc.estimate(req))
        row |= {"req." + k: req.get(k) for k in keys}
        if "model" in keys:
            row["model_name"] = model_name(req["model"])
        row[SOURCE] = {"command": "estimate", "request": req}
        rows.append(row)
    return rows


def present_components(rows: list[dict]) -> list[str]:
    """The components any row reports, in :data:`COMPONENT_ORDER`, then any other; a row
    that lacks one gets 0 for it."""
    found = {k[len("components.") :] for row in rows for k in row if k.startswith("components.")}
    ordered = [c for c in COMPONENT_ORDER if c in found] + sorted(found - set(COMPONENT_ORDER))
    for row in rows:
        for name in ordered:
            row["components." + name] = row.get("components." + name) or 0
    return ordered


def gpu_rows(gpu_ids: list[str] | None) -> list[dict]:
    """Catalogue rows (``python -m calc gpus``), all of them or the named ones in that order,
    each with its source."""
    from calc import gpus

    listing = {g["id"]: g for g in gpus.gpus_listing()["gpus"]}
    ids = list(listing) if gpu_ids is None else gpu_ids
    unknown = [i for i in ids if i not in listing]
    if unknown:
        raise KeyError(f"unknown GPU ids {unknown}")
    return [{**listing[i], SOURCE: {"command": "gpu", "id": i}} for i in ids]
