"""The process resources the column-wise models use: where their short-lived NumPy arrays come
from (:func:`tune_malloc`) and how many BLAS threads their matrix products get
(:func:`single_blas_thread`)."""

from __future__ import annotations

import contextlib
import functools

_malloc_tuned = False


def tune_malloc() -> None:
    """Keep the column-wise models' short-lived NumPy arrays in the heap (glibc only; elsewhere a no-op).

    The batch model (:mod:`storeloop.model.batch`) allocates and frees arrays of a few hundred KiB per
    call, a branch and bound expansion (:mod:`storeloop.mapper.tree`) a few hundred KiB to a few MiB
    per node. glibc's defaults serve those from fresh ``mmap`` pages or trim the heap after each
    free, so the time goes to the kernel faulting pages in: a fifth of a proof (384x384x96 matmul on
    the peers' arch: 44.6 s with 8.9 s system time; 32.6 s with 0.6 s after this), and about 40 % of
    the batch model's time (``bench/model_rate.py``). Raising the mmap threshold to glibc's maximum
    (32 MiB) and the trim threshold to 1 GiB keeps freed memory for reuse; the peak resident size
    is unchanged, it is just not returned while the process runs."""
    global _malloc_tuned
    if _malloc_tuned:
        return
    _malloc_tuned = True
    try:
        import ctypes
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError, TypeError):      # no C library to load, or no mallopt in it
        return
    mallopt(-3, 32 << 20)    # M_MMAP_THRESHOLD
    mallopt(-1, 1 << 30)     # M_TRIM_THRESHOLD


_blas = None


@contextlib.contextmanager
def one_blas_thread():
    """BLAS (NumPy's matrix products) on one thread inside the block, as it was outside after it.

    The branch and bound's matrix products (:mod:`storeloop.mapper.tree`) are a few hundred rows
    each: OpenBLAS's second thread gives them no wall time (a 100 M-candidate SSD point: 24.8 s
    and 24.7 s of CPU on one thread, 25.5 s and 45.7 s of CPU on two; a matmul proof 5.3 s against
    5.4 s) and takes the core a second sweep worker or search process needs."""
    global _blas
    if _blas is None:
        from threadpoolctl import ThreadpoolController
        _blas = ThreadpoolController()
    with _blas.limit(limits=1, user_api="blas"):
        yield


def single_blas_thread(fn):
    """``fn`` run inside :func:`one_blas_thread`."""
    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with one_blas_thread():
            return fn(*args, **kwargs)
    return wrapped
