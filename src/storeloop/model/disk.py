"""A storage level backed by an SSD: its cycles and energy from the access pattern of each tile.

For every tensor the level keeps, the mapping decides the contiguous runs its child tiles occupy
in the level's row-major layout (:func:`storeloop.model.nest.tile_runs`). A run at least one
stripe long (a page on every channel) is read as a sequential stream in stripe-sized requests;
a shorter one is a random request of the run's bytes (a request smaller than a page still senses
the whole page). The requests in flight are the SSD's ``queue_depth``, at most two child tiles'
worth (the tile being used and the next). Each stream's time is its bytes over the SSD model's
bandwidth for it (:func:`storeloop.model.ssd.performance`), the level's time is the sum (the
tensors share the device) and its energy is each stream's joules per byte.

The level's ``shared_bandwidth`` holds the SSD's peak read bandwidth and its energy-table price
the cheapest joules per byte of any stream (:func:`stand_in`); the mapper bounds a tensor's cost
with them (and :func:`bounds_per_word` for short runs) until its runs are known, then prices it
with :func:`word_rates`.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass

import numpy as np

from storeloop.model.ssd import (Stream, in_flight_read_Bps, joules_per_byte, least_latency, performance,
                                 short_request_bounds)
from storeloop.ir import ActionCosts


@dataclass(frozen=True, slots=True)
class DiskStream:
    tensor: str
    direction: str                    # read or write
    words: int
    stream: Stream
    bandwidth_Bps: float
    bottleneck: str
    seconds: float
    energy_pJ: float


def _request(ssd, run_bytes, tile_bytes):
    """(request bytes, queue depth) of runs and child tiles in bytes (ints or int arrays): a run of
    a stripe or more is read in stripes (sequential), a shorter one as one request (random)."""
    stripe = ssd.page_bytes * ssd.channels
    size = np.where(run_bytes >= stripe, stripe, np.maximum(1, run_bytes))
    return size, np.maximum(1, np.minimum(ssd.queue_depth, 2 * tile_bytes // size))


@functools.lru_cache(maxsize=65536)
def _priced(ssd, size: int, depth: int, read: bool) -> tuple[Stream, float, str, float]:
    """:func:`priced` of one request size and queue depth (a stripe: sequential; less: random)."""
    st = Stream(size, "sequential" if size == ssd.page_bytes * ssd.channels else "random", depth, 1.0 if read else 0.0)
    perf = performance(ssd, st, ssd.accelerator)
    return st, perf.bandwidth_Bps, perf.bottleneck, joules_per_byte(ssd, st, ssd.accelerator)


@functools.lru_cache(maxsize=65536)
def priced(ssd, run_bytes: int, tile_bytes: int, read: bool) -> tuple[Stream, float, str, float]:
    """(stream, bandwidth B/s, bottleneck, J/B) of a tensor read (written) in runs of ``run_bytes``
    as child tiles of ``tile_bytes``."""
    size, depth = (int(x) for x in _request(ssd, run_bytes, tile_bytes))
    return _priced(ssd, size, depth, read)


def word_rates(level, run_words: int, tile_words: int, read: bool) -> tuple[float, float]:
    """(seconds, picojoules) per word of an SSD-backed ``level`` for runs and child tiles in words."""
    wbytes = level.word_bits / 8
    _, bw, _, jpb = priced(level.ssd, int(run_words * wbytes), int(tile_words * wbytes), read)
    return wbytes / bw, wbytes * jpb * 1e12


_RATES: dict = {}      # (ssd, read) -> the requests priced so far: sorted keys, (bandwidth B/s, J/B) each


def word_rates_many(level, run_words: np.ndarray, tile_words: np.ndarray, read: bool) -> tuple[np.ndarray, np.ndarray]:
    """:func:`word_rates` of each (run, tile) pair of two integer arrays. The mapper's bounds call
    this on hundreds of thousands of rows of a few thousand distinct requests (size and queue
    depth): each request is priced once per process and the rows find theirs by a binary search
    (sorting the rows to find their distinct requests cost more than pricing them)."""
    ssd, wbytes = level.ssd, level.word_bits / 8
    q = ssd.queue_depth + 1
    if wbytes == int(wbytes) and np.asarray(run_words).dtype.kind in "iu" and np.asarray(tile_words).dtype.kind in "iu":
        as_bytes = lambda words: np.asarray(words, np.int64) * int(wbytes)             # (whole bytes a word)
    else:
        as_bytes = lambda words: np.floor(np.asarray(words, np.float64) * wbytes).astype(np.int64)  # int(words * wbytes)
    size, depth = _request(ssd, as_bytes(run_words), as_bytes(tile_words))
    rates = _lookup(_RATES, (ssd, read), np.ravel(size * q + depth), lambda k: _priced(ssd, k // q, k % q, read)[1:4:2])
    bw, jpb = rates[:, 0], rates[:, 1]
    return wbytes / bw, wbytes * jpb * 1e12


def _lookup(cache: dict, key, values: np.ndarray, price) -> np.ndarray:
    """(n, 2): ``price(v)`` of each entry v of an integer array, each distinct value priced once per
    process (``cache[key]``: the values priced so far, sorted, and their prices), the rows matched
    by a binary search."""
    known, rates = cache.get(key, (np.zeros(0, np.int64), np.zeros((0, 2))))
    at = np.searchsorted(known, values)
    if len(known) == 0 or (known[np.minimum(at, len(known) - 1)] != values).any():
        new = np.setdiff1d(values, known)
        more = np.array([price(int(v)) for v in new], np.float64).reshape(-1, 2)
        known, rates = np.concatenate([known, new]), np.concatenate([rates, more])
        order = np.argsort(known)
        known, rates = known[order], rates[order]
        cache[key] = (known, rates)
        at = np.searchsorted(known, values)
    return rates[at]


def least_seconds_per_word(ssd, word_bits: int) -> tuple[float, float]:
    """(read, write) seconds per word no stream beats: the peak streams' (:meth:`SSD.peak_stream`)."""
    wbytes = word_bits / 8
    return wbytes / ssd.peak_read_Bps(), wbytes / ssd.peak_write_Bps()


@functools.lru_cache(maxsize=4096)
def bounds_per_word(ssd, word_bits: int, longest_run_words: int, largest_tile_words: float, read: bool,
                    least_pJ: float) -> tuple[float, float]:
    """(seconds, picojoules) per word that no tensor read (written) in runs of at most
    ``longest_run_words`` as child tiles of at most ``largest_tile_words`` beats: runs shorter
    than a stripe are random requests, bounded by :func:`storeloop.model.ssd.short_request_bounds`;
    longer ones by the peak streams and ``least_pJ`` (the least energy per word of any stream).
    And at most two child tiles are in flight (:func:`_request`), so by Little's law no stream
    moves more than two tiles' bytes per :func:`storeloop.model.ssd.least_latency`, and no read
    stream more than the flash rounds pass of them (:func:`storeloop.model.ssd.in_flight_read_Bps`)."""
    wbytes = word_bits / 8
    peak = least_seconds_per_word(ssd, word_bits)[0 if read else 1]
    run = longest_run_words * wbytes
    if read:                                                             # seconds per word
        in_flight = wbytes / in_flight_read_Bps(ssd, 2 * largest_tile_words * wbytes)
    else:
        in_flight = least_latency(ssd, read) / (2 * largest_tile_words)
    if run >= ssd.page_bytes * ssd.channels:
        return max(peak, in_flight), least_pJ
    bw, jpb = short_request_bounds(ssd, int(run), read, ssd.accelerator)
    return max(peak, wbytes / bw, in_flight), max(least_pJ, wbytes * jpb * 1e12)


_BOUNDS: dict = {}     # (ssd, word_bits, largest tile, read, least pJ) -> the runs bounded so far: sorted, (n, 2) each


def bounds_per_word_many(ssd, word_bits: int, longest_run_words: np.ndarray, largest_tile_words: int, read: bool,
                         least_pJ: float) -> tuple[np.ndarray, np.ndarray]:
    """:func:`bounds_per_word` of each entry of an integer array of longest runs (the mapper's
    rows: hundreds of thousands, of a few distinct runs), each distinct run bounded once per
    process (:func:`_lookup`)."""
    largest, least = int(largest_tile_words), float(least_pJ)
    rates = _lookup(_BOUNDS, (ssd, word_bits, largest, read, least), np.asarray(longest_run_words, np.int64),
                    lambda r: bounds_per_word(ssd, word_bits, r, largest, read, least))
    return rates[:, 0], rates[:, 1]


def price(level, counts: dict[str, tuple[int, int]], runs: dict[str, tuple[int, int]]) -> list[DiskStream]:
    """Streams of an SSD-backed ``level``: ``counts`` (words read, words written) per tensor for
    the whole level, ``runs`` (run, child tile) in words per tensor."""
    ssd, wbytes = level.ssd, level.word_bits / 8
    out = []
    for name, (read, written) in counts.items():
        run, tile = runs[name]
        for direction, words in (("read", read), ("write", written)):
            if not words:
                continue
            st, bw, bottleneck, jpb = priced(ssd, int(run * wbytes), int(tile * wbytes), direction == "read")
            nbytes = words * wbytes
            out.append(DiskStream(name, direction, words, st, bw, bottleneck, nbytes / bw, nbytes * jpb * 1e12))
    return out


def cycles(streams: list[DiskStream], clock_hz: float) -> int:
    return math.ceil(sum(s.seconds for s in streams) * clock_hz)


def stand_in(level) -> ActionCosts:
    """Per-access price no stream beats: the peak stream's joules per byte, reads and writes."""
    ssd = level.ssd
    read, write = (joules_per_byte(ssd, ssd.peak_stream(r), ssd.accelerator) for r in (True, False))
    block = level.word_bits / 8 * level.block_size
    return ActionCosts(read * block * 1e12, write * block * 1e12, 0.0, ssd.energy.source)


def with_ssd_prices(arch, table):
    """``table`` with every SSD-backed level priced at its least energy per access (:func:`stand_in`)."""
    if not any(lvl.ssd is not None for lvl in arch.levels):
        return table
    storage = dict(table.storage)
    for lvl in arch.levels:
        if lvl.ssd is not None:
            st = stand_in(lvl)
            old = storage.get(lvl.name)
            storage[lvl.name] = ActionCosts(st.read_pJ, st.write_pJ, old.area_um2 if old else 0.0,
                                            f"SSD model (least energy per byte): {st.source}")
    return dataclasses.replace(table, storage=storage)
