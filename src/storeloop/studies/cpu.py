"""A measured general-purpose-CPU baseline for the PIR einsum (thesis Fig. 6-8).

The thesis timed OnionPIR's first dimension on a laptop CPU (29 minutes for 64 GB, ch. 6.4). This
module runs the same computation here -- the einsum ``C[m,n,p,q,c,d] = sum_j,k A[m,j,p,k,c,d] *
B[j,n,k,q,c,d] mod q_c``, the database B streamed once, every product reduced modulo its
coefficient modulus -- on this machine's CPU with NumPy (one process), on a database small
enough to fit in memory, and reports its rate in multiply-accumulates per second. The time of a
larger database is its MACs over that rate: the work is a stream over B, linear in its size.

Moduli are below 2**31, so a product fits an unsigned 64-bit word before its reduction (SEAL's
moduli are up to 60 bits and need 128-bit products; the 64-bit path here is the faster one, so the
baseline errs in the CPU's favour).
"""

from __future__ import annotations

import time

import numpy as np

from storeloop.ir import Workload

MODULI = (2147483647, 2147483629)          # two primes below 2**31: one per coefficient modulus (C)


def _operands(workload: Workload, seed: int):
    """Random query A and database B of ``workload`` (entries below their modulus) and the moduli
    q as a (C, 1) column."""
    b = dict(zip(workload.dims, workload.bounds))
    if b["C"] > len(MODULI):
        raise ValueError(f"the CPU baseline has {len(MODULI)} moduli; the workload has C = {b['C']}")
    rng = np.random.default_rng(seed)
    q = np.array(MODULI[:b["C"]], dtype=np.uint64)[:, None]
    A = rng.integers(0, q, size=tuple(b[d] for d in "MJPKCD"), dtype=np.uint64)
    B = rng.integers(0, q, size=tuple(b[d] for d in "JNKQCD"), dtype=np.uint64)
    return A, B, q


def run_pir(workload: Workload, seed: int = 0) -> tuple[np.ndarray, float]:
    """Compute the PIR einsum of ``workload`` (bounds M, N, P, Q, J, K, C, D) on the CPU: the
    response C and the seconds it took (data generation excluded)."""
    return _kernel(*_operands(workload, seed))


def _kernel(A: np.ndarray, B: np.ndarray, q: np.ndarray) -> tuple[np.ndarray, float]:
    """:func:`run_pir` on operands already made: the response and the seconds it took."""
    M, J, P, K, C, D = A.shape
    N, Q = B.shape[1], B.shape[3]
    out = np.zeros((M, N, P, Q, C, D), dtype=np.uint64)
    start = time.perf_counter()
    for j in range(J):
        for k in range(K):
            b_jk = B[j, :, k]                                                  # (N, Q, C, D)
            for m in range(M):
                for p in range(P):
                    prod = (A[m, j, p, k][None, None] * b_jk) % q              # (N, Q, C, D)
                    out[m, :, p] = (out[m, :, p] + prod) % q
    return out, time.perf_counter() - start


def macs_per_second(workload: Workload, repeats: int = 3) -> float:
    """The CPU's rate on ``workload`` (best of ``repeats`` runs on one set of operands: making
    them takes several times longer than a run)."""
    operands = _operands(workload, seed=0)
    best = min(_kernel(*operands)[1] for _ in range(repeats))
    return workload.macs / best


def check(workload: Workload) -> None:
    """The kernel against a plain integer einsum on a tiny case (raises AssertionError)."""
    got, _ = run_pir(workload, seed=0)
    A, B, q = (x.astype(object) for x in _operands(workload, seed=0))
    want = np.einsum("mjpkcd,jnkqcd->mnpqcd", A, B) % q
    assert (got.astype(object) == want).all()
