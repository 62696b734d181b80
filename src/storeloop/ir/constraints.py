"""What a user fixed of the map space: per level, factor ranges, loop orders, kept and bypassed tensors."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class LevelConstraint:
    """What a user fixed at one level. ``None`` means free."""

    temporal: dict[int, tuple[int, int]] = field(default_factory=dict)   # dim -> (min, max) factor
    spatial_x: dict[int, tuple[int, int]] = field(default_factory=dict)
    spatial_y: dict[int, tuple[int, int]] = field(default_factory=dict)
    # Timeloop's reading of a spatial constraint: a factor bounds a dim's whole spatial factor (X x Y)
    # and ``split`` puts a dim on one axis only (Constraints::Parse, Uber's spatial split space)
    spatial: dict[int, tuple[int, int]] = field(default_factory=dict)
    axis: dict[int, str] = field(default_factory=dict)       # dim -> "X" or "Y"
    # the dims a spatial permutation leaves unnamed, and how many of them may run along X and along
    # Y: Timeloop orders them freely between the named ones and splits that order at ``split``
    free_axes: tuple[frozenset[int], int, int] | None = None
    permutation: list[int] | None = None          # dims, outer -> inner (a partial order)
    # Timeloop's reading of a permutation (Constraints::ParsePermutations): the last ``anchor[1]``
    # dims of ``permutation`` are the innermost loops, the first ``anchor[0]`` the outermost ones
    anchor: tuple[int, int] | None = None
    keep: frozenset[str] | None = None             # tensors that must be kept
    bypass: frozenset[str] | None = None           # tensors that must be bypassed
    stationary: str | None = None                  # tensor that must be reused across the innermost loop

    def allows_order(self, order: list[int]) -> bool:
        """Whether the temporal loops ``order`` (dims with a factor > 1, outer -> inner) follow
        the permutation: the named dims in its order and, when anchored, the named prefix/suffix
        as the innermost/outermost loops (dims with no loop are skipped)."""
        perm = self.permutation
        if not perm:
            return True
        named = [d for d in order if d in perm]
        if named != [d for d in perm if d in named]:
            return False
        if self.anchor is None:
            return True
        outer, inner = set(perm[:self.anchor[0]]), set(perm[len(perm) - self.anchor[1]:])
        n_out, n_in = sum(d in outer for d in order), sum(d in inner for d in order)
        return set(order[:n_out]) <= outer and set(order[len(order) - n_in:]) <= inner


@dataclass
class Constraints:
    levels: dict[int, LevelConstraint] = field(default_factory=dict)
    min_spatial_utilization: float = 0.0
    # Timeloop's 'utilization'/'parallelism' constraint: the product of every fanout's utilization,
    # i.e. the share of the compute units a mapping uses (Uber::AssignSpatialTilingDirections)
    min_parallelism: float = 0.0
    source: str = "none"

    def at(self, level: int) -> LevelConstraint:
        """What is fixed at ``level`` (read only: a level with none shares one free constraint)."""
        return self.levels.get(level, _FREE)


_FREE = LevelConstraint()            # a level with no constraint (the mapper asks for it ~10^5 times a map)
