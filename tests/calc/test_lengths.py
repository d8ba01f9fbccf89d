"""Sample lengths and batching (calc.lengths): the step sequence by hand, and what it changes in
the estimate and the plan; without length_stats nothing changes."""

from __future__ import annotations

import json
import math

import pytest

import calc
from calc.config_import import import_config
from calc.lengths import Batching, LengthStats, data_shape, fit, micro_batch_tokens, sample_lengths
from calc.memory import estimate_dict
from calc.request import parse_estimate_request

BASE = {"model": "llama-3.1-8b", "micro_batch_size": 4, "seq_len": 4096}
PLAN = {**BASE, "gpu": "h100-sxm", "dataset_tokens": 1e8}


def test_the_fit_meets_mean_and_p90():
    """p90 exactly (closed form), the clipped mean by bisection."""
    from statistics import NormalDist

    stats = LengthStats(mean=900, p90=2000)
    mu, sigma, exact = fit(stats, 4096)
    assert exact
    assert math.exp(mu + sigma * NormalDist().inv_cdf(0.9)) == pytest.approx(2000)
    a = (math.log(4096) - mu) / sigma
    n = NormalDist()
    mean = math.exp(mu + sigma**2 / 2) * n.cdf(a - sigma) + 4096 * (1 - n.cdf(a))
    assert mean == pytest.approx(900, rel=1e-6)
    drawn, _ = sample_lengths(stats, 4096, 4096)
    assert sum(drawn) / len(drawn) == pytest.approx(900, rel=0.05)
    assert sorted(drawn)[int(0.9 * len(drawn))] == pytest.approx(2000, rel=0.05)


def test_a_mean_out_of_the_family_s_reach_is_approximated_and_says_so():
    est = calc.estimate({**BASE, "length_stats": {"mean": 300, "p90": 2000}})
    assert "length_stats_approximated" in est["warnings"]
    assert (
        "length_stats_approximated"
        not in calc.estimate({**BASE, "length_stats": {"mean": 900, "p90": 2000}})["warnings"]
    )


def test_hand_count_of_a_known_distribution():
    """Every sample max long (no mean, no p90) under pad-longest: no padding, the peak is
    micro_batch_size x max; with max 1024 of seq_len 4096, memory is that of seq_len 1024
    (with the padded batch's mask tensor the profile sets for sample lengths under SDPA)."""
    shape = data_shape(LengthStats(max=1024), Batching.PAD_LONGEST, 4096, 4)
    assert shape.peak_batch_tokens == 4 * 1024 and shape.padding_ratio == 1.0
    assert len(shape.tokens) == 4096 // 4
    est = calc.estimate({**BASE, "length_stats": {"max": 1024}})
    short = calc.estimate({**BASE, "seq_len": 1024, "attention_mask": "padding"})
    assert est["peak_allocated_bytes"] == short["peak_allocated_bytes"]
    assert est["data"]["peak_batch_tokens"] == 4096 and est["request"]["seq_len"] == 4096


def test_pad_longest_pads_each_micro_batch_to_its_longest_sample():
    stats = LengthStats(mean=900, p90=2000)
    lengths, _ = sample_lengths(stats, 4096, 4096)
    shape = data_shape(stats, Batching.PAD_LONGEST, 4096, 4)
    batches = [lengths[i : i + 4] for i in range(0, 4096, 4)]
    assert [t for t in shape.tokens] == [(sum(b), 4 * max(b)) for b in batches]
    padded = sum(4 * max(b) for b in batches)
    assert shape.padding_ratio == padded / sum(lengths)
    assert shape.peak_batch_tokens == 4 * max(lengths)
    assert micro_batch_tokens(
        parse_estimate_request({**BASE, "length_stats": {"mean": 900, "p90": 2000}})
    ) == [4 * max(b) for b in batches]


def test_the_sequence_is_seeded():
    a = data_shape(LengthStats(mean=700, p90=1500), Batching.PAD_LONGEST, 2048, 2)
    data_shape.cache_clear()
    b = data_shape(LengthStats(mean=700, p90=1500), Batching.PAD_LONGEST, 2048, 2)
    assert a.tokens == b.tokens


def test_the_peak_is_the_longest_micro_batch():
    """A narrow distribution well under seq_len: memory of a shorter padded sequence."""
    est = calc.estimate({**BASE, "length_stats": {"mean": 1000, "p90": 1100, "max": 3000}})
    peak = est["data"]["peak_sample_tokens"]
    assert peak < 3000
    assert (
        est["peak_allocated_bytes"]
        == calc.estimate({**BASE, "seq_len": peak, "attention_mask": "padding"})[
            "peak_allocated_bytes"
        ]
    )
    assert est["peak_allocated_bytes"] < calc.estimate(BASE)["peak_allocated_bytes"]


@pytest.mark.parametrize("batching", ["pad-max", "packed"])
def test_pad_max_and_packed_give_today_s_memory_and_step(batching):
    # no library profile: the HF Trainer's hands SDPA a mask tensor on padded batches
    plan = {**PLAN, "framework": "generic"}
    request = {**plan, "length_stats": {"mean": 900, "p90": 2000}, "batching": batching}
    today, shaped = calc.plan_setup(plan), calc.plan_setup(request)
    assert shaped["memory"]["peak_allocated_bytes"] == today["memory"]["peak_allocated_bytes"]
    assert shaped["memory"]["device_total_bytes"] == today["memory"]["device_total_bytes"]
    assert shaped["time"]["step"]["seconds"] == today["time"]["step"]["seconds"]
    ratio = shaped["time"]["padding_ratio"]
    if batching == "packed":
        assert ratio == 1.0 and shaped["time"]["compute_hours"] == today["time"]["compute_hours"]
    else:  # every sample padded to seq_len: padded tokens cost compute, real ones count
        assert ratio == pytest.approx(4096 / shaped["memory"]["data"]["mean_sample_tokens"])
        assert shaped["time"]["compute_hours"] == pytest.approx(
            today["time"]["compute_hours"] * ratio, rel=1e-3
        )


def test_time_counts_real_tokens():
    shaped = calc.plan_setup({**PLAN, "length_stats": {"mean": 900, "p90": 2000}})
    data, time = shaped["memory"]["data"], shaped["time"]
    assert data["padding_ratio"] > 1
    real_per_step = 4 * data["mean_padded_sample_tokens"] / data["padding_ratio"]
    assert time["step"]["tokens_per_gpu"] == round(real_per_step)
    assert time["compute_hours"] == pytest.approx(1e8 / time["tokens_per_second"] / 3600)


def test_without_length_stats_nothing_changes():
    """No data key in the response, and batching alone changes no figure."""
    today = calc.plan_setup(PLAN)
    assert "data" not in today["memory"] and "padding_ratio" not in today["time"]
    for batching in ("pad-max", "packed"):
        other = calc.plan_setup({**PLAN, "batching": batching})
        other["memory"]["request"]["batching"] = "pad-longest"
        assert other == today


def test_the_text_form_is_the_object():
    a = calc.estimate({**BASE, "length_stats": "mean:900,p90:2000"})
    b = calc.estimate({**BASE, "length_stats": {"mean": 900, "p90": 2000}})
    assert a == b and a["request"]["length_stats"] == {"mean": 900, "p90": 2000}


@pytest.mark.parametrize(
    "text, fmt, batching, status",
    [
        (
            "base_model: meta-llama/Llama-3.1-8B\nsequence_len: 2048\npad_to_sequence_len: true\n",
            "axolotl",
            "pad-max",
            "used",
        ),
        (
            "base_model: meta-llama/Llama-3.1-8B\nsample_packing: true\npad_to_sequence_len: true\n",
            "axolotl",
            "packed",
            "ignored",
        ),
        (
            "base_model: meta-llama/Llama-3.1-8B\ngroup_by_length: true\n",
            "axolotl",
            "grouped",
            "used",
        ),
        (
            "base_model: meta-llama/Llama-3.1-8B\nsample_packing: true\ngroup_by_length: true\n",
            "axolotl",
            "packed",
            "ignored",
        ),
        (
            "base_model: meta-llama/Llama-3.1-8B\ngroup_by_length: true\nsample_packing: false\n",
            "axolotl",
            "grouped",
            "used",
        ),
        (
            "model_name_or_path: meta-llama/Llama-3.1-8B\nstage: sft\nfinetuning_type: lora\nneat_packing: true\n",
            "llamafactory",
            "packed",
            "used",
        ),
    ],
)
def test_config_import_fills_batching(text, fmt, batching, status):
    result = import_config(text, fmt)
    assert result["request"].get("batching") == batching
    key = text.strip().splitlines()[-1].split(":")[0]
    assert {e["key"]: e["status"] for e in result["keys"]}[key] == status


def test_trl_packing_and_padding_free():
    packed = import_config(
        '{"model_name_or_path": "meta-llama/Llama-3.1-8B", "packing": true, "padding_free": true}',
        "trl",
    )
    assert packed["request"]["batching"] == "packed"
    alone = import_config(
        '{"model_name_or_path": "meta-llama/Llama-3.1-8B", "padding_free": true}', "trl"
    )
    assert alone["request"]["batching"] == "padding-free"


def test_schema_and_cli_flag_take_both_forms():
    from cli_run import flags_for_request, run_main
    from schema_check import errors

    from calc.fields import field_specs
    from calc.schema import request_schema

    schema = request_schema("estimate")
    for good in ({"mean": 900, "p90": 2000}, "mean:900,p90:2000", None):
        assert not errors({"model": "llama-3.1-8b", "length_stats": good}, schema), good
    for bad in ([900], 900, {"median": 700}, {"mean": 0}, {"mean": 1.5}):
        assert errors({"model": "llama-3.1-8b", "length_stats": bad}, schema), bad
    request = {
        "model": "llama-3.1-8b",
        "length_stats": {"mean": 900, "p90": 2000},
        "batching": "pad-max",
    }
    argv = flags_for_request(request, field_specs("estimate"))
    assert "--length-stats=mean:900,p90:2000" in argv
    rc, out, _ = run_main(["estimate", *argv, "--json"], tty=False)
    assert rc == 0 and json.loads(out) == calc.estimate(request)


def test_estimate_with_lengths_adds_the_replayed_allocator():
    """With ``length_stats`` the estimate adds the caching allocator replayed over the data's
    growing steps; the figures it had stay, and without ``length_stats`` nothing is added."""
    from calc.memory import CUDA_CONTEXT_BYTES
    from calc.step_events import simulate, simulated_lengths

    body = {"model": "gpt2", "seq_len": 1024, "length_stats": {"mean": 300, "p90": 700}}
    out = calc.estimate(body)
    req = parse_estimate_request(body)
    replayed = simulate(req, [req.micro_batch_size * n for n in simulated_lengths(req)])
    assert out["allocator"] == replayed.to_dict()
    assert out["min_device_bytes"] == replayed.min_allocator_bytes + CUDA_CONTEXT_BYTES
    assert replayed.min_allocator_bytes <= replayed.simulated_reserved_bytes
    from calc.memory import estimate_request

    assert {k: v for k, v in out.items() if k not in ("allocator", "min_device_bytes")} == (
        estimate_request(req).to_dict()
    )
    plain = calc.estimate({"model": "gpt2", "seq_len": 1024})
    assert "allocator" not in plain and "min_device_bytes" not in plain


def test_time_reports_padded_tokens_beside_real_ones():
    shaped = calc.plan_setup({**PLAN, "length_stats": {"mean": 900, "p90": 2000}})
    time = shaped["time"]
    ratio = time["padding_ratio"]
    assert ratio > 1
    assert time["padded_tokens_per_second_per_gpu"] == pytest.approx(
        time["tokens_per_second_per_gpu"] * ratio
    )
    assert time["padded_tokens_per_second"] == pytest.approx(time["tokens_per_second"] * ratio)
    # without length_stats every token is real: no padded figure
    assert "padded_tokens_per_second_per_gpu" not in calc.plan_setup(PLAN)["time"]


def test_grouped_batching_pads_less_than_a_random_draw_and_keeps_the_real_tokens():
    """transformers' group_by_length: the same samples, sorted by length within groups of
    GROUP_MEGABATCH micro-batches before they are cut: the real tokens are the same, each
    micro-batch pads to a like-length longest, so the padding falls (never below none)."""
    from calc.lengths import GROUP_MEGABATCH, Batching, LengthStats, data_shape, sample_lengths

    stats = LengthStats(mean=210, max=768)
    drawn = data_shape(stats, Batching.PAD_LONGEST, 768, 4)
    grouped = data_shape(stats, Batching.GROUPED, 768, 4)
    assert grouped.real_total == drawn.real_total
    assert 1.0 <= grouped.padding_ratio < drawn.padding_ratio
    # recomputed by hand: sort each group of 50 micro-batches, pad each micro-batch to its longest
    lengths, _ = sample_lengths(stats, 768, len(drawn.tokens) * 4)
    span = GROUP_MEGABATCH * 4
    ordered = [n for i in range(0, len(lengths), span) for n in sorted(lengths[i : i + span])[::-1]]
    padded = sum(4 * max(ordered[i : i + 4]) for i in range(0, len(ordered), 4))
    assert grouped.padded_total == padded


def test_grouped_batching_is_faster_per_real_token():
    base = {**PLAN, "length_stats": {"mean": 900, "p90": 2000}}
    drawn = calc.plan_setup(base)["time"]
    grouped = calc.plan_setup({**base, "batching": "grouped"})["time"]
    assert grouped["padding_ratio"] < drawn["padding_ratio"]
    assert grouped["tokens_per_second_per_gpu"] > drawn["tokens_per_second_per_gpu"]


# --- how long the run is ----------------------------------------------------------------------------

ALPACA = {"mean": 225, "p90": 442, "max": 1585}
SHORT = {
    "model": "llama-3.1-8b",
    "method": "qlora",
    "micro_batch_size": 2,
    "gradient_accumulation_steps": 4,
    "seq_len": 2048,
    "length_stats": ALPACA,
}


def _longest_by_integral(stats, seq_len, n, steps=200_000):
    """E[max of n] = integral over [0, cap] of 1 - F(x)^n, F the clipped log-normal's
    distribution function (1 at cap), by the trapezoid rule: apart from the quadrature of
    calc.lengths.expected_longest."""
    from statistics import NormalDist

    top = stats.max or seq_len
    cap = min(top, seq_len)
    mu, sigma, _ = fit(stats, top)
    phi = NormalDist().cdf

    def survive(x):  # P(max > x) for x in [0, cap); lengths are at least 1
        if x < 1:
            return 1.0
        return 1.0 - phi((math.log(x) - mu) / sigma) ** n

    h = cap / steps
    return h * (sum(survive(i * h) for i in range(1, steps)) + (survive(0) + survive(cap)) / 2)


@pytest.mark.parametrize("n", [1, 8, 60, 480, 4096, 51_760])
def test_expected_longest_is_the_mean_of_the_longest_of_n(n):
    from calc.lengths import expected_longest

    stats = LengthStats(**ALPACA)
    assert expected_longest(stats, 2048, n) == pytest.approx(
        _longest_by_integral(stats, 2048, n), abs=1.5
    )


def test_a_shorter_run_meets_a_shorter_longest_batch():
    """max_steps x micro_batch_size x accumulation x GPUs samples: the longest micro-batch, and
    the memory with it, rise with the run's length up to that of SAMPLES draws capped at max."""
    peaks, allocated = [], []
    for steps in (1, 5, 60, 600, 60_000):
        est = calc.estimate({**SHORT, "max_steps": steps})
        peaks.append(est["data"]["peak_batch_tokens"])
        allocated.append(est["peak_allocated_bytes"])
        assert est["request"]["max_steps"] == steps
        assert est["data"]["samples_seen"] == steps * 2 * 4
    assert peaks == sorted(peaks) and allocated == sorted(allocated)
    assert peaks[0] < peaks[2] < peaks[-1] == 2 * 1585
    default = calc.estimate(SHORT)
    assert "samples_seen" not in default["data"]
    assert default["data"]["peak_batch_tokens"] == 2 * 1585  # no run length: SAMPLES draws
    # 60 steps of 2 x 4 samples: the expected longest of 480, each micro-batch padded to it
    from calc.lengths import expected_longest

    assert peaks[2] == 2 * expected_longest(LengthStats(**ALPACA), 2048, 480) < 2 * 1585
    assert allocated[2] < default["peak_allocated_bytes"]


def test_the_run_s_sequence_is_its_own_draws_up_to_samples():
    from calc.lengths import SAMPLES, expected_longest

    stats = LengthStats(**ALPACA)
    drawn, _ = sample_lengths(stats, 2048, 480)
    short = data_shape(stats, Batching.PAD_LONGEST, 2048, 2, 480)
    longest = expected_longest(stats, 2048, 480)
    assert len(short.tokens) == 240
    cut = [min(n, longest) for n in drawn]
    cut[cut.index(max(cut))] = longest
    assert short.tokens == tuple(
        (cut[i] + cut[i + 1], 2 * max(cut[i], cut[i + 1])) for i in range(0, 480, 2)
    )
    long = data_shape(stats, Batching.PAD_LONGEST, 2048, 2, 10**9)
    assert len(long.tokens) == SAMPLES // 2 and long.peak_length == 1585


def test_samples_count_every_gpu_and_the_plan_reads_the_dataset():
    from calc.lengths import samples_seen

    one = parse_estimate_request({**SHORT, "max_steps": 60})
    two = parse_estimate_request({**SHORT, "max_steps": 60, "num_gpus": 2, "sharding": "ddp"})
    assert (samples_seen(one), samples_seen(two)) == (480, 960)
    assert samples_seen(parse_estimate_request(SHORT)) is None
    plan = {**SHORT, "gpu": "rtx-4090"}
    small = calc.plan_setup({**plan, "dataset_tokens": 225 * 480})["memory"]["data"]
    large = calc.plan_setup({**plan, "dataset_tokens": 1e8})["memory"]["data"]
    by_steps = calc.estimate({**SHORT, "max_steps": 60})["data"]
    assert small["peak_batch_tokens"] == by_steps["peak_batch_tokens"] < large["peak_batch_tokens"]
    # max_steps says how long the run is, whatever the dataset
    steps = calc.plan_setup({**plan, "dataset_tokens": 1e8, "max_steps": 60})["memory"]["data"]
    assert steps["peak_batch_tokens"] == by_steps["peak_batch_tokens"]


def test_max_steps_without_length_stats_changes_nothing():
    a, b = calc.estimate(BASE), calc.estimate({**BASE, "max_steps": 60})
    assert b["request"].pop("max_steps") == 60 and a["request"].pop("max_steps") is None
    assert a == b


@pytest.mark.parametrize(
    "value, code",
    [
        (0, "not_positive"),
        (-1, "not_positive"),
        (1.5, "not_integer"),
        ("x", "not_integer"),
        (10**10, "out_of_range"),
    ],
)
def test_bad_max_steps_is_a_coded_error(value, code):
    from calc.errors import InputError

    with pytest.raises(InputError) as err:
        parse_estimate_request({**SHORT, "max_steps": value})
    assert (err.value.code, err.value.field) == (code, "max_steps")


@pytest.mark.parametrize(
    "text, fmt",
    [
        ("output_dir: x\nmax_steps: 60\n", "trl"),
        ("base_model: x\nmax_steps: 60\n", "axolotl"),
    ],
)
def test_config_import_fills_max_steps(text, fmt):
    result = import_config(text, fmt)
    assert result["request"]["max_steps"] == 60
    assert import_config(text.replace("60", "-1"), fmt)["request"].get("max_steps") is None


# --- attention within each packed sample ----------------------------------------------------------


def test_a_packed_row_of_two_samples_costs_the_sum_of_their_squares():
    """A row of 3 + 5 tokens whose samples attend each within itself: the score and value
    matmuls cover 3^2 + 5^2 = 34 query-key pairs (half of them under the causal skip), not 8^2."""
    from calc.flops import attention_forward_flops_per_token
    from calc.presets import get_preset

    arch = get_preset("llama-3.1-8b")
    per_pair = 4.0 * arch.num_layers * arch.num_heads * arch.head_dim * 0.5
    lengths = [3, 5]
    span = sum(n * n for n in lengths) / sum(lengths)
    row = sum(lengths) * attention_forward_flops_per_token(arch, 8, "flash", "causal", span)
    assert row == pytest.approx(per_pair * 34)
    whole = sum(lengths) * attention_forward_flops_per_token(arch, 8, "flash", "causal")
    assert whole == pytest.approx(per_pair * 64)


def test_the_span_is_the_length_biased_mean_of_the_draw():
    from calc.lengths import attention_span

    stats = LengthStats(mean=300, p90=700)
    drawn, _ = sample_lengths(stats, 8192, 4096)
    assert attention_span(stats, 8192) == sum(n * n for n in drawn) / sum(drawn)
    assert 300 < attention_span(stats, 8192) < 8192
    # samples that fill the row: the row's own length
    assert attention_span(LengthStats(max=2048), 2048) == 2048


PACKED = {
    "model": "llama-3.1-8b",
    "framework": "generic",
    "seq_len": 8192,
    "length_stats": {"mean": 300, "p90": 700},
    "batching": "packed",
}


def _attention(request: dict) -> tuple[float, str]:
    from calc import timing

    req = parse_estimate_request(request)
    c = timing.counts(req, req.sharding)
    return c.flops.attention_forward, c.attention_mask


def test_per_sample_attention_by_kernel():
    """flash: the varlen kernel's per-sample triangles; sdpa: transformers' 4-D block mask, the
    whole row's square; eager: the whole square either way."""
    from calc.lengths import attention_span

    span = attention_span(LengthStats(mean=300, p90=700), 8192)
    for attention, expected, mask in (
        ("flash", span / 8192, "causal"),
        ("sdpa", 2.0, "padding"),
        ("eager", 1.0, "causal"),
    ):
        across = _attention({**PACKED, "attention": attention})
        within = _attention({**PACKED, "attention": attention, "packed_attention": "per-sample"})
        assert across[1] == "causal" and within[1] == mask
        assert within[0] == pytest.approx(across[0] * expected)


@pytest.mark.parametrize(
    "change",
    [{"length_stats": None}, {"batching": "pad-longest"}, {"packed_attention": "cross-sample"}],
)
def test_per_sample_attention_needs_packed_rows_of_drawn_samples(change):
    request = {**PACKED, "attention": "flash", "packed_attention": "per-sample", **change}
    request = {k: v for k, v in request.items() if v is not None}
    today = {k: v for k, v in request.items() if k != "packed_attention"}
    assert _attention(request) == _attention(today)


def test_per_sample_flash_attention_is_faster_per_token():
    plan = {**PACKED, "attention": "flash", "gpu": "h100-sxm", "dataset_tokens": 1e8}
    across = calc.plan_setup(plan)["time"]
    within = calc.plan_setup({**plan, "packed_attention": "per-sample"})["time"]
    assert within["tokens_per_second_per_gpu"] > across["tokens_per_second_per_gpu"]
    assert within["padding_ratio"] == across["padding_ratio"] == 1.0


@pytest.mark.parametrize(
    "framework, attention, expected",
    [
        ("trl-sft", "flash", "per-sample"),
        ("trl-sft", "sdpa", "per-sample"),
        ("axolotl", "flash", "per-sample"),
        ("axolotl", "sdpa", "cross-sample"),
        ("ms-swift", "flash", "per-sample"),
        ("hf-trainer", "flash", "cross-sample"),
    ],
)
def test_profiles_set_packed_attention_for_packed_rows(framework, attention, expected):
    request = {**PACKED, "framework": framework, "attention": attention}
    assert parse_estimate_request(request).packed_attention.value == expected
    padded = {**request, "batching": "pad-longest"}
    assert parse_estimate_request(padded).packed_attention.value == "cross-sample"


def test_llamafactory_neat_packing_attends_within_each_sample_and_exports_back():
    from calc.config_import.export import export_llamafactory

    text = "model_name_or_path: meta-llama/Llama-3.1-8B\nneat_packing: true\ncutoff_len: 4096\n"
    request = import_config(text, "llamafactory")["request"]
    assert request["batching"] == "packed" and request["packed_attention"] == "per-sample"
    plain = import_config(text.replace("neat_packing", "packing"), "llamafactory")["request"]
    assert plain["batching"] == "packed" and "packed_attention" not in plain
    again = import_config(export_llamafactory(request), "llamafactory")["request"]
    assert again["packed_attention"] == "per-sample"


@pytest.mark.parametrize(
    "extra, expected",
    [
        ({}, None),
        ({"packing_strategy": "bfd"}, None),
        ({"packing_strategy": "wrapped"}, "cross-sample"),
        ({"packing_strategy": "wrapped", "padding_free": True}, None),
    ],
)
def test_trl_wrapped_packing_attends_across_the_row(extra, expected):
    """TRL's bfd packing is padding-free (the trl-sft profile's per-sample attention); wrapped
    packing without padding_free concatenates and cuts, attending across the row."""
    config = {"model_name_or_path": "meta-llama/Llama-3.1-8B", "packing": True, **extra}
    request = import_config(json.dumps(config), "trl")["request"]
    assert request.get("packed_attention") == expected
    parsed = parse_estimate_request({**request, "length_stats": {"mean": 300}})
    assert parsed.packed_attention.value == (expected or "per-sample")


# --- the tail: p99 ----------------------------------------------------------------------------------

ALPACA_P99 = {**ALPACA, "p99": 619}


def _quantile(drawn, q):
    return sorted(drawn)[int(q * len(drawn))]


@pytest.mark.parametrize(
    "parts",
    [ALPACA_P99, {"p90": 442, "p99": 619, "max": 1585}, {"mean": 225, "p99": 619, "max": 1585}],
    ids=["mean-p90-p99", "p90-p99", "mean-p99"],
)
def test_the_fit_meets_every_part_given_with_p99(parts):
    """Each percentile given is met by the draw and the mean by the fit, within the draw's
    sampling error (200,000 samples)."""
    from calc.lengths import dataset_samples

    stats = LengthStats(**parts)
    drawn, exact = sample_lengths(stats, 2048, 200_000)
    assert exact
    for name, q in (("p90", 0.9), ("p99", 0.99)):
        if name in parts:
            assert _quantile(drawn, q) == pytest.approx(parts[name], rel=0.01)
    if "mean" in parts:
        assert sum(drawn) / len(drawn) == pytest.approx(parts["mean"], rel=0.01)
        # the fit's clipped mean (in closed form) is the mean given
        assert dataset_samples(stats, 2048, 225e6) == pytest.approx(1e6, rel=1e-6)


def test_p99_pulls_the_tail_to_the_data_s():
    """AlpacaDataCleaned: the log-normal through mean and p90 puts its p99 at about 955 tokens;
    with the published p99 (619) the draw's p99 is 619, its p90 and mean unchanged, and a
    60-step run (480 samples) meets a shorter longest sample, so the memory peak falls."""
    from calc.lengths import expected_longest

    plain = sample_lengths(LengthStats(**ALPACA), 2048, 200_000)[0]
    tailed = sample_lengths(LengthStats(**ALPACA_P99), 2048, 200_000)[0]
    assert _quantile(plain, 0.99) > 900 and _quantile(tailed, 0.99) == pytest.approx(619, rel=0.01)
    assert _quantile(tailed, 0.9) == pytest.approx(_quantile(plain, 0.9), rel=0.01)
    assert expected_longest(LengthStats(**ALPACA_P99), 2048, 480) < 0.6 * expected_longest(
        LengthStats(**ALPACA), 2048, 480
    )
    short = {**SHORT, "max_steps": 60}
    with_p99 = calc.estimate({**short, "length_stats": ALPACA_P99})
    without = calc.estimate(short)
    assert with_p99["data"]["peak_batch_tokens"] < without["data"]["peak_batch_tokens"]
    assert with_p99["peak_allocated_bytes"] < without["peak_allocated_bytes"]
    assert with_p99["request"]["length_stats"] == ALPACA_P99


@pytest.mark.parametrize("n", [8, 480, 51_760])
def test_expected_longest_follows_the_two_piece_tail(n):
    """The quadrature of expected_longest against E[max of n] = integral of 1 - F(x)^n, F the
    two-piece distribution function: Phi((ln x - mu) / sigma) up to p90, Phi((ln x - mu_t) /
    sigma_t) above it."""
    from statistics import NormalDist

    from calc.lengths import expected_longest, tail

    stats = LengthStats(**ALPACA_P99)
    mu, sigma, _ = fit(stats, 1585)
    split = tail(stats)
    assert split is not None
    _, mu_t, sigma_t = split
    phi = NormalDist().cdf

    def survive(x):
        if x < 1:
            return 1.0
        line = (mu, sigma) if x <= 442 else (mu_t, sigma_t)
        return 1.0 - phi((math.log(x) - line[0]) / line[1]) ** n

    steps = 200_000
    h = 1585 / steps
    integral = h * (sum(survive(i * h) for i in range(1, steps)) + (survive(0) + survive(1585)) / 2)
    assert expected_longest(stats, 2048, n) == pytest.approx(integral, abs=1.5)


def test_without_p99_the_single_log_normal_is_kept():
    """No p99: no tail piece, and the lengths are exp(mu + sigma z) of the fit as they were."""
    from calc.lengths import _normal_draws, tail

    stats = LengthStats(**ALPACA)
    assert tail(stats) is None
    mu, sigma, _ = fit(stats, 1585)
    drawn = sample_lengths(stats, 2048, 4096)[0]
    by_hand = [min(1585, max(1, int(math.exp(mu + sigma * z) + 0.5))) for z in _normal_draws(4096)]
    assert drawn == by_hand


@pytest.mark.parametrize(
    ("parts", "field", "low", "high"),
    [
        ({"mean": 225, "p90": 442, "p99": 400}, "length_stats.p99", 442, 2048),
        ({"p99": 3000}, "length_stats.p99", 1, 2048),
        ({"mean": 1000, "p90": 442, "p99": 619}, "length_stats.mean", 47, 473),
        ({"mean": 30, "p90": 442, "p99": 619}, "length_stats.mean", 47, 473),
        ({"mean": 700, "p99": 619}, "length_stats.mean", 8, 633),
    ],
)
def test_p99_out_of_order_is_refused_with_the_range_it_may_take(parts, field, low, high):
    """p99 at least p90 and at most max; the mean within what p90 and p99 leave:
    0.9 + 0.09 p90 + 0.01 p99 <= mean <= 0.9 p90 + 0.09 p99 + 0.01 max (max: seq_len 2048)."""
    from calc.errors import InputError

    with pytest.raises(InputError) as err:
        calc.estimate({**BASE, "seq_len": 2048, "length_stats": parts})
    assert err.value.code == "out_of_range" and err.value.field == field
    assert (err.value.extra["minimum"], err.value.extra["maximum"]) == (low, high)


def test_p99_in_the_url_and_cli_text_form():
    a = calc.estimate({**BASE, "length_stats": "mean:900,p90:2000,p99:3500"})
    b = calc.estimate({**BASE, "length_stats": {"mean": 900, "p90": 2000, "p99": 3500}})
    assert a == b and a["request"]["length_stats"] == {"mean": 900, "p90": 2000, "p99": 3500}


@pytest.mark.parametrize("batching", list(Batching))
@pytest.mark.parametrize(
    "parts",
    [
        {"mean": 900},
        {"p90": 2000},
        {"max": 1500},
        {"mean": 700, "p90": 1800, "max": 4096},
        {"mean": 225, "p90": 442, "p99": 619, "max": 1585},
        {"mean": 1900, "p90": 2000},  # not met at 512 tokens: exact is False there
        {"mean": 250, "p90": 2000},  # not met from 2048 on
        {"mean": 60, "p90": 120, "max": 4000},
    ],
)
def test_peak_of_is_the_drawn_shapes_peak_and_fit(parts, batching):
    # the plan's weighed setups read the peak without drawing: it must be the drawn shape's
    from calc.lengths import peak_of

    stats = LengthStats(**parts)
    for seq_len in (512, 2048, 8192):
        for mbs in (1, 3, 8):
            for samples in (None, 5, 100_000):
                shape = data_shape(stats, batching, seq_len, mbs, samples)
                assert peak_of(stats, batching, seq_len, mbs, samples) == (
                    shape.peak_length,
                    shape.exact,
                ), (seq_len, mbs, samples)


@pytest.mark.parametrize(
    "parts", [{"mean": 900, "p90": 2000}, {"mean": 300, "p90": 700, "max": 1500}, {"mean": 60}]
)
def test_the_longest_at_the_cap_is_kept_for_longer_runs_as_computed(parts):
    """calc.lengths.expected_longest answers at the cap, without its quadrature, for a run at
    least as long as one that reached it: what the quadrature gives, whichever order the run
    lengths come in (longer first, shorter first, mixed)."""
    from calc import lengths

    stats = LengthStats(**parts)
    runs = [1, 7, 60, 480, 4096, 51_760, 10**6, 10**9]
    truth = {n: lengths._expected_longest(stats, 2048, n) for n in runs}
    for order in (runs, runs[::-1], runs[3:] + runs[:3]):
        lengths._CAPPED_FROM.clear()
        assert [lengths.expected_longest(stats, 2048, n) for n in order] == [
            truth[n] for n in order
        ]
    if parts == {"mean": 900, "p90": 2000}:  # the cap is reached within these runs
        assert truth[10**9] == 2048 and truth[1] < 2048


def test_forgetting_every_memo_changes_no_figure():
    """calc.caches.forget_all empties the memos (a cold start for benchmarks and refits);
    each is exact, so the same request gives the same response before and after."""
    import calc
    from calc import activations, lengths, lora, memory, step_events
    from calc.caches import forget_all

    request = {"model": "llama-3.2-1b", "length_stats": {"mean": 733, "p90": 1700}}
    warm = calc.estimate(request)
    memos = (
        lengths.fit,
        step_events._simulated,
        activations.block_bytes_per_token,
        lora._adapted_kept,
    )
    assert all(memo.cache_info().currsize for memo in memos)
    forget_all()
    assert not any(memo.cache_info().currsize for memo in memos)
    assert not memory._KEPT
    assert calc.estimate(request) == warm


def test_expandable_segments_min_device_is_the_replayed_footprint():
    """With expandable segments the smallest card is the pages the held blocks touched at
    most (calc.allocator.unwalked_capacity) plus the memory outside the allocator: at least
    the replayed allocated peak, at most the replayed reserved peak, and below the default
    allocator's smallest card for the same steps (no cached segment stands in the way)."""
    from calc import allocator as al
    from calc import memory as mem
    from calc.step_events import StepReplay, simulate_request, simulated_lengths

    body = {
        "model": "llama-3.1-8b",
        "method": "lora",
        "micro_batch_size": 4,
        "length_stats": {"mean": 900, "p90": 2000},
    }
    req = parse_estimate_request({**body, "expandable_segments": True})
    steps = StepReplay(req, simulated_lengths(req))
    assert steps.config.expandable_segments
    run = steps.replay()
    sim = simulate_request(req)
    outside = mem.outside_allocator_bytes(req.num_gpus)
    assert sim.min_device_bytes == al.whole_steps(run.peak_footprint_bytes) + outside
    assert run.peak_allocated_bytes + outside <= sim.min_device_bytes
    assert sim.min_device_bytes <= sim.simulated_reserved_bytes + outside
    default = simulate_request(parse_estimate_request(body))
    assert sim.simulated_reserved_bytes < default.simulated_reserved_bytes
    assert sim.min_device_bytes < default.min_device_bytes


PADDING_FREE = {
    "model": "llama-3.1-8b",
    "method": "qlora",
    "attention": "flash",
    "micro_batch_size": 2,
    "seq_len": 2048,
    "length_stats": {"mean": 225, "p90": 442, "max": 1585},
}


def test_padding_free_rows_are_the_micro_batch_samples_end_to_end():
    from calc.lengths import Batching, LengthStats, data_shape, peak_of

    stats = LengthStats(mean=225, p90=442, max=1585)
    free = data_shape(stats, Batching.PADDING_FREE, 2048, 2)
    padded = data_shape(stats, Batching.PAD_LONGEST, 2048, 2)
    # the same samples, in the same micro-batches: no padding, one row each
    assert [real for real, _ in free.tokens] == [real for real, _ in padded.tokens]
    assert all(real == pad for real, pad in free.tokens) and free.padding_ratio == 1.0
    assert free.peak_length == free.peak_batch_tokens == max(real for real, _ in free.tokens)
    assert 1585 < free.peak_length < 2 * 1585 < padded.peak_batch_tokens + 1
    assert peak_of(stats, Batching.PADDING_FREE, 2048, 2) == (free.peak_length, free.exact)
    # one sample per micro-batch: nothing to remove
    one = data_shape(stats, Batching.PADDING_FREE, 2048, 1)
    assert one.tokens == data_shape(stats, Batching.PAD_LONGEST, 2048, 1).tokens


def test_padding_free_memory_is_one_row_of_the_longest_sum():
    free = estimate_dict({**PADDING_FREE, "batching": "padding-free"})
    padded = estimate_dict({**PADDING_FREE, "batching": "pad-longest"})
    row = free["data"]["peak_batch_tokens"]
    assert free["data"]["padding_ratio"] == 1.0
    assert free["peak_allocated_bytes"] < padded["peak_allocated_bytes"]
    # under FlashAttention (no mask tensor) the row weighs what a single sample of its length does
    single = {k: v for k, v in PADDING_FREE.items() if k != "length_stats"}
    alone = estimate_dict({**single, "micro_batch_size": 1, "seq_len": row})
    assert free["phases"] == alone["phases"]
    # the replay draws the same rows
    assert (
        free["allocator"]["simulated_reserved_bytes"]
        <= padded["allocator"]["simulated_reserved_bytes"]
    )
    # one sample per micro-batch: the same as padding it
    for key in ("phases", "allocator"):
        assert (
            estimate_dict({**PADDING_FREE, "micro_batch_size": 1, "batching": "padding-free"})[key]
            == estimate_dict({**PADDING_FREE, "micro_batch_size": 1, "batching": "pad-longest"})[
                key
            ]
        )


def test_padding_free_time_counts_real_tokens_and_per_sample_attention():
    import calc

    base = {**PADDING_FREE, "gpu": "a100-80gb-sxm", "dataset_tokens": 1e8}
    free = calc.plan_setup({**base, "batching": "padding-free"})["time"]
    padded = calc.plan_setup({**base, "batching": "pad-longest"})["time"]
    assert free["padding_ratio"] == 1.0 and padded["padding_ratio"] > 1.0
    assert free["tokens_per_second"] > padded["tokens_per_second"]


def test_unsloth_turns_padding_free_on_but_not_for_gemma_2():
    from calc.request import parse_estimate_request

    unsloth = {**PADDING_FREE, "framework": "unsloth"}
    assert parse_estimate_request(unsloth).batching.value == "padding-free"
    assert parse_estimate_request({**unsloth, "model": "gemma-2-9b"}).batching.value == (
        "pad-longest"
    )
    assert parse_estimate_request({**unsloth, "batching": "packed"}).batching.value == "packed"
