"""A deterministic model of PyTorch's CUDA caching allocator, replayed over alloc/free events.

Every rule is read from ``c10/cuda/CUDACachingAllocator.cpp`` (class
``DeviceCachingAllocator``) at pytorch/pytorch commit 001074d2, the copy at hand for the
torch 2.13.0 the project pins (tools/requirements-measure.txt), and cited where it is
applied. What the model keeps:

- one stream (the default one): blocks freed on a stream serve only that stream, and a
  training step in one stream never meets the rule; no CUDA graphs, no cross-stream events;
- the small pool (requests of at most 1 MiB, 2 MiB segments) and the large pool (20 MiB
  segments for requests under 10 MiB, 2 MiB-rounded segments above);
- best fit, with the smallest address among equal sizes (``BlockComparatorSize``); block
  splitting and merging of free neighbours; ``max_split_size_mb``;
- on a failed device allocation: release the cached oversize blocks (only with
  ``max_split_size_mb``), then every cached unsplit segment, then retry; out of memory only
  when that retry fails;
- ``expandable_segments``: one growing segment per pool, mapped in 2 MiB (small) or 20 MiB
  (large) pages, whose fully free pages are unmapped before out of memory.

Addresses are counters: a new segment gets the next free address, so ties between equal
sizes break in allocation order (real addresses differ; best fit decides on size first).
"""

from __future__ import annotations

import bisect
import itertools
import operator
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

MIN_BLOCK_BYTES = 512
"""``kMinBlockSize``: every request is rounded up to a multiple of 512 bytes (``round_size``)."""

SMALL_SIZE_BYTES = 1024**2
"""``kSmallSize``: requests of at most 1 MiB go to the small pool (``get_pool``)."""

SMALL_BUFFER_BYTES = 2 * 1024**2
"""``kSmallBuffer``: small requests are packed into 2 MiB segments (``get_allocation_size``);
also the page of a small-pool expandable segment (``find_expandable_block``)."""

MIN_LARGE_ALLOC_BYTES = 10 * 1024**2
"""``kMinLargeAlloc``: requests under 10 MiB get a 20 MiB segment (``get_allocation_size``)."""

LARGE_BUFFER_BYTES = 20 * 1024**2
"""``kLargeBuffer``: the 20 MiB segment of 1-10 MiB requests; also the page of a large-pool
expandable segment and the slack an oversize block may exceed a request by
(``get_free_block``)."""

ROUND_LARGE_BYTES = 2 * 1024**2
"""``kRoundLarge``: larger requests get a segment rounded up to 2 MiB (``get_allocation_size``)."""

UNLIMITED = None


@dataclass(frozen=True)
class AllocatorConfig:
    """The ``PYTORCH_CUDA_ALLOC_CONF`` settings the model follows (``CUDAAllocatorConfig``).

    ``max_split_size_bytes``: ``max_split_size_mb`` in bytes; ``None`` is the default
    (``std::numeric_limits<size_t>::max()``: any block may be split). The config parser
    raises values under 20 MiB to ``kLargeBuffer``. ``roundup_power2_divisions``: 0 (the
    default) rounds to 512 bytes only; ``n > 1`` rounds every request to the next of ``n``
    divisions between powers of two (``roundup_power2_next_division``)."""

    max_split_size_bytes: int | None = None
    expandable_segments: bool = False
    roundup_power2_divisions: int = 0

    def __post_init__(self) -> None:
        if self.max_split_size_bytes is not None and self.max_split_size_bytes < LARGE_BUFFER_BYTES:
            object.__setattr__(self, "max_split_size_bytes", LARGE_BUFFER_BYTES)

    @property
    def max_split(self) -> int:
        """``max_split_size()``: a huge number when unset."""
        return self.max_split_size_bytes if self.max_split_size_bytes is not None else 1 << 62


DEFAULT_CONFIG = AllocatorConfig()


def round_size(nbytes: int, config: AllocatorConfig = DEFAULT_CONFIG) -> int:
    """``DeviceCachingAllocator::round_size``: under 512 bytes -> 512; else, with
    ``roundup_power2_divisions`` ``d > 1`` and a size above ``512 d``, the next of ``d`` equal
    steps between the powers of two around it (``roundup_power2_next_division``; a power of
    two stays); else the next multiple of 512."""
    if nbytes < MIN_BLOCK_BYTES:
        return MIN_BLOCK_BYTES
    d = config.roundup_power2_divisions
    if d > 1 and nbytes > MIN_BLOCK_BYTES * d:
        if nbytes & (nbytes - 1) == 0:
            return nbytes
        floor = 1 << (nbytes.bit_length() - 1)
        step = floor >> (d.bit_length() - 1)
        if step == 0:
            return floor << 1
        low = nbytes & ~(step - 1)
        return nbytes if low == nbytes else low + step
    return -(-nbytes // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES


def is_small(size: int) -> bool:
    """``get_pool``: the small pool for rounded sizes of at most ``kSmallSize``."""
    return size <= SMALL_SIZE_BYTES


def allocation_size(size: int) -> int:
    """``get_allocation_size``: the segment ``cudaMalloc`` gets for a rounded request that no
    cached block serves: 2 MiB (small), 20 MiB (under 10 MiB), else the size rounded up to 2 MiB."""
    if size <= SMALL_SIZE_BYTES:
        return SMALL_BUFFER_BYTES
    if size < MIN_LARGE_ALLOC_BYTES:
        return LARGE_BUFFER_BYTES
    return -(-size // ROUND_LARGE_BYTES) * ROUND_LARGE_BYTES


class OutOfMemory(Exception):
    """The allocation failed after releasing the cache and retrying (``malloc``'s
    ``OutOfMemoryError``)."""


class _Block:
    __slots__ = ("size", "addr", "allocated", "prev", "next", "small", "mapped", "expandable")

    def __init__(self, size: int, addr: int, small: bool, expandable: bool = False) -> None:
        self.size = size
        self.addr = addr
        self.allocated = False
        self.prev: _Block | None = None
        self.next: _Block | None = None
        self.small = small
        self.mapped = True
        self.expandable = expandable

    def is_split(self) -> bool:
        return self.prev is not None or self.next is not None


_ADDR_BITS = 64
_ADDR_MASK = (1 << _ADDR_BITS) - 1
_block_addr = operator.attrgetter("addr")


class _Pool:
    """Cached free blocks ordered by (size, address): ``BlockPool::blocks`` with
    ``BlockComparatorSize`` (one stream). A key is ``size << 64 | address`` (addresses stay
    below 2**64): an int that sorts as the pair does, and compares faster than a tuple."""

    __slots__ = ("keys", "blocks", "small", "whole")

    def __init__(self, small: bool) -> None:
        self.keys: list[int] = []
        self.blocks: dict[int, _Block] = {}
        self.small = small
        self.whole = 0  # bytes of cached blocks that are whole segments (releasable)

    def insert(self, b: _Block) -> None:
        bisect.insort(self.keys, b.size << _ADDR_BITS | b.addr)
        self.blocks[b.addr] = b
        if b.prev is None and b.next is None and not b.expandable:
            self.whole += b.size

    def remove(self, b: _Block) -> None:
        self.remove_at(bisect.bisect_left(self.keys, b.size << _ADDR_BITS | b.addr), b)

    def remove_at(self, i: int, b: _Block) -> None:
        """Remove ``b``, whose key is at index ``i``."""
        del self.keys[i]
        del self.blocks[b.addr]
        if b.prev is None and b.next is None and not b.expandable:
            self.whole -= b.size


class CachingAllocator:
    """One device's caching allocator. ``capacity_bytes``: the memory ``cudaMalloc`` can
    hand out (``None``: unlimited, the cache as on a large card).

    ``malloc(nbytes)`` returns a handle; ``free(handle)`` returns the block to the cache.
    Statistics follow ``DeviceStats``: ``allocated`` counts block sizes (rounded, and the
    whole block when the remainder is not split off), ``reserved`` the segments held."""

    def __init__(
        self, capacity_bytes: int | None = UNLIMITED, config: AllocatorConfig = DEFAULT_CONFIG
    ) -> None:
        self.capacity = capacity_bytes
        self.config = config
        self.pools = (_Pool(small=False), _Pool(small=True))
        self.allocated = 0
        self.reserved = 0
        self.peak_allocated = 0
        self.peak_reserved = 0
        self.num_alloc_retries = 0
        self.num_device_alloc = 0
        self.num_device_free = 0
        self.segment_need = (
            0  # largest reserved-but-unreleasable + new segment, over device allocations
        )
        self._next_addr = 0
        # expandable segments: the unmapped tail block of each pool's segment (address space
        # of 1 1/8 of the device: ``find_expandable_block``; here unbounded)
        self._tail: list[_Block | None] = [None, None]
        self._base = [0, 0]
        self._mss = config.max_split
        self._plain_rounding = config.roundup_power2_divisions <= 1
        # reserved + the new segment at each device allocation, when a list is given
        # (with expandable segments the pages mapped may be fewer)
        self.device_needs: list[int] | None = None
        # stop (as if out of memory, with ``paused`` set) before the device allocation of
        # this index (the count of device allocations made before it)
        self.pause_before = -1
        self.paused = False
        # stop (as :attr:`pause_before` does, with ``paused`` set) at the first device
        # allocation whose need reaches this many bytes, its need recorded in device_needs
        self.need_limit: int | None = None
        # the best fits the inline loop makes, when a list (see repeats_from_cache): each
        # allocation served by a larger cached block and each device allocation, in order
        self.choices: list[tuple[bool, int, int, bool]] | None = None
        # expandable segments: the bytes of the pages that held blocks touch (each page
        # once), now and at most; the pages two held blocks share, with how many touch them
        self.footprint = 0
        self.peak_footprint = 0
        self._shared_pages: dict[int, int] = {}

    # ---- malloc ----------------------------------------------------------------------
    def malloc(self, nbytes: int) -> _Block:
        """``DeviceCachingAllocator::malloc``: round, pick the pool, search the cache; else
        allocate a segment; else release oversize cached blocks and retry
        (``release_available_cached_blocks``); else release every unsplit cached block and
        retry (``release_cached_blocks``, counted in ``num_alloc_retries``); else out of memory."""
        if self._plain_rounding and nbytes >= MIN_BLOCK_BYTES:
            size = -(-nbytes // MIN_BLOCK_BYTES) * MIN_BLOCK_BYTES
        else:
            size = round_size(nbytes, self.config)
        small = size <= SMALL_SIZE_BYTES
        pool = self.pools[small]
        block = self._get_free_block(pool, size)
        if block is None:
            block = self._device_block(pool, size)
        remaining = block.size - size
        if (
            remaining >= MIN_BLOCK_BYTES
            if small or block.expandable
            else size < self._mss and remaining > SMALL_SIZE_BYTES
        ):
            self._split(pool, block, size)
        block.allocated = True
        self.allocated += block.size
        if self.allocated > self.peak_allocated:
            self.peak_allocated = self.allocated
        if block.expandable:
            self._touch(block, 1)
            if self.footprint > self.peak_footprint:
                self.peak_footprint = self.footprint
        return block

    def _touch(self, block: _Block, sign: int) -> None:
        """Expandable segments: add (``sign`` 1) or remove (-1) a held block's pages from
        :attr:`footprint`. The pages wholly inside it are its own; its first and last page
        may also hold a neighbour, so they count while any held block touches them. The
        footprint is what stays mapped once every free page is unmapped (``unmap_block``
        returns only the whole pages of free blocks): the memory such a run needs at that
        moment, wherever the free pages had been mapped."""
        small = block.small
        page = SMALL_BUFFER_BYTES if small else LARGE_BUFFER_BYTES
        start = block.addr - self._base[small]
        first, last = start // page, (start + block.size - 1) // page
        footprint = self.footprint
        if last > first + 1:
            footprint += sign * (last - first - 1) * page
        shared = self._shared_pages
        for index in (first,) if first == last else (first, last):
            key = index << 1 | small  # the page's index and pool in one int (cheaper than a tuple)
            count = shared.get(key, 0) + sign
            if count:
                shared[key] = count
                if count == 1 and sign > 0:
                    footprint += page
            else:
                del shared[key]
                footprint -= page
        self.footprint = footprint

    def _device_block(self, pool: _Pool, size: int) -> _Block:
        """No cached block serves ``size``: allocate a segment; else release oversize cached
        blocks and retry; else release every unsplit cached block and retry; else raise
        :class:`OutOfMemory`. Keeps :attr:`segment_need`."""
        alloc = allocation_size(size)
        if self.num_device_alloc == self.pause_before:
            self.paused = True
            raise OutOfMemory(size)
        if self.device_needs is not None:
            self.device_needs.append(self.reserved + alloc)
        if self.need_limit is not None and self.reserved + alloc >= self.need_limit:
            self.paused = True
            raise OutOfMemory(size)
        need = self.reserved - self.pools[0].whole - self.pools[1].whole + alloc
        if need > self.segment_need:
            self.segment_need = need
        block = self._alloc_block(pool, size, alloc)
        if block is None and self._release_available_cached_blocks(pool, size):
            block = self._alloc_block(pool, size, alloc)
        if block is None:
            self.num_alloc_retries += 1
            self._release_cached_blocks()
            block = self._alloc_block(pool, size, alloc)
        if block is None:
            raise OutOfMemory(size)
        return block

    @staticmethod
    def _split(pool: _Pool, block: _Block, size: int) -> None:
        """``alloc_found_block``: the front ``size`` bytes are handed out, the rest goes back
        to the pool as a block of the same segment."""
        rest = _Block(block.size - size, block.addr + size, block.small, block.expandable)
        rest.prev, rest.next = block, block.next
        if block.next is not None:
            block.next.prev = rest
        block.next = rest
        block.size = size
        pool.insert(rest)

    def _get_free_block(self, pool: _Pool, size: int) -> _Block | None:
        """``get_free_block``: the smallest cached block of at least ``size`` bytes (lowest
        address among equals). An oversize block (``>= max_split_size``) never serves a
        smaller request, and serves a larger one only within ``kLargeBuffer`` (20 MiB) of it.
        With expandable segments a block that can still grow (followed by unmapped space)
        counts as that larger size, so a block that fits as it is wins."""
        keys = pool.keys
        i = bisect.bisect_left(keys, size << _ADDR_BITS)
        if i == len(keys):
            return None
        block = pool.blocks[keys[i] & _ADDR_MASK]
        if block.expandable and self.config.expandable_segments:

            def grow(b: _Block) -> int:
                return b.size + (b.next.size if b.next is not None and not b.next.mapped else 0)

            j = i + 1
            while block.expandable and j < len(keys):
                nxt = pool.blocks[keys[j] & _ADDR_MASK]
                if grow(nxt) >= grow(block):
                    break
                block, i, j = nxt, j, j + 1
        mss = self._mss
        if size < mss and block.size >= mss:
            return None
        if size >= mss and block.size >= size + LARGE_BUFFER_BYTES:
            return None
        pool.remove_at(i, block)
        return block

    def _fits(self, nbytes: int) -> bool:
        return self.capacity is None or self.reserved + nbytes <= self.capacity

    def _alloc_block(self, pool: _Pool, size: int, alloc: int) -> _Block | None:
        """``alloc_block``: ``cudaMalloc`` of ``alloc`` bytes (fails past the capacity), or with
        expandable segments ``try_allocate_expandable_block``."""
        if self.config.expandable_segments:
            return self._alloc_expandable(pool, size)
        if not self._fits(alloc):
            return None
        block = _Block(alloc, self._next_addr, pool.small)
        self._next_addr += alloc
        self._reserve(alloc)
        return block

    def _reserve(self, nbytes: int) -> None:
        self.reserved += nbytes
        self.num_device_alloc += 1
        if self.reserved > self.peak_reserved:
            self.peak_reserved = self.reserved

    # ---- expandable segments ---------------------------------------------------------
    def _alloc_expandable(self, pool: _Pool, size: int) -> _Block | None:
        """``try_allocate_expandable_block``: at the lowest address with room (a free block
        just before the unmapped space, then the unmapped space), map whole pages
        (``ExpandableSegment::map``: 2 MiB small pool, 20 MiB large) until the block holds
        ``size``; a page that does not fit the device fails the allocation."""
        page = SMALL_BUFFER_BYTES if pool.small else LARGE_BUFFER_BYTES
        tail = self._tail[pool.small]
        if tail is None:
            tail = _Block(1 << 60, self._next_addr, pool.small, expandable=True)
            tail.mapped = False
            self._base[pool.small] = tail.addr
            self._next_addr += 1 << 60
            self._tail[pool.small] = tail
        start = tail.prev if tail.prev is not None and not tail.prev.allocated else None
        have = start.size if start is not None else 0
        pages = -(-(size - have) // page)
        if pages <= 0 and start is not None:
            pool.remove(start)
            return start
        if not self._fits(pages * page):
            return None
        self._reserve(pages * page)
        block = _Block(pages * page, tail.addr, pool.small, expandable=True)
        block.prev, block.next = tail.prev, tail
        if tail.prev is not None:
            tail.prev.next = block
        tail.prev = block
        tail.addr += pages * page
        tail.size -= pages * page
        if start is not None:
            pool.remove(start)
            self._merge(block, start)
        return block

    def _unmap_free(self, block: _Block, pool: _Pool) -> None:
        """``unmap_block``: the whole pages inside a free block are returned to the device;
        partial pages at either end stay mapped as free blocks."""
        page = SMALL_BUFFER_BYTES if pool.small else LARGE_BUFFER_BYTES
        tail = self._tail[pool.small]
        assert tail is not None
        base = self._base[pool.small]  # pages are counted from the segment's start
        lo = -(-(block.addr - base) // page) * page + base
        hi = (block.addr + block.size - base) // page * page + base
        if hi <= lo:
            return
        self.reserved -= hi - lo
        self.num_device_free += 1
        if hi == block.addr + block.size and block.next is tail:
            # the unmapped range joins the tail
            pool.remove(block)
            tail.addr -= hi - lo
            tail.size += hi - lo
            if lo > block.addr:
                block.size = lo - block.addr
                pool.insert(block)
            else:
                tail.prev = block.prev
                if block.prev is not None:
                    block.prev.next = tail
            return
        # an unmapped hole inside the segment: the block keeps its place in the address space
        # but counts as reserved no more (a later mapping fills the hole before the tail in
        # PyTorch; here the hole stays unused, which can only overstate reserved memory)
        pool.remove(block)
        block.allocated = True  # never handed out again
        block.mapped = False

    # ---- free ------------------------------------------------------------------------
    def free(self, block: _Block) -> None:
        """``free`` -> ``free_block``: the block is merged with free neighbours of its segment
        (``try_merge_blocks``) and cached in its pool; nothing returns to the device."""
        block.allocated = False
        self.allocated -= block.size
        if block.expandable:
            self._touch(block, -1)
        pool = self.pools[block.small]
        for other in (block.prev, block.next):
            if other is not None and not other.allocated and other.mapped:
                pool.remove(other)
                self._merge(block, other)
        pool.insert(block)

    @staticmethod
    def _merge(dst: _Block, src: _Block) -> None:
        if dst.prev is src:
            dst.addr = src.addr
            dst.prev = src.prev
            if src.prev is not None:
                src.prev.next = dst
        else:
            dst.next = src.next
            if src.next is not None:
                src.next.prev = dst
        dst.size += src.size

    # ---- releasing the cache ---------------------------------------------------------
    def _release_block(self, pool: _Pool, block: _Block) -> None:
        """``release_block``: ``cudaFree`` of a cached unsplit segment."""
        pool.remove(block)
        self.reserved -= block.size
        self.num_device_free += 1

    def _release_available_cached_blocks(self, pool: _Pool, size: int) -> bool:
        """``release_available_cached_blocks``: only with ``max_split_size_mb``: free the
        smallest cached oversize block of at least ``max(size, max_split_size)``; if none,
        free oversize blocks from the largest down until that much is released."""
        if self.config.max_split_size_bytes is None:
            return False
        mss = self.config.max_split
        key = max(size, mss)
        candidates = [pool.blocks[k & _ADDR_MASK] for k in pool.keys]
        unsplit = [b for b in candidates if not b.is_split() and not b.expandable]
        fit = [b for b in unsplit if b.size >= key]
        if fit:
            self._release_block(pool, fit[0])
            return True
        released = 0
        for b in reversed(unsplit):
            if released >= key or b.size < mss:
                break
            released += b.size
            self._release_block(pool, b)
        return released >= key

    def _release_cached_blocks(self) -> None:
        """``release_cached_blocks`` -> ``release_blocks``: every cached block that is a whole
        segment (not split) is freed, large pool then small; expandable segments unmap their
        free pages."""
        if not self.config.expandable_segments:
            # one pass per pool: the whole segments leave it, the split blocks stay in order
            for pool in self.pools:
                keys, blocks = pool.keys, pool.blocks
                staying = []
                released = count = 0
                for key in keys:
                    addr = key & _ADDR_MASK
                    block = blocks[addr]
                    if block.prev is None and block.next is None:
                        del blocks[addr]
                        released += block.size
                        count += 1
                    else:
                        staying.append(key)
                keys[:] = staying  # in place: the replay loop holds this list
                pool.whole -= released
                self.reserved -= released
                self.num_device_free += count
            return
        for pool in self.pools:
            for key in list(pool.keys):
                block = pool.blocks[key & _ADDR_MASK]
                if block.expandable:
                    self._unmap_free(block, pool)
                elif not block.is_split():
                    self._release_block(pool, block)

    def copy(
        self, live: dict[Any, _Block], kept: frozenset[Any] = frozenset()
    ) -> tuple[CachingAllocator, dict[Any, _Block]]:
        """An independent copy of this allocator and of ``live`` (the blocks held, by key;
        they must be all the allocated blocks), to run on from the same state. Not with
        expandable segments (their unmapped blocks are neither held nor cached).

        ``kept``: keys of blocks held for good (never freed by what either copy runs: the
        weights, the optimizer states). Their blocks are shared, not copied: a block's
        neighbours are read only while it is cached or being freed (merging, splitting,
        ``is_split``), so the links of a block held for good are never read, and what either
        copy writes into them does no harm; its size, address and ``allocated`` never
        change."""
        if self.config.expandable_segments:
            raise ValueError("copy: not with expandable segments")
        new = object.__new__(CachingAllocator)
        new.__dict__.update(self.__dict__)
        # twins by address (every block held or cached but those kept, which are their
        # own twins: not looked up one by one), made without __init__ (a third cheaper) and
        # first linked to the originals' neighbours, then to their twins
        make, cls = _Block.__new__, _Block
        twins: dict[int, _Block] = {}
        new_live = dict(live)
        copied: list[_Block] = []
        for key in live.keys() - kept if kept else live:  # the kept blocks are shared
            b = live[key]
            c = make(cls)
            c.size = b.size
            c.addr = addr = b.addr
            c.allocated = True
            c.small = b.small
            c.prev = b.prev
            c.next = b.next
            c.mapped = True
            c.expandable = False
            new_live[key] = twins[addr] = c
            copied.append(c)
        pools = []
        for pool in self.pools:
            twin_pool = _Pool(pool.small)
            twin_pool.keys = pool.keys.copy()
            twin_pool.whole = pool.whole
            small = pool.small
            blocks = twin_pool.blocks
            for addr, b in pool.blocks.items():
                c = make(cls)
                c.size = b.size
                c.addr = addr
                c.allocated = False
                c.small = small
                c.prev = b.prev
                c.next = b.next
                c.mapped = True
                c.expandable = False
                blocks[addr] = c
            twins.update(blocks)
            copied.extend(blocks.values())
            pools.append(twin_pool)
        twin = twins.get  # a neighbour without a twin is held for good: itself
        for c in copied:
            prev, nxt = c.prev, c.next
            if prev is not None:
                c.prev = twin(prev.addr, prev)
            if nxt is not None:
                c.next = twin(nxt.addr, nxt)
        new.pools = (pools[0], pools[1])
        new._tail = [None, None]
        new._base = list(self._base)
        new.device_needs = None
        new.choices = None
        return new, new_live

    def shape(self, live: dict[Any, _Block], kept: frozenset[Any] = frozenset()) -> tuple[Any, ...]:
        """This allocator's state up to its addresses: two allocators of equal shapes that
        run the same events from here make the same decisions (no expandable segments).

        Per pool, the cached blocks and the held ones not in ``kept`` (``live``: the blocks
        held, by key), in address order, each as its size, its key (``None`` when cached)
        and its neighbours in the segment (the rank of one of these blocks, ``-1`` for
        none, ``-2`` for a block held for good); then reserved and allocated bytes. Why
        that is enough: best fit compares cached blocks by size, then address (their order
        here); a split leaves its rest inside the block's own range, a merge joins a block
        with its free neighbours, a release frees the cached blocks without neighbours,
        and a new segment lies above every address of either; a block held for good is
        never freed, so it only ever stands as a neighbour that is not free (its size,
        address and links do not matter: the copies of a replay share those blocks and
        may overwrite their links, which are therefore never read here)."""
        pools: tuple[list[_Block], list[_Block]] = ([], [])
        tags: dict[int, Any] = {}
        for pool in self.pools:
            pools[pool.small].extend(pool.blocks.values())
        for key in live.keys() - kept:
            b = live[key]
            pools[b.small].append(b)
            tags[b.addr] = key
        out: list[Any] = [self.reserved, self.allocated]
        by_addr = _block_addr
        for blocks in pools:
            blocks.sort(key=by_addr)
            # blocks by address: the blocks an allocator holds or caches never share one, and
            # a neighbour held for good (not ranked) keeps its address
            rank = dict(zip(map(by_addr, blocks), range(len(blocks)), strict=True))
            get, tag = rank.get, tags.get
            # a list comprehension: cheaper than a generator for tuple() in CPython
            out.append(
                tuple(
                    [
                        (
                            b.size,
                            tag(b.addr),
                            -1 if b.prev is None else get(b.prev.addr, -2),
                            -1 if b.next is None else get(b.next.addr, -2),
                        )
                        for b in blocks
                    ]
                )
            )
        return tuple(out)

    def empty_cache(self) -> None:
        """``torch.cuda.empty_cache()`` (``emptyCache`` -> ``release_cached_blocks``)."""
        self._release_cached_blocks()

    # ---- running an event sequence ---------------------------------------------------
    def result(self, failed_at: int) -> Replay:
        """This allocator's figures after a run that returned ``failed_at`` (:meth:`run`)."""
        return Replay(
            self.peak_allocated,
            self.peak_reserved,
            failed_at < 0,
            self.num_alloc_retries,
            failed_at,
            self.segment_need,
            self.peak_footprint,
        )

    def run(self, events: Iterable[Event], live: dict[Any, _Block]) -> int:
        """Apply ``events`` (see :data:`Event`), keeping the blocks they hold by key in
        ``live``: -1, or the index of the allocation that ran out of memory or paused
        (:attr:`pause_before`, :attr:`paused` then set; the events before it applied).
        Without expandable segments and with the default rounding the
        work of :meth:`malloc` and :meth:`free` is done inline (the replay's hot loop: the
        same steps in the same order); otherwise through them."""
        if self.config.expandable_segments or not self._plain_rounding:
            return self._run_calls(events, live)
        large, small = self.pools
        # the pools' lists and dicts are mutated in place (never replaced) by everything the
        # loop calls, so they are bound once
        large_keys, large_blocks = large.keys, large.blocks
        small_keys, small_blocks = small.keys, small.blocks
        bisect_left, insort = bisect.bisect_left, bisect.insort
        block_class, make = _Block, _Block.__new__
        addr_bits, addr_mask = _ADDR_BITS, _ADDR_MASK
        min_block, small_size, large_buffer = MIN_BLOCK_BYTES, SMALL_SIZE_BYTES, LARGE_BUFFER_BYTES
        round_add, round_mask = MIN_BLOCK_BYTES - 1, -MIN_BLOCK_BYTES  # a power of two
        mss = self._mss
        oversize = self.config.max_split_size_bytes is not None
        choices = self.choices
        pop = live.pop
        allocated, peak = self.allocated, self.peak_allocated
        try:
            for i, ev in enumerate(events):
                kind = ev[0]
                if kind == "alloc":
                    n = ev[2]
                    if n <= 0:
                        continue
                    # round_size: up to a multiple of 512 (at least 512), for n >= 1
                    size = (n + round_add) & round_mask
                    if size <= small_size:
                        pool, keys, blocks = small, small_keys, small_blocks
                    else:
                        pool, keys, blocks = large, large_keys, large_blocks
                    j = bisect_left(keys, size << addr_bits)
                    block = None
                    if j < len(keys):
                        key = keys[j]
                        bsize = key >> addr_bits
                        # get_free_block's oversize rules (see _get_free_block); without
                        # max_split_size_mb no block is oversize
                        if not oversize or (
                            (size >= mss or bsize < mss)
                            and (size < mss or bsize < size + large_buffer)
                        ):
                            block = blocks.pop(key & addr_mask)
                            del keys[j]
                            if block.prev is None and block.next is None:
                                pool.whole -= bsize
                            if choices is not None and bsize > size:
                                choices.append((pool is small, size, bsize, False))
                    if block is None:
                        try:
                            block = self._device_block(pool, size)
                        except OutOfMemory:
                            return i
                        if choices is not None:
                            choices.append((pool is small, size, block.size, True))
                    bsize = block.size
                    remaining = bsize - size
                    if (
                        remaining >= min_block
                        if pool is small
                        else size < mss and remaining > small_size
                    ):
                        # _split (the rest made without __init__: cheaper, the same fields)
                        addr = block.addr + size
                        rest = make(block_class)
                        rest.size, rest.addr, rest.small = remaining, addr, block.small
                        rest.allocated, rest.mapped, rest.expandable = False, True, False
                        nxt = block.next
                        rest.prev, rest.next = block, nxt
                        if nxt is not None:
                            nxt.prev = rest
                        block.next = rest
                        block.size = bsize = size
                        insort(keys, remaining << addr_bits | addr)
                        blocks[addr] = rest
                    block.allocated = True
                    allocated += bsize
                    if allocated > peak:
                        peak = allocated
                    live[ev[1]] = block
                elif kind == "free":
                    block = pop(ev[1], None)
                    if block is None:
                        continue
                    block.allocated = False
                    size = block.size
                    allocated -= size
                    if block.small:
                        pool, keys, blocks = small, small_keys, small_blocks
                    else:
                        pool, keys, blocks = large, large_keys, large_blocks
                    prev, nxt = block.prev, block.next
                    addr = block.addr
                    # try_merge_blocks with each free neighbour (neither is a whole segment)
                    if prev is not None and not prev.allocated:
                        merged = prev.size
                        addr = prev.addr
                        del keys[bisect_left(keys, merged << addr_bits | addr)]
                        del blocks[addr]
                        block.addr = addr
                        block.prev = prev = prev.prev
                        if prev is not None:
                            prev.next = block
                        size += merged
                    if nxt is not None and not nxt.allocated:
                        merged = nxt.size
                        del keys[bisect_left(keys, merged << addr_bits | nxt.addr)]
                        del blocks[nxt.addr]
                        block.next = nxt = nxt.next
                        if nxt is not None:
                            nxt.prev = block
                        size += merged
                    block.size = size
                    insort(keys, size << addr_bits | addr)
                    blocks[addr] = block
                    if prev is None and nxt is None:
                        pool.whole += size
                elif kind == "mark":
                    peak = allocated
                    self.peak_reserved = self.reserved
                elif kind == "empty_cache":
                    self.empty_cache()
        finally:
            self.allocated, self.peak_allocated = allocated, peak
        return -1

    def _run_calls(self, events: Iterable[Event], live: dict[Any, _Block]) -> int:
        """:meth:`run` through :meth:`malloc` and :meth:`free`."""
        malloc, free = self.malloc, self.free
        for i, ev in enumerate(events):
            kind = ev[0]
            if kind == "alloc":
                if ev[2] <= 0:
                    continue
                try:
                    live[ev[1]] = malloc(ev[2])
                except OutOfMemory:
                    return i
            elif kind == "free":
                block = live.pop(ev[1], None)
                if block is not None:
                    free(block)
            elif kind == "mark":
                self.peak_allocated, self.peak_reserved = self.allocated, self.reserved
                self.peak_footprint = self.footprint
            elif kind == "reset_footprint":
                self.peak_footprint = self.footprint
            elif kind == "empty_cache":
                self.empty_cache()
        return -1


# ---- replay ------------------------------------------------------------------------------

Event = tuple[Any, ...]
"""``("alloc", key, nbytes)``, ``("free", key)``, ``("mark",)`` (resets the peaks, as
``torch.cuda.reset_peak_memory_stats`` does before a measured step), ``("reset_footprint",)``
(restarts :attr:`CachingAllocator.peak_footprint` alone, with expandable segments: the load's
warmup block, :mod:`calc.load_warmup`, is not a card's need) or ``("empty_cache",)``
(``torch.cuda.empty_cache()``: :meth:`CachingAllocator.empty_cache`)."""


@dataclass(frozen=True)
class Replay:
    """What one replay of an event sequence gives, in bytes."""

    peak_allocated_bytes: int
    peak_reserved_bytes: int
    fits: bool
    alloc_retries: int
    failed_at: int  # index of the event that ran out of memory; -1 when it fits
    segment_need_bytes: int = 0  # see CachingAllocator.segment_need
    peak_footprint_bytes: int = 0  # expandable segments: see CachingAllocator.footprint


def replay(
    events: Iterable[Event],
    capacity_bytes: int | None = UNLIMITED,
    config: AllocatorConfig = DEFAULT_CONFIG,
) -> Replay:
    """Run ``events`` through a fresh allocator of ``capacity_bytes`` usable device memory."""
    a = CachingAllocator(capacity_bytes, config)
    return a.result(a.run(events, {}))


def min_device_bytes(
    events: Sequence[Event],
    config: AllocatorConfig = DEFAULT_CONFIG,
    outside_allocator_bytes: int = 0,
    unlimited: Replay | None = None,
) -> int:
    """The device memory from which ``events`` run without out-of-memory on every larger
    device too: ``outside_allocator_bytes`` (CUDA context, driver reserve, communication
    buffers: the caller counts and cites them) plus :func:`capacity_threshold` of the replay
    (or, where a release does not leave one state for a band of capacities,
    :func:`unwalked_capacity`: :func:`threshold_applies`). ``unlimited``: the replay with no
    limit, when the caller has it."""
    free_run = unlimited or replay(events, None, config)
    if not threshold_applies(config):
        return unwalked_capacity(free_run, config) + outside_allocator_bytes
    flat = _FlatEvents(events, config)
    capacity, _ = capacity_threshold(flat.root(), flat.continuation, flat.pause, flat.release)
    return capacity + outside_allocator_bytes


THRESHOLD_REPLAYS = 16
"""The most continuations :func:`capacity_threshold` replays before it settles for the bound
it has proven so far (each is the rest of the sequence run once with no limit). Chosen for
time, as each continuation costs a replay: on Llama 3.1 8B LoRA, micro-batch 4, seq_len
2048, lengths mean 900 / p90 2000 the bound it settles for lies within 1 % above the exact
threshold that 256 continuations reach, and llama-3.2-1b full (generic loop), micro-batch 4,
seq_len 4096, mean 400 (lengths spread as before 2026-12-05) is exact
(``tests/calc/test_allocator.py`` holds both). Not a bound in general: on the nine requests
of :data:`accuracy.walk_budget.GAP_REQUESTS` the figure at this budget is exact on one, lies
0.4 to 3.7 % above the exact threshold (which 1,024 continuations reach on all nine) on five,
and 8.9 % (llama-3.2-1b full on the default stack, micro-batch 4, seq_len 4096, mean 400),
11.1 % (qwen2.5-7b QLoRA, micro-batch 2, seq_len 4096, mean 1500) and 11.2 % (llama-3.2-3b
LoRA, micro-batch 8, seq_len 2048, mean 600 / p90 1400) on three, whose exact walks take 74,
305 and 406 ms against 57-71 ms here (2026-12-07, ``python -m benchmarks.bench_min_device
--gap`` and :func:`accuracy.walk_budget.gap`). The response says which
(``allocator.min_allocator_exact``); the methodology page publishes the spread
(:func:`accuracy.walk_budget.summary`).
``python -m benchmarks.bench_min_device --budgets`` prints the threshold and the walk's time
at this budget and at larger ones."""


def whole_steps(nbytes: int) -> int:
    """``nbytes`` rounded up to whole 2 MiB steps (``kRoundLarge``)."""
    return -(-nbytes // ROUND_LARGE_BYTES) * ROUND_LARGE_BYTES


def unwalked_capacity(unlimited: Replay, config: AllocatorConfig) -> int:
    """The capacity from which a sequence runs where :func:`capacity_threshold` does not apply
    (:func:`threshold_applies`), from its replay with no limit, in whole 2 MiB steps.

    - Expandable segments: the largest :attr:`CachingAllocator.footprint`, the pages the held
      blocks touch. On a smaller card a page that fails to map makes the allocator unmap the
      whole free pages of every free block (``release_cached_blocks`` -> ``unmap_block``) and
      retry, and the unmapped address ranges serve later requests again
      (``find_expandable_block`` searches the pool's ``unmapped`` blocks, lowest address
      first): what stays mapped is the footprint. Where a request lands may differ from the
      unlimited run's (the lowest unmapped range against a best fit), which can move a
      block's share of its edge pages; the footprint of the unlimited run's layout is taken.
    - ``max_split_size_mb``: the unlimited peak reserved, a bound (its release of oversize
      blocks makes what follows depend on the capacity)."""
    if config.expandable_segments:
        return whole_steps(unlimited.peak_footprint_bytes)
    return whole_steps(unlimited.peak_reserved_bytes)


def threshold_applies(config: AllocatorConfig) -> bool:
    """Whether a release leaves one state for a whole band of capacities (see
    :func:`capacity_threshold`): not with ``max_split_size_mb`` (its release of oversize
    blocks first adds a capacity-dependent step) nor with expandable segments (pages, not
    segments, are mapped and unmapped); there :func:`unwalked_capacity` answers."""
    return config.max_split_size_bytes is None and not config.expandable_segments


def capacity_threshold(
    root: Any,
    continuation: Callable[[Any, int, int], tuple[list[int], int, Any]],
    pause: Callable[[Any, int], Any],
    release: Callable[[Any], tuple[int, Any]],
    budget: int = THRESHOLD_REPLAYS,
) -> tuple[int, bool]:
    """The smallest capacity, in whole 2 MiB steps, from which every larger capacity runs the
    sequence without out-of-memory, and whether it is exact (else it is an upper bound of
    it, proven: every capacity from it fits).

    "Fits" is not monotone in the capacity: a smaller card releases its cached segments
    earlier (``release_cached_blocks``), the blocks then land elsewhere, and a later request
    may find room that the larger card's cache has split away. So the capacity axis is
    walked from the top, where the replay decides whole bands of capacities at once. From a
    state that a band ``[lo, hi)`` shares, the replay with no limit (``continuation``: the
    needs ``reserved + segment`` of its device allocations, and the number of device
    allocations before it) is the replay of every capacity of the band up to the first
    device allocation whose need exceeds that capacity: every capacity from the largest
    need fits; one below first differs at the first allocation whose running-maximum need
    exceeds it. For the capacities that first differ at allocation ``k``, ``pause`` stops the
    unlimited replay before it and ``release`` frees every cached whole segment and retries:
    below the retry's need (``low``) each of them runs out of memory; from it, all go on
    from one state (the one ``release`` returns, ``None`` when nothing was cached and so
    nothing retried), explored the same way, recursively. Bands are taken from the largest
    down and the walk stops at the first capacity found to fail: the answer is just above
    it. ``budget``: the continuations replayed at most; when they are used up, the bound
    proven so far is returned (not exact).

    ``continuation(state, hi, lo)`` may stop at the first device allocation whose need
    reaches ``hi`` (that need the last of its list): the allocations after it need more
    still, so they only lie above the band and the walk is the same. It then also returns
    the replay standing before that allocation (what ``pause`` would give there, which the
    walk then takes instead), else ``None``. ``lo``: the bottom of the band; the walk pauses
    ``state`` only at allocations whose running maximum of needs exceeds it (a replay may
    keep a copy of itself before the first of these for those pauses)."""
    left = [budget]

    def explore(state: Any, lo: int, hi: int) -> tuple[int, bool]:
        needs, base, stopped = continuation(state, hi, lo)
        left[0] -= 1
        peaks = list(itertools.accumulate(needs, max))
        x = min(hi, max(lo, peaks[-1] if peaks else 0))
        for j in range(len(peaks) - 1, -1, -1):
            prev = peaks[j - 1] if j else 0
            if peaks[j] == prev:
                continue  # no new maximum: capacities first differ at an earlier allocation
            if prev >= x:
                continue  # the band lies above what is left to decide
            b_lo, b_hi = max(lo, prev), min(x, peaks[j])
            if b_lo >= b_hi:
                break  # the band lies below lo
            if left[0] <= 0:
                return x, False
            if stopped is not None and j == len(peaks) - 1:
                paused, stopped = stopped, None
            else:
                paused = pause(state, base + j)
            low, after = release(paused)
            if low >= b_hi or after is None:
                return b_hi, True  # every capacity of the band runs out of memory
            y, exact = explore(after, max(b_lo, low), b_hi)
            if y > b_lo:
                return y, exact
            x = b_lo
        return x, True

    found, exact = explore(root, 0, _TOP_CAPACITY)
    return whole_steps(found), exact


_TOP_CAPACITY = 1 << 62
"""A capacity above any a replay reaches: the top of the search."""


FlatState = tuple["CachingAllocator", dict[Any, "_Block"], int]


class _FlatEvents:
    """:func:`capacity_threshold`'s steps over one list of events: a state is an allocator,
    the blocks it holds by key and the index of its next event."""

    def __init__(self, events: Sequence[Event], config: AllocatorConfig) -> None:
        self.events = events
        self.config = config

    def root(self) -> FlatState:
        return CachingAllocator(None, self.config), {}, 0

    @staticmethod
    def _copy(state: FlatState) -> FlatState:
        a, live = state[0].copy(state[1])
        return a, live, state[2]

    def continuation(
        self, state: FlatState, hi: int = _TOP_CAPACITY, lo: int = 0
    ) -> tuple[list[int], int, None]:
        """The whole unlimited run on from ``state`` (never stopped at ``hi``; ``lo`` unused)."""
        a, live, at = self._copy(state)
        needs: list[int] = []
        a.capacity, a.device_needs = None, needs
        base = a.num_device_alloc
        a.run(self.events[at:], live)
        return needs, base, None

    def pause(self, state: FlatState, k: int) -> FlatState:
        a, live, at = self._copy(state)
        a.capacity, a.pause_before = None, k
        stop = a.run(self.events[at:], live)
        if stop < 0 or not a.paused:
            raise AssertionError("the unlimited replay did not reach its own allocation")
        a.pause_before, a.paused = -1, False
        return a, live, at + stop

    def release(self, paused: FlatState) -> tuple[int, FlatState | None]:
        a, live, at = paused
        low, ran = release_and_retry(a, live, self.events[at], self.config)
        return low, (a, live, at + 1) if ran else None


def release_and_retry(
    a: CachingAllocator, live: dict[Any, _Block], event: Event, config: AllocatorConfig
) -> tuple[int, bool]:
    """At the device allocation ``a`` stands before (paused there): the capacity its retry
    needs once every cached whole segment is released (``release_cached_blocks``), and
    whether the retry ran (``a`` then holds the released state, the allocation made). With
    nothing cached the retry needs what the allocation did, and nothing runs."""
    cached = a.pools[0].whole + a.pools[1].whole
    need = a.reserved + allocation_size(round_size(event[2], config))
    if not cached:
        return need, False
    a.capacity = need - cached  # the allocation fails, the release and retry succeed
    retries = a.num_alloc_retries
    if a.run([event], live) >= 0 or a.num_alloc_retries != retries + 1:
        raise AssertionError("the retry after the release did not run as expected")
    a.capacity = None
    return need - cached, True


SKIPPED = (False, -1, -1, False)
"""The entry :attr:`CachingAllocator.choices` gets for events a replay skipped as unable to
change the allocator (``calc.step_events.StepReplay._run_span``): their best fits are not
known, so :func:`repeats_from_cache` accepts the repeat only if no segment is opened after them."""


def repeats_from_cache(choices: Sequence[tuple[bool, int, int, bool]]) -> bool:
    """Whether events that free all they allocate and nothing else, run once (unlimited, no
    ``max_split_size_mb``, the default rounding) with these best fits
    (:attr:`CachingAllocator.choices`), run again from the state they left make no device
    allocation, and the same choices: so that second run leaves the state as it found it
    and reaches no new peak (it can be skipped).

    Why: once they are all freed, the free blocks are the maximal free ranges of each
    segment (``free_block`` merges free neighbours), so the state they leave is the one they
    found plus the segments they opened, each one whole free block. The second run meets
    those segments early: it makes the first run's choices, with each device allocation
    served by the segment it opened, unless at some allocation before a segment was opened
    that segment (same pool) would have been the best fit: at least the request and smaller
    than the block taken (a tie goes to the lower address, never the newer segment's). That
    is checked here, for every choice against the segments opened after it; an allocation
    that a block of its own size served cannot be bettered (not listed). Events skipped
    (:data:`SKIPPED`) made no device allocation but their fits are not known: no segment may
    be opened after them."""
    later: tuple[list[int], list[int]] = ([], [])  # per pool: segments opened later, sorted
    for choice in reversed(choices):
        if choice is SKIPPED:
            if later[0] or later[1]:
                return False
            continue
        small, size, block, device = choice
        opened = later[small]
        i = bisect.bisect_left(opened, size)
        if i < len(opened) and opened[i] < block:
            return False
        if device:
            bisect.insort(opened, block)
    return True


def _live_floor(events: Iterable[Event], config: AllocatorConfig) -> int:
    """The largest total of rounded live requests: no capacity below it can work."""
    return live_profile(events, config)[0]


def live_profile(
    events: Iterable[Event], config: AllocatorConfig = DEFAULT_CONFIG
) -> tuple[int, int]:
    """The largest total of rounded live requests over ``events``, counted from zero, and the
    total they leave live at the end (0 when they free all they allocate)."""
    live: dict[object, int] = {}
    pop = live.pop
    total = best = 0
    plain = config.roundup_power2_divisions <= 1
    for ev in events:
        kind = ev[0]
        if kind == "alloc":
            n = ev[2]
            if n <= 0:
                continue
            if plain:
                size = MIN_BLOCK_BYTES
                if n > size:
                    size = -(-n // size) * size
            else:
                size = round_size(n, config)
            live[ev[1]] = size
            total += size
            if total > best:
                best = total
        elif kind == "free":
            total -= pop(ev[1], 0)
    return best, total
