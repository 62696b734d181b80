"""A compiled, summary-only twin of :func:`storeloop.model.evaluate.evaluate` for search.

The mapper evaluates hundreds of thousands of mappings of one (arch, workload, energy) triple.
:class:`FastModel` does the per-triple work once (tensor relevance as bit masks, per-level costs
and bandwidths) and then evaluates a mapping in closed form: for a tensor whose ranks are plain
dimensions, the words entering a level are its tile times the iterations of every temporal loop
above it from the innermost loop that indexes the tensor outwards. Tensors with sliding-window
ranks and archs with paged or single-buffered levels fall back to the reference model. An
SSD-backed level prices the same counts as request streams, from the runs its child tiles occupy
in its layout (:mod:`storeloop.model.disk`), as the reference model does.
``tests/test_fast_model.py`` checks that both give identical cycles, per-level cycles and energy
on the validation corpus and on random mappings (SSD-backed archs too).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from storeloop.errors import MappingError
from storeloop.model import costs, disk
from storeloop.ir.check import check_mapping
from storeloop.model.evaluate import evaluate as reference_evaluate
from storeloop.model.nest import check_layout, storage_order
from storeloop.ir import Arch, EnergyTable, Mapping, Workload


@dataclass(slots=True)
class Summary:
    cycles: int
    energy_pJ: float
    level_cycles: list[int]          # outermost first
    compute_cycles: int


class FastModel:
    def __init__(self, arch: Arch, workload: Workload, energy: EnergyTable):
        self.arch, self.workload, self.energy = arch, workload, energy
        self.nlev = len(arch.levels)
        self.ndims = len(workload.dims)
        # sliding windows, paged levels (access granularity) and single-buffered levels take the
        # reference model
        self.simple = not workload.windowed \
            and not any(lvl.page_bytes or lvl.buffering == "single" for lvl in arch.levels)
        self.tensors = [(t.name, sum(1 << d for d in t.dims()), t.read_write, [r[0][0] for r in t.ranks])
                        for t in workload.tensors]
        # SSD-backed levels: each tensor's rank order in the level's layout (storage_order)
        if self.simple and any(lvl.layout for lvl in arch.levels):
            check_layout(arch, workload)
        self.ssd = {L: [storage_order(arch, workload, L, t) for t in workload.tensors]
                    for L, lvl in enumerate(arch.levels) if lvl.ssd is not None} if self.simple else {}
        # the batch model (model.batch) prices the same closed form, without SSD streams
        self.batchable = self.simple and not self.ssd
        self.levels = []
        for lvl in arch.levels:
            c = energy.storage[lvl.name]
            self.levels.append((lvl.size_words, c.read_pJ, c.write_pJ))
        self.compute_pJ = workload.macs * energy.compute.read_pJ
        self.fanouts = [arch.fanout(i) for i in range(self.nlev)]
        self.bounds = list(workload.bounds)

    def evaluate(self, mapping: Mapping) -> Summary:
        """Cycles and energy of ``mapping``; raises MappingError like the reference model."""
        if not self.simple or mapping.uneven or mapping.imperfect:   # (the reference model's own)
            r = reference_evaluate(self.arch, self.workload, mapping, self.energy)
            return Summary(r.cycles, r.energy_pJ, [lv.cycles for lv in r.levels], r.compute_cycles)
        nlev, ndims = self.nlev, self.ndims
        if len(mapping.levels) != nlev:
            check_mapping(self.arch, self.workload, mapping)     # raises with the reason
        # flattened loops, outermost first, factor > 1 only; check products and fanouts
        lv_, dm_, f_, sp_ = [], [], [], []
        first = []                                   # index of the first loop of each level
        products = [1] * ndims
        unit_loops, width = [], 1
        for li, lm in enumerate(mapping.levels):
            first.append(len(lv_))
            for lp in lm.temporal:
                f = lp.factor
                if f > 1:
                    lv_.append(li); dm_.append(lp.dim); f_.append(f); sp_.append(False)
                    products[lp.dim] *= f
            if lm.spatial:
                x = y = 1
                for lp in lm.spatial_nest():      # Y loops outside X loops, as the reference model
                    f = lp.factor
                    if f > 1:
                        lv_.append(li); dm_.append(lp.dim); f_.append(f); sp_.append(True)
                        products[lp.dim] *= f
                        if lp.axis == "X":
                            x *= f
                        else:
                            y *= f
                total, fx, fy = self.fanouts[li]
                if x > fx or y > fy or x * y > total:
                    check_mapping(self.arch, self.workload, mapping)
                if li == nlev - 1:       # the units' grid (costs.unshared_operands): loops inner first
                    unit_loops = [(lp.factor, lp.dim) for lp in reversed(lm.spatial_nest()) if lp.factor > 1]
                    width = max(fx, x)
        if products != self.bounds:
            check_mapping(self.arch, self.workload, mapping)
        n = len(lv_)
        first.append(n)
        # prefix[i]: product of temporal factors of loops[0:i]
        prefix = [1] * (n + 1)
        for i in range(n):
            prefix[i + 1] = prefix[i] * (1 if sp_[i] else f_[i])
        compute_cycles = prefix[n]
        # inner[L][d] and spatial-above[L][d]
        inner = [[1] * ndims for _ in range(nlev + 1)]
        above = [[1] * ndims for _ in range(nlev + 1)]
        for L in range(nlev - 1, -1, -1):
            row = inner[L + 1][:]
            for i in range(first[L], first[L + 1]):
                row[dm_[i]] *= f_[i]
            inner[L] = row
        for L in range(1, nlev + 1):
            row = above[L - 1][:]
            for i in range(first[L - 1], first[L]):
                if sp_[i]:
                    row[dm_[i]] *= f_[i]
            above[L] = row
        utilized = [math.prod(row) for row in above]
        # Timeloop's compute-level deltas: the innermost loop, if spatial at the innermost level
        inner_dim = dm_[n - 1] if n and sp_[n - 1] and lv_[n - 1] == nlev - 1 else -1

        ntens = len(self.tensors)
        reads = [[0] * ntens for _ in range(nlev)]
        fills = [[0] * ntens for _ in range(nlev)]
        updates = [[0] * ntens for _ in range(nlev)]
        used = [0] * nlev
        bounds = self.bounds
        keeps = [lm.keep for lm in mapping.levels]
        runs = {L: {} for L in self.ssd}        # SSD-backed level -> tensor -> (run, child tile) in words
        for ti, (name, mask, rw, dims) in enumerate(self.tensors):
            # rep[L]: iterations of the temporal loops above level L, from the innermost loop
            # that indexes the tensor outwards (how often L's tile is (re)loaded)
            rep = [1] * (nlev + 1)
            last = 0
            i = 0
            sp_rel = [1] * nlev          # relevant spatial factors per level (scatter)
            for L in range(nlev + 1):
                stop = first[L]
                while i < stop:
                    if (mask >> dm_[i]) & 1:
                        if sp_[i]:
                            sp_rel[lv_[i]] *= f_[i]
                        else:
                            last = i + 1
                    i += 1
                rep[L] = prefix[last]
            kept = [L for L in range(nlev) if keeps[L] is None or name in keeps[L]]
            arrivals = [0] * (nlev + 1)
            for L in kept:
                row = inner[L]
                tile = 1
                for d in dims:
                    tile *= row[d]
                used[L] += tile
                arrivals[L] = tile * rep[L]
            for k, L in enumerate(kept):
                child = kept[k + 1] if k + 1 < len(kept) else nlev
                if L in runs:                # nest.tile_runs: the compute units take one element at a time
                    part = [inner[child][d] for d in dims] if child < nlev else [1] * len(dims)
                    order = self.ssd[L][ti]
                    runs[L][name] = (costs.run_words([part[i] for i in order], [inner[L][dims[i]] for i in order]),
                                     math.prod(part))
                scatter = 1
                for j in range(L, child):
                    scatter *= sp_rel[j]
                if child < nlev:
                    served = arrivals[child] * scatter
                else:                    # the compute units (costs.unit_content)
                    under = inner_dim >= 0
                    factors, indexes = [f for f, _ in unit_loops], [(mask >> d) & 1 for _, d in unit_loops]
                    shared = math.prod(f for f, i in zip(factors, indexes) if i)
                    served = costs.unit_content(under, rep[nlev], compute_cycles, scatter, shared,
                                                costs.unshared_operands(factors, indexes, width) if under else 0)
                part = 0
                if rw:
                    arow = above[L]
                    part = 1
                    for d in dims:
                        part *= bounds[d] // arow[d]
                reads[L][ti], fills[L][ti], updates[L][ti] = costs.keeper_accesses(
                    rw, served, arrivals[L], part, k > 0)

        compute_cycles *= self.arch.compute.cycles_per_op      # from here on: time
        cycles = compute_cycles
        energy = self.compute_pJ
        level_cycles = []
        for L in range(nlev):
            size, er, ew = self.levels[L]
            if size is not None and used[L] > size:
                raise MappingError(f"couldn't map level {self.arch.levels[L].name}: mapped tile size "
                                   f"{used[L]} exceeds buffer capacity {size}",
                                   level=self.arch.levels[L].name, kind="capacity")
            if L in runs:                    # evaluate: the streams of each kept tensor, reads then writes
                u = utilized[L]
                streams = disk.price(self.arch.levels[L],
                                     {name: (reads[L][ti] * u, (fills[L][ti] + updates[L][ti]) * u)
                                      for ti, (name, *_) in enumerate(self.tensors) if name in runs[L]}, runs[L])
                c = max(compute_cycles, disk.cycles(streams, self.arch.clock_hz))
                energy += sum(st.energy_pJ for st in streams)
            else:
                e, c = costs.level_costs(self.arch.levels[L], er, ew, reads[L], fills[L], updates[L], compute_cycles)
                energy += e * utilized[L]
            level_cycles.append(c)
            if c > cycles:
                cycles = c
        return Summary(cycles, energy, level_cycles, compute_cycles)
