"""Einsum strings: ``C[m,n,p,q,c,d] = A[m,j,p,k,c,d] * B[j,n,k,q,c,d]``.

Each index is an affine sum of loop variables, so convolutions read naturally:
``O[n,m,p,q] = I[n,c,2*p+r,2*q+s] * W[m,c,r,s]``. Problem dimensions are the loop variables in
upper case (``m`` -> ``M``), in order of first appearance. The left-hand tensor is the output
(read-write); every right-hand tensor is an input.
"""

from __future__ import annotations

import re

_TENSOR = re.compile(r"^\s*([A-Za-z_]\w*)\s*\[([^\]]*)\]\s*$")
_TERM = re.compile(r"^\s*(?:(\d+)\s*\*\s*)?([A-Za-z_]\w*)\s*(?:\*\s*(\d+))?\s*$")


class EinsumError(ValueError):
    pass


def _parse_tensor(text: str) -> tuple[str, list[list[tuple[str, int]]]]:
    m = _TENSOR.match(text)
    if not m:
        raise EinsumError(f"{text.strip()!r} is not a tensor reference like A[m,k]")
    ranks = []
    for idx in m.group(2).split(","):
        if not idx.strip():
            raise EinsumError(f"empty index in {text.strip()!r}")
        terms = []
        for term in idx.split("+"):
            t = _TERM.match(term)
            if not t:
                raise EinsumError(f"index term {term.strip()!r} in {text.strip()!r} is not 'var' or 'N*var'")
            coef = int(t.group(1) or t.group(3) or 1)
            if coef < 1:
                raise EinsumError(f"index term {term.strip()!r} in {text.strip()!r} has coefficient {coef}; "
                                  f"coefficients are whole numbers >= 1")
            terms.append((t.group(2), coef))
        ranks.append(terms)
    return m.group(1), ranks


def parse_einsum(text: str) -> tuple[list[str], list[tuple[str, list[list[tuple[str, int]]], bool]]]:
    """-> (dimension names in order of appearance, [(tensor, ranks, read_write)])."""
    if text.count("=") != 1:
        raise EinsumError("an einsum has exactly one '=': OUT[...] = IN1[...] * IN2[...]")
    lhs, rhs = text.split("=")
    out = _parse_tensor(lhs)
    ins = [_parse_tensor(part) for part in _split_product(rhs)]
    if not ins:
        raise EinsumError("the right-hand side names no input tensor")
    tensors = [(name, ranks, False) for name, ranks in ins] + [(out[0], out[1], True)]
    names = [t[0] for t in tensors]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise EinsumError(f"tensor name(s) used twice: {', '.join(sorted(dup))}")
    dims: list[str] = []
    for _, ranks, _ in tensors:
        for rank in ranks:
            for var, _ in rank:
                if var.upper() not in dims:
                    dims.append(var.upper())
    out_vars = {v.upper() for rank in out[1] for v, _ in rank}
    in_vars = {v.upper() for _, ranks in ins for rank in ranks for v, _ in rank}
    missing = out_vars - in_vars
    if missing:
        raise EinsumError(f"output index {', '.join(sorted(missing))} does not appear on the right-hand side")
    return dims, tensors


def _split_product(rhs: str) -> list[str]:
    parts, depth, cur = [], 0, ""
    for ch in rhs:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        if ch == "*" and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    parts.append(cur)
    if len(parts) > 1 and not all(p.strip() for p in parts):
        raise EinsumError(f"an empty factor in {rhs.strip()!r}: every '*' stands between two tensors")
    return [p for p in parts if p.strip()]
