"""The model loaded in bf16 and trained under autocast (calc's ``weights_loaded_16bit`` with
``bf16-mixed``), for the sweep to trace.

``tools/oracle/run.py`` builds a ``bf16-mixed`` model in fp32 (Lightning's meaning of mixed
precision: fp32 weights, 16-bit compute) and runs its forward under ``torch.autocast``.
transformers 5.17 ``from_pretrained`` loads the checkpoint's dtype instead (``dtype="auto"``),
so a Trainer with ``bf16=True`` autocasts a bf16 model. :func:`loaded_in_bf16` builds the
model in bf16 and leaves the rest of the run as it is: peft's adapters (fp32 with
``autocast_adapter_dtype=True``), autocast, the optimizer. ``benchmarks/oracle_sweep.py``
applies it around the setups whose request turns the key on, and asks the oracle for the
request with the key off (the oracle's own check refuses keys it does not read)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def loaded_in_bf16() -> Iterator[None]:
    """Every model ``run.build_meta_model`` builds is built in bf16."""
    import torch

    from . import run

    build = run.causal_lm_from_config

    def bf16(auto, config, **kwargs):  # type: ignore[no-untyped-def]
        return build(auto, config, **{**kwargs, "dtype": torch.bfloat16})

    run.causal_lm_from_config = bf16
    try:
        yield
    finally:
        run.causal_lm_from_config = build
