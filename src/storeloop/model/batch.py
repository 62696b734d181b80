"""Vectorized evaluation of many mappings that share one loop structure.

A mapper enumerates, for one choice of loop orders, spatial splits and keep/bypass (a
:class:`LoopStructure`), many factorizations of the problem bounds. :class:`BatchModel` evaluates
all of them at once with NumPy: each row of ``factors`` gives the factor of every loop slot of the
structure (1 where a slot is unused). The arithmetic is the closed form of
:mod:`storeloop.model.fast` for einsums whose indices are plain dimensions, done column-wise, with
the same floating-point order as Timeloop's bandwidth model, so results are identical to the
reference model (``tests/test_batch_model.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from storeloop.model import costs, heap
from storeloop.ir import Arch, EnergyTable, LevelMapping, Loop, Mapping, Workload


@dataclass(frozen=True)
class Slot:
    level: int
    dim: int
    spatial: bool = False
    axis: str = "X"


@dataclass(frozen=True)
class LoopStructure:
    """Loop slots outermost first (per level: temporal outer->inner, then spatial) and keep sets."""

    slots: tuple[Slot, ...]
    keep: tuple[frozenset[str] | None, ...]

    def mapping(self, factors) -> Mapping:
        """The :class:`Mapping` of one row of factors (for export and re-evaluation)."""
        levels = []
        for li, keep in enumerate(self.keep):
            t = tuple(Loop(s.dim, int(f)) for s, f in zip(self.slots, factors) if s.level == li and not s.spatial)
            sp = tuple(Loop(s.dim, int(f), True, s.axis) for s, f in zip(self.slots, factors)
                       if s.level == li and s.spatial)
            levels.append(LevelMapping(t, sp, keep))
        return Mapping(tuple(levels))


def structure_of(mapping: Mapping) -> tuple[LoopStructure, list[int]]:
    """Split a mapping into its loop structure and its row of factors."""
    slots, factors = [], []
    for li, lm in enumerate(mapping.levels):
        for lp in lm.temporal:
            slots.append(Slot(li, lp.dim))
            factors.append(lp.factor)
        for lp in lm.spatial_nest():          # Y loops outside X loops, as the reference model
            slots.append(Slot(li, lp.dim, True, lp.axis))
            factors.append(lp.factor)
    return LoopStructure(tuple(slots), tuple(lm.keep for lm in mapping.levels)), factors


@dataclass(slots=True)
class BatchResult:
    cycles: np.ndarray          # int64, per row (0 where invalid)
    energy_pJ: np.ndarray       # float64
    valid: np.ndarray           # bool: fits every level's capacity and fanout
    level_cycles: np.ndarray    # (rows, levels) int64


class BatchModel:
    def __init__(self, arch: Arch, workload: Workload, energy: EnergyTable):
        if workload.windowed:
            raise ValueError("BatchModel needs an einsum whose tensor indices are plain dimensions")
        if any(lvl.page_bytes for lvl in arch.levels):
            raise ValueError("BatchModel does not model access granularity (page_size); use evaluate()")
        self.arch, self.workload = arch, workload
        self.nlev = len(arch.levels)
        self.tensors = [(t.name, t.dims(), t.read_write, [r[0][0] for r in t.ranks]) for t in workload.tensors]
        self.costs = [energy.storage[lvl.name] for lvl in arch.levels]
        self.compute_pJ = workload.macs * energy.compute.read_pJ
        self.fanouts = [arch.fanout(i) for i in range(self.nlev)]
        heap.tune_malloc()                  # its arrays are short-lived: keep them in the heap

    def evaluate(self, structure: LoopStructure, factors: np.ndarray) -> BatchResult:
        F = np.asarray(factors, dtype=np.int64)
        if F.ndim == 1:
            F = F[None, :]
        rows, nslots = F.shape
        FT = np.ascontiguousarray(F.T)          # slot-major: each slot's factors are contiguous
        slots = structure.slots
        nlev, ndims = self.nlev, len(self.workload.dims)
        lv = np.array([s.level for s in slots], dtype=np.int64)
        dm = np.array([s.dim for s in slots], dtype=np.int64)
        sp = np.array([s.spatial for s in slots], dtype=bool)
        is_x = np.array([s.axis == "X" for s in slots], dtype=bool)
        big = FT > 1
        valid = np.ones(rows, dtype=bool)
        for d, b in enumerate(self.workload.bounds):
            valid &= FT[dm == d].prod(axis=0) == b
        for li in range(nlev):
            total, fx, fy = self.fanouts[li]
            x = FT[(lv == li) & sp & is_x].prod(axis=0)
            y = FT[(lv == li) & sp & ~is_x].prod(axis=0)
            valid &= (x <= fx) & (y <= fy) & (x * y <= total)

        prefix = np.empty((nslots + 1, rows), dtype=np.int64)     # products of the temporal factors before
        prefix[0] = 1
        for j in range(nslots):
            if sp[j]:
                prefix[j + 1] = prefix[j]
            else:
                np.multiply(prefix[j], FT[j], out=prefix[j + 1])
        compute_cycles = prefix[nslots]
        first = [int(np.searchsorted(lv, L, side="left")) for L in range(nlev)] + [nslots]
        inner = np.ones((nlev + 1, ndims, rows), dtype=np.int64)
        above = np.ones((nlev + 1, ndims, rows), dtype=np.int64)
        for L in range(nlev - 1, -1, -1):
            inner[L] = inner[L + 1]
            for j in range(first[L], first[L + 1]):
                inner[L, dm[j]] *= FT[j]
        for L in range(1, nlev + 1):
            above[L] = above[L - 1]
            for j in range(first[L - 1], first[L]):
                if sp[j]:
                    above[L, dm[j]] *= FT[j]
        utilized = above.prod(axis=1)                           # (nlev+1, rows)
        # Timeloop's compute-level deltas: the innermost slot with factor > 1, if spatial at the
        # innermost level (see nest.py); none where no factor exceeds 1
        inner_sp = np.zeros(rows, dtype=bool)
        for j in range(nslots):
            inner_sp = np.where(big[j], bool(sp[j] and lv[j] == nlev - 1), inner_sp)
        # the units' grid (costs.unshared_operands): the innermost level's spatial slots in nest order
        # (Y outside X, as LevelMapping.spatial_nest), inner first
        unit_slots = np.array(sorted(np.flatnonzero((lv == nlev - 1) & sp), key=lambda j: slots[j].axis != "Y")[::-1],
                              dtype=np.int64)
        unit_f = FT[unit_slots].T
        width = np.maximum(self.fanouts[nlev - 1][1], FT[unit_slots[is_x[unit_slots]]].prod(axis=0))

        used = np.zeros((nlev, rows), dtype=np.int64)
        reads = np.zeros((nlev, len(self.tensors), rows), dtype=np.int64)
        fills = np.zeros(reads.shape, dtype=np.int64)
        updates = np.zeros(reads.shape, dtype=np.int64)
        for ti, (name, rel, rw, dims) in enumerate(self.tensors):
            relevant = np.array([s.dim in rel for s in slots], dtype=bool)
            # the loops above a level that reload its tile: every temporal loop outside the innermost
            # relevant one with a factor > 1. rep[L] is prefix[first[L]] over the factors of the
            # temporal loops after that one (``trail``: irrelevant, or relevant with factor 1)
            rep, trail, start = [], np.ones(rows, dtype=np.int64), 0
            for end in first:
                for j in range(start, end):
                    if not sp[j]:
                        trail = np.where(big[j], 1, trail) if relevant[j] else trail * FT[j]
                rep.append(prefix[end] // trail)
                start = end
            # the compute units (costs.unit_content): the distinct elements under one innermost
            # instance, and those held by units without a neighbour holding the same one
            unit_rel = relevant[unit_slots]
            shared = FT[unit_slots[unit_rel]].prod(axis=0)
            unshared = costs.unshared_operands(unit_f, unit_rel, width)
            sp_rel = np.flatnonzero(sp & relevant)            # the spatial loops over the tensor's dims
            kept = [L for L in range(nlev) if structure.keep[L] is None or name in structure.keep[L]]
            arrivals = {}
            for L in kept:
                tile = np.ones(rows, dtype=np.int64)
                for d in dims:
                    tile = tile * inner[L, d]
                used[L] += tile
                arrivals[L] = tile * rep[L]
            for k, L in enumerate(kept):
                child = kept[k + 1] if k + 1 < len(kept) else nlev
                scatter = FT[sp_rel[(sp_rel >= first[L]) & (sp_rel < first[child])]].prod(axis=0)
                if child < nlev:
                    served = arrivals[child] * scatter
                else:
                    served = costs.unit_content(inner_sp, rep[nlev], compute_cycles, scatter, shared, unshared)
                part = 0
                if rw:
                    part = np.ones(rows, dtype=np.int64)
                    for d in dims:
                        part = part * (self.workload.bounds[d] // above[L, d])
                reads[L, ti], fills[L, ti], updates[L, ti] = costs.keeper_accesses(rw, served, arrivals[L],
                                                                                   part, k > 0)

        compute_cycles = compute_cycles * self.arch.compute.cycles_per_op    # from here on: time
        cycles = compute_cycles.copy()
        energy = np.full(rows, self.compute_pJ)
        level_cycles = np.zeros((rows, nlev), dtype=np.int64)
        for L, lvl in enumerate(self.arch.levels):
            if lvl.size_words is not None:
                valid &= used[L] <= lvl.size_words
            c = self.costs[L]
            e, lc = costs.level_costs(lvl, c.read_pJ, c.write_pJ, reads[L], fills[L], updates[L], compute_cycles)
            energy = energy + e * utilized[L]
            level_cycles[:, L] = lc
            cycles = np.maximum(cycles, lc)
        cycles = np.where(valid, cycles, 0)
        return BatchResult(cycles, np.where(valid, energy, np.inf), valid, level_cycles)
