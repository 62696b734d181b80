"""A query: several einsums run one after another, joined by the tensors they pass on (read by
:mod:`storeloop.formats.query`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from storeloop.ir.workload import Workload


@dataclass(frozen=True)
class QueryEinsum:
    workload: Workload
    binds: dict[str, tuple[str, int]]         # einsum tensor -> (query tensor, decomposed)
    home: str | None
    where: tuple = field(compare=False, default=(None, None, ""))   # (file, line, field) of its home


@dataclass(frozen=True)
class Query:
    name: str
    inputs: dict[str, str]                    # input -> a level name, 'top' or 'any'
    einsums: tuple[QueryEinsum, ...]
    where: dict = field(compare=False, default_factory=dict)     # input -> (file, line, field)

    def writer(self, tensor: str) -> int | None:
        """The einsum that writes ``tensor`` (None: an input of the query)."""
        return self._writers.get(tensor)

    @functools.cached_property
    def _writers(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for i, e in enumerate(self.einsums):
            for local, (g, _) in e.binds.items():
                if e.workload.tensor(local).read_write:
                    out.setdefault(g, i)
        return out
