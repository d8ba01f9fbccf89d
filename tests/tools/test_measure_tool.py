"""tools/measure_peak.py: the grid, the rows-to-requests conversion, and a CPU smoke run.

The grid and conversion tests use the standard library only; the smoke tests
need torch, transformers and peft (tools/requirements-measure.txt) and skip
without them.
"""

from __future__ import annotations

import csv
import io
import json
import math
import sys
import weakref

import pytest

from conftest import REPO_ROOT

ROOT = REPO_ROOT
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from calc.errors import CalcError  # noqa: E402
from calc.request import parse_estimate_request  # noqa: E402
from tools import measure_peak as mp  # noqa: E402

GRID = ROOT / "tools" / "measure_grid.json"

TINY_LLAMA = {
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 128,
    "tie_word_embeddings": False,
    "rope_theta": 500000.0,
    "rope_scaling": {
        "factor": 8.0,
        "high_freq_factor": 4.0,
        "low_freq_factor": 1.0,
        "original_max_position_embeddings": 64,
        "rope_type": "llama3",
    },
}
TINY_LLAMA_TEXT = json.dumps(TINY_LLAMA, sort_keys=True, separators=(",", ":"))
TINY_QWEN2 = {
    "model_type": "qwen2",
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "max_position_embeddings": 128,
    "tie_word_embeddings": True,
    "use_sliding_window": False,
}


def tiny_grid(*configs: dict) -> list[dict]:
    return mp.expand_grid(
        {
            "models": {"tiny-llama": TINY_LLAMA, "tiny-qwen2": TINY_QWEN2},
            "defaults": {"micro_batch_size": 2, "seq_len": 32},
            "configs": list(configs),
        }
    )


def settings_row(cfg: dict) -> dict:
    """A CSV row as csv.DictReader gives it back (all strings)."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=mp.CSV_COLUMNS, restval="")
    writer.writeheader()
    writer.writerow(mp._settings_row(cfg))
    return next(csv.DictReader(io.StringIO(buf.getvalue())))


# --- the grid ---------------------------------------------------------------


@pytest.fixture(scope="module")
def grid() -> list[dict]:
    return mp.load_grid(GRID)


# Published totals: model cards / config.json of each model.
@pytest.mark.parametrize(
    "preset_id, params",
    [
        ("qwen2.5-0.5b", 494_032_768),
        ("llama-3.2-1b", 1_235_814_400),
        ("llama-3.2-3b", 3_212_749_824),
        ("qwen2.5-7b", 7_615_616_512),
        ("llama-3.1-8b", 8_030_261_248),
    ],
)
def test_grid_models_have_the_real_architecture(preset_id, params):
    models = json.loads(GRID.read_text())["models"]
    assert mp.Dims.from_hf_config(models[preset_id]).params_total() == params


@pytest.mark.parametrize(
    "hf_config, rank, targets, expected",
    [
        # Llama-2-7B, r=8 on q,v: 32 layers * 2 * 8 * (4096 + 4096)
        (
            {
                "model_type": "llama",
                "hidden_size": 4096,
                "intermediate_size": 11008,
                "num_hidden_layers": 32,
                "num_attention_heads": 32,
                "vocab_size": 32000,
            },
            8,
            "q_proj,v_proj",
            4_194_304,
        ),
        # tiny llama, r=16 all-linear: 2 * 16 * (128+96+96+128+192+192+192)
        (TINY_LLAMA, 16, "all-linear", 32_768),
    ],
)
def test_lora_trainable_counts(hf_config, rank, targets, expected):
    assert mp.Dims.from_hf_config(hf_config).lora_params(rank, targets) == expected


def test_grid_covers_the_issue(grid):
    assert len(grid) >= 40
    values = lambda key: {cfg[key] for cfg in grid}  # noqa: E731
    assert values("model") == {
        "qwen2.5-0.5b",
        "llama-3.2-1b",
        "llama-3.2-3b",
        "qwen2.5-7b",
        "llama-3.1-8b",
    }
    assert {512, 2048, 8192} <= values("seq_len")
    assert {1, 4} <= values("micro_batch_size")
    assert values("gradient_checkpointing") == {True, False}
    assert {"sdpa", "eager"} <= values("attention")
    assert {"adamw", "sgd"} <= values("optimizer")
    assert {"bf16-true", "bf16-mixed"} <= values("precision")
    lora = {(c["lora_rank"], c["lora_targets"]) for c in grid if c["method"] == "lora"}
    assert lora == {(8, "q_proj,v_proj"), (16, "all-linear")}
    # every model: full fine-tuning and both LoRA set-ups
    for model in values("model"):
        kinds = {
            (c["method"], c["lora_rank"] if c["method"] == "lora" else 0)
            for c in grid
            if c["model"] == model
        }
        assert kinds == {("full", 0), ("lora", 8), ("lora", 16)}, model
    # bf16-mixed only where 16 bytes/param fits comfortably, plus one expected-OOM boundary case
    assert {c["model"] for c in grid if c["precision"] == "bf16-mixed"} == {
        "qwen2.5-0.5b",
        "llama-3.2-1b",
        "llama-3.2-3b",
        "llama-3.1-8b",
    }
    # the tool reproduces all of it on one GPU
    assert (
        values("num_gpus") == {1}
        and values("sharding") == {"none"}
        and values("cpu_offload") == {"none"}
    )
    assert "qlora" not in values("method")


def test_grid_fits_the_time_budget(grid):
    lines = mp.dry_run_lines(grid, 480)
    assert len(lines) == len(grid) + 2
    assert not any("beyond budget" in line for line in lines)
    total = mp.STARTUP_S + sum(mp.estimate_config_seconds(c) for c in grid)
    assert 240 < total < 480


def test_estimate_orders_configurations_sensibly(grid):
    by_id = {c["id"]: mp.estimate_config_seconds(c) for c in grid}
    base = "llama-3.1-8b|full|bf16-true|adamw|b1|s2048|gc|sdpa"
    assert by_id["llama-3.1-8b|full|bf16-true|adamw|b4|s2048|gc|sdpa"] > by_id[base]
    assert by_id["llama-3.1-8b|lora-r8-qv|bf16-true|adamw|b1|s2048|gc|sdpa"] < by_id[base]
    assert by_id["llama-3.1-8b|full|bf16-true|adamw|b1|s2048|nogc|eager"] < by_id[base] + 1.0
    assert by_id["qwen2.5-0.5b|full|bf16-true|adamw|b1|s2048|gc|sdpa"] < by_id[base]


# --- rows -> calc requests --------------------------------------------------


def test_every_grid_row_converts_to_a_valid_calc_request(grid):
    for cfg in grid:
        row = settings_row(cfg)
        req = parse_estimate_request(mp.row_to_request(row))
        assert req.method.value == cfg["method"]
        assert req.precision.value == cfg["precision"]
        assert req.optimizer.value == cfg["optimizer"]
        assert (req.micro_batch_size, req.seq_len) == (cfg["micro_batch_size"], cfg["seq_len"])
        assert req.gradient_checkpointing is cfg["gradient_checkpointing"]
        assert req.attention.value == cfg["attention"]
        assert (req.chunked_loss, req.activation_offload, req.optimizer_in_backward) == (
            cfg["chunked_loss"],
            cfg["activation_offload"],
            cfg["optimizer_in_backward"],
        )
        assert req.model.params_total == mp.Dims.from_hf_config(cfg["hf_config"]).params_total()
        if cfg["method"] == "lora":
            assert req.lora_rank == cfg["lora_rank"]
            expected = (
                "all-linear"
                if cfg["lora_targets"] == "all-linear"
                else tuple(cfg["lora_targets"].split(","))
            )
            assert req.lora_targets == expected


def test_fused_adamw_rows_ask_calc_for_fused():
    (cfg,) = tiny_grid({"model": "tiny-llama", "method": "full", "optimizer_impl": "fused"})
    row = settings_row(cfg)
    assert mp.row_to_request(row)["optimizer_fused"] is True
    row["optimizer_impl_used"] = "foreach"  # what ran wins over what was asked
    assert "optimizer_fused" not in mp.row_to_request(row)
    (cfg,) = tiny_grid(
        {"model": "tiny-llama", "method": "full", "optimizer": "sgd", "optimizer_impl": "fused"}
    )
    assert "optimizer_fused" not in mp.row_to_request(settings_row(cfg))


@pytest.mark.parametrize(
    "overrides, expected",
    [
        (
            {"method": "full", "optimizer": "sgd", "gradient_checkpointing": False},
            {
                "method": "full",
                "precision": "bf16-true",
                "optimizer": "sgd",
                "optimizer_in_backward": False,
                "micro_batch_size": 2,
                "seq_len": 32,
                "gradient_checkpointing": False,
                "attention": "sdpa",
                "chunked_loss": False,
                "activation_offload": False,
                "num_gpus": 1,
                "sharding": "none",
                "cpu_offload": "none",
            },
        ),
        (
            {
                "method": "lora",
                "lora_rank": 8,
                "lora_targets": ["q_proj", "v_proj"],
                "attention": "eager",
                "precision": "bf16-mixed",
            },
            {
                "method": "lora",
                "lora_rank": 8,
                "lora_targets": ["q_proj", "v_proj"],
                "precision": "bf16-mixed",
                "optimizer": "adamw",
                "optimizer_in_backward": False,
                "micro_batch_size": 2,
                "seq_len": 32,
                "gradient_checkpointing": True,
                "attention": "eager",
                "chunked_loss": False,
                "activation_offload": False,
                "num_gpus": 1,
                "sharding": "none",
                "cpu_offload": "none",
            },
        ),
        (
            {"method": "qlora", "qlora_double_quant": False},
            {
                "method": "qlora",
                "lora_rank": 16,
                "lora_targets": "all-linear",
                "qlora_double_quant": False,
                "precision": "bf16-true",
                "optimizer": "adamw",
                "optimizer_in_backward": False,
                "micro_batch_size": 2,
                "seq_len": 32,
                "gradient_checkpointing": True,
                "attention": "sdpa",
                "chunked_loss": False,
                "activation_offload": False,
                "num_gpus": 1,
                "sharding": "none",
                "cpu_offload": "none",
            },
        ),
    ],
)
def test_row_to_request_exact(overrides, expected):
    (cfg,) = tiny_grid({"model": "tiny-llama", **overrides})
    row = settings_row(cfg)
    request = mp.row_to_request(row)
    assert request.pop("model") == {"hf_config": TINY_LLAMA, "name": "tiny-llama"}
    assert request == expected
    assert mp.row_to_request(row, "preset")["model"] == "tiny-llama"
    with pytest.raises(ValueError):
        mp.row_to_request(row, "hub")


def test_write_requests_carries_the_measured_bytes():
    (cfg,) = tiny_grid({"model": "tiny-llama", "method": "full"})
    row = settings_row(cfg)
    row.update(
        status="ok",
        peak_allocated_bytes="1234567",
        peak_reserved_bytes="2000000",
        device_used_bytes="2600000",
        gpu_total_bytes="150000000000",
    )
    buf = io.StringIO()
    assert mp.write_requests([row], buf) == 1
    line = json.loads(buf.getvalue())
    assert line["config_id"] == cfg["id"] and line["status"] == "ok"
    assert line["measured"] == {
        "peak_allocated_bytes": 1_234_567,
        "peak_reserved_bytes": 2_000_000,
        "device_used_bytes": 2_600_000,
        "gpu_total_bytes": 150_000_000_000,
    }
    assert line["request"] == mp.row_to_request(row)


def measured_row(cfg: dict, status: str, alloc="", reserved="", used="", total="") -> dict:
    row = settings_row(cfg)
    row.update(
        status=status,
        peak_allocated_bytes=alloc,
        peak_reserved_bytes=reserved,
        device_used_bytes=used,
        gpu_total_bytes=total,
    )
    return row


def test_compare_rows_exact_errors():
    full, lora, other = tiny_grid(
        {"model": "tiny-llama", "method": "full"},
        {"model": "tiny-llama", "method": "lora"},
        {"model": "tiny-qwen2"},
    )
    rows = [
        measured_row(full, "ok", "100", "200", "250", "1000"),
        measured_row(lora, "ok", "80", "", "", "1000"),
        measured_row(full, "oom", total="1000"),
        measured_row(lora, "oom", total="200"),
        measured_row(other, "skipped"),
        measured_row(other, "ok"),
    ]
    rows[2]["config_id"], rows[3]["config_id"] = "oom-a", "oom-b"

    def estimate(request):
        return {"peak_allocated_bytes": 110, "peak_reserved_bytes": 180, "device_total_bytes": 300}

    entries = mp.compare_rows(rows, estimate)
    assert entries[0]["peak_allocated_bytes"] == (110, 100, 10.0)
    assert entries[0]["peak_reserved_bytes"] == (180, 200, -10.0)
    assert entries[0]["device_used_bytes"] == (300, 250, 20.0)
    assert (
        entries[1]["peak_allocated_bytes"] == (110, 80, 37.5)
        and "peak_reserved_bytes" not in entries[1]
    )
    assert [e["note"] for e in entries] == [
        "",
        "",
        "oom, calc says it fits",
        "oom, calc agrees",
        "not measured",
        "no CUDA figures",
    ]
    summary = [
        line for line in mp.comparison_lines(entries) if line.startswith("peak_allocated_bytes")
    ]
    assert summary == [
        "peak_allocated_bytes all: n=2 median |err| 10.0 % p90 37.5 % max 37.5 %",
        "peak_allocated_bytes full: n=1 median |err| 10.0 % p90 10.0 % max 10.0 %",
        "peak_allocated_bytes lora: n=1 median |err| 37.5 % p90 37.5 % max 37.5 %",
    ]


def test_compare_reports_calc_refusals():
    (cfg,) = tiny_grid(
        {"model": "tiny-llama", "method": "lora", "lora_targets": ["q_proj", "w_pack"]}
    )
    (entry,) = mp.compare_rows([measured_row(cfg, "ok", "100", "120", "150")])
    assert entry["note"] == "calc: unknown_lora_target"


def test_compare_against_real_calc(grid):
    import calc  # an ImportError here is a failure, not a reason to skip

    cfg = grid[0]
    predicted = calc.estimate(mp.row_to_request(settings_row(cfg)))
    alloc = predicted["peak_allocated_bytes"]
    (entry,) = mp.compare_rows([measured_row(cfg, "ok", str(alloc * 2), "", "")])
    assert entry["peak_allocated_bytes"] == (alloc, alloc * 2, -50.0)


def test_preset_requests_match_the_grid_configs(grid):
    from calc import presets

    # every model of the grid is one of calc's presets (the grid measures what the site offers)
    known = [cfg for cfg in grid if cfg["model"] in presets.preset_ids()]
    assert {cfg["model"] for cfg in known} == {cfg["model"] for cfg in grid}
    for cfg in known:
        req = parse_estimate_request(mp.row_to_request(settings_row(cfg), "preset"))
        assert req.model.params_total == mp.Dims.from_hf_config(cfg["hf_config"]).params_total()


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"model": "tiny-llama", "lora_rnak": 8}, "unknown keys"),
        ({"model": "gpt-5"}, "has no hf_config"),
    ],
)
def test_grid_errors(entry, message):
    with pytest.raises(ValueError, match=message):
        tiny_grid(entry)


def test_duplicate_ids_are_refused():
    with pytest.raises(ValueError, match="duplicate id"):
        tiny_grid({"model": "tiny-llama"}, {"model": "tiny-llama"})


@pytest.mark.parametrize(
    "only, expected",
    [
        ("2", [1, 2]),
        ("3,1", [3, 1]),
        ("tiny-qwen2", [3]),
        (None, [1, 2, 3]),
    ],
)
def test_select(only, expected):
    configs = tiny_grid(
        {"model": "tiny-llama", "seq_len": 16}, {"model": "tiny-llama"}, {"model": "tiny-qwen2"}
    )
    assert [configs.index(c) + 1 for c in mp.select(configs, only)] == expected


@pytest.mark.parametrize(
    "exc, status",
    [
        (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), "oom"),
        (RuntimeError("CUDA error: out of memory"), "oom"),
        (
            RuntimeError(
                "[enforce fail at alloc_cpu.cpp] DefaultCPUAllocator: can't allocate memory"
            ),
            "oom",
        ),
        (MemoryError(), "oom"),
        (RuntimeError("expected scalar type BFloat16 but found Float"), "error"),
        (ValueError("out of memory"), "error"),
        (mp.BudgetExceeded("late"), "timeout"),
        (mp.Unsupported("qlora"), "unsupported"),
        (ImportError("flash_attn"), "unsupported"),
    ],
)
def test_classify_error(exc, status):
    assert mp.classify_error(exc) == status


def test_dry_run_cli(capsys):
    assert mp.main(["--grid", str(GRID), "--dry-run", "--only", "3", "--time-budget-s", "30"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 5 and lines[-1].startswith("estimated total")
    assert "beyond budget" in lines[3] and "beyond budget" not in lines[1]


# --- CPU smoke run (torch, transformers, peft) -----------------------------


@pytest.fixture(scope="module")
def torch():
    pytest.importorskip("transformers")
    pytest.importorskip("peft")
    return pytest.importorskip("torch")


SMOKE = [
    {"model": "tiny-llama", "method": "full"},
    {
        "model": "tiny-llama",
        "method": "lora",
        "lora_rank": 8,
        "lora_targets": ["q_proj", "v_proj"],
        "precision": "bf16-mixed",
        "optimizer": "sgd",
        "attention": "eager",
        "gradient_checkpointing": False,
    },
    {"model": "tiny-qwen2", "method": "lora", "precision": "fp32", "optimizer": "sgd-momentum"},
    {"model": "tiny-llama", "method": "full", "chunked_loss": True, "optimizer_in_backward": True},
    {
        "model": "tiny-qwen2",
        "method": "full",
        "activation_offload": True,
        "micro_batch_size": 1,
        "optimizer_impl": "fused",
    },
    {"model": "tiny-llama", "method": "qlora"},
]


@pytest.fixture(scope="module")
def smoke_csv(torch, tmp_path_factory):
    out = tmp_path_factory.mktemp("measure") / "peaks.csv"
    rows = mp.run_grid(tiny_grid(*SMOKE), out, device="cpu", log=io.StringIO())
    return out, rows


def test_smoke_csv_columns_and_statuses(smoke_csv, torch):
    out, rows = smoke_csv
    with open(out, newline="") as fh:
        reader = csv.DictReader(fh)
        assert reader.fieldnames == mp.CSV_COLUMNS
        read = list(reader)
    assert [r["status"] for r in read] == ["ok"] * 5 + ["unsupported"]
    assert read[-1]["error"].startswith("Unsupported: qlora")
    # the configs as written in the grid, not as transformers rewrote them
    assert {r["hf_config"] for r in read if r["model"] == "tiny-llama"} == {TINY_LLAMA_TEXT}
    assert json.dumps(TINY_LLAMA, sort_keys=True, separators=(",", ":")) == TINY_LLAMA_TEXT
    for row in read[:5]:
        assert row["device"] == "cpu" and row["torch_version"] == torch.__version__
        assert row["transformers_version"] and row["peft_version"]
        for key in ("peak_allocated_bytes", "peak_reserved_bytes", "device_used_bytes", "gpu_name"):
            assert row[key] == ""  # no CUDA statistics on CPU
        assert float(row["tokens_per_s"]) > 0 and float(row["step_time_s"]) > 0
        assert abs(float(row["loss"]) - math.log(256)) < 0.5  # random init: about ln(vocab)
    # torch's default on CPU is the for-loop implementation; fused when asked
    assert [r["optimizer_impl_used"] for r in read] == ["for-loop"] * 4 + ["fused", ""]


@pytest.mark.parametrize(
    "index, params_total, params_trainable",
    [
        (0, 106_816, 106_816),  # tiny llama, untied: 2*16384 + 2*36992 + 64
        (1, 106_816 + 3_584, 3_584),  # + LoRA r8 on q,v: 2 layers * 8 * (128 + 96)
        (2, 90_688 + 32_768, 32_768),  # tiny qwen2 (tied, qkv bias) + LoRA r16 all-linear
        (4, 90_688, 90_688),
    ],
)
def test_smoke_parameter_counts(smoke_csv, index, params_total, params_trainable):
    row = smoke_csv[1][index]
    assert (row["params_total"], row["params_trainable"]) == (params_total, params_trainable)
    cfg = tiny_grid(SMOKE[index])[0]
    dims = mp.Dims.from_hf_config(cfg["hf_config"])
    lora = 0 if cfg["method"] == "full" else dims.lora_params(cfg["lora_rank"], cfg["lora_targets"])
    assert params_total == dims.params_total() + lora


def test_smoke_rows_become_calc_requests(smoke_csv, tmp_path):
    out, _ = smoke_csv
    jsonl = tmp_path / "requests.jsonl"
    assert mp.main(["--to-requests", str(out), "--out", str(jsonl)]) == 0
    lines = [json.loads(line) for line in jsonl.read_text().splitlines()]
    assert len(lines) == len(SMOKE)
    for line, entry in zip(lines, SMOKE, strict=True):
        assert line["measured"] == {}  # CPU: no CUDA figures
        req = parse_estimate_request(line["request"])
        assert req.method.value == entry["method"]
        assert req.micro_batch_size == entry.get("micro_batch_size", 2) and req.seq_len == 32


def test_oom_is_recorded_and_the_loop_goes_on(torch, tmp_path, monkeypatch):
    real_step, real_build = mp.train_step, mp.build_model
    calls, built = [], []

    def build(cfg, device):
        model = real_build(cfg, device)
        built.append(weakref.ref(model))
        return model

    def step(session, batch):
        calls.append(session.cfg["id"])
        if session.cfg["seq_len"] == 16 and len([c for c in calls if c == session.cfg["id"]]) == 2:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 20.00 GiB")
        if session.cfg["seq_len"] == 8:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real_step(session, batch)

    monkeypatch.setattr(mp, "build_model", build)
    monkeypatch.setattr(mp, "train_step", step)
    configs = tiny_grid(
        {"model": "tiny-llama", "seq_len": 16},
        {"model": "tiny-llama", "seq_len": 8},
        {"model": "tiny-llama"},
    )
    rows = mp.run_grid(configs, tmp_path / "oom.csv", device="cpu", log=io.StringIO())
    assert [(r["status"], r["failed_phase"]) for r in rows] == [
        ("oom", "step2"),
        ("error", "step1"),
        ("ok", ""),
    ]
    assert rows[0]["error"].startswith("OutOfMemoryError: CUDA out of memory")
    assert rows[0]["tokens_per_s"] == "" and rows[1]["error"].startswith("RuntimeError: CUDA error")
    assert all(ref() is None for ref in built)  # each configuration's model was freed


class FakeStats:
    """Stands in for the CUDA allocator: the patched step moves ``current`` and spikes the peak."""

    def __init__(self):
        self.current = self.peak = self.high_water = 0
        self.calls = []

    def spike(self, peak: int, current: int) -> None:
        self.peak = max(self.peak, peak)
        self.high_water = max(self.high_water, peak)
        self.current = current

    def sync(self):
        self.calls.append("sync")

    def empty_cache(self):
        self.calls.append("empty_cache")

    def reset_peak(self):
        self.calls.append("reset_peak")
        self.peak = self.current

    def allocated(self):
        return self.current

    def max_allocated(self):
        return self.peak

    def max_reserved(self):
        return self.peak + 10

    def device_used(self):
        return 5000 + self.high_water

    def alloc_retries(self):
        return 0


# step -> (peak during the step, allocated after it): step 1 creates the optimizer states
STEP_PROFILE = {1: (1000, 300), 2: (800, 300), 3: (790, 300)}


def test_peaks_come_from_steps_two_and_three(torch, tmp_path, monkeypatch):
    stats, steps = FakeStats(), []
    real_build = mp.build_model

    def build(cfg, device):
        stats.spike(150, 100)  # weights
        return real_build(cfg, device)

    def step(session, batch):
        steps.append(1)
        stats.spike(*STEP_PROFILE[len(steps)])
        return 5.5

    monkeypatch.setattr(mp, "build_model", build)
    monkeypatch.setattr(mp, "train_step", step)
    (row,) = mp.run_grid(
        tiny_grid({"model": "tiny-llama"}),
        tmp_path / "s.csv",
        device="cpu",
        stats=stats,
        log=io.StringIO(),
    )
    assert row["status"] == "ok"
    assert {
        k: row[k]
        for k in (
            "device_used_before_build_bytes",
            "weights_allocated_bytes",
            "peak_allocated_first_step_bytes",
            "peak_reserved_first_step_bytes",
            "peak_allocated_bytes",
            "peak_reserved_bytes",
            "device_used_bytes",
            "alloc_retries",
        )
    } == {
        "device_used_before_build_bytes": 5000,
        "weights_allocated_bytes": 100,
        "peak_allocated_first_step_bytes": 1000,
        "peak_reserved_first_step_bytes": 1010,
        "peak_allocated_bytes": 800,
        "peak_reserved_bytes": 810,
        "device_used_bytes": 6000,
        "alloc_retries": 0,
    }
    assert stats.calls[-1] == "empty_cache"  # fresh state for the next configuration


def test_oom_row_keeps_the_peak_reached(torch, tmp_path, monkeypatch):
    stats, steps = FakeStats(), []

    def step(session, batch):
        steps.append(session.cfg["model"])
        n = steps.count(session.cfg["model"])
        if session.cfg["model"] == "tiny-llama" and n == 2:
            stats.spike(900, 300)
            raise RuntimeError("CUDA out of memory. Tried to allocate 64.00 MiB")
        stats.spike(*STEP_PROFILE[n])
        return 5.5

    monkeypatch.setattr(mp, "train_step", step)
    rows = mp.run_grid(
        tiny_grid({"model": "tiny-llama"}, {"model": "tiny-qwen2"}),
        tmp_path / "o.csv",
        device="cpu",
        stats=stats,
        log=io.StringIO(),
    )
    assert [(r["status"], r["failed_phase"]) for r in rows] == [("oom", "step2"), ("ok", "")]
    assert (
        rows[0]["peak_allocated_at_failure_bytes"] == 900 and rows[0]["peak_allocated_bytes"] == ""
    )


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_time_budget_skips_what_would_not_fit(torch, tmp_path):
    configs = tiny_grid(
        {"model": "tiny-llama"}, {"model": "tiny-llama", "seq_len": 16}, {"model": "tiny-qwen2"}
    )
    estimates = {configs[0]["id"]: 0.0, configs[1]["id"]: 1000.0, configs[2]["id"]: 0.0}
    rows = mp.run_grid(
        configs,
        tmp_path / "b.csv",
        device="cpu",
        time_budget_s=100,
        clock=FakeClock(),
        estimate=lambda c: estimates[c["id"]],
        log=io.StringIO(),
    )
    assert [r["status"] for r in rows] == ["ok", "skipped", "ok"]
    assert rows[1]["error"] == "time budget" and rows[1]["estimated_time_s"] == 1000.0
    with open(tmp_path / "b.csv", newline="") as fh:
        assert [r["status"] for r in csv.DictReader(fh)] == ["ok", "skipped", "ok"]


def test_time_budget_stops_a_configuration_between_steps(torch, tmp_path, monkeypatch):
    clock = FakeClock()
    real_step = mp.train_step

    def slow_step(session, batch):
        clock.now += 100.0  # each step "takes" 100 s
        return real_step(session, batch)

    monkeypatch.setattr(mp, "train_step", slow_step)
    configs = tiny_grid({"model": "tiny-llama"}, {"model": "tiny-qwen2"})
    rows = mp.run_grid(
        configs,
        tmp_path / "t.csv",
        device="cpu",
        time_budget_s=150,
        clock=clock,
        estimate=lambda c: 0.0,
        log=io.StringIO(),
    )
    assert [(r["status"], r["failed_phase"]) for r in rows] == [
        ("timeout", "step2"),
        ("skipped", ""),
    ]


def test_invalid_rows_are_refused_by_calc():
    (cfg,) = tiny_grid(
        {"model": "tiny-llama", "method": "lora", "lora_targets": ["q_proj", "w_pack"]}
    )
    with pytest.raises(CalcError) as info:
        parse_estimate_request(mp.row_to_request(settings_row(cfg)))
    assert (info.value.code, info.value.field) == ("unknown_lora_target", "lora_targets")
