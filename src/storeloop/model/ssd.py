"""An SSD below the Disk: flash geometry, request streams, queue depth and device energy.

An analytical model from the device's structure, checked against MQSim (CMU-SAFARI, FAST'18) in
``tests/test_ssd.py`` (``tests/data/ssd-reference``, every case within 15 %, see
``docs/ssd.md``). A request stream (size, sequential or random, queue depth, read fraction) is
priced by four resources and one bottleneck rule (:func:`performance`):

* **Flash rounds** (the dies and the channels together). A channel serves its flash units (chips,
  or dies with ``die_interleaving``) in rounds: every unit with pending reads takes one command
  (``command_time`` on the channel each), senses its pages (``read_latency``, once for all the
  planes of a multi-plane read), and the channel then moves the data out one unit after the
  other; a unit holds its data until it is out, so a round lasts
  ``k command_time + tR + bytes / channel rate``. Sequential streams are striped page by page
  over channels, then chips, dies and planes (MQSim's CWDP order), so the pages of a stripe row
  on one die go in one multi-plane read; random pages land on uniform random units and read
  alone. The pending work of a round is what the queue depth puts there: for sequential streams
  the pages of ``queue_depth`` consecutive requests, for random ones the expectation over where
  ``queue_depth`` requests fall (binomial per channel, occupancy per unit).
* **Little's law**: no stream is faster than ``queue_depth / unloaded latency``.
* **Host link** (only for an accelerator behind it): PCIe lanes x per-lane rate x payload share.
* **Controller**: an optional IOPS limit.

The throughput is the least of the four and names the bottleneck; the mean latency follows from
Little's law. A request smaller than a page senses the whole page and moves only its own bytes.
Writes are acknowledged from the write cache and drained by programs (``program_latency`` per
multi-plane program: sequential streams as many planes as the program window has queued,
:func:`_sequential_programs`; random writes one page each); a read
and write mix shares the flash units' time (harmonic mean of the two rates).

Energy (:func:`energy_per_request`) is per page sensed and programmed (voltage x current x time,
from a NAND datasheet's operating currents), per byte on the channel and the host link, plus the
controller's active power over the busy time; the thesis's 25 W system figure is the named
alternative ``thesis``.
"""

from __future__ import annotations

import collections
import functools
import heapq
import math
from dataclasses import dataclass, field

import numpy as np

PATTERNS = ("sequential", "random")
PLACEMENTS = ("internal", "host")

# PCIe payload bytes per second per lane, after line coding (gen 1-2: 8b/10b; 3-5: 128b/130b;
# 6: 242/256 FLIT), PCI-SIG base specifications 1.0a-6.0.
PCIE_LANE_BPS = {1: 2.5e9 * 8 / 10 / 8, 2: 5e9 * 8 / 10 / 8, 3: 8e9 * 128 / 130 / 8, 4: 16e9 * 128 / 130 / 8,
                 5: 32e9 * 128 / 130 / 8, 6: 64e9 * 242 / 256 / 8}


@dataclass(frozen=True, slots=True)
class SsdEnergy:
    """Device energy: NAND array currents (datasheet), per-byte interface energies, controller power."""
    vcc_V: float
    read_current_A: float
    program_current_A: float
    channel_J_per_B: float
    host_J_per_B: float
    active_W: float
    idle_W: float
    system_J_per_B: float | None       # a whole-system figure per byte (the thesis's), replaces the rest
    source: str


@dataclass(frozen=True, slots=True)
class SSD:
    channels: int
    chips_per_channel: int
    dies_per_chip: int
    planes_per_die: int
    page_bytes: int
    read_s: float
    program_s: float
    channel_Bps: float                 # bytes per second of one channel
    host_Bps: float                    # payload bytes per second of the host link
    die_interleaving: bool
    command_s: float                   # channel time of one command (command and address cycles)
    controller_s: float                # controller overhead per request (added to its latency)
    max_iops: float | None             # controller limit, None: none
    write_cache_bytes: int
    energy: SsdEnergy
    program_window: int | None = None  # pages waiting for or in programs at once; None: one per plane
    accelerator: str = "internal"      # who issues the requests: on the flash channels, or behind the host link
    queue_depth: int = 256             # requests an accelerator keeps in flight at most
    where: tuple = field(default=(None, None, ""), compare=False)

    @property
    def units_per_channel(self) -> int:
        """Flash units that take commands at once on one channel: chips, or dies when they interleave."""
        return self.chips_per_channel * (self.dies_per_chip if self.die_interleaving else 1)

    @property
    def flash_Bps(self) -> float:
        """The flash channels' raw rate (bytes/s), all channels."""
        return self.channels * self.channel_Bps

    def peak_stream(self, read: bool = True) -> "Stream":
        """Long sequential runs at a deep queue: the read (write) stream that gets the most of the device."""
        return Stream(self.page_bytes * self.channels * self.units_per_channel * self.planes_per_die,
                      "sequential", 1 << 16, 1.0 if read else 0.0)

    def peak_read_Bps(self) -> float:
        """The most any read stream gets where the accelerator sits (an upper bound)."""
        return performance(self, self.peak_stream(), self.accelerator).bandwidth_Bps

    def peak_write_Bps(self) -> float:
        """The most any write stream gets: long sequential runs, as many planes per program as queue."""
        return performance(self, self.peak_stream(read=False), self.accelerator).bandwidth_Bps


def short_request_bounds(ssd: SSD, request_bytes: int, read: bool, placement: str = "internal") -> tuple[float, float]:
    """(most bytes/s, least J/B) of any stream of ``read`` (or write) requests of at most
    ``request_bytes`` bytes shorter than a stripe (a page on every channel), which are random:
    a request of s bytes moves at most min(s, page) per page it senses or programs, one page per
    unit and round (command, then tR, then the transfers; for writes, tPROG), so a channel with
    U units moves at most ``U m / (U command + tR + U m / rate)`` with m = min(s, page) (reads;
    writes ``U m / (command + m / rate + tPROG)`` per unit), and senses (programs) a page per m
    bytes. Both grow with m, so the largest request bounds them all (tests/test_ssd.py checks
    the model against them)."""
    m = min(request_bytes, ssd.page_bytes)
    C, U, e = ssd.channels, ssd.units_per_channel, ssd.energy
    if read:
        bw = C * U * m / (U * ssd.command_s + ssd.read_s + U * m / ssd.channel_Bps)
        array = e.vcc_V * e.read_current_A * ssd.read_s / m
    else:
        bw = C * U * m / (ssd.command_s + m / ssd.channel_Bps + ssd.program_s)
        array = e.vcc_V * e.program_current_A * ssd.program_s / m
    if placement == "host":
        bw = min(bw, ssd.host_Bps)
    if e.system_J_per_B is not None:
        return bw, e.system_J_per_B
    return bw, array + e.channel_J_per_B + (e.host_J_per_B if placement == "host" else 0.0)


def least_latency(ssd: SSD, read: bool) -> float:
    """Seconds no request of any size waits alone (:func:`unloaded_latency` without its transfers
    and host link, which only grow with the request): a read's command, sense and controller; a
    write's command and controller, plus its program where no cache acknowledges it. By Little's
    law a stream of at most B bytes in flight moves at most B / this per second."""
    if read:
        return ssd.command_s + ssd.read_s + ssd.controller_s
    return ssd.command_s + (0.0 if ssd.write_cache_bytes else ssd.program_s) + ssd.controller_s


def in_flight_read_Bps(ssd: SSD, in_flight_bytes: float) -> float:
    """Most bytes/s of any read stream with at most ``in_flight_bytes`` requested at once: by
    Little's law no more than that per :func:`least_latency`, and a channel's round (a command,
    tR, then the transfers of the pages it sensed) moves at most what is in flight on it, so
    channel c with M_c bytes moves at most M_c / (command + tR + M_c / rate); that is concave in
    M_c, so the channels together move at most B / (command + tR + B / (C rate)) for B bytes in
    flight (tests/test_ssd.py checks the model against it)."""
    b = float(in_flight_bytes)
    rounds = b / (ssd.command_s + ssd.read_s + b / (ssd.channels * ssd.channel_Bps))
    return min(b / least_latency(ssd, True), rounds)


@dataclass(frozen=True, slots=True)
class Stream:
    request_bytes: int
    pattern: str = "sequential"
    queue_depth: int = 1
    read_fraction: float = 1.0

    def __post_init__(self):
        if self.pattern not in PATTERNS:
            raise ValueError(f"pattern {self.pattern!r} is not one of {', '.join(PATTERNS)}")
        if self.request_bytes < 1 or self.queue_depth < 1 or not 0.0 <= self.read_fraction <= 1.0:
            raise ValueError("a stream needs request_bytes >= 1, queue_depth >= 1 and 0 <= read_fraction <= 1")


@dataclass(frozen=True, slots=True)
class Performance:
    bandwidth_Bps: float
    iops: float
    latency_s: float                   # mean, submission to completion (Little's law)
    bottleneck: str                    # the binding resource
    limits: dict                       # requests/s each resource allows: flash rounds, queue depth
                                       # (Little's law), host link, controller
    placement: str

    def as_dict(self) -> dict:
        return {"bandwidth_Bps": self.bandwidth_Bps, "iops": self.iops, "latency_s": self.latency_s,
                "bottleneck": self.bottleneck, "placement": self.placement,
                "limits_iops": {k: v for k, v in self.limits.items()}}


# ------------------------------------------------------------------------------ flash rounds
def _pages(ssd: SSD, stream: Stream) -> tuple[int, float]:
    """Pages a request touches (aligned to its size) and the bytes each moves on the channel."""
    n = max(1, math.ceil(stream.request_bytes / ssd.page_bytes))
    return n, stream.request_bytes / n


def _round(ssd: SSD, commands: int, moved_bytes: float) -> float:
    return commands * ssd.command_s + ssd.read_s + moved_bytes / ssd.channel_Bps


def _sequential_reads(ssd: SSD, stream: Stream) -> tuple[float, float]:
    """(request reads/s, share of the round the channel is busy) for ``queue_depth`` consecutive
    requests striped over channels, chips, dies and planes; the first round of every channel."""
    C, W, D, P = ssd.channels, ssd.chips_per_channel, ssd.dies_per_chip, ssd.planes_per_die
    npg, moved = _pages(ssd, stream)
    s = stream.request_bytes
    # the window's page reads: a request reads every page it touches (sub-page requests each
    # read their page again); beyond a few full stripes, more pending work changes no round
    stripe = C * W * D * P
    reqs = min(stream.queue_depth, max(1, math.ceil(2 * stripe * ssd.page_bytes / s)))
    first = np.arange(reqs, dtype=np.int64) * s // ssd.page_bytes
    lpa = (first[:, None] + np.arange(npg)[None, :]).ravel()
    ch, chip, die, plane = lpa % C, (lpa // C) % W, (lpa // (C * W)) % D, (lpa // (C * W * D)) % P
    unit = chip * D + die if ssd.die_interleaving else chip
    total_rate = busy = 0.0
    for c in range(C):
        sel = ch == c
        if not sel.any():
            continue
        cmds, pages = 0, 0
        u, d, p = unit[sel], die[sel], plane[sel]
        for uu in np.unique(u):
            on = u == uu
            front_die = d[on][0]                              # the oldest read decides the die
            pages += len(np.unique(p[on & (d == front_die)]))  # one multi-plane read, distinct planes
            cmds += 1
        t = _round(ssd, cmds, pages * moved)
        total_rate += pages * moved / t
        busy += (cmds * ssd.command_s + pages * moved / ssd.channel_Bps) / t
    return total_rate / s, busy / max(1, len(np.unique(ch)))


@functools.lru_cache(maxsize=4096)
def _occupancy(n: int, units: int) -> tuple[float, ...]:
    """P(k distinct units hold work | n reads on uniform random units), k = 0..units."""
    p = np.zeros(units + 1)
    p[0] = 1.0
    for _ in range(n):
        stay = p * np.arange(units + 1) / units
        move = np.zeros_like(p)
        move[1:] = p[:-1] * (units - np.arange(units)) / units
        p = stay + move
        if p[units] > 1 - 1e-12:
            break
    return tuple(p)


@functools.lru_cache(maxsize=4096)
def _spread(pending: int, channels: int, units: int) -> tuple[float, ...]:
    """P(k units of one channel hold work), k = 0..units, for ``pending`` page reads at uniform
    random places: the binomial count per channel, then the occupancy of its units."""
    M, C, U = pending, channels, units
    lo, hi = max(1, int(M / C - 10 * math.sqrt(M / C) - 10)), min(M, int(M / C + 10 * math.sqrt(M / C) + 10))
    n = np.arange(lo, hi + 1)
    logp = (np.array([math.lgamma(M + 1) - math.lgamma(x + 1) - math.lgamma(M - x + 1) for x in n])
            + n * math.log(1 / C) + (M - n) * math.log1p(-1 / C)) if C > 1 else np.zeros(len(n))
    pn = np.exp(logp) if C > 1 else (n == M).astype(float)
    w = np.zeros(U + 1)
    for x, px in zip(n, pn):
        if px >= 1e-14:
            w += px * np.array(_occupancy(int(min(x, 64 * U)), U))
    return tuple(w)


def _random_reads(ssd: SSD, stream: Stream) -> tuple[float, float]:
    """(request reads/s, channel-busy share) for ``queue_depth`` requests at uniform random places:
    the expectation over how many land on each channel and how many units they occupy there."""
    C, U = ssd.channels, ssd.units_per_channel
    npg, moved = _pages(ssd, stream)
    w = np.array(_spread(stream.queue_depth * npg, C, U))
    k = np.arange(U + 1)
    t = _round(ssd, k, k * moved)
    rate = float(np.sum(w * k * moved / t))
    busy = float(np.sum(w[1:] * (k[1:] * (ssd.command_s + moved / ssd.channel_Bps)) / t[1:]))
    return C * rate / stream.request_bytes, busy


@functools.lru_cache(maxsize=1024)
def _sequential_programs(ssd: SSD, moved: float) -> float:
    """Pages/s that programs drain from a long sequential write stream, by a short replay of the
    striping: pages enter the controller's program queue in address order while fewer than
    ``program_window`` wait for or are in programs; a free unit whose channel is free takes its
    oldest page and every other queued page of the same die and stripe row on another plane (one
    multi-plane program: command, data in, ``program_latency``). With a window of one page per
    plane (MQSim's back-pressure buffer) a die often starts before all its planes are queued, so a
    program averages fewer than ``planes_per_die`` pages (MQSim's ssdconfig: 3.43 of 4)."""
    C, W, D, P = ssd.channels, ssd.chips_per_channel, ssd.dies_per_chip, ssd.planes_per_die
    stripe = C * W * D * P
    window = ssd.program_window or stripe
    xfer = moved / ssd.channel_Bps
    total = 20 * max(stripe, window)                       # steady after a few stripes: measured from 1/4 on
    queues: dict[tuple, list] = {}
    waiting = [collections.deque() for _ in range(C)]      # units with queued pages, per channel
    busy_units: set = set()
    channel_free = [True] * C
    events: list = []
    admitted = in_flight = done = 0
    start_done, start_t, t = total // 4, None, 0.0

    def unit_of(page):
        c, w, d = page % C, (page // C) % W, (page // (C * W)) % D
        return (c, w, d) if ssd.die_interleaving else (c, w)

    def admit():
        nonlocal admitted, in_flight
        while in_flight < window and admitted < total:
            u = unit_of(admitted)
            queues.setdefault(u, []).append(admitted)
            if u not in busy_units and u not in waiting[u[0]]:
                waiting[u[0]].append(u)
            admitted += 1
            in_flight += 1

    def dispatch(c, now):
        while channel_free[c] and waiting[c]:
            u = waiting[c].popleft()
            q = queues[u]
            if not q:
                continue
            die, row = (q[0] // (C * W)) % D, q[0] // stripe
            take: dict[int, int] = {}                    # plane -> its oldest queued page of that die and row
            for page in q:
                if (page // (C * W)) % D == die and page // stripe == row:
                    take.setdefault((page // (C * W * D)) % P, page)
            taken = set(take.values())
            queues[u] = [page for page in q if page not in taken]
            busy_units.add(u)
            channel_free[c] = False
            heapq.heappush(events, (now + ssd.command_s + len(taken) * xfer, 0, u, len(taken)))

    admit()
    for c in range(C):
        dispatch(c, 0.0)
    while events:
        t, kind, u, n = heapq.heappop(events)
        if kind == 0:                                      # data in: the channel frees, the program starts
            channel_free[u[0]] = True
            heapq.heappush(events, (t + ssd.program_s, 1, u, n))
        else:                                              # programmed: the unit and n window slots free
            busy_units.discard(u)
            done += n
            in_flight -= n
            if start_t is None and done >= start_done:
                start_done, start_t = done, t
            admit()
            if queues[u] and u not in waiting[u[0]]:
                waiting[u[0]].append(u)
        dispatch(u[0], t)
    return (done - start_done) / (t - start_t)


def _write_rate(ssd: SSD, stream: Stream) -> float:
    """Request writes/s the programs drain: a sequential stream through the write cache in
    multi-plane programs (:func:`_sequential_programs`), random writes (or no write cache) one
    page per unit and ``command + data-in + tPROG``, with the channel's data-in keeping up."""
    npg, moved = _pages(ssd, stream)
    if stream.pattern == "sequential" and ssd.write_cache_bytes:
        return _sequential_programs(ssd, moved) / npg
    unit_cycle = ssd.command_s + moved / ssd.channel_Bps + ssd.program_s
    units = ssd.channels * ssd.units_per_channel
    return min(units / unit_cycle, ssd.channels * ssd.channel_Bps / moved) / npg


def unloaded_latency(ssd: SSD, stream: Stream, placement: str = "internal") -> float:
    """One request alone: command, sense, its pages on one channel out, the host link, the controller."""
    npg, moved = _pages(ssd, stream)
    per_channel = math.ceil(npg / ssd.channels)
    if stream.read_fraction > 0:
        t = ssd.command_s + ssd.read_s + per_channel * moved / ssd.channel_Bps
    else:                                             # a write is acknowledged from the cache
        t = ssd.command_s + (0.0 if ssd.write_cache_bytes else per_channel * moved / ssd.channel_Bps + ssd.program_s)
    host = stream.request_bytes / ssd.host_Bps if placement == "host" else 0.0
    return t + host + ssd.controller_s


@functools.lru_cache(maxsize=65536)
def performance(ssd: SSD, stream: Stream, placement: str = "internal") -> Performance:
    """Bandwidth, IOPS, mean latency and the binding resource of ``stream`` on ``ssd``.

    ``placement``: ``internal`` (an accelerator on the flash channels, as OnionChopper) or
    ``host`` (behind the host link)."""
    if placement not in PLACEMENTS:
        raise ValueError(f"placement {placement!r} is not one of {', '.join(PLACEMENTS)}")
    f = stream.read_fraction
    limits: dict[str, float] = {}
    flash_name = "channels"
    if f > 0:
        reads, busy = (_sequential_reads if stream.pattern == "sequential" else _random_reads)(ssd, stream)
        deep, deep_busy = (_sequential_reads if stream.pattern == "sequential" else _random_reads)(
            ssd, Stream(stream.request_bytes, stream.pattern, 1 << 16, 1.0))
        # the flash side of a round binds; which part: the channel's transfers or the units' sensing
        flash_name = "channels" if deep_busy >= 0.5 else ("dies" if ssd.die_interleaving else "chips")
        if reads < 0.9 * deep:
            flash_name = "queue_depth"                # too few requests in flight to fill the rounds
    else:
        reads = math.inf
    writes = _write_rate(ssd, stream) if f < 1 else math.inf
    flash = 1.0 / (f / reads + (1 - f) / writes)
    if f < 1 and (1 - f) / writes > f / reads:
        flash_name = "programs"
    limits["flash"] = flash
    limits["queue_depth"] = stream.queue_depth / unloaded_latency(ssd, stream, placement)   # Little's law
    if placement == "host":
        limits["host_link"] = ssd.host_Bps / stream.request_bytes
    if ssd.max_iops:
        limits["controller"] = ssd.max_iops
    binding = min(limits, key=limits.get)
    iops = limits[binding]
    bottleneck = flash_name if binding == "flash" else binding
    return Performance(bandwidth_Bps=iops * stream.request_bytes, iops=iops, latency_s=stream.queue_depth / iops,
                       bottleneck=bottleneck, limits=limits, placement=placement)


# ------------------------------------------------------------------------------------ energy
def energy_per_request(ssd: SSD, stream: Stream, placement: str = "internal") -> dict[str, float]:
    """Joules per request of ``stream``, by part: pages sensed and programmed (a request smaller
    than a page senses or programs the whole page), bytes over the channel and the host link, and
    the controller's active power over the request's share of busy time."""
    e = ssd.energy
    s = stream.request_bytes
    if e.system_J_per_B is not None:
        return {"system": e.system_J_per_B * s}
    npg, _ = _pages(ssd, stream)
    f = stream.read_fraction
    perf = performance(ssd, stream, placement)
    out = {
        "array_read": f * npg * e.vcc_V * e.read_current_A * ssd.read_s,
        "array_program": (1 - f) * npg * e.vcc_V * e.program_current_A * ssd.program_s,
        "channel": s * e.channel_J_per_B,
        "host_link": s * e.host_J_per_B if placement == "host" else 0.0,
        "controller": e.active_W / perf.iops,
    }
    return out


def joules_per_byte(ssd: SSD, stream: Stream, placement: str = "internal") -> float:
    return sum(energy_per_request(ssd, stream, placement).values()) / stream.request_bytes
