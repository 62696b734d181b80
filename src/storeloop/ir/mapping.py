"""A mapping: per level, its temporal and spatial loops and the tensors it keeps."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Loop:
    dim: int
    factor: int
    spatial: bool = False
    axis: str = "X"     # for spatial loops: "X" or "Y"


@dataclass(frozen=True)
class LevelMapping:
    """The loops one storage level runs: temporal (outer->inner), then its spatial fanout.

    Spatial loops are listed outer->inner within each axis; as in Timeloop, the X loops sit inside
    the Y loops (see :meth:`spatial_nest`)."""

    temporal: tuple[Loop, ...] = ()
    spatial: tuple[Loop, ...] = ()
    keep: frozenset[str] | None = None   # None: every tensor is kept
    # uneven positions: (tensor, n) where the tensor's tile here lies below this level's n
    # outermost temporal loops (they refill it, as loops of the level above would); others: 0
    above: tuple[tuple[str, int], ...] = ()

    def spatial_nest(self) -> tuple[Loop, ...]:
        """The spatial loops in nest order, outer->inner: Y loops, then X loops."""
        return tuple(lp for lp in self.spatial if lp.axis == "Y") + \
            tuple(lp for lp in self.spatial if lp.axis == "X")

    def keeps(self, tensor: str) -> bool:
        return self.keep is None or tensor in self.keep

    def outside(self, tensor: str) -> int:
        """How many of this level's outermost temporal loops lie above ``tensor``'s tile here."""
        return dict(self.above).get(tensor, 0)


@dataclass(frozen=True)
class Mapping:
    levels: tuple[LevelMapping, ...]     # aligned with Arch.levels (outermost first)
    name: str | None = None
    # imperfect factorization: a dimension's factors may multiply to more than its bound; the
    # mapping runs the problem padded to those products (:func:`storeloop.ir.check.padded`)
    imperfect: bool = False

    @property
    def uneven(self) -> bool:
        """Some tensor's tile lies below some of its level's temporal loops (:attr:`LevelMapping.above`)."""
        return any(n for lm in self.levels for _, n in lm.above)
