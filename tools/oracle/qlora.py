"""A model of bitsandbytes' 4-bit linear layer for the fake-tensor oracle: NOT the kernel.

bitsandbytes is a CUDA library; its kernels do not run under ``FakeTensorMode`` on a CPU.
What a QLoRA training step allocates around them is a matter of which tensors exist,
their shapes and dtypes, and when they die, all of which bitsandbytes' Python code
decides. This module rebuilds that bookkeeping from the code of **bitsandbytes 0.49.2**
(tag ``0.49.2``, 2026-02-16) and reproduces it with plain torch operations, so the tracker
sees the same storages a CUDA run allocates. The arithmetic (NF4 code look-ups, the
matmul's values) is not done: the values are fake anyway.

Storage of one ``Linear4bit`` (``bitsandbytes/functional.py`` ``quantize_4bit``,
``bitsandbytes/backends/cuda/ops.py`` ``_quantize_4bit_impl``), ``n = out * in`` weights,
block size 64 (``blocksize=None`` -> 64):

- the packed weight (``Params4bit``, a parameter): ``((n + 1) // (2 * itemsize), 1)`` of
  ``quant_storage`` (uint8 by default: two 4-bit codes per byte; bf16 when
  ``bnb_4bit_quant_storage=torch.bfloat16``, same bytes);
- without double quantization: ``absmax``, fp32, one per block: ``ceil(n / 64)``;
- with double quantization (``compress_statistics=True``, transformers'
  ``bnb_4bit_use_double_quant``): ``offset = absmax.mean()`` (a 0-d fp32 tensor),
  ``quantize_blockwise(absmax - offset, blocksize=256)``: the uint8 absmax of each block
  (``ceil(n / 64)`` bytes), and a nested state with an fp32 absmax per 256 blocks and its
  own copy of the 256-entry fp32 "dynamic" code (``code.to(device, copy=True)``);
- the NF4 code: 16 fp32 values (``get_4bit_type("nf4", device)``), one tensor per layer.

These statistics live in ``Params4bit.quant_state``, a plain attribute, not a parameter
or buffer; here they are non-persistent buffers, so the oracle fakes and counts them.

Forward and backward (``bitsandbytes/autograd/_functions.py`` ``MatMul4Bit`` and
``bitsandbytes/nn/modules.py`` ``Linear4bit.forward`` at 0.49.2):

- ``Linear4bit.forward`` casts the input to the compute dtype (``x.to(compute_dtype)``,
  bf16 here), runs ``matmul_4bit`` and casts the result back to the input's dtype;
- ``MatMul4Bit.forward`` dequantizes the whole weight to a fresh 16-bit ``out x in``
  tensor (with double quantization it first dequantizes the absmax into an fp32 vector of
  ``ceil(n / 64)`` and adds the offset in place), runs ``F.linear`` and frees both; it
  keeps ``ctx.tensors = (None, B)``: the packed weight only, no input (since bitsandbytes
  0.43.2, PR #1270);
- ``MatMul4Bit.backward`` dequantizes the weight again and multiplies: ``grad_A =
  grad_output @ W``; the weight gets no gradient.

bitsandbytes 0.50 routes ``MatMul4Bit`` through a ``gemm_4bit`` op whose CUDA backend
picks a fused kernel only for at most 512 rows (``_gemm_4bit_use_custom_cuda``); above
that (every training micro-batch of a few hundred tokens or more) it runs
``_gemm_4bit_default_impl``, the same dequantize-then-``F.linear`` path with the same
buffers. The kernels' own workspaces are not modelled (``workarounds.LIMITS``).

The LoRA layer peft 0.21.0 puts on a ``Linear4bit`` (``peft/tuners/lora/bnb.py``
``Linear4bit.forward``) differs from the one on ``nn.Linear``: it clones the base
layer's output ("defensively", a comment there says), casts the input to the adapter's
dtype and the adapter's output back to the result's dtype before adding, both only
outside CUDA autocast (``requires_conversion = not torch.is_autocast_enabled()``).
:class:`LoraLinear4bitModel` is registered through peft's ``_register_custom_module``
(peft's own dispatch of bitsandbytes layers needs bitsandbytes importable) and repeats
that forward for a vanilla adapter.
"""

from __future__ import annotations

import torch
from torch import nn

BLOCKSIZE = 64  # bitsandbytes quantize_4bit: blocksize=None -> 64
NESTED_BLOCKSIZE = (
    256  # quantize_4bit(compress_statistics=True): quantize_blockwise(..., blocksize=256)
)
NF4_CODE_VALUES = 16  # get_4bit_type("nf4"): 16 fp32 values
DYNAMIC_CODE_VALUES = 256  # create_dynamic_map(): 256 fp32 values, copied per nested state

# Set by the oracle's run to its tracker, so the dequantized weights are tagged as such.
CURRENT: dict = {"tracker": None}


def _tagged(category: str):
    import contextlib

    tracker = CURRENT["tracker"]
    return tracker.tagged(category) if tracker is not None else contextlib.nullcontext()


def storage_shapes(
    out_features: int,
    in_features: int,
    double_quant: bool,
    quant_storage: torch.dtype = torch.uint8,
) -> dict:
    """Name -> (shape, dtype) of every tensor bitsandbytes 0.49.2 keeps for one 4-bit weight."""
    n = out_features * in_features
    blocks = -(-n // BLOCKSIZE)
    shapes = {
        "weight": (((n + 1) // (quant_storage.itemsize * 2), 1), quant_storage),
        "quant_code": ((NF4_CODE_VALUES,), torch.float32),
    }
    if double_quant:
        shapes["quant_absmax"] = ((blocks,), torch.uint8)
        shapes["quant_offset"] = ((), torch.float32)
        shapes["quant_nested_absmax"] = ((-(-blocks // NESTED_BLOCKSIZE),), torch.float32)
        shapes["quant_nested_code"] = ((DYNAMIC_CODE_VALUES,), torch.float32)
    else:
        shapes["quant_absmax"] = ((blocks,), torch.float32)
    return shapes


class Params4bit(nn.Parameter):
    """The packed weight's class name, which peft's ``prepare_model_for_kbit_training``
    checks (``param.__class__.__name__ != "Params4bit"``) to leave it uncast."""


def _dequantize(layer: "Linear4bitModel") -> torch.Tensor:
    """The full 16-bit weight ``out x in`` that ``F.dequantize_4bit`` returns (a new
    tensor each call), with the fp32 absmax it first rebuilds under double quantization."""
    with _tagged("dequant_buffer"):
        absmax = None
        if layer.double_quant:
            blocks = layer.quant_absmax.shape[0]
            absmax = torch.empty((blocks,), dtype=torch.float32, device=layer.weight.device)
            absmax += layer.quant_offset  # in place, as dequantize_4bit does
        w = torch.empty(
            (layer.out_features, layer.in_features),
            dtype=layer.compute_dtype,
            device=layer.weight.device,
        )
        del absmax
    return w


class _MatMul4Bit(torch.autograd.Function):
    """``MatMul4Bit`` at bitsandbytes 0.49.2: dequantize, ``F.linear``, free; nothing of
    the input saved; the backward dequantizes again for ``grad_A``."""

    @staticmethod
    def forward(ctx, A, packed, bias, layer):
        w = _dequantize(layer)
        out = torch.nn.functional.linear(A, w, bias)
        del w
        ctx.layer = layer  # ctx.tensors = (None, B): the packed weight, a parameter already
        return out

    @staticmethod
    def backward(ctx, grad_output):
        grad_a = None
        if ctx.needs_input_grad[0]:
            w = _dequantize(ctx.layer).to(grad_output.dtype)
            grad_a = torch.matmul(grad_output, w)
            del w
        return grad_a, None, None, None


class Linear4bitModel(nn.Linear):
    """Stand-in for ``bnb.nn.Linear4bit`` (nf4): the storages and buffers of bitsandbytes
    0.49.2, not its kernels (see the module doc). A subclass of ``nn.Linear`` as
    ``Linear4bit`` is, so peft's ``"all-linear"`` matches it."""

    def __init__(
        self,
        in_features: int,
        out_features: int,
        bias: bool,
        dtype: torch.dtype,
        double_quant: bool,
        compute_dtype: torch.dtype = torch.bfloat16,
        quant_storage: torch.dtype = torch.uint8,
        device: str = "meta",
    ) -> None:
        nn.Module.__init__(self)
        self.in_features, self.out_features = in_features, out_features
        self.double_quant = double_quant
        self.compute_dtype = compute_dtype
        shapes = storage_shapes(out_features, in_features, double_quant, quant_storage)
        shape, st_dtype = shapes.pop("weight")
        self.weight = Params4bit(
            torch.empty(shape, dtype=st_dtype, device=device), requires_grad=False
        )
        self.bias = (
            nn.Parameter(torch.empty(out_features, dtype=dtype, device=device), requires_grad=False)
            if bias
            else None
        )
        for name, (shape, st_dtype) in shapes.items():
            self.register_buffer(
                name, torch.empty(shape, dtype=st_dtype, device=device), persistent=False
            )

    @classmethod
    def from_linear(
        cls, linear: nn.Linear, double_quant: bool, quant_storage: torch.dtype
    ) -> "Linear4bitModel":
        return cls(
            linear.in_features,
            linear.out_features,
            linear.bias is not None,
            linear.weight.dtype,
            double_quant,
            quant_storage=quant_storage,
            device=str(linear.weight.device),
        )

    @classmethod
    def from_conv1d(cls, conv, double_quant: bool, quant_storage: torch.dtype) -> "Linear4bitModel":
        """A ``Conv1D`` (GPT-2's ``c_attn``, ``c_proj``, ``c_fc``) as transformers 5.17
        quantizes it: ``replace_with_bnb_linear`` (``integrations/bitsandbytes.py`` lines
        189-191) reads ``in_features, out_features = module.weight.shape`` (Conv1D stores
        ``in x out``) and builds a ``Linear4bit`` of those widths; the quantize step
        transposes the weight first (lines 52-54)."""
        d_in, d_out = conv.weight.shape
        return cls(
            d_in,
            d_out,
            conv.bias is not None,
            conv.weight.dtype,
            double_quant,
            quant_storage=quant_storage,
            device=str(conv.weight.device),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # bitsandbytes casts the bias to the input's dtype once, in place (bias.data = ...)
        if self.bias is not None and self.bias.dtype != x.dtype:
            self.bias.data = self.bias.data.to(x.dtype)
        inp_dtype = x.dtype
        x = x.to(self.compute_dtype)
        bias = None if self.bias is None else self.bias.to(self.compute_dtype)
        return _MatMul4Bit.apply(x, self.weight, bias, self).to(inp_dtype)


def quantize_linears(model: nn.Module, double_quant: bool, quant_storage: torch.dtype) -> list[str]:
    """Replace the modules transformers 5.17 quantizes with ``load_in_4bit=True`` by
    :class:`Linear4bitModel`; the names replaced.

    ``replace_with_bnb_linear`` (``integrations/bitsandbytes.py`` line 189) converts a module
    when ``isinstance(module, Conv1D) or type(module) is nn.Linear``: GPT-2's ``Conv1D`` is
    quantized, an ``nn.Linear`` subclass (Falcon's ``FalconLinear``) is not. It skips
    ``get_keys_to_not_convert(model)`` (``quantizers/base.py``): tied weights, the last
    parameter's module and the output embeddings (the LM head); a checkpoint whose config
    carries ``quantization_config.llm_int8_skip_modules`` skips that list instead
    (``quantizers/base.py`` ``get_modules_to_not_convert``: the default keys only when the list
    is ``None``), each module matched by ``quantizers/quantizers_utils.py``
    ``should_convert_module``."""
    from transformers.pytorch_utils import Conv1D
    from transformers.quantizers.base import get_keys_to_not_convert
    from transformers.quantizers.quantizers_utils import should_convert_module

    quant = getattr(model.config, "quantization_config", None)
    listed = quant.get("llm_int8_skip_modules") if isinstance(quant, dict) else None
    skip = set(get_keys_to_not_convert(model)) if listed is None else set()
    replaced = []
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full = f"{name}.{child_name}" if name else child_name
            if full in skip or (listed is not None and not should_convert_module(full, listed)):
                continue
            if isinstance(child, Conv1D):
                quantized = Linear4bitModel.from_conv1d(child, double_quant, quant_storage)
            elif type(child) is nn.Linear:
                quantized = Linear4bitModel.from_linear(child, double_quant, quant_storage)
            else:
                continue
            setattr(module, child_name, quantized)
            replaced.append(full)
    model.is_loaded_in_4bit = True
    return replaced


def lora_layer_class():
    """peft 0.21.0's LoRA layer for a 4-bit linear (``peft/tuners/lora/bnb.py``), as a
    class built on peft's ``LoraLayer`` (imported lazily: peft is optional for calc)."""
    from peft.tuners.lora.layer import LoraLayer

    class LoraLinear4bitModel(nn.Module, LoraLayer):
        """The forward of peft's ``lora.bnb.Linear4bit`` for a vanilla adapter."""

        def __init__(self, base_layer, adapter_name, config, r=0, lora_alpha=1, **kwargs):
            super().__init__()
            LoraLayer.__init__(self, base_layer)
            self.fan_in_fan_out = False
            self._active_adapter = adapter_name
            self.update_layer(adapter_name, r, lora_alpha=lora_alpha, config=config)

        def forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
            result = self.base_layer(x, *args, **kwargs)
            result = result.clone()  # peft: "for 4bit, we need to defensively clone here"
            for active in self.active_adapters:
                if active not in self.lora_A:
                    continue
                lora_a, lora_b = self.lora_A[active], self.lora_B[active]
                # peft asks torch.is_autocast_enabled() (CUDA autocast): the device's here
                convert = not torch.is_autocast_enabled(x.device.type)
                if convert:
                    expected = result.dtype
                    x = self._cast_input_dtype(x, lora_a.weight.dtype)
                output = lora_b(lora_a(self.lora_dropout[active](x))) * self.scaling[active]
                if convert:
                    output = output.to(expected)
                result = result + output
            return result

    return LoraLinear4bitModel


def unsupported_reason(req: dict, options: dict) -> str | None:
    """Why a QLoRA request cannot be traced faithfully, or None."""
    if req["precision"] not in ("bf16-true", "bf16-mixed", "fp32"):
        return (
            f"QLoRA with {req['precision']}: modelled with bf16 or fp32 non-quantized "
            "parameters and a bf16 compute dtype only"
        )
    if options.get("prepare_kbit") and req["precision"] != "fp32":
        return "prepare_kbit leaves the non-quantized parameters in fp32: ask for precision fp32"
    if req.get("qlora_prepare_kbit") and req["precision"] != "bf16-true":
        return "qlora_prepare_kbit is traced on a bf16 model without autocast (precision bf16-true)"
    return None


def load_in_4bit(model: nn.Module, req: dict, options: dict) -> nn.Module:
    """The model as ``from_pretrained(..., quantization_config=BitsAndBytesConfig(
    load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_compute_dtype=torch.bfloat16,
    bnb_4bit_use_double_quant=qlora_double_quant))`` leaves it, then, with the oracle
    option ``prepare_kbit``, after peft's ``prepare_model_for_kbit_training``.

    - ``lora_adapter_dtype``: as for LoRA. peft 0.21.0 moves each new adapter to the base
      layer's ``compute_dtype`` when it has one (``BaseTunerLayer.
      _get_base_layer_device_and_dtype``: "bnb Linear4bitLt"), bf16 here, whatever the
      packed weight's storage dtype; ``get_peft_model(autocast_adapter_dtype=True)``, the
      default, then upcasts them to fp32 (``"fp32"``); with False they stay bf16 (``"base"``).
      The weights are packed in uint8, bitsandbytes' default ``quant_storage``.
    - ``qlora_prepare_kbit`` (``bf16-true``): the model built in bf16, then peft's
      ``prepare_model_for_kbit_training`` itself (the same as the option ``prepare_kbit``).
    - ``precision="bf16-mixed"``: the model built in fp32 as below (calc's AMP regime: what
      ``prepare_model_for_kbit_training`` leaves) and run under CPU autocast; the norms'
      fp32 outputs make the 4-bit linears return fp32.
    - ``precision="fp32"``: every non-quantized parameter in fp32, what
      ``prepare_model_for_kbit_training`` makes of a bf16 model (with ``prepare_kbit`` the
      model is built in bf16 and that function itself does the casting) (it casts each fp16/bf16
      parameter whose class is not ``Params4bit`` to fp32, ``peft/utils/other.py``): the
      embeddings, norms, biases and the output layer; the 4-bit matmuls still compute in
      bf16 and cast their outputs back to fp32 (``Linear4bit.forward``).
    """
    quantize_linears(model, req["qlora_double_quant"], torch.uint8)
    if options.get("prepare_kbit") or req.get("qlora_prepare_kbit"):
        from peft import prepare_model_for_kbit_training

        model = prepare_model_for_kbit_training(
            model,
            use_gradient_checkpointing=req["gradient_checkpointing"],
            gradient_checkpointing_kwargs={"use_reentrant": bool(options.get("reentrant"))},
        )
    return model
