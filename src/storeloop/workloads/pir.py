"""PIR workloads by database size (OnionChopper thesis, ch. 3.3 and Table 3.2).

All PIR schemes here map onto one 8-rank einsum (thesis ch. 3.3)::

    C[m,n,p,q,c,d] = A[m,j,p,k,c,d] * B[j,n,k,q,c,d]

A is the query (ciphertexts), B the database (plaintexts), C the response. Elements are 64-bit
words (one NTT coefficient modulo one coefficient modulus).
"""

from __future__ import annotations

from storeloop.errors import SpecError
from storeloop.spec.einsum import parse_einsum
from storeloop.spec.types import Tensor, Workload

PIR_EINSUM = "C[m,n,p,q,c,d] = A[m,j,p,k,c,d] * B[j,n,k,q,c,d]"
WORD_BYTES = 8


def pir_workload(name: str, bounds: dict[str, int], bits: int = 64) -> Workload:
    dims, tensors = parse_einsum(PIR_EINSUM)
    ts = tuple(Tensor(n, tuple(tuple((dims.index(v.upper()), c) for v, c in rank) for rank in ranks), rw, bits)
               for n, ranks, rw in tensors)
    return Workload(name=name, dims=tuple(dims), bounds=tuple(bounds[d] for d in dims), tensors=ts,
                    einsum=PIR_EINSUM)


def onionpir_first_dimension(db_bytes: int, *, first_dim: int = 256, ell: int = 2, moduli: int = 2,
                             degree: int = 4096) -> Workload:
    """The first (database-wide) dimension of an OnionPIR query (thesis ch. 3.3, ch. 6.1).

    Each plaintext polynomial of the database is decomposed into ``ell`` (K) parts, with ``moduli``
    (C) coefficient moduli and ``degree`` (D) coefficients; the query's first dimension has
    ``first_dim`` (J) entries, each an RGSW-style 2 x 2*ell matrix of polynomials (P = 2). The
    database B then holds J x N x K x C x D words, so ``N = db_bytes / (8 * J * K * C * D)``; a
    64 GiB database gives N = 2048 and 17,179,869,184 multiply-accumulates.
    """
    per_column = WORD_BYTES * first_dim * ell * moduli * degree
    if db_bytes < per_column:
        raise SpecError(f"a {db_bytes} B database is smaller than one column of the first dimension "
                        f"({per_column} B = 8 B x J={first_dim} x K={ell} x C={moduli} x D={degree})",
                        field="db_size", allowed=f"a multiple of {per_column} B")
    if db_bytes % per_column:
        raise SpecError(f"the database size {db_bytes} B is not a whole number of columns of {per_column} B",
                        field="db_size", allowed=f"a multiple of {per_column} B (e.g. 512 MiB, 1 GiB, … 64 GiB)")
    n = db_bytes // per_column
    return pir_workload(f"onionpir-{_size_name(db_bytes)}",
                        {"M": 1, "N": n, "P": 2, "Q": 1, "J": first_dim, "K": ell, "C": moduli, "D": degree})


def _size_name(n: int) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def tensor_elements(w: Workload) -> dict[str, int]:
    return {t.name: w.tensor_elements(t) for t in w.tensors}


__all__ = ["PIR_EINSUM", "pir_workload", "onionpir_first_dimension", "tensor_elements"]
