"""Sliding windows in the mapper: a plain surrogate that bounds the model from below.

A tensor indexed by affine ranks (``I[n, c, p+r, q+s]``, ``2*p+r``) has tiles whose extent along
a rank is ``sum(c * (F_d - 1)) + 1`` and whose arrivals follow Timeloop's delta walk
(:func:`storeloop.model.nest._arrivals`); the tree's closed forms (tile = product of the relevant
factors, arrivals = tile x the loops above down to the innermost relevant one) do not hold for it.
So the mapper searches the problem's own map space (the same dimensions, every loop order, every
spatial order) but bounds each node on a *surrogate*: the same einsum with the windowed ranks
dropped (``I[n, c, p+r, q+s]`` becomes ``I[n, c]``). For every mapping the surrogate's counts are
at most the model's:

* tiles: the true tile spans the same plain ranks and at least one element along each window;
* arrivals: the surrogate counts a whole (smaller) tile at each step of the loops above down to
  the innermost one it indexes; each such step moves the true tile along a plain rank (disjoint:
  the whole true tile is new) or wraps (Timeloop reloads the whole tile); steps of the loops the
  surrogate does not index add nothing to it;
* multicast, link transfers and compute-level deltas: children that differ along a window share
  the surrogate's data (one multicast read), so links can save the model nothing the surrogate
  charges. (A surrogate that keeps a window's largest dimension, ``I[n, c, p, q]``, is tighter but
  not a bound: where units pass a window's halo over links, the model charges fewer parent reads.)

The tree's bounds on the surrogate are therefore bounds on the model, and its leaves' surrogate
prices bound each complete mapping's; the leaves that could beat the best so far are priced by the
reference model (:meth:`storeloop.mapper.tree.Tree._exact_leaves`). ``tests/test_window_mapper.py``
checks the inequality mapping by mapping and the search against brute force on windowed problems.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from storeloop.ir import Workload, plain


def without_unit_terms(workload: Workload) -> Workload:
    """``workload`` with the terms of dimensions of bound 1 dropped from its ranks: a 1x1
    convolution's ``I[n, c, p+r, q+s]`` (R = S = 1) is ``I[n, c, p, q]``. Such a term adds
    ``c * (1 - 1) = 0`` to every tile extent and its loops are all of one step, so every mapping
    prices the same on both (``tests/test_window_mapper.py``); a workload whose ranks all become
    plain is searched and bounded as a plain one, with the plain bounds. A stride stays a stride
    (``2*p+r`` with R = 1 is ``2*p``); a rank of unit dimensions only keeps its first, plain."""
    def rank(r):
        kept = tuple(term for term in r if workload.bounds[term[0]] > 1)
        return kept or ((r[0][0], 1),)
    tensors = tuple(dataclasses.replace(t, ranks=tuple(rank(r) for r in t.ranks)) for t in workload.tensors)
    return dataclasses.replace(workload, tensors=tensors)


def surrogate(workload: Workload) -> Workload:
    """``workload`` with each affine rank dropped: a windowed tensor keeps its plain ranks only."""
    tensors = tuple(dataclasses.replace(t, ranks=tuple(r for r in t.ranks if plain(r))) for t in workload.tensors)
    return dataclasses.replace(workload, tensors=tensors)


def touched(workload: Workload, tensor_index: int) -> int:
    """Distinct elements of a tensor the computes of ``workload`` read: every one of them leaves
    the tensor's backing level and enters its innermost keeper at least once, whatever the mapping
    (the surrogate's size counts only the plain ranks). Per rank, the distinct values of its index
    expression (``2*p+r`` skips the elements a stride passes over); the product over the ranks
    where no dimension indexes two of them, else the surrogate's count."""
    t = workload.tensors[tensor_index]
    dims = [d for rank in t.ranks for d, _ in rank]
    if len(dims) != len(set(dims)):
        return math.prod(workload.bounds[r[0][0]] for r in t.ranks if plain(r))
    count = 1
    for rank in t.ranks:
        values = np.zeros(1, np.int64)
        for d, c in rank:
            values = np.unique((values[:, None] + c * np.arange(workload.bounds[d])[None, :]).ravel())
        count *= len(values)
    return count
