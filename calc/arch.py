"""Model architecture: the shapes that decide parameter counts and activations.

A :class:`ModelArch` is built from a preset (``calc.presets``) or from the
contents of a Hugging Face ``config.json`` (``calc.hf_config``). Parameter
counts are exact per module: grouped-query attention (k and v are
``hidden x kv_heads*head_dim``), explicit ``head_dim``, gated (3 matrices) or
plain (2 matrices) MLP, biases, norms, tied embeddings and MoE experts. A hybrid stack
(``block_counts`` over :data:`MIXER_KINDS`) holds attention blocks beside Gated DeltaNet
(:class:`LinearAttention`) or short-convolution blocks, each kind with its own linears
(``block_kind``) and parameters outside them (``block_kind_params``: conv weights, decays,
gated norms, q/k norms).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from functools import cached_property

from .errors import ConfigError
from .jsontypes import JsonObject


# What each MLP module reads, by the name calc's readers give it (calc.hf_config), as the
# families' transformers code calls them: an input projection reads the block's MLP input
# (the norm's output, or a routed expert's gathered rows), an output projection reads the
# unit's intermediate and writes back to the residual width. Read from the name, never from
# the widths: gpt-oss has intermediate_size == hidden_size (2880), so both of its expert
# matrices read 2880 values.
MLP_INPUT_NAMES = frozenset(
    {
        "gate_proj",
        "up_proj",  # LlamaMLP.forward: down_proj(act_fn(gate_proj(x)) * up_proj(x))
        "gate_up_proj",  # Phi3MLP.forward: up_states = self.gate_up_proj(hidden_states)
        "w1",
        "w3",  # MixtralBlockSparseTop2MLP.forward: act_fn(w1(x)) * w3(x)
        "fc1",  # PhiMLP.forward: fc2(activation_fn(fc1(hidden_states)))
        "c_fc",  # GPT2MLP.forward: c_proj(act(c_fc(hidden_states)))
        "dense_h_to_4h",  # GPTNeoXMLP / FalconMLP / BloomMLP
        "input_linear",  # GraniteMoeHybridMLP: act(chunk 0) * chunk 1 of input_linear(x)
        "experts.gate_up_proj",  # GptOssExperts / Llama4TextExperts: x @ gate_up_proj
        "experts.up_proj",  # NemotronHExperts: down_proj(relu2(up_proj(x))), no gate
    }
)
MLP_OUTPUT_NAMES = frozenset(
    {
        "down_proj",
        "w2",
        "fc2",
        "c_proj",
        "dense_4h_to_h",
        "output_linear",
        "experts.down_proj",  # GptOssExperts / Llama4TextExperts: (...) @ down_proj
    }
)
MIXER_KINDS = ("full_attention", "linear_attention", "conv")
"""Token mixers a hybrid stack's blocks hold, by transformers' ``layer_types`` names:
softmax attention, Gated DeltaNet linear attention (Qwen3-Next, Qwen3.5) or a gated short
convolution (LFM2). A Mamba-2 stack (:class:`Mamba2`) names its blocks ``mamba``,
``full_attention`` and ``mlp`` (Nemotron-H: one sublayer per block, see
:data:`SUBLAYER_KINDS`)."""
SUBLAYER_KINDS = ("mamba", "full_attention", "mlp")
"""Blocks of a stack that holds one sublayer per block (Nemotron-H's ``NemotronHBlock``: a
norm, then a Mamba-2 mixer, an attention or an MLP, then the residual add)."""

ATTN_INNER_NAMES = frozenset(
    {
        "q_b_proj",  # DeepseekV3Attention.forward: q_b_proj(q_a_layernorm(q_a_proj(x)))
        "kv_b_proj",  # DeepseekV3Attention.expand_kv: kv_b_proj(kv_a_layernorm(kv_nope))
    }
)
"""Attention linears that read an intermediate of the attention (multi-head latent attention's
up-projections from the compressed q and kv), not the block's normalised input (transformers
5.17 ``models/deepseek_v3/modeling_deepseek_v3.py``)."""
ROUTER_NAMES = frozenset({"gate", "router"})
"""MoE routers (hidden -> experts): Mixtral / Qwen-MoE ``gate``, gpt-oss / Llama 4 ``router``;
Qwen2-MoE's ``shared_expert_gate`` (hidden -> 1) is a router-role module but no router."""


@dataclass(frozen=True)
class LinearLayer:
    """One linear module of a decoder block, as Hugging Face names it.

    ``count`` is how many copies one block holds (MoE experts: one per expert).
    ``active`` is how many of those copies a token passes through.
    ``quantizable``: QLoRA (bitsandbytes / torchao NF4) quantizes it; the MoE
    router stays in 16-bit.
    ``role``: ``"attn"`` (q, k, v, fused qkv, output projection), ``"mlp"`` (dense MLP,
    MoE experts and shared experts), ``"router"`` (MoE gate and shared-expert gate) or
    ``"ple"`` (Gemma 4's per-layer input projections) or ``"mixer"`` (the projections of a linear-attention mixer: Gated DeltaNet's
    ``in_proj_qkv``, ``in_proj_z``, ``in_proj_b``, ``in_proj_a``, ``out_proj``; listed with
    its output projection last) or ``"indexer"`` (the lightning indexer of DeepSeek sparse
    attention, ``wq_b``, ``wk``, ``weights_proj``: it runs under ``torch.no_grad``, so it
    saves nothing, its weights and any adapter on them get no gradient, and only the blocks
    that run an indexer hold it, ``ModelArch.indexer_layers``).
    An ``"mlp"`` module's name says what it reads (:data:`MLP_INPUT_NAMES`,
    :data:`MLP_OUTPUT_NAMES`); a name in neither is refused.
    ``kind``: ``"linear"`` for an ``nn.Linear`` (what peft's ``target_modules`` and
    ``"all-linear"`` match, what bitsandbytes replaces with a 4-bit layer), ``"param"`` for
    a bare ``nn.Parameter`` such as the 3-D expert tensors of gpt-oss and Llama 4 in
    transformers 5 (``experts.gate_up_proj`` of shape ``experts x hidden x 2*width``): peft
    reaches those only through ``target_parameters`` and bitsandbytes leaves them in 16-bit.
    """

    name: str
    d_in: int
    d_out: int
    bias: bool = False
    count: int = 1
    active: int = 1
    quantizable: bool = True
    role: str = "mlp"
    kind: str = "linear"
    # "" when every decoder block holds this module; else the name of the kind of block that
    # does (Llama 4 Maverick: "moe" or "dense"), counted in ``ModelArch.block_counts``.
    block_kind: str = ""

    def __post_init__(self) -> None:
        for key in ("d_in", "d_out", "count", "active"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError("config_invalid_value", key, value)
        if self.active > self.count:
            raise ConfigError("config_invalid_value", "active", self.active)
        if not isinstance(self.block_kind, str):
            raise ConfigError("config_invalid_value", "block_kind", self.block_kind)
        if self.role not in ("attn", "mlp", "router", "mixer", "indexer", "ple"):
            raise ConfigError("config_invalid_value", "role", self.role)
        if self.kind not in ("linear", "param"):
            raise ConfigError("config_invalid_value", "kind", self.kind)
        if self.role == "mlp" and self.name not in MLP_INPUT_NAMES | MLP_OUTPUT_NAMES:
            raise ConfigError("config_invalid_value", "name", self.name)

    @property
    def mlp_output(self) -> bool:
        """An MLP unit's output projection (down, w2, fc2, ...): it reads the unit's
        intermediate, not the block's MLP input."""
        return self.role == "mlp" and self.name in MLP_OUTPUT_NAMES

    @property
    def is_router(self) -> bool:
        """The MoE router (hidden -> experts), not a shared expert's scalar gate."""
        return self.role == "router" and self.name in ROUTER_NAMES

    @property
    def weight_params(self) -> int:
        return self.d_in * self.d_out

    @property
    def params(self) -> int:
        """Parameters of all ``count`` copies, bias included."""
        return self.count * (self.d_in * self.d_out + (self.d_out if self.bias else 0))


@dataclass(frozen=True)
class LinearAttention:
    """Shapes of a Gated DeltaNet mixer (transformers 5.17 ``Qwen3NextGatedDeltaNet``,
    ``Qwen3_5GatedDeltaNet``): ``key_heads`` q/k heads of ``key_head_dim``, ``value_heads``
    v heads of ``value_head_dim`` (q and k are repeated to the value heads), a depthwise
    causal ``conv1d`` of ``conv_kernel`` taps over q, k and v (no bias), one decay
    (``A_log``) and one ``dt_bias`` per value head, and a gated RMSNorm of
    ``value_head_dim`` weights on the output. Its recurrent state is ``value_heads x
    key_head_dim x value_head_dim`` per sequence. Kimi Linear's Kimi Delta Attention
    (``KimiLinearDeltaAttention``, ``ModelArch.extra["kda"]``) has the same shapes with as many
    key heads as value heads; its own parameters (a ``dt_bias`` per channel, not per head) are
    counted by its reader, not by :attr:`own_params`."""

    key_heads: int
    value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int

    def __post_init__(self) -> None:
        for key in ("key_heads", "value_heads", "key_head_dim", "value_head_dim", "conv_kernel"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError("config_invalid_value", key, value)
        if self.value_heads % self.key_heads:
            raise ConfigError("config_kv_heads_indivisible", "key_heads", self.key_heads)

    @property
    def key_dim(self) -> int:
        return self.key_heads * self.key_head_dim

    @property
    def value_dim(self) -> int:
        return self.value_heads * self.value_head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the short convolution: q, k and v concatenated."""
        return 2 * self.key_dim + self.value_dim

    @property
    def own_params(self) -> int:
        """Parameters of the mixer outside its linears: the depthwise conv weight
        (``conv_dim x 1 x kernel``), ``A_log`` and ``dt_bias`` (one per value head each),
        the gated norm's weight (``value_head_dim``)."""
        return self.conv_dim * self.conv_kernel + 2 * self.value_heads + self.value_head_dim

    @property
    def state_elements(self) -> int:
        """The recurrent state of one sequence: ``value_heads x key_head_dim x
        value_head_dim`` (fp32 in the kernels), plus the conv state ``conv_dim x
        (kernel - 1)``."""
        return self.value_heads * self.key_head_dim * self.value_head_dim + self.conv_dim * (
            self.conv_kernel - 1
        )


@dataclass(frozen=True)
class Mamba2:
    """Shapes of a Mamba-2 mixer (transformers 5.17 ``NemotronHMamba2Mixer``): ``heads`` SSM
    heads of ``head_dim`` (``d_inner = heads * head_dim``), ``groups`` groups of B and C of
    ``state`` each, a depthwise causal ``conv1d`` of ``conv_kernel`` taps over x, B and C
    (``conv_dim = d_inner + 2 * groups * state`` channels, with a bias when ``conv_bias``),
    ``dt_bias``, ``A_log`` and ``D`` (one per head) and a gated RMSNorm of ``d_inner``
    weights (normalised per group). ``in_proj`` writes ``2 * d_inner + 2 * groups * state +
    heads`` values (z, x, B, C, dt); ``out_proj`` reads ``d_inner``."""

    heads: int
    head_dim: int
    groups: int
    state: int
    conv_kernel: int
    conv_bias: bool = True
    chunk: int = 128
    # the gated RMSNorm before out_proj (Falcon-H1's ``mamba_rms_norm`` may leave it out: the
    # scan gates its output with ``z`` itself)
    gated_norm: bool = True

    def __post_init__(self) -> None:
        for key in ("heads", "head_dim", "groups", "state", "conv_kernel", "chunk"):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError("config_invalid_value", key, value)
        if self.heads % self.groups:
            raise ConfigError("config_kv_heads_indivisible", "n_groups", self.groups)

    @property
    def d_inner(self) -> int:
        return self.heads * self.head_dim

    @property
    def conv_dim(self) -> int:
        """Channels of the short convolution: x, B and C concatenated."""
        return self.d_inner + 2 * self.groups * self.state

    @property
    def in_proj_width(self) -> int:
        """``in_proj``'s output: z, x, B, C and dt."""
        return self.d_inner + self.conv_dim + self.heads

    @property
    def own_params(self) -> int:
        """Parameters of the mixer outside its linears: the conv weight (``conv_dim x 1 x
        kernel``) and bias, ``dt_bias``, ``A_log``, ``D``, the gated norm's weight."""
        conv = self.conv_dim * self.conv_kernel + (self.conv_dim if self.conv_bias else 0)
        return conv + 3 * self.heads + (self.d_inner if self.gated_norm else 0)


@dataclass(frozen=True)
class ModelArch:
    """Shapes of a decoder-only transformer. Sizes are element counts."""

    name: str
    family: str
    vocab_size: int
    hidden_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    intermediate_size: int  # dense MLP width; for MoE, one routed expert's width
    max_position_embeddings: int
    linears: tuple[LinearLayer, ...]  # one block's linear modules
    norm_kind: str = "rms"  # "rms" (weight), "layer" (weight and bias), "none" (OLMo: no weights)
    norms_per_layer: int = 2
    tie_word_embeddings: bool = False
    learned_positions: int = 0  # rows of a learned position table (GPT-2); 0 for RoPE/ALiBi
    embedding_norm: bool = False  # BLOOM normalises the embedding output
    num_experts: int = 0  # 0 for a dense model
    experts_per_token: int = 0
    parallel_block: bool = False  # attention and MLP read the same input (NeoX, Falcon, Phi-2)
    mlp_gated: bool = True  # gate * up (SwiGLU/GeGLU, 3 matrices) or plain up/down (2 matrices)
    shared_expert_intermediate_size: int = 0  # Qwen-MoE shared expert width; 0 when none
    lm_head_bias: bool = False  # Phi-2's output layer has a bias
    block_extra_params: int = 0  # per block, outside linears and full-width norms (q/k norms)
    # family traits read from the config (dropouts, soft-capping, ...): compared, so that two
    # configs that differ only there are two models to every cache keyed on the request; not
    # hashed (a dict), which equal hashes of unequal models allow
    extra: JsonObject = field(default_factory=dict, hash=False)
    # A mixed stack (Llama 4 Maverick alternates dense and MoE blocks): how many blocks of each
    # kind, ((kind, count), ...), summing to num_layers; empty when every block is the same.
    block_counts: tuple[tuple[str, int], ...] = ()
    # Parameters outside linears and full-width norms that only one kind of block holds,
    # ((kind, params per block), ...): a hybrid stack's Gated DeltaNet conv / decay / gated
    # norm, its attention blocks' q/k norms. Empty for a uniform stack.
    block_kind_params: tuple[tuple[str, int], ...] = ()
    # A hybrid stack whose blocks also differ by their MLP (LFM2-MoE: dense MLPs in the first
    # blocks, routed experts after), whichever their mixer: how many blocks hold each MLP kind,
    # ((kind, count), ...), summing to num_layers; a linear of one of these kinds is held by
    # that many blocks. Empty when the MLP kinds are in ``block_counts`` or every block has one.
    ffn_counts: tuple[tuple[str, int], ...] = ()
    # The Gated DeltaNet shapes of a hybrid stack (block kinds of MIXER_KINDS); None else.
    linear_attention: LinearAttention | None = None
    # Taps of the gated short convolution of a hybrid stack's "conv" blocks (LFM2); 0 else.
    short_conv_kernel: int = 0
    # The Mamba-2 shapes of a hybrid stack's "mamba" blocks (Nemotron-H), or of the Mamba-2
    # mixer every block runs beside its attention (Falcon-H1: no block_counts); None else.
    mamba: Mamba2 | None = None
    # Multi-head latent attention (DeepSeek-V3, Kimi K2; transformers 5.17 DeepseekV3Attention):
    # 0 when the model has none. ``head_dim`` is then the q/k head width the attention kernel
    # sees (``qk_nope_head_dim + qk_rope_head_dim``); ``v_head_dim`` the value head width;
    # ``qk_rope_head_dim`` the rotary part (RoPE's cos/sin width); ``kv_lora_rank`` and
    # ``q_lora_rank`` the compressed widths (``q_lora_rank`` 0: a plain ``q_proj``).
    kv_lora_rank: int = 0
    q_lora_rank: int = 0
    qk_rope_head_dim: int = 0
    v_head_dim: int = 0
    # DeepSeek sparse attention (DeepSeek-V3.2, GLM-5; transformers 5.17 DeepseekV32Indexer):
    # the lightning indexer's heads and head width, the keys each query keeps (index_topk), and
    # how many blocks run an indexer of their own (GLM-5's "shared" blocks reuse the previous
    # one's selection); 0 when the model has none. Its linears have role "indexer"; its key
    # LayerNorm (weight and bias, index_head_dim each) is counted here.
    index_heads: int = 0
    index_head_dim: int = 0
    index_topk: int = 0
    indexer_layers: int = 0
    # Parameters outside the blocks that no token multiplies through (gathers, norms): Gemma 4's
    # per-layer input table (``embed_tokens_per_layer``, ``vocab x layers*width``) and the norm of
    # its context projection; DeepSeek-V4's ``hc_head`` (the last collapse of the residual
    # streams, a few weights per stream); counted with the embedding.
    per_layer_embedding_params: int = 0
    # Manifold-constrained hyper-connections (DeepSeek-V4; transformers 5.17
    # DeepseekV4HyperConnection): ``hc_mult`` residual streams of ``hidden_size`` each, mixed
    # in and out of every sublayer; 0 for a plain residual stream. Its indexer
    # (``ModelArch.indexer_layers``: the compressed-sparse-attention blocks) is not DeepSeek-V3.2's:
    # see :attr:`sparse_attention`.
    hyper_connections: int = 0
    # QLoRA's 4-bit loading of a checkpoint whose ``quantization_config.llm_int8_skip_modules``
    # names modules inside blocks (Unsloth's dynamic 4-bit builds: ``model.layers.1.mlp``):
    # the (block index, linear name) pairs bitsandbytes leaves in 16 bits, sorted; empty else
    # (:func:`calc.hf_config.bnb_kept_16bit`, :meth:`quantized_blocks`).
    bnb_kept_16bit: tuple[tuple[int, str], ...] = ()

    def __hash__(self) -> int:
        """The hash dataclass would give (the hashed fields as a tuple), worked out once: a
        request is a cache key, and its model's nested shapes (every linear a dataclass) are
        hashed again on each lookup, thousands of times a plan."""
        found = self.__dict__.get("_hash")
        if found is None:
            found = hash(tuple(getattr(self, name) for name in _ARCH_HASHED))
            object.__setattr__(self, "_hash", found)
        return found

    def __post_init__(self) -> None:
        for key in (
            "vocab_size",
            "hidden_size",
            "num_layers",
            "num_heads",
            "num_kv_heads",
            "head_dim",
            "intermediate_size",
        ):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ConfigError("config_invalid_value", key, value)
        if self.num_heads % self.num_kv_heads:
            raise ConfigError("config_invalid_value", "num_key_value_heads", self.num_kv_heads)
        if not self.linears:
            raise ConfigError("config_invalid_value", "linears", self.linears)
        if self.norm_kind not in ("rms", "layer", "none"):
            raise ConfigError("config_invalid_value", "norm_kind", self.norm_kind)
        for key in (
            "norms_per_layer",
            "learned_positions",
            "num_experts",
            "experts_per_token",
            "shared_expert_intermediate_size",
            "block_extra_params",
            "short_conv_kernel",
            "kv_lora_rank",
            "q_lora_rank",
            "qk_rope_head_dim",
            "v_head_dim",
            "index_heads",
            "index_head_dim",
            "index_topk",
            "indexer_layers",
            "per_layer_embedding_params",
            "hyper_connections",
        ):
            value = getattr(self, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError("config_invalid_value", key, value)
        if self.experts_per_token > self.num_experts:
            raise ConfigError("config_invalid_value", "experts_per_token", self.experts_per_token)
        if self.kv_lora_rank and not (
            0 < self.qk_rope_head_dim < self.head_dim and self.v_head_dim
        ):
            raise ConfigError("config_invalid_value", "qk_rope_head_dim", self.qk_rope_head_dim)
        if self.indexer_layers > self.num_layers or (
            self.indexer_layers > 0 and not (self.index_heads and self.index_head_dim)
        ):
            raise ConfigError("config_invalid_value", "indexer_layers", self.indexer_layers)
        counts = dict(self.block_counts)
        if counts and (sum(counts.values()) != self.num_layers or min(counts.values()) < 0):
            raise ConfigError("config_invalid_value", "block_counts", self.block_counts)
        ffn = dict(self.ffn_counts)
        if ffn and (
            sum(ffn.values()) != self.num_layers or min(ffn.values()) < 0 or set(ffn) & set(counts)
        ):
            raise ConfigError("config_invalid_value", "ffn_counts", self.ffn_counts)
        for lin in self.linears:
            if lin.block_kind and lin.block_kind not in counts and lin.block_kind not in ffn:
                raise ConfigError("config_invalid_value", "block_kind", lin.block_kind)
        for kind, params in self.block_kind_params:
            if kind not in counts or not isinstance(params, int) or params < 0:
                raise ConfigError("config_invalid_value", "block_kind_params", kind)
        if self.linear_attention is not None and set(counts) != set(MIXER_KINDS[:2]):
            raise ConfigError("config_invalid_value", "block_counts", self.block_counts)
        if self.short_conv_kernel and not set(counts) <= {"full_attention", "conv"}:
            raise ConfigError("config_invalid_value", "block_counts", self.block_counts)
        if self.mamba is not None and counts and "mamba" not in counts:
            raise ConfigError("config_invalid_value", "block_counts", self.block_counts)
        kept_names = {l.name for l in self.linears if l.quantizable and l.kind == "linear"}
        if any(
            not 0 <= index < self.num_layers or name not in kept_names
            for index, name in self.bnb_kept_16bit
        ) or len(set(self.bnb_kept_16bit)) != len(self.bnb_kept_16bit):
            raise ConfigError("config_invalid_value", "bnb_kept_16bit", self.bnb_kept_16bit)

    @property
    def hybrid(self) -> bool:
        """Blocks of different token mixers (:data:`MIXER_KINDS`)."""
        return (
            self.linear_attention is not None
            or self.short_conv_kernel > 0
            or self.mamba is not None
        )

    @property
    def mla(self) -> bool:
        """Multi-head latent attention (compressed kv, split RoPE): see ``kv_lora_rank``."""
        return self.kv_lora_rank > 0

    @property
    def sparse_attention(self) -> bool:
        """DeepSeek sparse attention (V3.2, GLM-5): a lightning indexer picks ``index_topk`` keys
        per query and the torch path hands them to the attention as an ``s x s`` mask.
        DeepSeek-V4's indexer picks among compressed entries instead (:attr:`hyper_connections`
        marks that family): none of V3.2's masks and transients."""
        return self.indexer_layers > 0 and not self.hyper_connections

    @property
    def indexer_own_params(self) -> int:
        """One indexer's parameters outside its linears: DeepSeek-V3.2's key ``LayerNorm``
        (weight and bias of ``index_head_dim``, ``DeepseekV32Indexer.k_norm``); DeepSeek-V4's
        compressor ``position_bias`` and ``kv_norm`` (``arch.extra["indexer_own_params"]``)."""
        own = self.extra.get("indexer_own_params")
        return own if isinstance(own, int) else 2 * self.index_head_dim

    @property
    def indexer_norm_params(self) -> int:
        """Every indexer's own parameters (:attr:`indexer_own_params`), in each block that runs
        one."""
        return self.indexer_own_params * self.indexer_layers

    @cached_property
    def no_grad_params(self) -> int:
        """Parameters that never get a gradient: the indexers' (their forward runs under
        ``torch.no_grad``). They require grad, so the optimizer holds them, but torch's AdamW
        makes states only for parameters whose ``.grad`` is set (``torch/optim/adamw.py``,
        ``_init_group``: ``if p.grad is None: continue``)."""
        return (
            sum(self.blocks_of(l) * l.params for l in self.linears if l.role == "indexer")
            + self.indexer_norm_params
        )

    def quantized_blocks(self, lin: LinearLayer) -> int:
        """How many blocks hold ``lin`` in 4 bits under QLoRA: those that hold it, less the
        ones whose copy the checkpoint's skip list keeps in 16 bits (``bnb_kept_16bit``); 0
        for a linear QLoRA never quantizes."""
        if not lin.quantizable:
            return 0
        kept = sum(1 for _, name in self.bnb_kept_16bit if name == lin.name)
        return self.blocks_of(lin) - kept

    @cached_property
    def kept_16bit_block_params(self) -> int:
        """The most weight parameters one block keeps in 16 bits out of its quantizable linears
        (``bnb_kept_16bit``): what a block's autocast copies add at most."""
        per_block: dict[int, int] = {}
        sizes = {l.name: l.count * l.weight_params for l in self.linears}
        for index, name in self.bnb_kept_16bit:
            per_block[index] = per_block.get(index, 0) + sizes[name]
        return max(per_block.values(), default=0)

    # ---- mixed stacks -------------------------------------------------------
    def blocks_of(self, lin: LinearLayer) -> int:
        """How many decoder blocks hold ``lin`` (all of them unless it belongs to one kind; an
        indexer's linears: the blocks that run an indexer)."""
        if lin.role == "indexer":
            return self.indexer_layers
        if not lin.block_kind:
            return self.num_layers
        return dict(self.block_counts + self.ffn_counts)[lin.block_kind]

    def kind_share(self, kind: str) -> tuple[int, int]:
        """(blocks of ``kind``, all blocks) in a mixed stack."""
        return dict(self.block_counts + self.ffn_counts).get(kind, 0), self.num_layers

    def _largest_of(self, counts: tuple[tuple[str, int], ...]) -> str:
        kinds = [k for k, n in counts if n > 0]
        own = dict(self.block_kind_params)
        return max(
            kinds,
            key=lambda k: sum(l.params for l in self.linears if l.block_kind == k) + own.get(k, 0),
        )

    @cached_property
    def _largest_kind(self) -> str:
        return self._largest_of(self.block_counts)

    @cached_property
    def block_linears(self) -> tuple[LinearLayer, ...]:
        """The linears of the largest block (every block's, for a uniform stack): what one
        FSDP unit gathers or one checkpointed block recomputes at most. With ``ffn_counts``, the
        largest mixer beside the largest MLP kind."""
        if not self.block_counts and not self.ffn_counts:
            return self.linears
        kinds = {""}
        if self.block_counts:
            kinds.add(self._largest_kind)
        if self.ffn_counts:
            kinds.add(self._largest_of(self.ffn_counts))
        return tuple(l for l in self.linears if l.block_kind in kinds)

    def block_share(self, lin: LinearLayer) -> tuple[int, int]:
        """(blocks holding ``lin``, all blocks): what a per-block average weighs it by."""
        return self.blocks_of(lin), self.num_layers

    # ---- parameter counts (cached: the arch is frozen and a plan reads them thousands of times)
    @cached_property
    def norm_params(self) -> int:
        """Per norm: ``hidden`` weights, plus ``hidden`` biases for LayerNorm; none for
        OLMo's non-parametric LayerNorm."""
        return self.hidden_size * {"rms": 1, "layer": 2, "none": 0}[self.norm_kind]

    @cached_property
    def block_params(self) -> int:
        """One decoder block: its linears (all copies), its norms and any small extras (the
        largest block of a mixed stack)."""
        own = dict(self.block_kind_params).get(self._largest_kind, 0) if self.block_counts else 0
        return (
            sum(l.params for l in self.block_linears)
            + self.norms_per_layer * self.norm_params
            + self.block_extra_params
            + own
            + (self.indexer_own_params if self.indexer_layers else 0)
        )

    @cached_property
    def stack_params(self) -> int:
        """Every decoder block together (``num_layers * block_params`` for a uniform stack)."""
        per_block = self.norms_per_layer * self.norm_params + self.block_extra_params
        counts = dict(self.block_counts)
        own = sum(counts[kind] * params for kind, params in self.block_kind_params)
        return (
            sum(self.blocks_of(l) * l.params for l in self.linears)
            + self.num_layers * per_block
            + own
            + self.indexer_norm_params
        )

    @cached_property
    def embedding_params(self) -> int:
        emb = self.vocab_size * self.hidden_size + self.learned_positions * self.hidden_size
        emb += self.per_layer_embedding_params
        return emb + (self.norm_params if self.embedding_norm else 0)

    @cached_property
    def lm_head_params(self) -> int:
        """``vocab x hidden`` unless tied to the embedding; plus a bias where the family has one."""
        weight = 0 if self.tie_word_embeddings else self.vocab_size * self.hidden_size
        return weight + (self.vocab_size if self.lm_head_bias else 0)

    @cached_property
    def params_total(self) -> int:
        """Every parameter held in memory (all MoE experts included)."""
        return self.embedding_params + self.stack_params + self.norm_params + self.lm_head_params

    @cached_property
    def params_active(self) -> int:
        """Parameters a token passes through (MoE: top-k experts only)."""
        inactive = sum(
            self.blocks_of(l)
            * (l.count - l.active)
            * (l.weight_params + (l.d_out if l.bias else 0))
            for l in self.linears
        )
        return self.params_total - inactive

    def linear_names(self) -> tuple[str, ...]:
        """The distinct module names a LoRA target list may use, in block order.

        Two modules can share a name (GPT-2's ``attn.c_proj`` and ``mlp.c_proj``; a
        Qwen-MoE expert's and the shared expert's ``gate_proj``): a name-based target
        adapts every module with that name, as peft does, so the name appears once.
        """
        return tuple(dict.fromkeys(l.name for l in self.linears))


_ARCH_HASHED = tuple(f.name for f in fields(ModelArch) if (f.compare if f.hash is None else f.hash))
"""The fields :meth:`ModelArch.__hash__` hashes: those dataclass would (not ``extra``)."""
