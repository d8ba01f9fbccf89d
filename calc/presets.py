"""Model presets, read from ``calc/data/models.json``.

Each row holds the shape keys of a Hugging Face ``config.json`` (parsed by the same
reader as a pasted config, :func:`calc.hf_config.arch_from_hf_config`), its stated
``params_total``, ``source`` and ``as_of``. The file is read once, on first use, and
each preset is parsed once; later calls return the cached :class:`~calc.arch.ModelArch`.
"""

from __future__ import annotations

import json

from .arch import ModelArch
from .errors import InputError
from .hf_config import arch_from_hf_config

DATA_FILE = "models.json"

_rows: dict[str, dict] | None = None
_archs: dict[str, ModelArch] = {}


def _load_rows() -> dict[str, dict]:
    """Rows by id, in file order. Reads through importlib.resources so it also works
    when ``calc`` is installed from a wheel or a zip (Pyodide)."""
    global _rows
    if _rows is None:
        from importlib.resources import files

        text = files(__package__).joinpath("data").joinpath(DATA_FILE).read_text(encoding="utf-8")
        rows = {}
        for row in json.loads(text)["models"]:
            if row["id"] in rows:
                raise ValueError(f"duplicate preset id {row['id']!r} in {DATA_FILE}")
            rows[row["id"]] = row
        _rows = rows
    return _rows


def preset_ids() -> tuple[str, ...]:
    return tuple(_load_rows())


def preset_row(preset_id: str) -> dict:
    """The data row of a preset (config, source, as_of, stated counts)."""
    row = _load_rows().get(preset_id) if isinstance(preset_id, str) else None
    if row is None:
        raise InputError("unknown_preset", "model", preset_id)
    return row


def get_preset(preset_id: str) -> ModelArch:
    """The architecture of a preset id; ``InputError("unknown_preset", "model", id)``."""
    arch = _archs.get(preset_id) if isinstance(preset_id, str) else None
    if arch is None:
        row = preset_row(preset_id)
        arch = arch_from_hf_config(row["config"], preset_id)
        _archs[preset_id] = arch
    return arch


def presets_listing() -> list[dict]:
    """JSON-able list for ``python -m calc presets`` and the site's preset tables."""
    out = []
    for preset_id, row in _load_rows().items():
        arch = get_preset(preset_id)
        out.append({
            "id": preset_id,
            "name": row["name"],
            "family": arch.family,
            "hf_repo": row["hf_repo"],
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
            "source": row["source"],
            "as_of": row["as_of"],
        })
    return out
