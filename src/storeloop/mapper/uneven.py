"""Uneven positions in the search (``storeloop map --uneven``): each tensor a level keeps may lie
below some of that level's temporal loops (:attr:`storeloop.ir.mapping.LevelMapping.above`,
AccelForge's per-tensor storage positions).

The tree searches them as an arch whose split levels are each a stack of *virtual* levels, one per
position: the j-th holds the tensors at the j-th position from the top and the loops between that
position and the next; the last also the level's fanout. A tensor's loops above and below it are
then exactly the model's (``nest._flatten`` moves the loops above a tensor's position to the level
above, in place). What the virtual levels of one physical level share, the tree enforces where it
decides it (:class:`storeloop.mapper.tree.Tree`): one copy of each tensor (a tensor is kept at one position), one
capacity (the tiles of all positions together), one bandwidth (the leaves' cycles and the nodes'
traffic bounds sum their counts), one loop per dimension a level (the mapping format's), and one
canonical split per uneven mapping (no two splits stand for the same mapping). Every bound that
reads a level's capacity or bandwidth alone sees a relaxation of those, so it stays a bound.

Split are the levels below the first that are neither paged, SSD-backed nor single-buffered (nor
above a single-buffered one), and have no user constraint (a level's constraints name its loops
as one list); a level is split into one more position than the workload has tensors (the outermost
may keep none), which is every uneven mapping the mapping format writes."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from storeloop.ir import Arch, EnergyTable, LevelMapping, Mapping
from storeloop.ir.constraints import Constraints


@dataclass(frozen=True)
class Split:
    """The virtual arch of a split and how to read its mappings back.

    ``group[v]``: the physical level of virtual level v; ``first(v)``: v is its physical level's
    outermost position; ``members[L]``: the virtual levels of physical level L, outermost first."""

    arch: Arch                     # the physical arch (the model prices on it)
    virtual: Arch
    energy: EnergyTable
    constraints: Constraints
    group: tuple[int, ...]
    members: tuple[tuple[int, ...], ...]

    @property
    def split_names(self) -> list[str]:
        return [self.arch.levels[L].name for L, vs in enumerate(self.members) if len(vs) > 1]

    def first(self, v: int) -> bool:
        return self.members[self.group[v]][0] == v

    def to_physical(self, mapping: Mapping) -> Mapping:
        """The uneven mapping a virtual mapping stands for: per physical level its positions' loops
        in order, the last one's fanout, the kept tensors and the loops above each."""
        levels = []
        for vs in self.members:
            temporal, keep, above, all_kept = [], set(), [], False
            for v in vs:
                lm = mapping.levels[v]
                if lm.keep is None:
                    all_kept = True
                else:
                    for t in sorted(lm.keep):
                        keep.add(t)
                        if temporal:
                            above.append((t, len(temporal)))
                temporal.extend(lm.temporal)
            if all_kept:               # (an unsplit level, or one position holding every tensor)
                keep = None
            levels.append(LevelMapping(tuple(temporal), mapping.levels[vs[-1]].spatial,
                                       None if keep is None else frozenset(keep), tuple(above)))
        return Mapping(tuple(levels), mapping.name)


def split(arch: Arch, energy: EnergyTable, constraints: Constraints, positions: int) -> Split:
    """The virtual arch of ``arch``: every level that can hold uneven positions (module doc) as
    ``positions`` virtual levels named ``NAME@1``.. (outermost) and ``NAME`` (the last, with the fanout)."""
    single = {L for L, lvl in enumerate(arch.levels) if lvl.buffering == "single"}
    levels, group, members, storage = [], [], [], dict(energy.storage)
    for L, lvl in enumerate(arch.levels):
        ok = L > 0 and not lvl.page_bytes and lvl.ssd is None and L not in single and L + 1 not in single \
            and L not in constraints.levels and positions > 1
        n = positions if ok else 1
        vs = []
        for j in range(1, n + 1):
            name = lvl.name if j == n else f"{lvl.name}@{j}"
            if j < n:
                storage[name] = energy.storage[lvl.name]
            vs.append(len(levels))
            group.append(L)
            levels.append(dataclasses.replace(lvl, name=name))
        members.append(tuple(vs))
    virtual = dataclasses.replace(arch, levels=tuple(levels))
    at = {L: vs[-1] for L, vs in enumerate(members)}
    cons = dataclasses.replace(constraints, levels={at[L]: c for L, c in constraints.levels.items()})
    return Split(arch, virtual, dataclasses.replace(energy, storage=storage), cons, tuple(group), tuple(members))
