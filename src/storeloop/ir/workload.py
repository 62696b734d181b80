"""A workload: the einsum's dimensions, bounds and tensors (ranks as affine sums of dimensions)."""

from __future__ import annotations

import math
from dataclasses import dataclass

# A rank (one coordinate of a tensor) is an affine sum of problem dimensions:
# ((dim_index, coefficient), ...). A plain einsum index is ((d, 1),).
Rank = tuple[tuple[int, int], ...]


def plain(rank: Rank) -> bool:
    """A rank that is one dimension with coefficient 1 (not a window ``p+r``, not ``2*p``)."""
    return len(rank) == 1 and rank[0][1] == 1


@dataclass(frozen=True)
class Tensor:
    name: str
    ranks: tuple[Rank, ...]
    read_write: bool = False
    bits: int = 64

    def dims(self) -> frozenset[int]:
        """Problem dimensions that index this tensor (its relevant dimensions)."""
        return frozenset(d for rank in self.ranks for d, _ in rank)

    @property
    def window(self) -> bool:
        """Some rank sums dimensions (a sliding window: neighbouring tiles overlap)."""
        return any(len(rank) > 1 for rank in self.ranks)


def rank_label(rank: Rank, dims: tuple[str, ...]) -> str:
    """A rank as a layout names it: its index expression in lower case ('d', 'p+r', '2*p+r')."""
    return "+".join(("" if c == 1 else f"{c}*") + dims[d].lower() for d, c in rank)


@dataclass(frozen=True)
class Workload:
    name: str
    dims: tuple[str, ...]
    bounds: tuple[int, ...]
    tensors: tuple[Tensor, ...]
    einsum: str | None = None

    def dim_index(self, name: str) -> int:
        return self.dims.index(name)

    @property
    def macs(self) -> int:
        return math.prod(self.bounds)

    @property
    def windowed(self) -> bool:
        """Some tensor has a rank that is not a plain dimension (a sliding window, a stride)."""
        return not all(plain(r) for t in self.tensors for r in t.ranks)

    def tensor(self, name: str) -> Tensor:
        for t in self.tensors:
            if t.name == name:
                return t
        raise KeyError(name)

    def tensor_elements(self, t: Tensor) -> int:
        return math.prod(sum(c * (self.bounds[d] - 1) for d, c in rank) + 1 for rank in t.ranks)

    def bounds_dict(self) -> dict[str, int]:
        return dict(zip(self.dims, self.bounds))


# component classes placed outside the accelerator proper by default (a level's ``placement``
