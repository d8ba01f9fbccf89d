"""Live-storage accounting under fake tensors: the allocated bytes a CUDA run would hold.

A :class:`LiveStorageTracker` is a ``TorchDispatchMode`` pushed inside a
``FakeTensorMode``. Every tensor an operator returns is looked up by its storage; a
storage seen for the first time is counted once (views share it) at its ``nbytes`` and
a weakref finalizer on the storage's Python object subtracts it when the storage dies
(PyTorch keeps one Python object per storage alive as long as the storage is, the same
mechanism ``torch.distributed._tools.mem_tracker.MemTracker`` relies on). The running
total is what ``torch.cuda.memory_allocated`` would show without the caching allocator's
512-byte rounding; its maximum per phase is the allocated peak.

Each storage carries a category (the component names of ``calc``'s response): set from
the context it was created in (forward: ``activations``; inside the output layer and the
loss: ``logits``; the optimizer step: ``optimizer_temporaries``) and re-tagged when its
role becomes known (parameters, gradients, optimizer states, autocast's weight copies).
"""

from __future__ import annotations

import weakref
from collections import defaultdict
from contextlib import contextmanager

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten


class LiveStorageTracker(TorchDispatchMode):
    """Counts live storage bytes, tagged by category, with the peak of each phase."""

    def __init__(self, debug: bool = False) -> None:
        super().__init__()
        self.debug = debug  # keep the creating op of each storage and the live set at each peak
        self.op = ""
        self.peak_sets: dict[str, list] = {}
        self.live: dict[int, list] = {}  # id(storage) -> [nbytes, category, weakref]
        self.total = 0
        self.by_category: dict[str, int] = defaultdict(int)
        self.context = "activations"
        self.phase: str | None = None
        self.peaks: dict[str, tuple[int, dict]] = {}
        self.param_storages: set[int] = set()
        # with ``events`` a list: each storage's allocation and free, in order, as
        # ("alloc", n, nbytes) / ("free", n): the sequence calc.allocator replays
        self.events: list | None = None
        self._serial = 0

    # ---- bookkeeping -----------------------------------------------------------------
    def _freed(self, key: int, _ref) -> None:
        entry = self.live.pop(key, None)
        if entry is not None:
            if self.events is not None and len(entry) > 4:
                self.events.append(("free", entry[4]))
            self.total -= entry[0]
            self.by_category[entry[1]] -= entry[0]

    def track(self, t: torch.Tensor, category: str | None = None) -> None:
        """Count ``t``'s storage if new; with ``category``, (re)tag it."""
        if not isinstance(t, torch.Tensor) or t.device.type == "meta" and not _is_fake(t):
            return
        st = t.untyped_storage()
        key = id(st)
        entry = self.live.get(key)
        if entry is None:
            nbytes = st.nbytes()
            cat = category or self.context
            self.live[key] = [
                nbytes,
                cat,
                weakref.ref(st, lambda r, k=key: self._freed(k, r)),
                self.op + " " + str(tuple(t.shape)) + " " + str(t.dtype),
            ]
            if self.events is not None:
                self._serial += 1
                self.live[key].append(self._serial)
                self.events.append(("alloc", self._serial, nbytes))
            self.total += nbytes
            self.by_category[cat] += nbytes
            self._update_peak()
        elif category is not None and entry[1] != category:
            self.by_category[entry[1]] -= entry[0]
            self.by_category[category] += entry[0]
            entry[1] = category

    def category_of(self, t: torch.Tensor) -> str | None:
        entry = self.live.get(id(t.untyped_storage()))
        return entry[1] if entry else None

    def _update_peak(self) -> None:
        if self.phase is None:
            return
        best = self.peaks.get(self.phase)
        if best is None or self.total > best[0]:
            self.peaks[self.phase] = (self.total, {k: v for k, v in self.by_category.items() if v})
            if self.debug:
                self.peak_sets[self.phase] = [(e[0], e[1], e[3]) for e in self.live.values()]

    def set_phase(self, phase: str | None) -> None:
        self.phase = phase
        self._update_peak()

    def phase_peaks(self) -> tuple[dict[str, int], dict[str, dict[str, int]]]:
        """``(peak bytes per phase, bytes per category at each phase's peak)``; with ``debug``,
        prints the largest live storages of each peak by category and operator."""
        phases = {name: peak for name, (peak, _parts) in self.peaks.items()}
        components = {name: dict(parts) for name, (_peak, parts) in self.peaks.items()}
        if self.debug:
            import collections

            for ph, items in self.peak_sets.items():
                agg: collections.Counter = collections.Counter()
                for nbytes, cat, op in items:
                    agg[(cat, op)] += nbytes
                print("==", ph)
                for (cat, op), n in agg.most_common(40):
                    print(f"  {n:>12,d} {cat:22s} {op}")
        return phases, components

    @contextmanager
    def tagged(self, category: str):
        """Storages created inside are tagged ``category``."""
        old, self.context = self.context, category
        try:
            yield
        finally:
            self.context = old

    # ---- the dispatch hook ------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if self.debug:
            self.op = str(func)
        category = None
        if func is torch.ops.aten._to_copy.default and args and isinstance(args[0], torch.Tensor):
            # autocast's 16-bit copy of a parameter (bf16-mixed / fp16-mixed)
            if id(args[0].untyped_storage()) in self.param_storages:
                category = "weight_copies"
        for t in tree_flatten(out)[0]:
            if isinstance(t, torch.Tensor):
                self.track(t, category)
        return out


def _is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)
