"""Sliding windows in the mapper: a plain surrogate that bounds the model from below.

A tensor indexed by affine ranks (``I[n, c, p+r, q+s]``, ``2*p+r``) has tiles whose extent along
a rank is ``sum(c * (F_d - 1)) + 1`` and whose arrivals follow Timeloop's delta walk
(:func:`storeloop.model.nest._arrivals`); the tree's closed forms (tile = product of the relevant
factors, arrivals = tile x the loops above down to the innermost relevant one) do not hold for it.
So the mapper searches the problem's own map space (the same dimensions, every loop order, every
spatial order) but bounds each node on a *surrogate*: the same einsum with each windowed rank
replaced by one of its dimensions (``I[n, c, p, q]``). For every mapping the surrogate's counts
are at most the model's:

* tiles: a rank's extent ``sum(c_i (F_i - 1)) + 1`` is at least ``F_d`` for each of its terms;
* arrivals: the surrogate counts a whole (smaller) tile at each step of the loops above down to
  the innermost one it indexes. At such a step the true tile either reloads (a wrap-around, a
  translation change: the whole true tile), moves along a plain rank (disjoint: the whole tile),
  or slides along the kept dimension by ``c_d x span_d >= span_d`` rows of a tile at least as wide
  in every other rank; steps of loops the surrogate does not index add nothing to it;
* multicast, link transfers and compute-level deltas: the true tensor's children hold distinct
  windows at least as often as the surrogate's.

The tree's bounds on the surrogate are therefore bounds on the model, and its leaves' surrogate
prices bound each complete mapping's; the leaves that could beat the best so far are priced by the
reference model (:meth:`storeloop.mapper.tree.Tree._exact_leaves`). ``tests/test_mapper_oracle.py``
checks the inequality mapping by mapping and the search against brute force on windowed problems.
"""

from __future__ import annotations

import dataclasses

from storeloop.spec.types import Workload


def windowed(workload: Workload) -> bool:
    """True when some tensor has a rank that is not a plain dimension (``p+r``, ``2*p``)."""
    return any(len(r) > 1 or r[0][1] != 1 for t in workload.tensors for r in t.ranks)


def surrogate(workload: Workload) -> Workload:
    """``workload`` with each affine rank dropped: a windowed tensor keeps its plain ranks only."""
    tensors = tuple(dataclasses.replace(t, ranks=tuple(r for r in t.ranks if len(r) == 1 and r[0][1] == 1))
                    for t in workload.tensors)
    return dataclasses.replace(workload, tensors=tensors)
