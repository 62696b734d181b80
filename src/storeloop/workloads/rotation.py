"""The rotation-perturbation pipeline of privacy-offloading smart storage (seed 000, SYSTOR '21).

Columns of a table are perturbed in triplets: every row's 3-vector of doubles is multiplied by a
3x3 rotation matrix per dataset (paper ch. 3, 4.2)::

    Y[t,g,i] = R[g,i,j] * X[t,g,j]

t runs over rows, g over column triplets, i/j over the 3 coordinates. The pipeline's
column->row and row->column stages transpose pages of columnar data (512 B .. KB pages, ch. 4.2)
so the rotation sees rows; in storeloop they are the page buffer level of ``arch/rotation-nic.yaml``
that X enters and Y leaves by, page by page. The source and sink is the network (NIC) at line rate.

Paper figures: at the 156.25 MHz network clock, 10 Gbps needs 8 B/cycle; one rotation core outputs
a 3-vector of doubles every 18 cycles (1.33 B/cycle), so 6 cores reach line rate (ch. 4.2), and
25 / 40 Gbps need more cores (ch. 5.1, Fig. 10a). How many cores and decompressors a line rate
takes, and whether they fit the FPGA, is the system layer's question: ``systems/rotation.yaml``
(``storeloop system systems/rotation.yaml --set target=25Gb/s``).
"""

from __future__ import annotations

from storeloop.errors import SpecError
from storeloop.ir import Workload
from storeloop.workloads.pir import einsum_workload

ROTATION_EINSUM = "Y[t,g,i] = R[g,i,j] * X[t,g,j]"


def rotation(rows: int = 30720, groups: int = 1) -> list[Workload]:
    """One batch of ``rows`` rows x ``groups`` column triplets, doubles (64 bit).

    The default 30,720 rows (= 2^11 x 3 x 5, 60 pages of 4 KiB per column) divide evenly over 6,
    15 and 24 cores, so line rate is not lost to an uneven split of rows over cores.
    """
    if rows < 1 or groups < 1:
        raise SpecError(f"rows={rows}, groups={groups}: both must be at least 1", field="rows",
                        allowed="positive integers")
    return [einsum_workload(f"rotation-{rows}x{groups}", ROTATION_EINSUM,
                            {"T": rows, "G": groups, "I": 3, "J": 3}, bits=64)]


SCHEMES = {"rotation": rotation}
