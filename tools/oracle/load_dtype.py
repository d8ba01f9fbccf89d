"""The model loaded in 16 bits and trained under autocast (calc's ``weights_loaded_16bit`` with
``*-mixed``, and ``weights_loaded_other_16bit``: the other 16-bit type), for the sweep to trace.

``tools/oracle/run.py`` builds a ``bf16-mixed`` model in fp32 (Lightning's meaning of mixed
precision: fp32 weights, 16-bit compute) and runs its forward under ``torch.autocast``.
transformers 5.17 ``from_pretrained`` loads the checkpoint's dtype instead (``dtype="auto"``),
so a Trainer with ``bf16=True`` autocasts a bf16 model (an fp16 one where the checkpoint is
fp16). :func:`loaded_in` builds the model in that dtype and leaves the rest of the run as it is: peft's adapters (fp32 with
``autocast_adapter_dtype=True``), autocast, the optimizer. ``benchmarks/oracle_sweep.py``
applies it around the setups whose request turns the key on, and asks the oracle for the
request with the key off (the oracle's own check refuses keys it does not read)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator


@contextlib.contextmanager
def loaded_in(dtype_name: str) -> Iterator[None]:
    """Every model ``run.build_meta_model`` builds is built in ``dtype_name`` ("bfloat16", or
    "float16": an fp16 checkpoint loaded with ``dtype="auto"``, calc's
    ``weights_loaded_other_16bit`` under ``bf16-mixed``)."""
    import torch

    from . import run

    build = run.causal_lm_from_config
    dtype = getattr(torch, dtype_name)

    def loaded(auto, config, **kwargs):  # type: ignore[no-untyped-def]
        return build(auto, config, **{**kwargs, "dtype": dtype})

    run.causal_lm_from_config = loaded
    try:
        yield
    finally:
        run.causal_lm_from_config = build
