"""Every memo calc keeps between calls, forgotten in one call.

calc keeps what a request costs to work out and another request may ask again: the fitted
length distributions and their draws (:mod:`calc.lengths`, ``functools.lru_cache``), the
estimates of a request without its run's length (:func:`calc.memory.forget_estimates`), the
allocator replays and the sequences they share (:mod:`calc.step_events`), the step
counts by request object (:mod:`calc.timing`), and the model's adapters and a block's saved
bytes per token (:mod:`calc.lora`, :mod:`calc.activations`). Each is exact (a value memo or a memo on the
object itself), so forgetting changes no figure, only time: a benchmark of a request calc
has not seen, or a caller that changes a module constant a memo has read (a
leave-one-source-out refit), calls :func:`forget_all`.
"""

from __future__ import annotations

from . import activations, lengths, lora, memory, step_events, timing

# the standard normal and its quantiles: constants, not memos of a request
_CONSTANTS = frozenset({"_normal", "_z90", "_z99"})


def forget_all() -> None:
    """Forget every memo of calc (module docstring)."""
    for name, value in vars(lengths).items():
        if callable(getattr(value, "cache_clear", None)) and name not in _CONSTANTS:
            value.cache_clear()
    lengths._CAPPED_FROM.clear()
    memory.forget_estimates()
    step_events.forget_simulations()
    step_events.clear_shared()
    timing._COUNTS.clear()
    timing._AT_MEAN.clear()
    activations.block_bytes_per_token.cache_clear()
    lora._adapted_kept.cache_clear()


__all__ = ["forget_all"]
