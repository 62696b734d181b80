"""Search strategies. They see candidates and their costs (or cost bounds), never model internals.

* :func:`branch_and_bound` walks the :class:`~storeloop.mapper.tree.Tree` depth first, children
  in order of their lower bounds, and drops every subtree whose bound shows it cannot beat the
  best mapping found so far. When it finishes, the best mapping is optimal for the objective
  over the whole (constrained) map space. Several processes split the top-level subtrees (each
  walks every N-th); each starts from the same first incumbent and ties go to the earliest
  share, so the answer does not depend on scheduling; 'converged' below is decided on the whole
  walk, every share's (:class:`_Shares`).
* :func:`random_search` samples mappings like Timeloop's ``random`` / ``random-pruned`` mappers
  and stops after ``victory`` consecutive valid samples that did not improve (for comparison).

Why a search stopped is one of :data:`STOPS`, named in the report:

* ``optimal``: the whole space is covered (or the cycles equal their lower bound under the
  ``delay`` objective), so nothing can beat the answer;
* ``energy-gap``: the cycles equal their lower bound and the objective (energy, for the
  lexicographic one) is within ``energy_gap`` of its lower bound: the map space's, or, for the
  lexicographic objective, the bounds of the subtrees the walk has left open (checked after each
  child it finishes, :meth:`_DFS.left_bound`), which rise as it goes. With a gap, the walk also
  cuts every subtree whose energy bound at the best's cycles is within the gap of the best's
  energy (:meth:`storeloop.mapper.tree.Tree.cut`, as a MIP solver's relative gap); a walk that
  ends having cut one says ``energy-gap`` with the least energy bound it cut, not ``optimal``;
* ``converged``: the branch and bound generated twice as many candidates since its last
  improvement as before it (at least :data:`CONVERGE_MIN`; a windowed search's full walk counts
  from its own start, after the walk over first orders), counted in candidates, not seconds,
  so the answer does not depend on the machine's load (for the random searches: Timeloop's
  victory condition); but not while the top-level subtrees left that could still beat the best,
  at the mean cost of the later half of those walked, project to at most
  :data:`CONVERGE_PATIENT` times the walk's work so far (it is then likely to end soon with a
  proof), and not before :data:`CONVERGE_WALKED` subtrees are walked to project from, unless
  the one being walked alone took :data:`CONVERGE_MIN`; nor where an aspiration stage would still
  walk (:func:`branch_and_bound`); and, without a budget (``map``'s default),
  not in the first :data:`CONVERGE_HOLD` of the walk's time limit, by when enough subtrees are
  walked to project from, unless the walk could not end in time even if the subtrees left cost
  a hundredth of those walked (the one rule that reads the clock: a walk it lets end with a proof
  gives the same answer on any machine; a search that still converges after it may converge
  elsewhere on a busy one, as a time limit would). A budget of candidates (a sweep's) caps
  the walk, not this patience: with the energy gap cutting near-ties, the SSD study's searches
  that stopped 'converged' 13 % above their energy bound end within the gap a few seconds later;
* ``truncated``: the branch and bound ended, but some expansion had more children than it keeps
  (:data:`storeloop.mapper.tree.MAX_CHILDREN`, memory) and cut the ones with the worst bounds, so
  the answer is not proven;
* ``budget``: the branch and bound generated the candidates it was allowed (``budget``); counted
  like ``converged``, so the same inputs give the same answer on a quiet or a busy machine;
* ``time-limit`` (a safety net: where it ends a search, the answer depends on the machine's load)
  and ``interrupted`` (Ctrl-C). ``map`` ends its branch and bound before its time limit, keeping
  a share of it for a retry from the best (mapper/__init__.py); a walk that reaches that earlier
  deadline goes on to the time limit where the subtrees left project to end by then, as above
  (:meth:`_DFS.finishing`): the retry is for a search that ends without a proof.
"""

from __future__ import annotations

import math
import multiprocessing
import multiprocessing.connection
import os
import random
import signal
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from storeloop.errors import MappingError
from storeloop.mapper.objective import Objective
from storeloop.mapper.space import MapSpace, divisors
from storeloop.mapper.tree import Tree
from storeloop.model.fast import FastModel
from storeloop.model.heap import single_blas_thread, tune_malloc
from storeloop.ir import Mapping


STOPS = ("optimal", "energy-gap", "converged", "truncated", "budget", "time-limit", "interrupted")
CONVERGE_MIN = 5_000_000         # candidates a branch and bound spends at least before "converged"
CONVERGE_PATIENT = 8             # ... and not while the projected rest of its walk is at most this many times its work
CONVERGE_WALKED = 32             # ... projected from at least this many top-level subtrees
CONVERGE_HOLD = 0.15             # ... and, without a budget, not in this share of the walk's time limit
CONVERGE_OPTIMISM = 100          # ... unless the subtrees left, at this fraction of the mean cost, could not end in time
GRACE_SHARE = 1.0                # a walk at its deadline goes on if its rest projects within this share of the time left
LEAF_BATCH = 256                 # last-level children priced together (Tree.prefetch)


@dataclass
class Found:
    cycles: int | None = None
    energy_pJ: float | None = None
    mapping: Mapping | None = None
    complete: bool = False           # the whole space was covered (exhaustively or by bounds)
    stopped: str | None = None       # one of STOPS
    stats: dict = field(default_factory=dict)
    # a branch and bound that stopped before covering its space: the fewest cycles any mapping
    # could have, and the least energy one at the best's cycles could have, from the subtrees it
    # left open (_DFS.left_bound; None: not known)
    left: tuple[int, float] | None = None


@dataclass
class Goal:
    """When a search may stop before covering its space: the lower bounds and the allowed gap."""

    cycles_lb: int
    energy_lb: float
    energy_gap: float = 1e-3
    converge: bool = True
    patient: bool = False               # no budget of candidates: the local retry after the walk waits (patience), not a budget

    def reached(self, objective: Objective, cycles: int, energy: float) -> str | None:
        """'optimal' or 'energy-gap' when (cycles, energy) provably needs no more search."""
        return objective.proven(cycles, energy, self.cycles_lb, self.energy_lb, self.energy_gap)


class _Stop(Exception):
    pass


class _Shares:
    """The top-level walk of a parallel search as each of its processes sees it (shared memory of
    aligned 8-byte words, written without locks): the candidates each walked top-level subtree
    took (-1: not walked) and, in each share's own slots, its position in its subtrees, its work
    so far and the count and sum of the subtrees it walked; in ``last``, which any share may set
    (the latest write wins), the walk's candidates when a share last improved the best and whether
    one converged. 'converged' is then decided on the whole walk, as one process walking it alone
    would: a share that projected from its own half alone converged the 32-channel 14x14 3x3 layer
    on 32 PEs after 25 of its subtrees, 6 s into a proof that took 14 s."""

    def __init__(self, ctx, total: int, nshare: int, skip: int):
        self.costs = ctx.RawArray("q", [-1] * total)
        self.pos = ctx.RawArray("q", [-1] * nshare)
        self.spent = ctx.RawArray("q", [0] * nshare)
        self.count = ctx.RawArray("q", [0] * nshare)     # the subtrees each share walked
        self.sums = ctx.RawArray("q", [0] * nshare)      # ... and the candidates they took
        # the walk's candidates when a share last improved the best, and whether one converged
        self.last = ctx.RawArray("q", [0, 0])
        # whether the walk goes on past its deadline (_DFS.finishing): 0 undecided, 1 yes, 2 no
        self.grace = ctx.RawArray("q", [0])
        self.total, self.nshare, self.skip = total, nshare, skip

    def mine(self, share: int) -> range:
        return range(self.skip + share, self.total, self.nshare)

    def finished(self, share: int, i: int, cost: int) -> None:
        self.costs[i] = cost
        self.count[share] += 1
        self.sums[share] += cost

    def summary(self) -> tuple[int, int, int, int]:
        """(subtrees walked, the candidates they took, subtrees no share has reached, the walk's
        candidates), without a pass over the subtrees."""
        return (sum(self.count), sum(self.sums),
                sum(max(len(self.mine(s)) - self.pos[s] - 1, 0) for s in range(self.nshare)), sum(self.spent))

    def walked(self) -> list[int]:
        """The walked subtrees' costs, in the walk's order."""
        c = np.frombuffer(self.costs, np.int64)
        return c[c >= 0].tolist()

    def rest(self) -> list[int]:
        """The top-level subtrees no share has reached yet."""
        return sorted(i for s in range(self.nshare) for i in self.mine(s)[self.pos[s] + 1:])

    def reached(self) -> int:
        """The top-level subtrees walked, being walked or cut (progress)."""
        return self.skip + sum(min(self.pos[s] + 1, len(self.mine(s))) for s in range(self.nshare))


class _DFS:
    def __init__(self, tree: Tree, objective: Objective, deadline: float | None, start: float | None = None,
                 goal: Goal | None = None, limit: int | None = None):
        self.tree, self.obj, self.deadline, self.goal = tree, objective, deadline, goal
        self.limit = limit                       # candidates (tree.stats) at which the budget is spent
        self.grace: float | None = None          # until when a walk projected to end may go on (finishing)
        self.began_at: float | None = None       # when the top-level walk began
        self.best: tuple | None = None          # (cycles, energy, choice or Mapping); choice None: virtual
        self.t0 = time.monotonic() if start is None else start
        self.trace: list[tuple] = []             # (seconds, cycles, energy) of each new best
        self.first_only = False                  # stop at the first complete mapping (a dive)
        self.since = 0                           # candidates generated when the best last improved
        self.base = 0                            # ... and when this search began (a second walk: the first's)
        # the top-level walk: (children, the indices walked, position, candidates when it began and
        # when the current child began), the candidates each top-level subtree walked took, and the
        # projection last made (see :meth:`nearly_done`)
        self.top: list | None = None
        self.top_costs: list[int] = []
        self.top_took = 0                        # (their sum)
        self.shares: _Shares | None = None       # a parallel search's whole walk, and this process's share
        self.share = 0
        self._projected: tuple = (None, False)
        # the walk's open expansions, outermost first: [children, indices walked, position, the
        # suffix minima of their bounds for the best's cycles (left_bound)]
        self.stack: list[list] = []
        self.left: tuple | None = None
        # (aspirations, deadline, candidates): 'converged' waits while the top-level walk is in
        # subtrees whose cycle bound is at most the largest aspiration below the best's cycles,
        # until the deadline or the candidates (each None: no such limit); see branch_and_bound
        self.hold: tuple | None = None
        tree.halt = lambda: self.halted() is not None

    def key(self):
        return None if self.best is None else self.best[:2]

    def tied(self) -> int | None:
        """The best's cycles, under the lexicographic objective (where a mapping beats it only at
        as few cycles): :meth:`Tree.refine` bounds the energy of those mappings only."""
        if self.best is None or not self.obj.lexicographic or not math.isfinite(self.best[0]):
            return None
        return int(self.best[0])

    def halted(self) -> str | None:
        """'time-limit' or 'budget' once the search must stop (also asked between exact leaves)."""
        if self.deadline is not None and time.monotonic() > self.deadline and not self.finishing():
            return "time-limit"
        if self.limit is not None and self.tree.stats["candidates"] >= self.limit:
            return "budget"
        return None

    def finishing(self) -> bool:
        """At the deadline of a walk given a :attr:`grace` (the time limit's end, past the share
        kept for the retry), whether it goes on until then: where it is projected to end within
        :data:`GRACE_SHARE` of the grace (:meth:`ends_within`). The retry is for a search that ends
        without a proof; this one is projected to end with one. Decided once for the walk (by the
        first share to ask, in a parallel search); the time limit's end stays a hard one."""
        if self.grace is None:
            return False
        grace, self.grace = self.grace, None
        decided = self.shares.grace[0] if self.shares is not None else 0
        if not decided:
            decided = 1 if self.ends_within(GRACE_SHARE * (grace - time.monotonic())) else 2
            if self.shares is not None:
                self.shares.grace[0] = decided
        if decided == 1:
            self.deadline = grace
        return decided == 1 and time.monotonic() <= grace

    def ends_within(self, seconds: float) -> bool:
        """Whether the top-level subtrees left that the best does not cut (the one being walked
        counted as one more), at the mean cost of the later half of at least
        :data:`CONVERGE_WALKED` walked ones (the first are the largest, :meth:`nearly_done`),
        would take at most ``seconds`` at the walk's pace so far. The refill bound weighs the
        children left, least bound first, until more stay than that allows."""
        if self.top is None or self.began_at is None or seconds <= 0:
            return False
        walked, _, _, work = self.walk_so_far(self.tree.stats["candidates"])
        if walked < CONVERGE_WALKED or work <= 0:
            return False
        pace = work / max(time.monotonic() - self.began_at, 1e-3)          # candidates a second
        allowed = seconds * pace / self._recent_cost() - 1                  # subtrees left, at most
        return self._open_left(allowed) <= allowed

    def _recent_cost(self) -> float:
        """The mean cost (candidates) of the later half of the top-level subtrees walked (of a
        parallel search, every share's): the first are the largest, so the later ones predict the
        rest better (:meth:`nearly_done`)."""
        costs = self.top_costs if self.shares is None else self.shares.walked()
        recent = costs[len(costs) // 2:]
        return max(sum(recent) / len(recent), 1e-9)

    def _open_left(self, allowed: float) -> int:
        """The top-level subtrees no share has reached yet that neither a first walk settled nor the
        best cuts, counted up to just past ``allowed`` where the refill bound weighs them too (least
        bound first: raising conv3_x's 30,000 root children took a minute)."""
        ch, idx, k = self.top[:3]
        rest = np.asarray(idx[k + 1:] if self.shares is None else self.shares.rest(), np.int64)
        if ch.settled is not None and len(rest):     # (walked already, by a first walk)
            rest = rest[~ch.settled[rest]]
        rest = rest[~self.tree.cut(ch.clb[rest], ch.elb[rest], self.key(), self.obj, note=False)] \
            if len(rest) else rest
        if ch.refill is None or len(rest) <= allowed:
            return len(rest)
        tied, left = self.tied(), 0
        for i in rest:
            if not self.tree.cut(ch.clb[i], self.tree.refine(ch, int(i), tied), self.key(), self.obj, note=False):
                left += 1
                if left > allowed:
                    break
        return left

    def stop(self, why: str, current: bool = True) -> _Stop:
        """The exception that ends the walk early, after noting the bounds of what it leaves
        (``current``: the child being visited in the innermost expansion is left too)."""
        self.left = self.left_bound(current)
        return _Stop(why)

    def left_bound(self, current: bool = False) -> tuple[int, float] | None:
        """For the lexicographic objective: the fewest cycles any mapping could have, and the least
        energy a mapping with at most the best's cycles could have, from what the walk has not
        excluded. Every subtree it pruned was dominated by a best at least as good as the current
        one, so a mapping that beats these is the best itself or lies in a subtree still open on
        the stack (the children not yet visited; with ``current``, the one being visited in the
        innermost expansion too), whose bounds it cannot beat. None where that does not hold:
        another objective, no mapping yet, children cut without a bound (``truncated``)."""
        if self.best is None or self.best[2] is None or not self.obj.lexicographic \
                or self.tree.stats.get("truncated"):
            return None
        bc = self.best[0]
        cycles, energy = int(bc), min(float(self.best[1]), self.tree.gap_lb.get(bc, math.inf))  # (cut by the gap)
        for depth, entry in enumerate(self.stack):
            ch, idx, k, cached = entry
            start = k if current and depth == len(self.stack) - 1 else k + 1
            if start >= len(idx):
                continue
            if cached is None or cached[0] != bc:       # suffix minima, once per expansion and best cycles
                sel = np.asarray(idx, np.int64)
                clb = ch.clb[sel]
                elb = np.where(clb <= bc, ch.elb[sel], np.inf)
                entry[3] = cached = (bc, np.minimum.accumulate(clb[::-1])[::-1],
                                     np.minimum.accumulate(elb[::-1])[::-1])
            cycles = min(cycles, int(cached[1][start]))
            energy = min(energy, float(cached[2][start]))
        return cycles, energy

    def visit(self, node) -> None:
        why = self.halted()
        if why:
            raise self.stop(why)
        spent = self.tree.stats["candidates"]
        if self.shares is not None and self.top is not None:
            self.shares.spent[self.share] = spent - self.top[3]
        if self.shares is None:
            quiet, limit = spent - self.since, max(CONVERGE_MIN, 2 * (self.since - self.base))
        else:                                    # the whole walk's, as one process walking it alone
            if self.shares.last[1]:
                raise self.stop("converged")     # (another share did: it decided for the walk)
            improved = self.shares.last[0]
            quiet, limit = sum(self.shares.spent) - improved, max(CONVERGE_MIN, 2 * improved)
        if self.goal is not None and self.goal.converge and self.best is not None and self.best[2] is not None \
                and quiet > limit and not self.holding(spent) and not self.aspiring(spent) \
                and not self.nearly_done(spent):
            if self.shares is not None:
                self.shares.last[1] = 1
            raise self.stop("converged")
        out = self.tree.expand(node, self.key(), self.obj)
        if node.depth == self.tree.nlev - 1:
            if out:
                self.best = out
                self.since = self.tree.stats["candidates"]
                if self.shares is not None:
                    self.shares.last[0] = sum(self.shares.spent)
                self.trace.append((round(time.monotonic() - self.t0, 3), out[0], out[1]))
                if self.first_only:
                    raise _Stop("first mapping")
                why = self.goal.reached(self.obj, out[0], out[1]) if self.goal is not None else None
                if why:
                    raise _Stop(why)
            why = self.halted()                   # a leaf's exact pricing stopped part-way
            if why:
                raise self.stop(why)
            return
        self.walk(out)

    def aspiring(self, spent: int) -> bool:
        """Whether the walk is still where an aspiration stage (:attr:`hold`) would have walked
        without converging: the stage at the largest aspiration below the best's cycles walks the
        subtrees whose cycle bound is at most it until it finds a mapping there. Within the first
        stage's share of the time and candidates."""
        if self.hold is None or self.top is None:
            return False
        aspirations, deadline, limit = self.hold
        below = [a for a in aspirations if a < self.best[0]]
        ch, idx, k = self.top[:3]
        return bool(below) and ch.clb[idx[k]] <= below[-1] and (deadline is None or time.monotonic() < deadline) \
            and (limit is None or spent < limit)

    def holding(self, spent: int) -> bool:
        """A search without a budget of candidates (``map``'s default) holds 'converged' for the
        first :data:`CONVERGE_HOLD` of its time limit: until then too few top-level subtrees may
        have been walked to project from (the first ones, of the best bounds, are the largest).
        It does not hold a walk that could not end in the time left even if each top-level subtree
        left took a hundredth (:data:`CONVERGE_OPTIMISM`) of the mean of those walked so far (the
        current one counted as it stands), at the walk's pace so far: a 7-dimension layer with
        tens of thousands of subtrees of millions of candidates each converges where it did. (A
        tenth until session 41: with every element a window touches counted at each node, the
        16-channel 14x14 3x3 layer's first subtree took 252 M candidates and the 1,384 others
        2.7 M each, 93 times fewer; a tenth converged it at once, where its proof takes 24 s.)"""
        now = time.monotonic()
        if not (self.goal.patient and self.deadline is not None and self.top is not None
                and now - self.t0 < CONVERGE_HOLD * (self.deadline - self.t0)):
            return False
        ch, idx, k, began, child_began = self.top
        walked, took, left, work = self.walk_so_far(spent)
        per = (took + spent - child_began) / (walked + 1)
        pace = work / max(now - self.t0, 1e-3)                      # candidates a second
        return per / CONVERGE_OPTIMISM * left <= pace * (self.deadline - now)

    def walk_so_far(self, spent: int) -> tuple[int, int, int, int]:
        """The top-level walk so far: the subtrees walked, the candidates they took, the subtrees
        not reached yet and the walk's candidates; of a parallel search, over all its shares
        (:class:`_Shares`)."""
        ch, idx, k, began, _ = self.top
        if self.shares is None:
            return len(self.top_costs), self.top_took, len(idx) - k - 1, spent - began
        return self.shares.summary()

    def nearly_done(self, spent: int) -> bool:
        """Whether the top-level subtrees left that the best does not cut, at the mean cost (in
        candidates) of the later half of at least :data:`CONVERGE_WALKED` walked subtrees, would
        take at most :data:`CONVERGE_PATIENT` times the walk's work so far: then 'converged' waits
        (the walk is likely to end with a proof soon). The children are walked in order of their
        bounds, so the first subtrees are the largest, and the later ones predict the rest better
        (a 384x384x96 matmul on the peers' arch: 218 M projected, 195 M taken, where the mean of
        all said 278 M). Recomputed when the walk moves on or the best changes."""
        if self.top is None:
            return False
        ch, idx, k, began, child_began = self.top
        walked, _, _, work = self.walk_so_far(spent)
        if walked < CONVERGE_WALKED:                # too few to project from: wait,
            return spent - child_began < CONVERGE_MIN  # unless this one is large
        key = (k, walked, self.key())
        if self._projected[0] != key:
            allowed = CONVERGE_PATIENT * work / self._recent_cost() - 1   # subtrees left, at most
            self._projected = (key, self._open_left(allowed) <= allowed)
        return self._projected[1]

    def walk(self, ch, indices=None, after=None) -> None:
        """Visit the children of ``ch`` (or only ``indices``), calling ``after(i)`` after each."""
        idx = range(len(ch.row)) if indices is None else indices
        top = ch.node.depth == 0                 # the root's children: progress for nearly_done
        if top:
            idx = list(idx)
            began, self.began_at = self.tree.stats["candidates"], time.monotonic()
        entry = [ch, idx, 0, None]
        self.stack.append(entry)
        gap = self.goal is not None and self.goal.energy_gap > 0 and self.obj.lexicographic
        # children at the last level are priced ahead in batches (Tree.prefetch); each is still
        # taken in its turn, so the search goes exactly as if it priced them one by one. A sliding
        # window's batches start small and grow while every child priced ahead is visited (a
        # child the best cuts before its turn was priced for nothing; its exact leaves, the most
        # of the work, are priced only when visited)
        ahead = {} if ch.node.depth == self.tree.nlev - 2 else None
        batch, primed = (LEAF_BATCH if self.tree.exact is None else 8), 0
        for k, i in enumerate(idx):
            entry[2] = k
            if top:
                self.top = [ch, idx, k, began, self.tree.stats["candidates"]]
                if self.shares is not None:
                    self.shares.pos[self.share] = k
                if ch.settled is not None and ch.settled[i]:
                    # a first walk walked it for every order: walked, at no cost to this walk (the
                    # projection of 'converged' counts it so)
                    self.tree.stats["settled"] = self.tree.stats.get("settled", 0) + 1
                    self.top_costs.append(0)
                    if self.shares is not None:
                        self.shares.finished(self.share, i, 0)
                    continue
                # (a first walk: whether this subtree has a leaf whose other orders may still win;
                # noted only from a mapping in hand, whose successors prune no less)
                noting = self.tree.first_orders and self.best is not None and self.best[2] is not None
                self.tree.open_orders = False
            if self.best is not None and self.tree.cut(ch.clb[i], ch.elb[i], self.key(), self.obj):
                if indices is None:              # sorted by bound: everything after is cut too
                    self.tree.stats["pruned_bound"] += len(ch.row) - i
                    break
                self.tree.stats["pruned_bound"] += 1
                continue
            if self.best is not None and ch.refill is not None and \
                    self.tree.cut(ch.clb[i], self.tree.refine(ch, i, self.tied()), self.key(), self.obj):
                self.tree.stats["pruned_bound"] += 1
                if self.deadline is not None and time.monotonic() > self.deadline and not self.finishing():
                    raise self.stop("time-limit", current=False)    # (a long run of children cut here visits none)
                continue
            if ahead is None:
                node = self.tree.child(ch, i)
                if self.best is not None and self.tree.floor_cut(ch, i, node, self.key(), self.obj):
                    self.tree.stats["pruned_bound"] += 1
                    continue
            else:
                if i not in ahead:
                    if self.tree.exact is not None and primed:     # (left in ahead: cut before their turn)
                        if not ahead:
                            batch = min(2 * batch, LEAF_BATCH)
                        elif 2 * len(ahead) > primed:
                            batch = max(batch // 2, 1)
                    key = self.key()
                    nxt = [j for j in idx[k:k + batch]
                           if self.best is None or not self.tree.cut(ch.clb[j], ch.elb[j], key, self.obj, note=False)]
                    # a window's: those its leaves' least send floor rules out, most before they are built
                    ahead = self.tree.floor_cuts(ch, nxt, key, self.obj) if self.best is not None else {}
                    ahead = {j: ahead.get(j) or self.tree.child(ch, j) for j in nxt}
                    primed = len(ahead)
                    for j, nd in ahead.items():
                        if nd.leaf is None and self.tree.floor_cut(ch, j, nd, key, self.obj):
                            nd.leaf = (self.tree.floored_count(nd.choice), 0, ())
                    self.tree.prefetch(list(ahead.values()), self.obj)
                node = ahead.pop(i)
            self.visit(node)
            if top:
                if noting and not self.tree.open_orders:
                    self.tree.settled.add(self.tree.top_key(ch, i))
                self.top_costs.append(self.tree.stats["candidates"] - self.top[4])
                self.top_took += self.top_costs[-1]
                if self.shares is not None:
                    self.shares.finished(self.share, i, self.top_costs[-1])
            if after is not None:
                after(i)
            if gap and self.best is not None and self.best[2] is not None:
                # what is left may already be unable to beat the best by more than the gap
                left = self.left_bound()
                why = left and self.obj.proven(self.best[0], self.best[1], *left, self.goal.energy_gap)
                if why:
                    raise self.stop(why, current=False)
        self.stack.pop()


def _progress(done: int, total: int, best, start: float) -> None:
    if not sys.stderr.isatty():
        return
    width = 30
    fill = int(width * done / max(total, 1))
    b = f"best {best[0]:,} cycles, {best[1] / 1e12:.6g} J" if best else "no valid mapping yet"
    sys.stderr.write(f"\r[{'#' * fill}{'.' * (width - fill)}] {done}/{total} subtrees  {b}  {time.monotonic() - start:.1f} s ")
    sys.stderr.flush()


_WORKER: dict = {}


def _share(args, conn, fn=None) -> None:
    """A share's process: its walk's outcome (or the error that ended it) sent back to the search
    (``fn``: what it runs instead of a walk, :func:`forked`)."""
    try:
        out = ("ok", (fn or _worker)(args))
    except BaseException as exc:                    # (a KeyboardInterrupt is _worker's own)
        out = ("error", exc)
    signal.signal(signal.SIGINT, signal.SIG_IGN)    # a late Ctrl-C must not lose the answer
    conn.send(out)
    conn.close()


def forked(fn, args: list) -> list:
    """``fn(a)`` for each of ``args``, each in a forked process of its own (as the branch and
    bound's shares, :func:`_run_shares`), in their order."""
    return _run_shares(multiprocessing.get_context("fork"), list(args), fn=fn)


def _run_shares(ctx, args: list, progress=None, fn=None) -> list:
    """Each share's :func:`_worker` (or ``fn``) outcome, in share order, from one forked process per share.
    Ctrl-C (in a terminal, every process gets it) reaches a share that has not answered within a
    moment too (a signal sent to this process alone), so each still returns its best so far."""
    procs, conns = [], []
    for a in args:
        recv, send = ctx.Pipe(duplex=False)
        p = ctx.Process(target=_share, args=(a, send, fn), daemon=True)
        p.start()
        send.close()
        procs.append(p)
        conns.append(recv)
    outs: list = [None] * len(args)

    def collect(timeout: float) -> None:
        for c in multiprocessing.connection.wait([c for c, o in zip(conns, outs) if o is None], timeout):
            try:
                outs[conns.index(c)] = c.recv()
            except EOFError:                         # it died without a word (killed)
                outs[conns.index(c)] = ("error", RuntimeError("a search process ended without its answer"))

    try:
        try:
            while None in outs:
                collect(0.25)
                if progress is not None:
                    progress()
        except KeyboardInterrupt:
            collect(0.5)
            for p, o in zip(procs, outs):
                if o is None and p.is_alive():
                    os.kill(p.pid, signal.SIGINT)
            end = time.monotonic() + 5
            while None in outs and time.monotonic() < end:
                collect(0.25)
            if None in outs:
                raise
    finally:
        for p in procs:
            p.join(0.5)
            if p.is_alive():
                p.terminate()
    for kind, out in outs:
        if kind == "error":
            raise out
    return [out for _, out in outs]


def _worker(args):
    share, first_best, deadline, budget, start, grace = args
    tree, obj, goal = _WORKER["tree"], _WORKER["objective"], _WORKER["goal"]
    dfs = _DFS(tree, obj, deadline, start, goal=goal, limit=budget)     # counted from 0: this share's own work
    dfs.grace = grace
    dfs.best, dfs.hold = first_best, _WORKER["hold"]
    dfs.shares, dfs.share = shares, share = _WORKER["shares"], share
    root_children = _WORKER["root_children"]           # (the indices the shares split)
    tree.stats = dict.fromkeys(tree.stats, 0)          # count only this share's work
    known = set(tree._refills)
    stopped = None
    try:
        dfs.walk(root_children, shares.mine(share))
    except _Stop as exc:
        stopped = str(exc)
    except KeyboardInterrupt:
        stopped = "interrupted"
    shares.pos[share] = len(shares.mine(share))      # (done)
    # the refill cases this share weighed, for the full walk after a walk over first orders
    refills = tree.refills_since(known) if tree.first_orders and stopped != "interrupted" else {}
    return dfs.best, stopped, tree.stats, dfs.left, tree.gap_lb, dfs.trace, tree.settled, refills


@single_blas_thread
def branch_and_bound(tree: Tree, objective: Objective, *, time_limit: float | None = None,
                     budget: int | None = None, threads: int = 1, progress: bool = True,
                     incumbent: tuple | None = None, goal: Goal | None = None, trace: list | None = None,
                     grace: float | None = None) -> Found:
    """Exact search, from ``incumbent`` = (cycles, energy, merged Mapping) when one is known.

    For cycle-first objectives without a mapping in hand it first looks only for mappings at the
    cycle lower bound (aspiration), then at 1%, 10% above it, then anywhere: a stage that finds a
    mapping has covered every mapping that could beat it, so its best is optimal for the whole
    space. With an ``incumbent`` given (the local search's, normally) it walks once: an aspiration
    stage that found nothing would leave its subtrees, whose bounds are the lowest, for the next
    stage to walk again, and the incumbent prunes from the start (the SSD sweep's 16- and
    32-channel points, whose cycles lie 0.2-1.6 % above their bound: 105 s -> 82 s, the same
    answers). That walk does not stop 'converged' where an aspiration stage would have walked on:
    in a top-level subtree whose cycle bound is at most the largest aspiration below the best's
    cycles, within the first stage's share of the time and budget (:meth:`_DFS.aspiring`).
    ``goal`` adds the early stops (``energy-gap``, ``converged``; see the module docstring).

    With a time limit or a ``budget`` of candidates, a stage that has found nothing gets half of
    the time (and of the candidates) left, so a space with no mapping near the bound still gets an
    answer from the later stages; each stage's space contains the earlier ones', so a later stage
    that completes still proves its best optimal. A stage that has found a mapping gets the rest
    to improve it."""
    tune_malloc()
    start = time.monotonic()
    deadline = None if time_limit is None else start + time_limit
    base = tree.stats["candidates"]                  # 'converged' weighs this search's own work
    limit = None if budget is None else base + budget
    why = goal.reached(objective, *incumbent[:2]) if goal is not None and incumbent is not None else None
    if why:
        found = Found(incumbent[0], incumbent[1], _as_mapping(tree, incumbent[2]), complete=why == "optimal",
                      stopped=why, stats=dict(tree.stats, improvements=list(trace or [])))
        found.stats["seconds"] = time.monotonic() - start
        return found
    stages = [tree.global_lb, tree.global_lb * 1.01, tree.global_lb * 1.1, None] \
        if objective.name in ("delay", "delay,energy") else [None]
    if incumbent is not None:
        stages = [a for a in stages if a is None or a < incumbent[0]]
    fallback, interrupted = _dive(tree, objective, deadline, start, limit) \
        if (deadline is not None or limit is not None) and len(stages) > 1 and incumbent is None else (None, False)
    if fallback is not None:
        incumbent = fallback.best
    best, trace = incumbent, list(trace or []) + (fallback.trace if fallback is not None else [])

    def half() -> tuple:                 # a stage's share: half of the time and of the candidates left
        return (None if deadline is None else time.monotonic() + (deadline - time.monotonic()) / 2,
                None if limit is None else (tree.stats["candidates"] + limit) // 2)

    hold = None
    if fallback is None and best is not None and len(stages) > 1:
        # with a mapping in hand (not the dive's first one), one walk: an aspiration stage that
        # found nothing would leave its subtrees for the next stage to walk again. It does not
        # converge where and while a stage would have walked on (the subtrees at its bound, in
        # the first stage's share)
        hold = (stages[:-1], *half())
        stages = [None]
    found = Found(stopped="interrupted", stats=dict(tree.stats)) if interrupted else None
    for i, aspiration in enumerate([] if interrupted else stages):
        share = half() if i < len(stages) - 1 else (deadline, limit)
        found = _bnb_stage(tree, objective, share, threads, progress, start, aspiration, goal, best, trace, base,
                           hold, grace if share == (deadline, limit) else None)
        improved = found.mapping is not None
        left = (deadline is None or time.monotonic() < deadline) and (limit is None or tree.stats["candidates"] < limit)
        if found.stopped in ("time-limit", "budget") and share != (deadline, limit) and left:
            if not improved:
                continue            # out of its share: the next stage's space contains this one's
            # found one: use the rest of the time in this stage, starting from it
            best, trace = (found.cycles, found.energy_pJ, found.mapping), found.stats["improvements"]
            found = _bnb_stage(tree, objective, (deadline, limit), threads, progress, start, aspiration, goal,
                               best, trace, base, grace=grace)
        if found.mapping is not None:
            best, trace = (found.cycles, found.energy_pJ, found.mapping), found.stats["improvements"]
        if improved or found.mapping is not None or found.stopped:
            break
    if found.stopped is None and tree.stats.get("truncated"):
        found.stopped = "truncated"       # the walk ended, but children were cut without a bound
    if found.stopped is None and best is not None and tree.gap_lb.get(best[0], math.inf) < best[1]:
        # the walk ended, but the gap cut subtrees that might hold a mapping at the best's cycles
        # with a little less energy: its cycles are proven, its energy within the gap
        found.stopped, found.left = "energy-gap", (best[0], tree.gap_lb[best[0]])
    found.complete = found.stopped in (None, "optimal")
    found.stopped = found.stopped or "optimal"
    if best is not None:
        found.cycles, found.energy_pJ, found.mapping = best[0], best[1], _as_mapping(tree, best[2])
    found.stats["improvements"] = trace
    found.stats["seconds"] = time.monotonic() - start
    return found


def _as_mapping(tree: Tree, how) -> Mapping | None:
    """None for a virtual incumbent (given, never beaten)."""
    return how if how is None or isinstance(how, Mapping) else tree.mapping(how)


def _dive(tree, objective, deadline, start, limit=None) -> tuple[_DFS | None, bool]:
    """Best-bound-first descent to the first complete mapping: an answer for a time limit (or a
    budget, up to ``limit`` candidates) that ends before the aspiration stages find one. Its counts
    are not kept in the search stats.
    Returns (the search, or None without a mapping; whether Ctrl-C interrupted it)."""
    saved = dict(tree.stats)
    dfs = _DFS(tree, objective, deadline, start, limit=limit)
    dfs.first_only = True
    interrupted = False
    try:
        dfs.visit(tree.root())
    except _Stop:
        pass
    except KeyboardInterrupt:
        interrupted = True
    tree.stats = saved
    return (dfs if dfs.best is not None else None), interrupted


def _bnb_stage(tree, objective, until, threads, progress, start, aspiration, goal, incumbent, trace,
               base: int, hold: tuple | None = None, grace: float | None = None) -> Found:
    """One stage, until (deadline, candidates), either None: no limit; ``found.mapping`` is set
    only when the stage improved on ``incumbent``, and ``found.stopped`` is None when the stage
    covered its whole space. ``grace``: :attr:`_DFS.grace`."""
    deadline, limit = until
    dfs = _DFS(tree, objective, deadline, start, goal, limit)
    dfs.grace = grace
    tree.gap = goal.energy_gap if goal is not None and objective.lexicographic else 0.0
    # (a walk that skips what a first walk settled keeps what that walk's gap cut there)
    skips = bool(tree.settled) and not tree.first_orders
    if not skips:
        tree.gap_lb = {}
    if aspiration is not None:
        dfs.best = (aspiration, math.inf, None)      # a virtual incumbent: prune whatever is slower
    if incumbent is not None and (aspiration is None or incumbent[0] <= aspiration):
        dfs.best = incumbent
    dfs.trace = list(trace)
    dfs.since, dfs.base, dfs.hold = tree.stats["candidates"], base, hold
    given = dfs.best
    stopped = None
    try:
        root = tree.root()
        ch = tree.expand(root, dfs.key(), objective) if tree.nlev > 1 else None
        total = len(ch.row) if ch is not None else 0
        if skips and ch is not None:
            live = np.ones(total, bool) if dfs.best is None else ~tree.cut(ch.clb, ch.elb, dfs.key(), objective,
                                                                           note=False)
            ch.settled = np.zeros(total, bool)
            for i in np.nonzero(live)[0]:
                ch.settled[i] = tree.top_key(ch, int(i)) in tree.settled
        if ch is None:                               # one storage level: the root's leaves are the space
            dfs.visit(root)
        elif threads <= 1 or total < 2:
            dfs.walk(ch, after=(lambda i: _progress(i + 1, total, dfs.best, start)) if progress else None)
        else:
            skip = int(dfs.best is None)
            if skip:
                dfs.stack.append([ch, range(total), 0, None])   # (the other subtrees are still open)
                dfs.visit(tree.child(ch, 0))         # a first incumbent every process starts from
                dfs.stack.pop()
            ctx = multiprocessing.get_context("fork")
            shares = _Shares(ctx, total, threads, skip)
            _WORKER.update(tree=tree, objective=objective, goal=goal, hold=hold, shares=shares, root_children=ch)
            each = None if limit is None else max(1, (limit - tree.stats["candidates"]) // threads)
            try:
                outs = _run_shares(ctx, [(s, dfs.best, deadline, each, start, grace) for s in range(threads)],
                                   (lambda: _progress(shares.reached(), total, dfs.best, start)) if progress else None)
            finally:
                _WORKER.clear()                      # (the tree is not kept alive by it)
            lefts = []
            for best, why, stats, left, gap_lb, _, settled, refills in outs:  # earliest share first: ties keep the first
                tree.settled |= settled
                for key, got in refills.items():    # (the next walk's processes start with them)
                    tree._refills.setdefault(key, got)
                if why:                                  # stopped early: it left subtrees open
                    lefts.append(left)
                for k, v in stats.items():
                    tree.stats[k] = tree.stats.get(k, 0) + v
                for c, e in gap_lb.items():
                    tree.gap_lb[c] = min(tree.gap_lb.get(c, math.inf), e)
                if best is not None and (dfs.best is None or objective.better(best[0], best[1], dfs.key())):
                    dfs.best = best
            # the improvements: each share's that beat every share's best before it
            for t, c, e in sorted(x for out in outs for x in out[5]):
                if not dfs.trace or objective.better(c, e, dfs.trace[-1][1:]):
                    dfs.trace.append((t, c, e))
            # a share's proof from what it left open covers that share only: a share that stopped
            # without a proof decides the stop
            whys = [out[1] for out in outs if out[1]]
            stopped = next((w for w in whys if w not in ("optimal", "energy-gap")), whys[0] if whys else None)
            dfs.left = None if not lefts or None in lefts else (min(c for c, _ in lefts), min(e for _, e in lefts))
    except _Stop as exc:
        stopped = str(exc)
    except KeyboardInterrupt:
        stopped = "interrupted"
    if progress and sys.stderr.isatty():
        sys.stderr.write("\n")
    found = Found(stats=dict(tree.stats), stopped=stopped, left=dfs.left if stopped else None)
    found.stats["improvements"] = dfs.trace
    if dfs.best is not None and dfs.best[2] is not None and dfs.best is not given:
        found.cycles, found.energy_pJ = dfs.best[:2]
        found.mapping = _as_mapping(tree, dfs.best[2])
    return found


# ---------------------------------------------------------------------- random sampling
def sample(space: MapSpace, rng: random.Random, pruned: bool) -> Mapping:
    """One random mapping of the space: random keep sets, splits, factors and loop orders."""
    rem = list(space.workload.bounds)
    levels = []
    for L in range(space.nlev):
        opts = [o for o in space.spatial_options[L]
                if all(r % (x * y) == 0 for r, x, y in zip(rem, *o))]
        x, y = rng.choice(opts) if opts else ([1] * space.ndims, [1] * space.ndims)
        tf = []
        for d in range(space.ndims):
            left = rem[d] // (x[d] * y[d])
            lo, hi = space.temporal_range(L, d)
            cands = [left] if L == space.nlev - 1 else [f for f in divisors(left) if lo <= f <= hi] or [1]
            tf.append(rng.choice(cands))
            rem[d] = left // tf[-1]
        if pruned:
            pattern = sum(1 << ci for ci, (_, ds) in enumerate(space.classes) if math.prod(tf[d] for d in ds) > 1)
            perm = rng.choice(space.orders[L][pattern] or [tuple(range(len(space.classes)))])
            dims = [d for ci in perm for d in space.classes[ci][1]]
        else:
            dims = list(range(space.ndims))
            rng.shuffle(dims)
        levels.append(space.level_mapping(dims, tf, x, y, rng.choice(space.keep_masks[L])))
    return Mapping(tuple(levels))


def random_search(space: MapSpace, model: FastModel, objective: Objective, *, victory: int = 500,
                  time_limit: float | None = None, seed: int = 0, pruned: bool = True) -> Found:
    rng = random.Random(seed)
    start = time.monotonic()
    found = Found(stats={"candidates": 0, "complete": 0, "pruned_capacity": 0, "pruned_bound": 0})
    since = 0
    try:
        while since < victory:
            if time_limit is not None and time.monotonic() - start > time_limit:
                found.stopped = "time-limit"
                break
            m = sample(space, rng, pruned)
            found.stats["candidates"] += 1
            if space.min_units and math.prod(lp.factor for lm in m.levels for lp in lm.spatial) < space.min_units:
                found.stats["pruned_capacity"] += 1      # too few compute units in use (min parallelism)
                continue
            try:
                s = model.evaluate(m)
            except MappingError:
                found.stats["pruned_capacity"] += 1
                continue
            found.stats["complete"] += 1
            since += 1
            if found.cycles is None or objective.better(s.cycles, s.energy_pJ, (found.cycles, found.energy_pJ)):
                found.cycles, found.energy_pJ, found.mapping = s.cycles, s.energy_pJ, m
                since = 0
        else:
            found.stopped = "converged"       # Timeloop's victory condition
    except KeyboardInterrupt:
        found.stopped = "interrupted"
    found.stats["seconds"] = time.monotonic() - start
    return found
