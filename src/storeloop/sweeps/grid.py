"""The points of a sweep, generated lazily: each point's parameter values, its arch and whether it
meets the sweep's constraints."""

from __future__ import annotations

import copy
import itertools
import math
from pathlib import Path
from typing import Iterator

from storeloop.formats.native import arch_from_native, capacity_words
from storeloop.formats.overrides import set_arch_field
from storeloop.formats.quantities import ExpressionError, bits_of
from storeloop.formats.sweep import _CONSTRAINT, _OPS, Sweep, _is_number
from storeloop.formats.yamlio import LDict


def points(sweep: Sweep) -> Iterator[tuple[dict, Path]]:
    """Every (parameter values, workload) of the grid, generated lazily."""
    names = ["+".join(p) for p, _ in sweep.parameters]
    for combo in itertools.product(*[v for _, v in sweep.parameters]):
        for w in sweep.workloads:
            yield dict(zip(names, combo)), w


def _point_doc(sweep: Sweep, params: dict) -> LDict | None:
    if sweep.system_file is not None:
        return None
    doc = copy.deepcopy(sweep.arch_doc)
    for key, value in params.items():
        for p in key.split("+"):
            set_arch_field(doc, p, value)
    return doc


def point_arch(sweep: Sweep, params: dict):
    """The loaded Arch of one point (errors name the spec's arch file and the point)."""

    return arch_from_native(_point_doc(sweep, params))


def satisfies(sweep: Sweep, params: dict, doc: LDict | None = None) -> bool:
    """The constraints, read from the point's arch fields (before the arch is validated, so
    they can exclude points that would not even be valid architectures). ``doc``: the point's
    arch document when the caller has it already."""
    if not sweep.constraints:
        return True
    a = (doc if doc is not None else _point_doc(sweep, params))["arch"]
    nodes = {str(lvl.get("name")): lvl for lvl in a.get("levels") or []}
    nodes[str(a["compute"].get("name"))] = a["compute"]

    def value(side: str) -> float:
        if _is_number(side):
            return float(side)
        name, _, attr = side.partition(".")
        node = nodes[name]
        bits = bits_of(node.get("word_bits", 64))
        cap = node.get("capacity")
        words = capacity_words(cap, bits)
        words = math.inf if words is None else words
        return {"instances": int(node.get("instances", 1)), "capacity_words": words,
                "capacity_bytes": words * bits / 8, "word_bits": bits,
                "block_size": int(node.get("block_size", 1))}[attr]

    for c in sweep.constraints:
        lhs, op, rhs = _CONSTRAINT.match(c).groups()
        try:
            ok = _OPS[op](value(lhs), value(rhs))
        except (ExpressionError, ValueError, TypeError):
            return True             # an unreadable value: the point runs and stores the arch's error
        if not ok:
            return False
    return True
