"""The request's shape: the reader's keys on top, the library behaviours in one ``behaviour``
object. Older requests and shared links, with behaviours on top, go through one migration
(calc.fields.migrate_request) and get the same answer as before."""

from __future__ import annotations

from urllib.parse import parse_qsl

import pytest

import calc
from calc.config_import import import_config
from calc.errors import InputError
from calc.fields import BEHAVIOUR, BY_KEY, keys, migrate_request, with_changes
from calc.memory import estimate_dict
from calc.request import parse_estimate_request
from conftest import REPO_ROOT

ROOT = REPO_ROOT

# Shared links of the calculator as they have been made (the browser tests' variations that set a
# behaviour, the page's own library section): the URL names every key at the top.
OLD_LINKS = [
    "?method=qlora&qlora_keeps_inputs=true&model=qwen2.5-7b",
    "?frozen_weight_grads=true&num_gpus=2&sharding=zero3",
    "?gradient_accumulation_steps=4&num_gpus=2&sharding=zero3&sync_each_micro_batch=true&method=full",
    "?method=qlora&qlora_unchunked_quantization=true&model=llama-2-13b",
    "?attention_keeps_fused_qkv=true&attention=eager&gradient_checkpointing=false",
    "?optimizer_fused=true&method=full&model=llama-3.2-1b",
    "?framework=hf-trainer&lora_adapter_dtype=fp32",
    "?model=qwen3-30b-a3b&moe_expert_layout=fused-3d&lora_adapter_dtype=fp32",
    "?framework=hf-custom-loop&loss_outputs_kept=true&attention_grouped_kv=true",
    "?framework=torchtune&model=llama-3.2-1b&chunked_loss=false&loss_outputs_kept=true"
    "&logits_upcast_in_model=true",
    "?model=llama-3.2-1b&chunked_loss=true&chunked_loss_keeps_fp32=true",
    "?method=full&model=llama-3.2-1b&chunked_loss=true&output_layer_chunked=true"
    "&rope_cache_fp32=true",
    "?method=qlora&model=llama-3.2-3b&previous_outputs_kept=true&qlora_output_layer_quantized=true"
    "&qlora_dequant_fp16=true",
    "?fsdp_flat_parameters=true&fsdp_wrap_floor=true&method=full&model=gemma-2-2b&num_gpus=2&sharding=zero3",
    "?framework=unsloth&method=qlora&qlora_quant_state_replicated=true&num_gpus=2&sharding=zero3",
    "?framework=unsloth&method=qlora&model=llama-3.1-8b&rope_cache_16bit=per-layer",
    "?framework=litgpt&num_gpus=2&sharding=zero3&gpu=h100-sxm&dataset_tokens=100000000",
    "?mode=advanced&framework=litgpt&qlora_keeps_inputs=false&method=qlora",
    "?method=qlora&model=llama-3.1-8b&qlora_prepare_kbit=true&lora_adapter_dtype=fp32",
    "?method=qlora&model=llama-3.1-8b&qlora_prepare_kbit=true&qlora_compute_dtype_from_input=true",
    "?method=qlora&framework=hf-trainer-4&qlora_prepare_kbit=true&qlora_embeddings_recast_bf16=false",
    "?model=llama-3.2-1b&loss_on_16bit_logits=true&seq_len=4096",
    "?model=llama-3.1-8b&attention_mask=padding&seq_len=4096",
    "?model=llama-3.1-8b&attention_mask=padding&sdpa_cudnn_last=true&gpu=h100-sxm",
    "?model=llama-3.1-8b&fp8_compute=true&fp8_library=torchao&gpu=h100-sxm",
    "?model=llama-3.2-1b&method=full&zero_grad_set_to_none=false&gradient_accumulation_steps=1",
    "?model=llama-2-7b&method=lora&precision=fp32&tf32=true&gpu=a100-40gb-sxm",
    "?model=llama-3.1-8b&length_stats=mean:400,p90:900&batching=packed&packed_attention=per-sample"
    "&attention=flash&seq_len=8192",
    "?model=llama-3.1-8b&length_stats=mean:225,p90:442,p99:619,max:1585&max_steps=60"
    "&attention_mask=padding&seq_len=2048",
    "?model=llama-3.2-1b&chunked_loss=true&loss_fused_lm_head=true&seq_len=4096",
    "?method=qlora&model=llama-3.1-8b&chunked_loss=true&loss_grad_in_forward=true"
    "&fused_lora_kernels=true&seq_len=8192",
    "?model=llama-3.1-8b&chunked_loss=true&chunked_loss_holds_logits=true"
    "&lora_fused_qkv_adapter=true&lora_targets=q_proj,v_proj",
    "?method=lora&precision=bf16-mixed&framework=generic&weights_loaded_16bit=true",
    "?method=lora&model=llama-2-7b&precision=bf16-mixed&weights_loaded_16bit=true"
    "&weights_loaded_other_16bit=true&seq_len=512",
    "?method=full&model=llama-3.1-8b&checkpointing_granularity=every-n&checkpointing_every=4"
    "&attention_mask=padding&length_stats=mean:900,p90:2000",
    "?model=llama-3.2-1b&checkpointing_granularity=selective-op&sdpa_cudnn_last=true"
    "&gpu=h100-sxm&dataset_tokens=100000000",
    "?method=full&num_gpus=8&sharding=zero3&gpu=h100-sxm&fsdp_fully_shard=true",
    "?method=full&model=llama-3.2-1b&gpu=h100-sxm&gradient_clipping=false&dataset_tokens=100000000",
    "?model=mistral-7b&seq_len=8192&attention_mask=padding&sdpa_mask_boolean=false",
    "?framework=unsloth&method=qlora&model=mistral-7b&loss_grad_in_forward=false"
    "&outputs_cast_fp32=true&seq_len=8192",
    "?framework=unsloth&method=qlora&model=llama-3.1-8b&loss_fused_lm_head=true"
    "&loss_whole_logits_small_batches=true&length_stats=mean:225,p90:442,max:1585&seq_len=2048",
    "?framework=unsloth&method=qlora&model=llama-3.1-8b&expandable_segments=false&seq_len=4096",
    "?method=full&num_gpus=8&sharding=zero3&attention=flash&seq_len=65536&sequence_parallel=8"
    "&sequence_parallel_repeats_kv=true",
    "?method=full&model=llama-3.2-1b&gpu=a100-80gb-sxm&num_gpus=2&sharding=zero2"
    "&sharding_engine=deepspeed&cpu_offload=optimizer&offload_pinned=false"
    "&offload_host_cast=false&dataset_tokens=100000000",
    "?framework=unsloth&method=qlora&model=llama-3.1-8b&gpu=t4&load_warmup=transformers-4.51"
    "&length_stats=mean:225,p90:442,max:1585&seq_len=2048",
]


def _link_request(link: str) -> dict:
    """The request the calculator sends for a link (calc's field kinds read the URL's text)."""
    from calculator_page import request_for

    return request_for(dict(parse_qsl(link.lstrip("?"))))


def _old_requests() -> list[dict]:
    """Requests as older callers write them: every validation row (accuracy.memory), every
    config the importers read (tests/configs), a few by hand."""
    from accuracy.memory import NotCovered, load_rows, row_request

    out = []
    for row in load_rows():
        try:
            out.append(row_request(row))
        except NotCovered:
            continue
    for path in sorted((ROOT / "tests" / "configs").glob("*/*")):
        try:
            imported = import_config(path.read_bytes())
        except InputError:
            continue  # a DeepSpeed file that only makes sense inside another config
        out.append({"model": "llama-3.1-8b", **imported["request"]})
    out.append(
        {
            "model": "llama-3.1-8b",
            "framework": "torchtune",
            "chunked_loss": False,
            "optimizer_fused": False,
            "qlora_keeps_inputs": True,
            "method": "qlora",
        }
    )
    return out


OLD_REQUESTS = _old_requests()


def test_the_lists_cover_every_behaviour():
    given = {key for request in OLD_REQUESTS for key in request}
    given |= {key for link in OLD_LINKS for key, _ in parse_qsl(link.lstrip("?"))}
    assert set(keys(BEHAVIOUR)) <= given
    assert len(OLD_REQUESTS) > 100


def _check_migration(old: dict) -> dict:
    new = migrate_request(old)
    assert isinstance(new, dict)
    behaviours = {k: v for k, v in old.items() if BY_KEY.get(k) and BY_KEY[k].group == BEHAVIOUR}
    assert new.get("behaviour", {}) == behaviours
    assert {k: v for k, v in new.items() if k != "behaviour"} == {
        k: v for k, v in old.items() if k not in behaviours
    }
    assert migrate_request(new) == new  # once migrated, nothing more to move
    return new


@pytest.mark.parametrize("index", range(0, len(OLD_REQUESTS), 7))
def test_old_requests_give_the_same_answer_in_the_new_shape(index):
    old = OLD_REQUESTS[index]
    new = _check_migration(old)
    assert parse_estimate_request(new) == parse_estimate_request(old)
    assert estimate_dict(new) == estimate_dict(old)


def test_every_old_request_migrates_to_the_same_parsed_request():
    for old in OLD_REQUESTS:
        assert parse_estimate_request(_check_migration(old)) == parse_estimate_request(old), old


@pytest.mark.parametrize("link", OLD_LINKS)
def test_old_shared_links_give_the_same_answer(link):
    old = _link_request(link)  # what the page sends: the URL's keys, on top
    new = _check_migration(old)
    assert new.get("behaviour"), link
    assert calc.run("plan", new) == calc.run("plan", old)


def test_a_profile_fills_what_the_behaviour_object_leaves_out():
    base = {"model": "llama-3.1-8b", "method": "qlora", "framework": "litgpt"}
    profiled = parse_estimate_request(base)
    assert profiled.qlora_keeps_inputs is True and "qlora_keeps_inputs" in profiled.profile_keys
    chosen = parse_estimate_request({**base, "behaviour": {"qlora_keeps_inputs": False}})
    assert chosen.qlora_keeps_inputs is False and "qlora_keeps_inputs" not in chosen.profile_keys
    assert chosen.previous_outputs_kept is True  # the rest of the profile still applies
    assert chosen == parse_estimate_request({**base, "qlora_keeps_inputs": False})


@pytest.mark.parametrize(
    "request_obj, code, field",
    [
        ({"behaviour": 3}, "wrong_type", "behaviour"),
        ({"behaviour": {"seq_len": 1024}}, "unknown_key", "behaviour.seq_len"),
        ({"behaviour": {"no_such": True}}, "unknown_key", "behaviour.no_such"),
        ({"behaviour": {"qlora_keeps_inputs": 1}}, "not_boolean", "qlora_keeps_inputs"),
        (
            {"behaviour": {"qlora_keeps_inputs": True}, "qlora_keeps_inputs": False},
            "key_given_twice",
            "qlora_keeps_inputs",
        ),
        (
            {"behaviour": {"optimizer_fused": True}, "optimizer_fused": 1},
            "key_given_twice",
            "optimizer_fused",
        ),
    ],
)
def test_a_bad_behaviour_object_is_a_coded_error(request_obj, code, field):
    request_obj = {"model": "llama-3.1-8b", **request_obj}
    with pytest.raises(InputError) as err:
        parse_estimate_request(request_obj)
    assert (err.value.code, err.value.field) == (code, field)
    answer = calc.run("estimate", request_obj)
    assert (answer["error"]["code"], answer["error"]["field"]) == (code, field)
    assert [e["field"] for e in answer["errors"]].count(field) == 1


def test_the_same_value_given_both_ways_is_accepted():
    request = {
        "model": "llama-3.1-8b",
        "torch_compile": True,
        "optimizer_fused": True,
        "behaviour": {"optimizer_fused": True},
    }
    assert parse_estimate_request(request).optimizer_fused is True


def test_changes_win_over_either_shape():
    nested = {
        "model": "llama-3.1-8b",
        "behaviour": {"optimizer_fused": True, "loss_outputs_kept": True},
    }
    changed = with_changes(nested, {"optimizer_fused": False, "seq_len": 4096})
    assert changed == {
        "model": "llama-3.1-8b",
        "seq_len": 4096,
        "behaviour": {"optimizer_fused": False, "loss_outputs_kept": True},
    }
    flat = {"model": "llama-3.1-8b", "optimizer_fused": True}
    assert with_changes(flat, {"behaviour": {"optimizer_fused": False}}) == {
        "model": "llama-3.1-8b",
        "behaviour": {"optimizer_fused": False},
    }


def test_the_cli_flags_override_a_nested_request_file(tmp_path):
    from cli_run import run_main

    path = tmp_path / "request.json"
    path.write_text('{"model": "llama-3.1-8b", "behaviour": {"optimizer_fused": true}}')
    rc, out, err = run_main(["estimate", "--request", str(path), "--no-optimizer-fused", "--json"])
    assert rc == 0, err
    import json

    assert json.loads(out)["request"]["optimizer_fused"] is False
