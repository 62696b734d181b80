"""A query: several einsums run one after another, joined by the tensors they pass on (``query:``).

```yaml
query:
  name: onionpir-64GiB
  inputs: {database: top, query1: any, query2: any}    # tensors from outside, and where they are
  einsums:
    - name: dim1
      einsum: C[m,n,p,q,c,d] = A[m,j,p,k,c,d] * B[j,n,k,q,c,d]
      bounds: {M: 1, N: 2048, ...}
      tensors: {A: query1, B: database, C: ct1}      # each einsum tensor -> a query tensor
    - name: dim2
      einsum: C[m,n,p,q,c,d] = A[m,j,p,k,c,d] * B[j,n,k,q,c,d]
      bounds: {...}
      home: DRAM                                     # optional: where its tensors live
      tensors: {A: query2, B: {tensor: ct1, decomposed: 5}, C: ct2}
```

Each einsum's tensors name query tensors. A tensor is written by one einsum and read by later ones
or is one of the ``inputs``, which sit at a level (``top``: the arch's first, where the database
lives) or ``any`` (delivered to the home of the einsum that reads it, not priced); ``decomposed: k`` says the reader holds k words per word written (a
digit decomposition between the einsums, not priced). The loader refuses, at the line: an einsum
tensor with no query tensor, a tensor read before any einsum writes it (a cycle) or never written,
one written twice, an input written, and a reader whose words differ from the writer's (times
``decomposed``).
"""

from __future__ import annotations

from pydantic import Field, StrictInt

from storeloop.formats.einsum import EinsumError, parse_einsum
from storeloop.formats.native import WorkloadSpec, workload_at
from storeloop.formats.validate import Strict, top_level
from storeloop.formats.yamlio import LDict, error_at, locate
from storeloop.ir.query import Query, QueryEinsum


class BindingSpec(Strict):
    tensor: str = Field(description="the query tensor")
    decomposed: StrictInt = Field(1, ge=1, le=1024, description="words the einsum's tensor holds per word of "
                                  "the query tensor (a digit decomposition between einsums, not priced)")


class QueryEinsumSpec(WorkloadSpec):
    tensors: dict[str, str | BindingSpec] = Field(description="each tensor of the einsum -> a query tensor, "
                                                  "e.g. {A: query1, B: database, C: ct1}")
    home: str | None = Field(None, description="the storage level its tensors live in (default: searched)")


class QuerySpec(Strict):
    name: str
    inputs: dict[str, str] = Field(description="query tensors that come from outside and the level they sit in: "
                                   "{database: top, query1: any} (top: the arch's first level; any: delivered to "
                                   "the level of the einsum that reads it)")
    einsums: list[QueryEinsumSpec] = Field(min_length=1, description="the einsums, in the order they run")
    description: str | None = None
    source: str | None = None


def query_from_native(doc: LDict) -> Query:
    spec: QuerySpec = top_level(QuerySpec, doc, "query")
    inputs = list(spec.inputs)
    names = [e.name for e in spec.einsums]
    words: dict[str, tuple[int, int, tuple]] = {}     # query tensor -> (words, bits, where it was first sized)
    written: dict[str, str] = {}
    out = []
    for i, e in enumerate(spec.einsums):
        loc = ("query", "einsums", i)
        if e.name in names[:i]:
            raise error_at(doc, loc + ("name",), f"einsum {e.name!r} is named twice", allowed="a name per einsum")
        w = workload_at(doc, loc, e)
        local = [t.name for t in w.tensors]
        for k in e.tensors:
            if k not in local:
                raise error_at(doc, loc + ("tensors", k), f"{k!r} is not a tensor of {e.einsum!r}",
                               allowed=", ".join(local))
        binds = {}
        for t in w.tensors:
            if t.name not in e.tensors:
                raise error_at(doc, loc + ("tensors",), f"einsum {e.name}: tensor {t.name} names no query tensor",
                               allowed=f"{t.name}: <query tensor> for each of {', '.join(local)}")
            b = e.tensors[t.name]
            g, k = (b, 1) if isinstance(b, str) else (b.tensor, b.decomposed)
            at = loc + ("tensors", t.name)
            n = w.tensor_elements(t)
            if t.read_write:
                if k != 1:
                    raise error_at(doc, at, f"{t.name} is written: it cannot be decomposed",
                                   allowed="a query tensor name")
                if g in inputs:
                    raise error_at(doc, at, f"{g!r} is an input of the query: no einsum writes it",
                                   allowed="a new query tensor name")
                if g in written:
                    raise error_at(doc, at, f"{g!r} is written by einsum {written[g]} already",
                                   allowed="a tensor written by one einsum")
                written[g] = e.name
                words[g] = (n, t.bits, at)
            else:
                if g not in inputs and g not in written:
                    later = next((x.name for x in spec.einsums[i + 1:] if g in _written(x)), None)
                    why = f"read before einsum {later} writes it (a cycle)" if later else "read but never written"
                    raise error_at(doc, at, f"{g!r} is {why}, and not an input",
                                   allowed=f"an input ({', '.join(inputs)}) or a tensor an earlier einsum writes")
                if n % k:
                    raise error_at(doc, at, f"{t.name} holds {n:,} words, not a multiple of decomposed: {k}")
                if g in words:
                    want, bits, first = words[g]
                    if n // k != want or bits != t.bits:
                        fl = locate(doc, first)[1]
                        raise error_at(doc, at, f"{t.name} holds {n:,} words of {t.bits} bits"
                                       + (f" ({n // k:,} before decomposition)" if k > 1 else "")
                                       + f", but {g!r} has {want:,} words of {bits} bits (line {fl})",
                                       allowed="bounds that give the writer's shape (times decomposed)")
                else:
                    words[g] = (n // k, t.bits, at)
            binds[t.name] = (g, k)
        out.append(QueryEinsum(w, binds, e.home, (locate(doc, loc)[0], locate(doc, loc + (("home",) if e.home else ()))[1],
                                                  f"query.einsums[{i}].home")))
    for name in inputs:
        if name not in words:
            raise error_at(doc, ("query", "inputs", name), f"input {name!r} is read by no einsum",
                           allowed=", ".join(sorted(words)))
    where = {name: (*locate(doc, ("query", "inputs", name)), f"query.inputs.{name}") for name in inputs}
    return Query(spec.name, dict(spec.inputs), tuple(out), where)


def _written(e: QueryEinsumSpec) -> set[str]:
    """The query tensors einsum ``e`` writes (none where its einsum does not parse: its own error
    comes when it is read)."""
    try:
        _, tensors = parse_einsum(e.einsum)
    except EinsumError:
        return set()
    binds = [e.tensors.get(name) for name, _, rw in tensors if rw]
    return {b if isinstance(b, str) else b.tensor for b in binds if b is not None}
