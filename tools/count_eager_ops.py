"""Ops transformers' decoder blocks dispatch per layer, eager: the trace behind
``calc.timing.TRANSFORMERS_BLOCK_OPS``.

``python tools/count_eager_ops.py [MODEL_TYPE ...] [--json]`` (needs torch and transformers:
``tools/requirements-oracle-transformers5.txt``). For one preset of each family calc reads, it
builds the model from the preset's Hugging Face config with random weights on the CPU (bf16,
``attn_implementation="sdpa"``, no KV cache, no checkpointing), runs a warm-up step, then
counts the aten ops one forward (with the loss) and one backward dispatch, under a
``TorchDispatchMode``. Views and metadata ops launch no kernel and are not counted
(:data:`NO_KERNEL`). The stack is built twice, with one period of its layer pattern and with
two; the difference is the ops of one period, divided by its layers: the ops of an average
block, whatever the embedding, final norm, head and loss add once.

Dropouts are set to 0 (calc counts a block's dropout kernels apart,
``RESIDUAL_DROPOUTS_PER_LAYER``). The widths that only size tensors are shrunk (MLP widths, vocabulary, routed experts; the
count of an op does not depend on its size), the widths that shape the block's code are kept
(hidden size, heads, head dims). A block's ops are the same on the CPU as on a GPU except
inside SDPA, which is one op forward and one backward on either (the CPU's flash kernel, or
CUDA's flash, memory-efficient or cuDNN kernel).

What calc counts apart is taken out: the block's linears (one matmul each forward, two
backward: calc's ``linear_ops``, which for routed experts is what
:func:`calc.moe_kernels.moe_counts` says transformers 5.17's grouped path launches). The
rest, forward and backward, per block, is the table.

Not traced (calc keeps its generic count there): stacks with a linear-attention, Mamba or
short-convolution mixer (calc prices those mixers as flash-linear-attention's and
mamba-ssm's kernels, which the CPU does not run; transformers' pure-torch fallback is a
different op count) and families transformers builds without SDPA.
"""

from __future__ import annotations

import collections
import copy
import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

NO_KERNEL = frozenset(
    {
        "_has_compatible_shallow_copy_type",
        "_local_scalar_dense",
        "_reshape_alias",
        "_unsafe_view",
        "alias",
        "as_strided",
        "chunk",
        "detach",
        "diagonal",
        "dim",
        "empty",
        "empty_like",
        "empty_strided",
        "expand",
        "is_contiguous",
        "is_nonzero",
        "is_same_size",
        "lift_fresh",
        "narrow",
        "new_empty",
        "new_empty_strided",
        "numel",
        "permute",
        "reshape",
        "result_type",
        "select",
        "size",
        "slice",
        "split",
        "split_with_sizes",
        "squeeze",
        "stride",
        "sym_numel",
        "sym_size",
        "sym_storage_offset",
        "sym_stride",
        "t",
        "transpose",
        "unbind",
        "unflatten",
        "unfold",
        "unsqueeze",
        "view",
        "view_as",
        "view_as_complex",
        "view_as_real",
    }
)
"""Aten ops that only make a view, read metadata or allocate without writing: no kernel."""

SHRINK = {
    "intermediate_size": 64,
    "moe_intermediate_size": 32,
    "shared_expert_intermediate_size": 32,
    "ffn_hidden_size": 64,
    "vocab_size": 512,
    "n_routed_experts": 8,
    "num_experts": 8,
    "num_local_experts": 8,
}
"""Widths that only size tensors, and their traced values."""

TOP_K_KEYS = ("num_experts_per_tok", "top_k", "moe_topk", "num_experts_per_token", "top_k_experts")
SEQ_LEN = 32


HALF_MATMULS = frozenset({"mm", "addmm", "bmm", "baddbmm"})
"""The matmul ops :func:`fp32_matmuls` runs in fp32."""


def fp32_matmuls() -> Any:
    """A ``TorchDispatchMode`` that runs 16-bit matmuls in fp32 and rounds the result back.

    Why: on a CPU without native bf16 instructions (AVX2 only), PyTorch 2.13's bf16 GEMM runs a
    reference loop at about 0.3 GFLOP/s against 50 in fp32 (measured on this project's CI
    machine), so one traced 4,096-wide block took minutes. The traces count kernels and the
    bytes of element-wise ops; matmuls are counted once by name and never by bytes, and their
    outputs keep their dtype, shape and layout, so the counts do not change. Enter it *outside*
    the counter, so the counter sees one matmul and not the casts this mode adds."""
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode

    half = (torch.bfloat16, torch.float16)

    class Fp32Matmuls(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            kwargs = kwargs or {}
            tensors = [a for a in args if isinstance(a, torch.Tensor)]
            if (
                func.overloadpacket.__name__ not in HALF_MATMULS
                or "out" in kwargs
                or not tensors
                or tensors[0].dtype not in half
            ):
                return func(*args, **kwargs)
            dtype = tensors[0].dtype
            up = [a.float() if isinstance(a, torch.Tensor) else a for a in args]
            return func(*up, **kwargs).to(dtype)

    return Fp32Matmuls()


def op_counter() -> Any:
    """A ``TorchDispatchMode`` that counts the aten ops dispatched inside it, by name (``.ops``);
    ``benchmarks/count_float8_ops.py`` counts with it too."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.ops: collections.Counter[str] = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            self.ops[func.overloadpacket.__name__] += 1
            return func(*args, **(kwargs or {}))

    return Count()


def kernels(ops: collections.Counter[str]) -> int:
    return sum(n for name, n in ops.items() if name not in NO_KERNEL)


def traced_config(config: dict, layers: int) -> dict:
    """The preset's config with ``layers`` blocks (its layer pattern cut to them) and the
    sizing widths shrunk (:data:`SHRINK`)."""
    hf = copy.deepcopy(config)
    if isinstance(hf.get("text_config"), dict):
        hf = dict(hf["text_config"])
    for key, value in SHRINK.items():
        if isinstance(hf.get(key), int):
            hf[key] = min(hf[key], value)
    experts = min(
        [hf[k] for k in ("n_routed_experts", "num_experts", "num_local_experts") if k in hf] or [0]
    )
    for key in TOP_K_KEYS:
        if isinstance(hf.get(key), int):
            hf[key] = min(hf[key], 2)
    if experts:  # DeepSeek's group-limited routing: one group holding every expert
        for key in ("n_group", "topk_group"):
            if key in hf:
                hf[key] = 1
    for key in ("first_k_dense_replace",):
        if key in hf:
            hf[key] = 0
    if isinstance(hf.get("layer_types"), list):
        hf["layer_types"] = hf["layer_types"][:layers]
    hf["num_hidden_layers"] = layers
    for key in ("n_layer", "num_layers", "n_layers"):  # the names some families use for it
        if key in hf:
            hf[key] = layers
    hf["use_cache"] = False
    for key in ("pad_token_id", "eos_token_id", "bos_token_id"):
        hf[key] = None
    for key in _dropout_keys(hf):
        # dropouts off, the config class's defaults too: calc counts a block's dropout kernels
        # itself (RESIDUAL_DROPOUTS_PER_LAYER), and reads the same dict
        hf[key] = 0.0
    return hf


def _dropout_keys(hf: dict) -> list[str]:
    """The dropout probabilities of the family's config class, given or defaulted."""
    from transformers import AutoConfig

    fields = {k: v for k, v in hf.items() if k not in ("model_type", "architectures")}
    cfg = AutoConfig.for_model(hf["model_type"], **fields)
    return [
        key
        for key, value in vars(cfg).items()
        if (key.endswith("pdrop") or key.endswith("dropout")) and isinstance(value, float)
    ]


def build_stack(config: dict, layers: int, dtype: Any, attention: str = "sdpa") -> tuple[Any, Any]:
    """The preset's causal LM of ``layers`` blocks (:func:`traced_config`), random weights in
    ``dtype``, ``attention`` (transformers' ``attn_implementation``: SDPA unless told); and its
    transformers config."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from tools.oracle.run import causal_lm_from_config

    hf = traced_config(config, layers)
    model_type = hf.pop("model_type")
    hf.pop("architectures", None)
    cfg = AutoConfig.for_model(model_type, **hf)
    torch.manual_seed(0)
    dtype_key = "dtype" if generation() >= 5 else "torch_dtype"
    model = causal_lm_from_config(
        AutoModelForCausalLM, cfg, attn_implementation=attention, **{dtype_key: dtype}
    )
    return model, cfg


def trace(config: dict, layers: int, lora: dict | None = None) -> tuple[int, int]:
    """Kernel-launching ops of one forward (with the loss) and one backward of the stack.
    ``lora``: peft's LoRA on it first (``targets``: ``"all-linear"`` or module names,
    ``fp32``: adapters in fp32, as ``get_peft_model(autocast_adapter_dtype=True)`` makes them)."""
    import torch

    model, cfg = build_stack(config, layers, torch.bfloat16)
    if lora is not None:
        from peft import LoraConfig, get_peft_model

        adapters = LoraConfig(r=8, target_modules=lora["targets"], lora_dropout=0.0)
        model = get_peft_model(model, adapters, autocast_adapter_dtype=lora["fp32"])
    model.train()
    ids = torch.randint(0, cfg.vocab_size, (1, SEQ_LEN))
    with fp32_matmuls():
        model(input_ids=ids, labels=ids).loss.backward()  # warm-up: lazy inits off the count
        model.zero_grad(set_to_none=True)
        forward, backward = op_counter(), op_counter()
        with forward:
            loss = model(input_ids=ids, labels=ids).loss
        with backward:
            loss.backward()
    return kernels(forward.ops), kernels(backward.ops)


def period(config: dict) -> int:
    """Blocks in one period of the stack's ``layer_types`` (1 without one)."""
    text = config.get("text_config", config)
    kinds = text.get("layer_types")
    if not isinstance(kinds, list) or not kinds:
        return 1
    for p in range(1, len(kinds) + 1):
        if all(kinds[i] == kinds[i % p] for i in range(len(kinds))):
            return p
    return len(kinds)


def generation() -> int:
    """The installed transformers' major version."""
    import transformers

    return int(transformers.__version__.split(".")[0])


def calc_framework() -> str:
    """A calc profile of the installed transformers generation (its MoE layout: transformers 5's
    3-D experts, transformers 4's per-expert modules)."""
    return "hf-custom-loop" if generation() >= 5 else "pytorch-loop-4"


def calc_request(config: dict, layers: int, **keys: Any) -> Any:
    """calc's request for the traced stack of ``layers`` blocks, read from the same config:
    full fine-tuning, bf16, SDPA, eager, one row of :data:`SEQ_LEN` tokens (``keys`` override
    the method and its settings)."""
    from calc.request import parse_estimate_request

    return parse_estimate_request(
        {
            "model": {"hf_config": traced_config(config, layers)},
            "method": "full",
            **keys,
            "precision": "bf16-true",
            "gradient_checkpointing": False,
            "attention": "sdpa",
            "framework": calc_framework(),
            "micro_batch_size": 1,
            "seq_len": SEQ_LEN,
        }
    )


def calc_linear_ops(config: dict, layers: int) -> float:
    """calc's ``linear_ops`` (:func:`calc.timing.block_linear_ops`) of the traced stack."""
    from calc import timing

    return timing.block_linear_ops(calc_request(config, layers))


def family_presets() -> dict[str, str]:
    """One preset per family calc reads that the trace covers: the first of models.json."""
    from calc.presets import get_preset, preset_ids

    out: dict[str, str] = {}
    for pid in preset_ids():
        arch = get_preset(pid)
        if arch.family in out or arch.hybrid:
            continue
        out[arch.family] = pid
    return out


def block_ops(preset: str) -> dict[str, Any]:
    from calc.presets import preset_row

    config = preset_row(preset)["config"]
    p = period(config)
    f1, b1 = trace(config, p)
    f2, b2 = trace(config, 2 * p)
    forward, backward = (f2 - f1) / p, (b2 - b1) / p
    linear = (calc_linear_ops(config, 2 * p) - calc_linear_ops(config, p)) / p
    return {
        "preset": preset,
        "period": p,
        "forward": forward,
        "backward": backward,
        "linear_ops": linear,
        "other_forward": round(forward - linear, 2),
        "other_backward": round(backward - 2 * linear, 2),
    }


def family_table(wanted: list[str], row: Any) -> dict[str, Any]:
    """``row(preset)`` for the preset of each family (those ``wanted``, or all); a family
    transformers builds differently is reported with its error and skipped."""
    table: dict[str, Any] = {}
    for family, preset in sorted(family_presets().items()):
        if wanted and family not in wanted:
            continue
        try:
            table[family] = row(preset)
        except Exception as exc:
            table[family] = {"preset": preset, "error": f"{type(exc).__name__}: {exc}"[:200]}
    return table


def main(argv: list[str]) -> int:
    import torch
    import transformers

    as_json = "--json" in argv
    table = family_table([a for a in argv if not a.startswith("--")], block_ops)
    versions = {"torch": torch.__version__, "transformers": transformers.__version__}
    if as_json:
        print(json.dumps({"versions": versions, "families": table}, indent=1, sort_keys=True))
        return 0
    print(f"torch {versions['torch']}, transformers {versions['transformers']}")
    print_family_table(
        table,
        lambda row: (
            f"per block: forward {row['forward']:6.1f} "
            f"backward {row['backward']:6.1f}; linears {row['linear_ops']:5.1f}; other "
            f"{row['other_forward']:6.1f} / {row['other_backward']:6.1f}"
        ),
    )
    return 0


def print_family_table(table: dict[str, Any], line: Any) -> None:
    """One line per family: its preset and ``line(row)``, or why it was not traced."""
    for family, row in table.items():
        text = f"not traced: {row['error']}" if "error" in row else line(row)
        print(f"{family:20s} {row['preset']:24s} {text}")


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
