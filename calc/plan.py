"""The plan command: memory, time, cost, cards that fit, recommendations, solvers, suggestions.

``python -m calc plan --request FILE|-`` takes every key of the estimate request plus the plan's
own (:data:`calc.fields.FIELDS`, group ``plan``: their defaults, bounds and sources are there, and
their meaning in the catalogue's ``help.<key>``; ``dataset_tokens`` and ``gpu`` are required).

The response adds to the estimate's fields (under ``"memory"``): ``time_hours`` (wall-clock of
the final run), ``time`` (breakdown and factors), ``cost_usd`` (total, breakdown, per hour,
per month; ``priced: false`` and ``unpriced_reason: "no_rental_price"`` when the card has no
rental price: its figures then count storage only), ``fits`` (every catalogue card),
``recommendations`` (each configuration with ``priced``, ``stack`` and its ranks within its
stack; ``cheapest`` and ``fastest`` name priced runs only, and ``by_stack`` repeats the picks
within each software stack), ``solvers`` and, when the setup does not fit the chosen card,
``suggestions``. Errors are coded as for ``estimate``.
Warning codes: the estimate's, plus ``does_not_fit_selected_gpu`` or ``borderline_selected_gpu``, ``price_from_other_tier``,
``price_is_interruptible_rate`` / ``price_is_on_demand_rate`` and the ROCm caveats of
:func:`calc.gpus.rocm_warnings`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterable

from . import gpus as gpu_catalogue
from . import liger, recommend, run_phases
from .cost import (
    CHECKPOINT_WRITE_GB_PER_S,
    CostEstimate,
    CostInputs,
    RunExtras,
    default_storage_gb,
    electricity_usd_per_gpu_hour,
    estimate_cost,
)
from .comm import GPUS_PER_NODE
from .errors import InputError
from .fields import BY_KEY, PLAN, field_specs
from .jsontypes import JsonObject
from .lengths import dataset_samples
from .lora import TRANSFORMERS_FRAMEWORKS
from .request import (
    MAX_MICRO_BATCH,
    MAX_SEQ_LEN,
    EstimateRequest,
    Precision,
    check_sequence_parallel,
    parse_estimate_request,
    parse_fields,
)
from .run_phases import RunPhases
from .timing import (
    FP8_MEASURED_CLASSES,
    SINGLE_SOURCE_CLASSES,
    TimeEstimate,
    bf16_without_tensor_cores,
    default_mfu,
    estimate_time,
    eval_seconds,
)


@dataclass(frozen=True)
class PlanOptions:
    """The plan's own keys, checked: one attribute per key of group ``plan`` in
    :data:`calc.fields.FIELDS` (their defaults are there; :func:`parse_plan_options` fills them)."""

    dataset_tokens: float
    epochs: float
    gpu: gpu_catalogue.Gpu
    price_per_gpu_hour: float | None
    price_tier: str
    interruptible: bool
    owned: bool
    electricity_price_per_kwh: float
    board_power_w: float | None
    power_limit_w: float | None
    checkpoint_interval_minutes: float
    checkpoint_minutes: float
    interruptions_per_day: float
    startup_minutes: float
    starts: int
    storage_gb: float | None
    storage_price_per_gb_month: float | None
    months_kept: float
    experiment_multiplier: float
    safety_margin: float
    mfu: float | None
    qlora_speed_factor: float | None
    scaling_efficiency: float | None
    fp8_compute: bool
    network: str
    eval_steps: float | None = None
    eval_tokens: float = 0.0
    eval_on_start: bool = False
    eval_batch_size: int = 8
    save_steps: float | None = None
    save_only_model: bool = False
    save_total_limit: int | None = None
    checkpoint_write_gb_per_s: float = CHECKPOINT_WRITE_GB_PER_S
    gpus_per_node: int = GPUS_PER_NODE

    @property
    def total_tokens(self) -> float:
        return self.dataset_tokens * self.epochs


def parse_plan_options(data: object) -> PlanOptions:
    """Validate the plan-only keys (the estimate keys are checked by ``parse_estimate_request``)."""
    fields = {spec.key: spec for spec in field_specs("plan")}
    values = parse_fields(data, fields)
    out: JsonObject = {
        key: spec.check(values[key]) for key, spec in fields.items() if spec.group == PLAN
    }
    if out["power_limit_w"] is not None:
        # the chosen card as it runs under the reader's limit (its id unchanged: the plan's
        # other figures of that card read this one, see _cards)
        out["gpu"] = gpu_catalogue.with_power_limit(out["gpu"], out["power_limit_w"])
    return PlanOptions(**out)


def check_plan_field(key: str, value: object) -> object:
    """One plan-only field, checked on its own (``None`` = left out)."""
    return BY_KEY[key].check(value)


def parse_plan_request(data: object) -> tuple[EstimateRequest, PlanOptions]:
    """The estimate request and the plan's options. With ``length_stats`` and no ``max_steps``
    the run's length is the dataset's: ``dataset_tokens x epochs`` over the mean sample length
    (:func:`calc.lengths.dataset_samples`), the samples whose longest micro-batch sets the
    memory peak (:func:`calc.lengths.samples_seen`)."""
    options = parse_plan_options(data)
    request = parse_estimate_request(data, "plan")
    if request.length_stats is not None and request.max_steps is None:
        seen = dataset_samples(
            request.length_stats, request.seq_len, options.dataset_tokens * options.epochs
        )
        request = replace(request, samples_seen=seen)
    return request, options


# --- pieces of the plan ---------------------------------------------------------------------------


class Planner:
    """Time and cost of any (card, count, sharding) for one request; memoises the estimates."""

    def __init__(
        self,
        request: EstimateRequest,
        options: PlanOptions,
        estimator: recommend.Estimator | None = None,
    ) -> None:
        self.request = request
        self.options = options
        self.estimator = estimator or recommend.Estimator(request)
        base = self.estimator.get()
        if base is None:  # the request itself is rejected by the memory model: re-raise it
            from .memory import estimate_request

            estimate_request(request)
            raise InputError("estimate_failed", None, None)
        self.base: JsonObject = base
        self.storage = (
            default_storage_gb(
                self.base["params_total"],
                self.base["params_trainable"],
                options.dataset_tokens,
                *self._checkpoints_kept(),
            )
            if options.storage_gb is None
            else {"total": options.storage_gb}
        )
        self.storage_price = (
            options.storage_price_per_gb_month
            if options.storage_price_per_gb_month is not None
            # an owner's disk is their own: no monthly rent unless they give one
            else 0.0
            if options.owned
            else gpu_catalogue.storage_price().usd
        )
        self._prices: dict[str, JsonObject] = {}

    def _checkpoints_kept(self) -> tuple[int, int | None]:
        """How many checkpoints the disk holds at the end and the bytes of each: with
        ``save_steps``, the request's own saves (HF Trainer keeps them all unless
        ``save_total_limit``) of what a save writes (:func:`calc.run_phases.checkpoint_bytes`);
        else two of the default size (:func:`calc.cost.default_storage_gb`)."""
        o = self.options
        if o.save_steps is None:
            return 2, None
        req = self.request
        time = self.time(o.gpu, req.num_gpus, req.sharding.value)
        saves = run_phases.occurrences(self._steps(time, req.num_gpus), o.save_steps)
        kept = saves if o.save_total_limit is None else min(saves, o.save_total_limit)
        return kept, run_phases.checkpoint_bytes(req, o.save_only_model).total

    def price(self, gpu: gpu_catalogue.Gpu) -> JsonObject:
        """The price row used for ``gpu`` (memoised per card: it does not change within a plan)."""
        cached = self._prices.get(gpu.id)
        if cached is None:
            cached = self._prices[gpu.id] = self._price(gpu)
        return dict(cached)

    def _price(self, gpu: gpu_catalogue.Gpu) -> JsonObject:
        o = self.options
        if gpu.id == o.gpu.id and o.price_per_gpu_hour is not None:
            return {
                "usd_per_gpu_hour": o.price_per_gpu_hour,
                "source": "request",
                "tier": o.price_tier,
                "interruptible": o.interruptible,
                "as_of": None,
                "fallback": False,
                "priced": True,
            }
        if o.owned:
            # the reader's own cards: an hour of work costs the electricity the card draws
            # the chosen card's is the reader's (board_power_w, else the power limit, which
            # with_power_limit set on it); another card's, the catalogue's
            watts = (
                o.board_power_w
                if gpu.id == o.gpu.id and o.board_power_w is not None
                else o.gpu.board_power_w
                if gpu.id == o.gpu.id
                else gpu.board_power_w
            )
            return {
                "usd_per_gpu_hour": electricity_usd_per_gpu_hour(
                    watts, o.electricity_price_per_kwh
                ),
                "source": None,
                "tier": o.price_tier,
                "interruptible": o.interruptible,
                "as_of": None,
                "fallback": False,
                "source_kind": "electricity",
                "board_power_w": watts,
                "board_power_from": _board_power_from(o, gpu),
                "electricity_price_per_kwh": o.electricity_price_per_kwh,
                "priced": True,
            }
        if not gpu_catalogue.prices_for(gpu.id):
            # A card nobody rents publicly (a desktop card, a new accelerator): still planned
            # for its owner, at no rental price; warning "price_is_none" says so and ranks it
            # after the priced ones by cost.
            return {
                "usd_per_gpu_hour": 0.0,
                "source": None,
                "tier": o.price_tier,
                "interruptible": o.interruptible,
                "as_of": None,
                "fallback": False,
                "source_kind": "none",
                "no_price": True,
                "priced": False,
            }
        quote = gpu_catalogue.price_quote(gpu.id, o.price_tier, o.interruptible)
        out = quote.to_dict()
        out["source_kind"] = "catalogue"
        out["priced"] = True
        return out

    def _setup(self, changes: JsonObject | None) -> EstimateRequest:
        """The request with ``changes`` applied (a suggestion's or a solver's setup)."""
        return self.estimator.variant(**changes) if changes else self.request

    def _steps(self, time: TimeEstimate, num_gpus: int) -> int:
        """Optimizer steps of the run at ``time``'s real tokens per step on ``num_gpus``."""
        return run_phases.run_steps(
            self.options.total_tokens, time.tokens_per_step_per_gpu * num_gpus
        )

    def time(
        self,
        gpu: gpu_catalogue.Gpu,
        num_gpus: int,
        sharding: str,
        changes: JsonObject | None = None,
    ) -> TimeEstimate:
        """Training time of the request (with ``changes`` applied) on ``num_gpus`` x ``gpu``."""
        changes = changes or {}
        req = self._setup(changes)
        est = self.estimator.get(**changes) if changes else self.base
        trainable = est["params_trainable"] if est else self.base["params_trainable"]
        o = self.options
        return estimate_time(
            req,
            gpu,
            o.total_tokens,
            num_gpus=num_gpus,
            sharding=sharding,
            mfu=o.mfu,
            qlora_speed_factor=o.qlora_speed_factor,
            scaling_efficiency=o.scaling_efficiency,
            fp8_compute=o.fp8_compute,
            trainable_params=trainable,
            memory=est,
            network=o.network,
            gpus_per_node=o.gpus_per_node,
        )

    def phases(
        self,
        gpu: gpu_catalogue.Gpu,
        num_gpus: int,
        sharding: str,
        time: TimeEstimate,
        changes: JsonObject | None = None,
    ) -> RunPhases:
        """The run's evaluations and saves on ``num_gpus`` x ``gpu`` (:mod:`calc.run_phases`)."""
        o = self.options
        steps = self._steps(time, num_gpus)
        evaluating = o.eval_steps is not None and o.eval_tokens > 0
        if not evaluating and o.save_steps is None:  # the usual plan: nothing more to count
            return RunPhases(steps, 0, 0.0, 0, 0.0, None)
        req = run_phases.with_sharding(self._setup(changes), num_gpus, sharding)
        evaluations, each_eval = 0, 0.0
        if evaluating and o.eval_steps is not None:
            evaluations = run_phases.occurrences(steps, o.eval_steps) + o.eval_on_start
            each_eval = eval_seconds(
                req,
                gpu,
                o.eval_tokens,
                batch_size=o.eval_batch_size,
                mfu=o.mfu,
                fp8_compute=o.fp8_compute,
                network=o.network,
                gpus_per_node=o.gpus_per_node,
            )
        saves, each_save, ckpt = 0, 0.0, None
        if o.save_steps is not None:
            saves = run_phases.occurrences(steps, o.save_steps)
            ckpt = run_phases.checkpoint_bytes(req, o.save_only_model)
            each_save = run_phases.save_seconds(
                ckpt, req.sharding, time.link.nodes, o.checkpoint_write_gb_per_s
            )
        return RunPhases(steps, evaluations, each_eval, saves, each_save, ckpt)

    def cost(
        self,
        gpu: gpu_catalogue.Gpu,
        num_gpus: int,
        time: TimeEstimate,
        price: JsonObject,
        phases: RunPhases | None = None,
    ) -> CostEstimate:
        o = self.options
        inputs = CostInputs(
            price_per_gpu_hour=price["usd_per_gpu_hour"],
            num_gpus=num_gpus,
            storage_gb=self.storage["total"],
            storage_price_per_gb_month=self.storage_price,
            months_kept=o.months_kept,
            startup_minutes=o.startup_minutes,
            starts=o.starts,
            experiment_multiplier=o.experiment_multiplier,
            interruptible=o.interruptible,
            checkpoint_interval_minutes=o.checkpoint_interval_minutes,
            checkpoint_minutes=o.checkpoint_minutes,
            interruptions_per_day=o.interruptions_per_day,
        )
        extras = RunExtras()
        if phases is not None:
            interval = None
            if o.save_steps is not None and phases.steps:
                every = run_phases.interval_steps(o.save_steps, phases.steps)
                interval = min(every, phases.steps) * time.step_seconds / 3600.0
            extras = RunExtras(
                eval_hours=phases.eval_hours,
                save_hours=phases.save_hours if o.save_steps is not None else None,
                save_interval_hours=interval,
            )
        return estimate_cost(time.compute_hours, inputs, extras)

    def state(self, estimate: JsonObject | None, gpu: gpu_catalogue.Gpu) -> str:
        """The one verdict (:func:`calc.recommend.judge`) of ``estimate`` on one ``gpu``, with
        the user's margin: ``fits`` | ``borderline`` | ``does_not_fit``."""
        return recommend.state_of(estimate, gpu.memory_bytes, self.options.safety_margin)

    def fits(self, estimate: JsonObject | None, gpu: gpu_catalogue.Gpu) -> bool:
        return self.state(estimate, gpu) == "fits"


def _time_warnings(gpu: gpu_catalogue.Gpu, fp8_compute: bool, precision: Precision) -> list[str]:
    """What the time of ``gpu`` rests on, where it is thin: a card family whose efficiency was
    fitted on one source (:data:`calc.timing.SINGLE_SOURCE_CLASSES`), FP8 on a card family no
    FP8 row was measured on (:data:`calc.timing.FP8_MEASURED_CLASSES`); and what makes it slow
    for a reason the reader can change: bf16 on a card without BF16 tensor cores
    (:func:`calc.timing.bf16_without_tensor_cores`). The selected card's plan and each
    recommendation of that card say so alike."""
    out = ["time_class_single_source"] if gpu.utilisation_class in SINGLE_SOURCE_CLASSES else []
    if bf16_without_tensor_cores(precision, gpu):
        out.append("bf16_without_tensor_cores")
    if (
        fp8_compute
        and getattr(gpu, "fp8_dense_tflops", 0.0) > 0
        and gpu.utilisation_class not in FP8_MEASURED_CLASSES
    ):
        out.append("fp8_rate_not_measured_on_class")
    return out


def _board_power_from(o: PlanOptions, gpu: gpu_catalogue.Gpu) -> str:
    """Where the watts an owned card is priced at come from: ``request`` (``board_power_w``),
    ``power_limit`` (``power_limit_w``), else ``catalogue``."""
    if gpu.id == o.gpu.id and o.board_power_w is not None:
        return "request"
    if gpu.id == o.gpu.id and o.power_limit_w is not None:
        return "power_limit"
    return "catalogue"


def _cards(options: PlanOptions) -> tuple[gpu_catalogue.Gpu, ...]:
    """The catalogue, with the chosen card as the request has it (under its power limit)."""
    return tuple(
        options.gpu if gpu.id == options.gpu.id else gpu for gpu in gpu_catalogue.all_gpus()
    )


def _recommendations(planner: Planner) -> JsonObject:
    """Every (card, count, sharding) that fits with the margin, ranked by total cost and by time."""
    req = planner.request
    method = req.method.value
    configs = []
    cards = _cards(planner.options)
    in_one_node: set[str] = set()  # cards that fit some configuration of at most 8 GPUs
    own_pair = (req.num_gpus, req.sharding.value)
    for num_gpus, sharding in recommend.configurations(req):
        # Several nodes are explored only for the cards that fit no single node: the answer
        # to "how many H100 for a 70B full fine-tuning", without 64-GPU rows for a model that
        # fits one card (the request's own pair is always kept).
        multi_node = num_gpus > recommend.GPU_COUNTS[3] and (num_gpus, sharding) != own_pair
        if multi_node and all(gpu.id in in_one_node for gpu in cards):
            continue
        changes = (
            {}
            if (num_gpus == req.num_gpus and sharding == req.sharding.value)
            else {"num_gpus": num_gpus, "sharding": sharding}
        )
        est = planner.estimator.get(**changes)
        if est is None:
            continue
        need = recommend.need_of(est)
        for gpu in cards:
            verdict = recommend.judge(need, gpu.memory_bytes, planner.options.safety_margin)
            if not verdict.fits or (multi_node and gpu.id in in_one_node):
                continue
            if num_gpus <= recommend.GPU_COUNTS[3]:
                in_one_node.add(gpu.id)
            time = planner.time(gpu, num_gpus, sharding)
            price = planner.price(gpu)
            phases = planner.phases(gpu, num_gpus, sharding, time)
            cost = planner.cost(gpu, num_gpus, time, price, phases)
            configs.append(
                {
                    "id": f"{gpu.id}x{num_gpus}-{sharding}",
                    "gpu": gpu.id,
                    "num_gpus": num_gpus,
                    "sharding": sharding,
                    "memory_bytes": gpu.memory_bytes,
                    "device_total_bytes": est["device_total_bytes"],
                    "required_bytes": verdict.required_bytes,
                    # the headroom of the figure the verdict judged (need_of)
                    "headroom_fraction": (gpu.memory_bytes - verdict.need.central_bytes)
                    / gpu.memory_bytes,
                    **verdict.need.min_device_fields(),
                    "time_hours": cost.schedule.total_hours,
                    "tokens_per_second": time.tokens_per_second,
                    "cost_usd": cost.total_usd,
                    "per_hour_usd": cost.per_hour_usd,
                    "price_per_gpu_hour": price["usd_per_gpu_hour"],
                    "price_tier": price["tier"],
                    "price_fallback": price["fallback"],
                    # no rental price: cost_usd and per_hour_usd count storage only, and the
                    # site shows "no rental price" instead of them
                    "priced": price["priced"],
                    "stack": gpu.stack,
                    "warnings": _price_warnings(price, planner.options.interruptible)
                    + gpu_catalogue.rocm_warnings(gpu, method, req.attention.value)
                    + _time_warnings(gpu, planner.options.fp8_compute, req.precision),
                }
            )

    # A price at another rate than asked (an interruptible-only listing when on-demand was
    # asked, or the reverse) or from the other kind of provider (a managed-cloud price when
    # marketplace prices were asked, or the reverse) is not like for like: such
    # configurations rank after the others by cost, so the cost ranking and the "cheapest"
    # pick never disagree.
    def rate_mismatch(c: JsonObject) -> bool:
        return any(w.startswith("price_is_") or w == "price_from_other_tier" for w in c["warnings"])

    # Cards with no rental price come last, fastest first: ranked for their owners.
    def unpriced(c: JsonObject) -> bool:
        return "price_is_none" in c["warnings"]

    # Among runs whose cost (time) shows the same to two significant figures, one with a
    # caveat (ROCm, an uncertain price) ranks after one without.
    def cost_key(c: JsonObject) -> float:
        key: float = c["time_hours"] if unpriced(c) else c["cost_usd"]
        return key

    configs.sort(
        key=lambda c: (
            unpriced(c),
            rate_mismatch(c),
            recommend.estimate_level(cost_key(c)),
            recommend.has_caveat(c),
            cost_key(c),
            c["time_hours"],
            c["id"],
        )
    )
    by_time = sorted(
        configs,
        key=lambda c: (
            recommend.estimate_level(c["time_hours"]),
            recommend.has_caveat(c),
            c["time_hours"],
            c["cost_usd"],
            c["id"],
        ),
    )
    for rank, c in enumerate(configs, 1):
        c["rank_by_cost"] = rank
    for rank, c in enumerate(by_time, 1):
        c["rank_by_time"] = rank
    # the same rankings within each software stack: what a reader who keeps to one stack sees
    for stack in gpu_catalogue.STACKS:
        for order, key in ((configs, "rank_by_cost_in_stack"), (by_time, "rank_by_time_in_stack")):
            for rank, c in enumerate((c for c in order if c["stack"] == stack), 1):
                c[key] = rank

    def pick(candidates: Iterable[JsonObject]) -> JsonObject | None:
        # least memory in total (8 small cards are not "smaller" than one large one); among
        # cards of one class (an H100's 79.6 GiB vs an A100's 80 GiB) the cheaper run wins
        best = min(
            candidates,
            key=lambda c: (
                c["num_gpus"] * gpu_catalogue.get_gpu(c["gpu"]).memory_gb_marketed,
                rate_mismatch(c),
                c["cost_usd"],
                c["num_gpus"],
            ),
            default=None,
        )
        return None if best is None else {k: best[k] for k in ("id", "gpu", "num_gpus", "sharding")}

    def highlights(chosen: list[JsonObject]) -> JsonObject:
        # "cheapest" and "fastest" name a run one can rent: a card without a rental price has
        # no cost to compare. A price at another rate (e.g. interruptible-only listings) is
        # ranked but named cheapest only when nothing else is priced.
        priced = [c for c in chosen if c["priced"]]
        ids = {c["id"] for c in chosen}
        timed = [c for c in by_time if c["priced"] and c["id"] in ids]
        own = [
            c
            for c in chosen
            if c["num_gpus"] == req.num_gpus and c["sharding"] == req.sharding.value
        ]
        return {
            "cheapest": next(
                (c["id"] for c in priced if not rate_mismatch(c)),
                priced[0]["id"] if priced else None,
            ),
            "fastest": timed[0]["id"] if timed else None,
            # seed 004: start with the smallest card that fits your configuration, move up
            # only when time per step is the bottleneck
            "smallest_card": pick(own),
            "smallest_single_gpu": pick(c for c in chosen if c["num_gpus"] == 1),
            "smallest_config": pick(chosen),
        }

    return {
        "count": len(configs),
        "configs": configs,
        "by_cost": [c["id"] for c in configs],
        "by_time": [c["id"] for c in by_time],
        **highlights(configs),
        # the same picks within each software stack (a ROCm card is no drop-in for a CUDA one)
        "by_stack": {
            stack: highlights([c for c in configs if c["stack"] == stack])
            for stack in gpu_catalogue.STACKS
        },
        "gpu_counts": list(recommend.GPU_COUNTS),
        "shardings": ["none", *recommend.MULTI_GPU_SHARDINGS],
    }


def _price_warnings(price: JsonObject, interruptible: bool) -> list[str]:
    if price.get("no_price"):
        return ["price_is_none"]
    out = []
    if price.get("fallback"):
        out.append("price_from_other_tier")
    if price.get("interruptible") != interruptible:
        out.append(
            "price_is_interruptible_rate"
            if price.get("interruptible")
            else "price_is_on_demand_rate"
        )
    return out


def _solvers(planner: Planner) -> JsonObject:
    """Largest micro-batch and longest sequence that fit the chosen card (request's count and
    sharding), by exponential search and bisection over the memory estimate: ``value`` the
    largest whose verdict is ``fits``; ``borderline_value``, when some larger value (or any,
    when none fits) is ``borderline``, the largest not ruled out. So the solver answers with
    the verdict of the request itself: a borderline setup is borderline here too."""
    req, gpu = planner.request, planner.options.gpu

    def solve(field: str, start: int, maximum: int) -> JsonObject:
        def state(x: int) -> str:
            return planner.state(
                planner.estimator.get(**{field: x}) if x != start else planner.base, gpu
            )

        value = recommend.largest_fitting(lambda x: state(x) == "fits", start, maximum)
        out: JsonObject = {"found": False} if value is None else {"found": True, "value": value}
        if value != maximum:
            possible = recommend.largest_fitting(
                lambda x: state(x) != "does_not_fit", value or start, maximum
            )
            if possible is not None and possible != value:
                out["borderline_value"] = possible
        return out

    seq = solve("seq_len", req.seq_len, MAX_SEQ_LEN)
    if seq["found"]:
        seq["above_max_position_embeddings"] = seq["value"] > req.model.max_position_embeddings
    return {
        "gpu": gpu.id,
        "num_gpus": req.num_gpus,
        "sharding": req.sharding.value,
        "max_micro_batch_size": solve("micro_batch_size", req.micro_batch_size, MAX_MICRO_BATCH),
        "max_seq_len": seq,
    }


def _suggestion(
    planner: Planner, action: str, changes: JsonObject, extra: JsonObject | None = None
) -> JsonObject | None:
    est = planner.estimator.get(**changes)
    if est is None:
        return None
    gpu = planner.options.gpu
    num_gpus = changes.get("num_gpus", planner.request.num_gpus)
    sharding = changes.get("sharding", planner.request.sharding.value)
    time = planner.time(gpu, num_gpus, sharding, changes)
    phases = planner.phases(gpu, num_gpus, sharding, time, changes)
    cost = planner.cost(gpu, num_gpus, time, planner.price(gpu), phases)
    # the figure itself: the saving it shows (and whether there is one) reads it
    need = recommend.settled(recommend.need_of(est))
    verdict = recommend.judge(need, gpu.memory_bytes, planner.options.safety_margin)
    out = {
        "action": action,
        "changes": dict(changes),
        "fits": verdict.fits,
        "verdict": verdict.state,
        "device_total_bytes": est["device_total_bytes"],
        **need.min_device_fields(),
        "required_bytes": recommend.required_bytes(need.high_bytes, planner.options.safety_margin),
        # what the change saves of the figure the verdict judges (need_of)
        "saved_bytes": recommend.need_of(planner.base).central_bytes - need.central_bytes,
        "host_bytes": est["host_bytes"],
        "time_hours": cost.schedule.total_hours,
        "cost_usd": cost.total_usd,
    }
    if extra:
        out.update(extra)
    return out


def _liger_can_apply(req: EstimateRequest) -> bool:
    """Whether turning Liger-Kernel on is a change the reader can make: a model Liger patches
    (:func:`calc.liger.patches`), built by transformers' own modeling code, in a stack that
    does not run its own kernels instead (Unsloth)."""
    return (
        not req.liger_kernel
        and liger.patches(req.model.family)
        and req.framework.value in TRANSFORMERS_FRAMEWORKS
        and not req.fused_lora_kernels
    )


def _suggestions(planner: Planner, solvers: JsonObject) -> list[JsonObject]:
    """Ordered ways to make the setup fit the chosen card, each with its computed effect:
    shorter sequences, smaller micro-batch with gradient accumulation, gradient checkpointing,
    chunked loss, Liger-Kernel's modules, LoRA -> QLoRA (full -> LoRA), 8-bit optimizer,
    ZeRO-3/FSDP over N GPUs, CPU offload."""
    req = planner.request
    out: list[JsonObject | None] = []
    seq = solvers["max_seq_len"]
    if seq["found"] and seq["value"] < req.seq_len:
        out.append(_suggestion(planner, "shorter_sequences", {"seq_len": seq["value"]}))
    elif req.seq_len > 1:
        out.append(_suggestion(planner, "shorter_sequences", {"seq_len": max(1, req.seq_len // 2)}))
    if req.micro_batch_size > 1:
        mb = solvers["max_micro_batch_size"]
        new_mb = mb["value"] if mb["found"] else 1
        accumulation = -(-req.micro_batch_size // new_mb)  # keeps the effective batch
        out.append(
            _suggestion(
                planner,
                "smaller_micro_batch_with_accumulation",
                {"micro_batch_size": new_mb},
                {
                    "gradient_accumulation_steps": accumulation,
                    "effective_batch_per_gpu": new_mb * accumulation,
                },
            )
        )
    if not req.gradient_checkpointing:
        out.append(_suggestion(planner, "gradient_checkpointing", {"gradient_checkpointing": True}))
    if not req.chunked_loss:
        # fp32 logits of a large vocabulary (Llama 3: 128,256) can exceed the model's activations
        out.append(_suggestion(planner, "chunked_loss", {"chunked_loss": True}))
    if _liger_can_apply(req):
        # the Trainer's use_liger_kernel: lighter norms and MLP, and the fused loss
        out.append(
            _suggestion(planner, "liger_kernel", {"liger_kernel": True, "chunked_loss": True})
        )
    if req.method.value == "lora":
        out.append(_suggestion(planner, "lora_to_qlora", {"method": "qlora"}))
    elif req.method.value == "full":
        out.append(_suggestion(planner, "full_to_lora", {"method": "lora"}))
    eight_bit = {"adamw": "adamw-8bit", "paged-adamw": "paged-adamw-8bit"}.get(req.optimizer.value)
    if eight_bit:
        out.append(_suggestion(planner, "optimizer_8bit", {"optimizer": eight_bit}))
    if req.sharding.value != "zero3" or req.num_gpus < recommend.GPU_COUNTS[-1]:
        # the fewest GPUs that fit, else the most; judged on the verdict alone, and only
        # the count chosen made a suggestion (it reads the figure itself)
        last = None
        for n in recommend.GPU_COUNTS[1:]:
            if n < req.num_gpus or n % req.sequence_parallel:
                continue
            last = n
            est = planner.estimator.get(num_gpus=n, sharding="zero3")
            if est is not None and planner.fits(est, planner.options.gpu):
                break
        if last is not None:
            zero3 = {"num_gpus": last, "sharding": "zero3"}
            out.append(_suggestion(planner, "zero3_over_n_gpus", zero3))
    split = _sequence_parallel_change(planner)
    if split is not None:
        out.append(_suggestion(planner, "sequence_parallel", split))
    if req.cpu_offload.value == "none":
        opt = _suggestion(planner, "cpu_offload", {"cpu_offload": "optimizer"})
        out.append(opt)
        if opt is not None and not opt["fits"]:
            out.append(_suggestion(planner, "cpu_offload", {"cpu_offload": "optimizer+params"}))
    elif req.cpu_offload.value == "optimizer":
        out.append(_suggestion(planner, "cpu_offload", {"cpu_offload": "optimizer+params"}))
    # a change that saves nothing is no suggestion
    found = [s for s in out if s is not None and s["saved_bytes"] > 0]
    if found and not any(s["fits"] for s in found):
        combined = _combined_suggestion(planner, found)
        if combined is not None:
            found.append(combined)
    return found


SEQUENCE_PARALLEL_TRIED = (2, 4, 8)
"""Groups the "split each sequence" suggestion tries, smallest first: within one server of
:data:`calc.comm.GPUS_PER_NODE`, where the all-to-alls stay on its link."""


def _sequence_parallel_change(planner: Planner) -> JsonObject | None:
    """Sequence parallelism as a way to fit (:data:`SEQUENCE_PARALLEL_TRIED`, groups larger than
    the request's that the model's heads allow): on the request's GPUs when the group divides
    them, with the accumulation multiplied by the group so each optimizer step still takes as
    many sequences; else each GPU becomes a group (the GPUs times the group, the steps as they
    were). The smallest group that fits, else the largest tried; ``None`` when none applies."""
    req = planner.request
    last = None
    for k in SEQUENCE_PARALLEL_TRIED:
        if k <= req.sequence_parallel:
            continue
        try:  # the heads and the mixers; a group of k GPUs on its own divides itself
            check_sequence_parallel(k, k, req.model)
        except InputError:
            continue
        accumulation = req.gradient_accumulation_steps * k
        if req.num_gpus % k == 0 and accumulation % req.sequence_parallel == 0:
            # fewer replicas on the same GPUs, each accumulating more micro-batches
            change: JsonObject = {
                "sequence_parallel": k,
                "gradient_accumulation_steps": accumulation // req.sequence_parallel,
            }
        else:  # every replica becomes a group of k GPUs
            change = {"sequence_parallel": k, "num_gpus": req.data_parallel * k}
        last = change
        est = planner.estimator.get(**change)
        if est is not None and planner.fits(est, planner.options.gpu):
            break
    return last


# Changes that keep the training task as it is (same data, same effective batch), in the
# order they are tried together when no single one is enough.
_COMBINABLE = (
    "gradient_checkpointing",
    "chunked_loss",
    "liger_kernel",
    "lora_to_qlora",
    "full_to_lora",
    "optimizer_8bit",
    "zero3_over_n_gpus",
    "cpu_offload",
)


def _combined_suggestion(planner: Planner, single: list[JsonObject]) -> JsonObject | None:
    """When no single change fits: apply the task-preserving ones cumulatively, in order, and
    stop at the first combination that fits (or return the last, which does not)."""
    changes: JsonObject = {}
    last = None
    for suggestion in single:
        if suggestion["action"] not in _COMBINABLE:
            continue
        changes.update(suggestion["changes"])
        last = _suggestion(planner, "combined", changes)
        if last is not None and last["fits"]:
            break
    return last


def step_tokens(request: EstimateRequest) -> int:
    """Tokens one optimizer step takes: micro-batch x sequence length x accumulation steps x
    data-parallel GPUs (sequence parallelism splits each sequence, it does not add samples).
    A dataset smaller than that is not one step of training: a typo in its size."""
    return (
        request.micro_batch_size
        * request.seq_len
        * request.gradient_accumulation_steps
        * request.data_parallel
    )


def plan_request(
    request: EstimateRequest, options: PlanOptions, estimator: recommend.Estimator | None = None
) -> JsonObject:
    """The plan for a validated request (see the module docstring for the response)."""
    from .memory import with_allocator

    planner = Planner(request, options, estimator)
    gpu = options.gpu
    base = planner.base
    time = planner.time(gpu, request.num_gpus, request.sharding.value)
    price = planner.price(gpu)
    phases = planner.phases(gpu, request.num_gpus, request.sharding.value, time)
    cost = planner.cost(gpu, request.num_gpus, time, price, phases)
    fits = recommend.fits_table(base, gpu_catalogue.all_gpus(), options.safety_margin)
    solvers = _solvers(planner)
    selected_fits = fits[gpu.id]["fits"]
    selected_state = fits[gpu.id]["verdict"]
    warnings = list(base.get("warnings", []))
    warnings += gpu_catalogue.rocm_warnings(gpu, request.method.value, request.attention.value)
    warnings += _time_warnings(gpu, options.fp8_compute, request.precision)
    warnings += _price_warnings(price, options.interruptible)
    if selected_state != "fits":
        warnings.append(selected_state + "_selected_gpu")
    if options.dataset_tokens < step_tokens(request):
        warnings.append("dataset_tokens_below_one_step")
    if options.eval_steps is not None and options.eval_tokens <= 0:
        # an interval without an evaluation set: nothing to time, said rather than dropped
        warnings.append("eval_steps_without_eval_tokens")
    cost_out = cost.to_dict()
    cost_out["price"] = price
    # no rental price: the figures above count storage only; the site shows "no rental price"
    cost_out["priced"] = price["priced"]
    if not price["priced"]:
        cost_out["unpriced_reason"] = "no_rental_price"
    time_out = time.to_dict()
    time_out["schedule"] = cost.schedule.to_dict()
    # evaluations and saves: how many, each one's seconds and a checkpoint's bytes
    time_out["run_phases"] = phases.to_dict()
    time_out["mfu_default"] = default_mfu(gpu.utilisation_class, request.method.value)
    # the clock the time was priced at (below the catalogue's under a power_limit_w)
    time_out["sustained_clock_mhz"] = gpu.sustained_clock_mhz
    time_out["power_limit_w"] = options.power_limit_w
    # the servers the GPUs sit in (the multi-node note reads it)
    time_out["gpus_per_node"] = options.gpus_per_node
    # evaluations, start-up, checkpoints and lost work, apart from the steady-state rate above
    time_out["startup_and_checkpoint_hours"] = (
        cost.schedule.total_hours - cost.schedule.compute_hours
    )
    if options.fp8_compute and not time_out["step"]["fp8_compute"]:
        warnings.append("fp8_compute_unavailable_on_gpu")
    return {
        "gpu": gpu.id,
        "num_gpus": request.num_gpus,
        "sharding": request.sharding.value,
        # the request's own estimate as ``estimate`` answers it (min_device_bytes with
        # length_stats); the verdicts above judged ``base`` (need_of)
        "memory": with_allocator(request, base),
        "fits_selected_gpu": selected_fits,
        "time_hours": cost.schedule.total_hours,
        "time": time_out,
        "cost_usd": cost_out,
        "storage_gb": planner.storage,
        "storage_price_per_gb_month": planner.storage_price,
        "safety_margin": options.safety_margin,
        "fits": fits,
        "recommendations": _recommendations(planner),
        "solvers": solvers,
        "suggestions": [] if selected_fits else _suggestions(planner, solvers),
        "warnings": warnings,
        "notes": ["prices_move_override_with_price_per_gpu_hour"],
    }


def plan_dict(data: object) -> JsonObject:
    """``python -m calc plan``: validate the request dict and plan it."""
    request, options = parse_plan_request(data)
    return plan_request(request, options)


__all__ = [
    "PlanOptions",
    "Planner",
    "parse_plan_options",
    "parse_plan_request",
    "plan_dict",
    "plan_request",
]
