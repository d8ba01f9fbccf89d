"""How periodic the allocator replay is, layer by layer: what bulk processing of identical
layers could skip.

Usage: ``python -m benchmarks.probe_layer_periods``. For each request, the unlimited replay of
:func:`calc.step_events.step_events` over :func:`calc.step_events.simulated_lengths` (the
sequence ``estimate`` replays) is cut into layers, and each layer's net effect on the cache
is compared with the layers before it. Layers are found in the events themselves, not told:
a layer run is a stretch of events whose kinds and sizes (a free counts the size of what it
frees) repeat with one period at least ``num_layers - 2`` times.

A layer's net effect, per pool: the sizes of the cached blocks it removed and of those it
added, the segments it allocated and freed, and the bytes allocated and reserved it added.
Shares of the replayed events (layers and the rest):

- ``same``: the layer's net effect is the previous layer's (a translation: only addresses
  and counts differ), the case a bulk step that repeats a layer's effect needs;
- ``period<=8``: it is that of one of the 8 layers before (alignment cycles: a 16 MiB tensor
  in 20 MiB segments repeats every few layers);
- ``affine``: per pool, as many blocks removed and added, and the same change in cached
  bytes, as the previous layer (one cached block shrinks or grows by a tensor each layer);
- ``other``: none of these; ``outside``: events outside the layer runs.

``frees earlier`` counts the layer events that free what an earlier layer allocated (the
backward frees the forward's saved tensors): there a layer's effect depends on where an
earlier layer put its blocks, not only on the cache.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from benchmarks.bench_lengths import REQUESTS as BENCH_REQUESTS
from calc import allocator as al
from calc.request import parse_estimate_request
from calc.step_events import StepReplay, simulated_lengths

REQUESTS: dict[str, dict[str, Any]] = {
    **BENCH_REQUESTS,  # the three the speed benchmark times
    "full, mbs 4, mean 400 (llama-3.2-1b)": {
        "model": "llama-3.2-1b",
        "method": "full",
        "micro_batch_size": 4,
        "seq_len": 4096,
        "length_stats": {"mean": 400},
    },
}


def layer_bounds(events: list[al.Event], layers: int) -> list[tuple[int, int, int]]:
    """``(start, period, count)`` of each layer run in ``events``: ``count`` blocks of
    ``period`` events from ``start`` with the same kinds and sizes, ``count >= layers - 2``;
    the shortest period first, runs apart from each other."""
    sizes: dict[Any, int] = {}
    shape: list[tuple[str, int]] = []
    for ev in events:
        if ev[0] == "alloc":
            sizes[ev[1]] = ev[2]
            shape.append(("a", ev[2]))
        elif ev[0] == "free":
            shape.append(("f", sizes.get(ev[1], -1)))
        else:
            shape.append((ev[0], 0))
    n = len(shape)
    taken = [False] * n
    runs: list[tuple[int, int, int]] = []
    least = max(2, layers - 2)
    for period in range(1, n // least + 1):
        i = 0
        while i + period < n:
            if shape[i] != shape[i + period]:
                i += 1
                continue
            j = i
            while j + period < n and shape[j] == shape[j + period]:
                j += 1
            count = (j - i) // period + 1
            if count >= least and not any(taken[i : i + count * period]):
                runs.append((i, period, count))
                for k in range(i, i + count * period):
                    taken[k] = True
            i = j + 1
    return sorted(runs)


def _pool_effect(before: set[int], after: set[int]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    bits = al._ADDR_BITS
    removed = tuple(sorted(k >> bits for k in before - after))
    added = tuple(sorted(k >> bits for k in after - before))
    return removed, added


def _affine(effect: tuple[Any, ...]) -> tuple[Any, ...]:
    pools = tuple((len(r), len(a), sum(a) - sum(r)) for r, a in effect[0])
    return (pools,) + effect[1:]


def probe(request: dict[str, Any]) -> tuple[Counter[str], int]:
    """Events of the unlimited replay by class (see the module docstring), and how many."""
    req = parse_estimate_request(request)
    steps = StepReplay(req, simulated_lengths(req))
    a = al.CachingAllocator(None)
    live: dict[Any, Any] = {}
    a.run(steps._resident, live)
    shares: Counter[str] = Counter()
    shares["outside"] += len(steps._resident)
    for index in range(len(steps.groups)):
        events = steps._events(index)
        at = 0
        for start, period, count in layer_bounds(events, req.model.num_layers):
            a.run(events[at:start], live)
            shares["outside"] += start - at
            seen: list[tuple[Any, ...]] = []
            for layer in range(count):
                chunk = events[start + layer * period : start + (layer + 1) * period]
                own = {ev[1] for ev in chunk if ev[0] == "alloc"}
                if any(ev[0] == "free" and ev[1] not in own and ev[1] in live for ev in chunk):
                    shares["frees earlier"] += period
                keys = [set(p.keys) for p in a.pools]
                counts = (a.num_device_alloc, a.num_device_free, a.allocated, a.reserved)
                a.run(chunk, live)
                effect = (
                    tuple(_pool_effect(k, set(p.keys)) for k, p in zip(keys, a.pools, strict=True)),
                    a.num_device_alloc - counts[0],
                    a.num_device_free - counts[1],
                    a.allocated - counts[2],
                    a.reserved - counts[3],
                )
                if seen and seen[-1] == effect:
                    shares["same"] += period
                elif effect in seen[-8:]:
                    shares["period<=8"] += period
                elif seen and _affine(seen[-1]) == _affine(effect):
                    shares["affine"] += period
                else:
                    shares["other"] += period
                seen.append(effect)
            at = start + count * period
        a.run(events[at:], live)
        shares["outside"] += len(events) - at
    total = sum(v for k, v in shares.items() if k != "frees earlier")
    return shares, total


def main() -> int:
    classes = ("same", "period<=8", "affine", "other", "outside", "frees earlier")
    print(f"{'request':<46} {'events':>7} " + " ".join(f"{c:>13}" for c in classes))
    for label, request in REQUESTS.items():
        shares, total = probe(request)
        cells = " ".join(f"{100 * shares[c] / total:12.1f}%" for c in classes)
        print(f"{label:<46} {total:>7} {cells}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
