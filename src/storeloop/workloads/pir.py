"""PIR workloads by database size (OnionChopper thesis, ch. 3.3 and Table 3.2).

All PIR schemes here map onto one 8-rank einsum (thesis ch. 3.3)::

    C[m,n,p,q,c,d] = A[m,j,p,k,c,d] * B[j,n,k,q,c,d]

A is the query (ciphertexts), B the database (plaintexts), C the response. Elements are 64-bit
words (one NTT coefficient modulo one coefficient modulus).
"""

from __future__ import annotations

import math

from storeloop.errors import SpecError
from storeloop.formats.einsum import parse_einsum
from storeloop.ir import Tensor, Workload
from storeloop.ir.check import ops_problem

PIR_EINSUM = "C[m,n,p,q,c,d] = A[m,j,p,k,c,d] * B[j,n,k,q,c,d]"
WORD_BYTES = 8


def einsum_workload(name: str, einsum: str, bounds: dict[str, int], bits: int = 64) -> Workload:
    dims, tensors = parse_einsum(einsum)
    problem = ops_problem([bounds[d] for d in dims])
    if problem:
        raise SpecError(f"{name}: {problem}", field="--param", allowed="smaller parameters")
    ts = tuple(Tensor(n, tuple(tuple((dims.index(v.upper()), c) for v, c in rank) for rank in ranks), rw, bits)
               for n, ranks, rw in tensors)
    return Workload(name=name, dims=tuple(dims), bounds=tuple(bounds[d] for d in dims), tensors=ts, einsum=einsum)


def pir_workload(name: str, bounds: dict[str, int], bits: int = 64) -> Workload:
    return einsum_workload(name, PIR_EINSUM, bounds, bits)


def onionpir_first_dimension(db_bytes: int, *, first_dim: int = 256, ell: int = 2, moduli: int = 2,
                             degree: int = 4096, batch: int = 1) -> Workload:
    """The first (database-wide) dimension of an OnionPIR query (thesis ch. 3.3, ch. 6.1).

    Each plaintext polynomial of the database is decomposed into ``ell`` (K) parts, with ``moduli``
    (C) coefficient moduli and ``degree`` (D) coefficients; the query's first dimension has
    ``first_dim`` (J) entries, each an RGSW-style 2 x 2*ell matrix of polynomials (P = 2). The
    database B then holds J x N x K x C x D words, so ``N = db_bytes / (8 * J * K * C * D)``; a
    64 GiB database gives N = 2048 and 17,179,869,184 multiply-accumulates. ``batch`` queries
    share one pass over the database: M = batch (each query its own A and C, B read once).
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
    return pir_workload(f"onionpir-{_size_name(db_bytes)}{_batched(batch)}",
                        {"M": batch, "N": n, "P": 2, "Q": 1, "J": first_dim, "K": ell, "C": moduli, "D": degree})


def onionpir(db_bytes: int, *, first_dim: int = 256, later_dim: int = 4, ell: int = 5, moduli: int = 2,
             degree: int = 4096, batch: int = 1) -> list[Workload]:
    """Every external-product pass of one OnionPIR query (thesis ch. 2.1, 3.3; OnionPIR ref. code).

    ``[0]`` is the first dimension (:func:`onionpir_first_dimension`): it leaves N BFV ciphertexts.
    Each later dimension of size ``later_dim`` (4 in the reference implementation) folds groups of
    ``later_dim`` ciphertexts with an RGSW query entry (a 2*ell x 2 matrix of polynomials) by the
    external product: A = RGSW query (M=1, J=later_dim, P=2, K=2*ell), B = the ciphertexts
    decomposed base B into 2*ell polynomials (J=later_dim, N=n/later_dim, K=2*ell, Q=1). When N is
    not a power of ``later_dim`` the last dimension is the remaining factor. ``ell`` is the RGSW
    decomposition length; the thesis leaves it open, 5 is an assumption here (change it with
    ``--param ell=``). MACs of a later dimension: n * 2 * 2*ell * C * D.

    ``batch`` queries share the first dimension's pass over the database (M = batch). Later
    dimensions work on each query's own ciphertexts, so nothing is shared there: they are generated
    once per query (Q = batch: B and C per query, the RGSW entry A per query too, which this einsum
    cannot index, so A is over-shared there; its words are a small part of that pass).
    """
    first = onionpir_first_dimension(db_bytes, first_dim=first_dim, moduli=moduli, degree=degree, batch=batch)
    out = [first]
    n = first.bounds_dict()["N"]
    step = 1
    while n > 1:
        if n % later_dim == 0:
            size = later_dim
        elif n < later_dim:
            size = n
        else:
            raise SpecError(f"{n} intermediate ciphertexts cannot be folded in dimensions of {later_dim}",
                            field="later_dim", allowed=f"a first dimension that leaves {later_dim}^k x r "
                            f"ciphertexts (r < {later_dim})")
        n //= size
        step += 1
        out.append(pir_workload(f"{first.name}-dim{step}",
                                {"M": 1, "N": n, "P": 2, "Q": batch, "J": size, "K": 2 * ell, "C": moduli,
                                 "D": degree}))
    return out


def onionpir_query(db_bytes: int, *, first_dim: int = 256, later_dim: int = 4, ell: int = 5, moduli: int = 2,
                   degree: int = 4096, batch: int = 1) -> dict:
    """One OnionPIR query as a query document (:mod:`storeloop.formats.query`): the passes of
    :func:`onionpir`, each reading the ciphertexts the one before wrote, decomposed into ``ell``
    digits per polynomial (2 polynomials become 2*ell: ``decomposed: ell``). The database sits at
    the arch's first level; each pass's query entry is delivered where the pass runs."""
    passes = onionpir(db_bytes, first_dim=first_dim, later_dim=later_dim, ell=ell, moduli=moduli, degree=degree,
                      batch=batch)
    return _query_doc(passes, ell)


def _query_doc(passes: list[Workload], decomposed: int) -> dict:
    """Passes as a query document: the first over the database, each later one reading the
    ciphertexts the one before wrote, ``decomposed`` words per word written."""
    einsums = []
    for i, w in enumerate(passes, 1):
        reads = "database" if i == 1 else {"tensor": f"ciphertexts{i - 1}", "decomposed": decomposed}
        einsums.append({"name": w.name, "einsum": w.einsum, "bounds": w.bounds_dict(), "bits": 64,
                        "tensors": {"A": f"query{i}", "B": reads, "C": f"ciphertexts{i}"}})
    return {"query": {"name": passes[0].name + "-query",
                      "inputs": {"database": "top", **{f"query{i}": "any" for i in range(1, len(passes) + 1)}},
                      "einsums": einsums}}


def sealpir_query(db_bytes: int, *, expansion: int = 10, moduli: int = 2, degree: int = 4096, batch: int = 1) -> dict:
    """One SealPIR query (d = 2) as a query document: the first dimension (:func:`sealpir`) leaves N
    ciphertexts; SealPIR then splits each into F = ``expansion`` plaintexts (thesis ch. 2.1.3, 3.4.1:
    "expands each ciphertext in the resulting vector into F ciphertexts, and treats them as
    plaintexts for the next round of multiplication"; the response is F^(d-1) ciphertexts) and the
    second dimension multiplies them with the second query vector of N ciphertexts: J = N, N = F,
    P = 2, K = 1 (no decomposition). The thesis gives neither d nor F: d = 2 is SealPIR's usual
    choice and F = 10 (2 log q / log t for a 60-bit modulus and 12-bit plaintexts) an assumption
    (``--param expansion=``). The split itself is not priced (as OnionPIR's decomposition is not).
    ``batch`` queries share the first pass; the second works on each query's own ciphertexts (Q)."""
    if expansion < 2 or expansion % 2:
        raise SpecError(f"expansion {expansion}: a ciphertext of 2 polynomials splits into an even number of "
                        "plaintexts", field="expansion", allowed="an even number >= 2")
    first = sealpir(db_bytes, moduli=moduli, degree=degree, batch=batch)[0]
    n = first.bounds_dict()["N"]
    second = pir_workload(f"{first.name}-dim2", {"M": 1, "N": expansion, "P": 2, "Q": batch, "J": n, "K": 1,
                                                 "C": moduli, "D": degree})
    return _query_doc([first, second], expansion // 2)


def single_pass_query(scheme, db_bytes: int, **params) -> dict:
    """A scheme whose server answers with one einsum as a query document of that one pass:
    SimplePIR (its online answer is the matrix-vector product; the hint D x A is computed once,
    offline: thesis ch. 2.1, 3.4.3) and FastPIR (its pass over the database, after which it rotates
    and adds the per-column results into one ciphertext, thesis ch. 3.4.4: rotations are not an
    einsum of this form and are not priced)."""
    return _query_doc(scheme(db_bytes, **params), 1)


def _near_square(n: int) -> tuple[int, int]:
    """(small, large) with small * large >= n: the divisor pair of n closest to a square, or
    ceil(sqrt(n)) x ceil(n / ceil(sqrt(n))) with padding when n has no divisor within 2x of sqrt(n)."""
    root = math.isqrt(n)
    for a in range(root, 0, -1):
        if n % a == 0:
            if 2 * a >= root:
                return a, n // a
            break
    a = root if root * root == n else root + 1
    return a, -(-n // a)


def _check_db(db_bytes: int, unit: int, what: str) -> int:
    if db_bytes < unit:
        raise SpecError(f"a {db_bytes} B database is smaller than one {what} ({unit} B)",
                        field="db_size", allowed=f"at least {unit} B, a multiple of it")
    if db_bytes % unit:
        raise SpecError(f"the database size {db_bytes} B is not a whole number of {what}s of {unit} B",
                        field="db_size", allowed=f"a multiple of {unit} B")
    return db_bytes // unit


def sealpir(db_bytes: int, *, moduli: int = 2, degree: int = 4096, batch: int = 1) -> list[Workload]:
    """SealPIR's first dimension (thesis Table 3.2, ch. 3.4.1): M=1, P=2, Q=1, K=1, C=2, D=4096.

    The database holds ``db_bytes / (8 * C * D)`` plaintexts (in NTT form, one 64-bit word per
    coefficient and modulus) arranged as a J x N matrix as close to sqrt(records) x sqrt(records) as
    a divisor allows (padded with zero plaintexts otherwise, as SealPIR does); the query has J
    ciphertexts. Only this database-wide pass is generated (later dimensions work on N ciphertexts).
    ``batch`` queries share the pass: M = batch.
    """
    records = _check_db(db_bytes, WORD_BYTES * moduli * degree, "plaintext")
    j, n = _near_square(records)
    return [pir_workload(f"sealpir-{_size_name(db_bytes)}{_batched(batch)}",
                         {"M": batch, "N": n, "P": 2, "Q": 1, "J": j, "K": 1, "C": moduli, "D": degree})]


def simplepir(db_bytes: int, *, batch: int = 1) -> list[Workload]:
    """SimplePIR's answer (thesis Table 3.2, ch. 3.4.3): a matrix-vector product, D = C = 1.

    The database is the matrix A (M rows x J columns, one 64-bit word per entry: SimplePIR's
    small-modulus entries packed into the arch's words), the query the vector B (J x N=1). M x J is
    as close to sqrt(records) x sqrt(records) as a divisor allows (padded otherwise); M >= J.
    Here M counts the database's rows, so ``batch`` queries are N = batch query vectors (a
    matrix-matrix product).
    """
    records = _check_db(db_bytes, WORD_BYTES, "64-bit word")
    j, m = _near_square(records)
    return [pir_workload(f"simplepir-{_size_name(db_bytes)}{_batched(batch)}",
                         {"M": m, "N": batch, "P": 1, "Q": 1, "J": j, "K": 1, "C": 1, "D": 1})]


def fastpir(db_bytes: int, *, record_bytes: int = 256, slot_bits: int = 16, moduli: int = 2,
            degree: int = 4096, batch: int = 1) -> list[Workload]:
    """FastPIR's pass over the database (thesis Table 3.2, ch. 3.4.4): M=1, P=2, Q=1, K=1.

    Each record is split over ``columns = record_bytes * 8 / slot_bits`` columns (one plaintext slot
    of ``slot_bits`` bits each); a column packs ``degree`` records per plaintext, so the database
    holds N = columns x J = plaintexts per column plaintexts, each stored in NTT form as C x D
    64-bit words. The defaults (256 B records, 16-bit slots: 128 columns) are assumptions, not
    values from the thesis. ``batch`` queries share the pass: M = batch.
    """
    if (record_bytes * 8) % slot_bits:
        raise SpecError(f"a {record_bytes} B record does not split into {slot_bits}-bit slots",
                        field="record_bytes", allowed=f"a multiple of {slot_bits // 8 or 1} B")
    columns = record_bytes * 8 // slot_bits
    per_column = _check_db(db_bytes, WORD_BYTES * moduli * degree * columns, f"row of {columns} plaintexts")
    return [pir_workload(f"fastpir-{_size_name(db_bytes)}{_batched(batch)}",
                         {"M": batch, "N": columns, "P": 2, "Q": 1, "J": per_column, "K": 1, "C": moduli, "D": degree})]


def _batched(batch: int) -> str:
    return f"-batch{batch}" if batch > 1 else ""


def _size_name(n: int) -> str:
    for unit, size in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n % size == 0:
            return f"{n // size}{unit}"
    return f"{n}B"


def tensor_elements(w: Workload) -> dict[str, int]:
    return {t.name: w.tensor_elements(t) for t in w.tensors}


SCHEMES = {"onionpir": onionpir, "sealpir": sealpir, "simplepir": simplepir, "fastpir": fastpir}
# each scheme's whole query (storeloop workload SCHEME --query)
QUERIES = {"onionpir": onionpir_query, "sealpir": sealpir_query,
           "simplepir": lambda db_bytes, *, batch=1: single_pass_query(simplepir, db_bytes, batch=batch),
           "fastpir": lambda db_bytes, *, record_bytes=256, slot_bits=16, moduli=2, degree=4096, batch=1:
           single_pass_query(fastpir, db_bytes, record_bytes=record_bytes, slot_bits=slot_bits, moduli=moduli,
                             degree=degree, batch=batch)}

__all__ = ["PIR_EINSUM", "SCHEMES", "einsum_workload", "pir_workload", "onionpir", "onionpir_first_dimension",
           "onionpir_query", "sealpir",
           "simplepir", "fastpir", "tensor_elements", "QUERIES", "sealpir_query", "single_pass_query"]
