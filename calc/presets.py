"""Model presets, read from ``calc/data/models.json``.

Each row holds the shape keys of a Hugging Face ``config.json`` (parsed by the same
reader as a pasted config, :func:`calc.hf_config.arch_from_hf_config`), its stated
``params_total``, ``source`` and ``as_of``. The file is read once, on first use, and
each preset is parsed once; later calls return the cached :class:`~calc.arch.ModelArch`.

Models by name (the alias table). A request's ``model`` may be a preset id or a Hugging
Face id: the row's ``hf_repo`` or one of its ``aliases`` (instruct and base variants,
well-known fine-tunes and re-uploads whose config.json has the same shapes, so the same
parameter count). Hugging Face ids are matched without regard to case, as the Hub does,
and a leading ``https://huggingface.co/`` is dropped. An id that is not in the table is
``unknown_preset`` on field ``model``, with ``suggestions``: up to three preset ids whose
names are nearest to it (``difflib`` ratio on the lowercased names), so the page can say
"not in our list: paste its config.json" and offer them. Nothing is fetched from the Hub.

Mixture-of-experts presets hold every expert in ``params_total`` (what memory must hold);
``params_active`` counts the experts a token passes through (top-k plus shared ones), which
is what compute and time use. gpt-oss ships its expert weights in MXFP4 (4.25 bits per
weight: 4-bit values and one 8-bit scale per 32); transformers dequantizes them to bf16 on
load for training, so a bf16 fine-tune holds 2 bytes per parameter like any other model,
which is what calc counts (``mxfp4_experts`` in the preset listing says which presets ship
so).
"""

from __future__ import annotations

import json
from pathlib import Path

from .arch import ModelArch
from .errors import InputError
from .hf_config import arch_from_hf_config
from .jsontypes import JsonObject

DATA_FILE = "models.json"
_DATA_DIR = Path(__file__).with_name("data")

_rows: dict[str, JsonObject] | None = None
_archs: dict[str, ModelArch] = {}
_aliases: dict[str, str] | None = None
HF_URL_PREFIX = "https://huggingface.co/"
MAX_SUGGESTIONS = 3


def _load_rows() -> dict[str, JsonObject]:
    """Rows by id, in file order. Read next to the module, as the GPU catalogue is (the
    wheel installs calc unpacked, the browser's worker unpacks its bundle):
    ``importlib.resources`` would add half a dozen modules to a first start."""
    global _rows
    if _rows is None:
        text = (_DATA_DIR / DATA_FILE).read_text(encoding="utf-8")
        rows = {}
        for row in json.loads(text)["models"]:
            if row["id"] in rows:
                raise ValueError(f"duplicate preset id {row['id']!r} in {DATA_FILE}")
            rows[row["id"]] = row
        _rows = rows
    return _rows


def preset_ids() -> tuple[str, ...]:
    return tuple(_load_rows())


def preset_row(preset_id: str) -> JsonObject:
    """The data row of a preset (config, source, as_of, stated counts)."""
    row = _load_rows().get(preset_id) if isinstance(preset_id, str) else None
    if row is None:
        raise InputError("unknown_preset", "model", preset_id)
    return row


def alias_table() -> dict[str, str]:
    """Lowercased Hugging Face id -> preset id (each row's ``hf_repo`` and ``aliases``)."""
    global _aliases
    if _aliases is None:
        table: dict[str, str] = {}
        for preset_id, row in _load_rows().items():
            for hf_id in (row["hf_repo"], *row.get("aliases", ())):
                key = hf_id.lower()
                if table.get(key, preset_id) != preset_id:
                    raise ValueError(f"{DATA_FILE}: {hf_id!r} names two presets")
                table[key] = preset_id
        _aliases = table
    return _aliases


def resolve_preset_id(value: object) -> str:
    """The preset id a request's ``model`` string names: a preset id, or a Hugging Face id
    in the alias table. Otherwise ``InputError("unknown_preset", "model", value)`` with
    ``extra={"suggestions": [...]}`` (nearest preset ids, possibly empty)."""
    if isinstance(value, str):
        if value in _load_rows():
            return value
        key = value.strip().lower()
        if key.startswith(HF_URL_PREFIX):
            key = key[len(HF_URL_PREFIX) :].strip("/")
        found = alias_table().get(key)
        if found is not None:
            return found
    raise InputError(
        "unknown_preset", "model", value, extra={"suggestions": suggest_presets(value)}
    )


def suggest_presets(value: object, limit: int = MAX_SUGGESTIONS) -> list[str]:
    """Up to ``limit`` preset ids nearest to ``value`` by name (best first)."""
    if not isinstance(value, str) or not value.strip():
        return []
    import difflib  # only a model not in the list needs it

    name = value.strip().lower().rstrip("/").rsplit("/", 1)[-1]
    candidates: dict[str, str] = {}  # lowercased name -> preset id
    for preset_id in _load_rows():
        candidates.setdefault(preset_id, preset_id)
    for hf_id, preset_id in alias_table().items():
        candidates.setdefault(hf_id.rsplit("/", 1)[-1], preset_id)
    scored = sorted(
        (
            (difflib.SequenceMatcher(None, name, cand).ratio(), preset_id)
            for cand, preset_id in candidates.items()
        ),
        reverse=True,
    )
    out: list[str] = []
    for ratio, preset_id in scored:
        if ratio < 0.5 or len(out) >= limit:
            break
        if preset_id not in out:
            out.append(preset_id)
    return out


def get_preset(preset_id: str) -> ModelArch:
    """The architecture of a preset id; ``InputError("unknown_preset", "model", id)``."""
    arch = _archs.get(preset_id) if isinstance(preset_id, str) else None
    if arch is None:
        row = preset_row(preset_id)
        arch = arch_from_hf_config(row["config"], preset_id)
        _archs[preset_id] = arch
    return arch


def presets_listing() -> list[JsonObject]:
    """JSON-able list for ``python -m calc presets`` and the site's preset tables."""
    out = []
    for preset_id, row in _load_rows().items():
        arch = get_preset(preset_id)
        out.append(
            {
                "id": preset_id,
                "name": row["name"],
                "family": arch.family,
                "series": row["series"],
                "released": row["released"],
                "hf_repo": row["hf_repo"],
                "aliases": list(row.get("aliases", ())),
                "params_total": arch.params_total,
                "params_active": arch.params_active,
                "layers": arch.num_layers,
                "hidden": arch.hidden_size,
                "heads": arch.num_heads,
                "kv_heads": arch.num_kv_heads,
                "head_dim": arch.head_dim,
                "intermediate": arch.intermediate_size,
                "vocab": arch.vocab_size,
                "num_experts": arch.num_experts,
                "experts_per_token": arch.experts_per_token,
                "tie_word_embeddings": arch.tie_word_embeddings,
                "max_position_embeddings": arch.max_position_embeddings,
                "mxfp4_experts": (row["config"].get("quantization_config") or {}).get(
                    "quant_method"
                )
                == "mxfp4",
                "source": row["source"],
                "as_of": row["as_of"],
            }
        )
    return out
