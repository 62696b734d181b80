"""Disk (NVMe SSD) energy: per-bit read and write energy = active power / sequential bandwidth.

Attributes (on the arch's Disk level): ``read_power_W``, ``write_power_W``, ``read_bytes_per_s``,
``write_bytes_per_s`` (default: the level's bandwidth), ``area_um2`` (default 0: the drive is
off-chip). Energy per action is per block access (block_size words of word_bits).

Defaults are the OnionChopper thesis's operating point (ch. 5.3.3 and its validation ERT:
2.5 nJ per byte, i.e. 25 W of active power at 10 GB/s of internal bandwidth); the thesis derived
its figure from NVMe sequential read/write power (its references [12] Seagate FireCuda 510
datasheet, 2021, and [16] J. Hicks, "How many watts does an SSD use?", 2022). These defaults are
the thesis's, not re-measured here: give your drive's datasheet power and bandwidth as
attributes to price it.
"""

from __future__ import annotations

from storeloop.energy import Estimate
from storeloop.energy.component_model import component_model

THESIS_POWER_W = 25.0
THESIS_BYTES_PER_S = 10e9


class DiskPlugin:
    name = "storeloop-disk"
    version = "0.1.0"
    priority = 1.0
    classes = ("disk", "ssd", "nvme")

    def attributes(self, cls: str) -> dict:
        """The arch-file attributes it reads (storeloop's registry refuses others, with a did-you-mean)."""
        return {"read_power_W": "active read power (W)", "write_power_W": "active write power (W)",
                "read_bytes_per_s_datasheet": "the read bandwidth the power was measured at (B/s)",
                "write_bytes_per_s_datasheet": "the write bandwidth the power was measured at (B/s)",
                "area_um2": "area (um^2; default 0, off chip)"}

    def estimate(self, cls: str, a: dict) -> Estimate:
        bw = a.get("shared_bytes_per_s") or a.get("read_bytes_per_s") or THESIS_BYTES_PER_S
        rbw = float(a.get("read_bytes_per_s_datasheet", a.get("read_bytes_per_s", bw)))
        wbw = float(a.get("write_bytes_per_s_datasheet", a.get("write_bytes_per_s", bw)))
        rp = float(a.get("read_power_W", THESIS_POWER_W))
        wp = float(a.get("write_power_W", THESIS_POWER_W))
        bits = int(a.get("word_bits", 64)) * int(a.get("block_size", 1))
        read = rp / (rbw * 8) * bits * 1e12
        write = wp / (wbw * 8) * bits * 1e12
        given = "read_power_W" in a or "write_power_W" in a
        src = (f"NVMe SSD: {rp:g} W read / {wp:g} W write at {rbw / 1e9:g} / {wbw / 1e9:g} GB/s -> "
               f"{rp / rbw * 1e9:.4g} / {wp / wbw * 1e9:.4g} nJ/B, per {bits}-bit access; "
               + ("powers from the arch file" if given else
                  "thesis operating point (OnionChopper ch. 5.3.3; NVMe datasheet power, refs [12] [16])"))
        return Estimate({"read": read, "write": write}, float(a.get("area_um2", 0.0)), 0.0, src)


def _model_attributes(tech_node: float = 45e-9, width: int = 64, read_power_W: float = THESIS_POWER_W,
                      write_power_W: float = THESIS_POWER_W, read_bytes_per_s: float = THESIS_BYTES_PER_S,
                      write_bytes_per_s: float = THESIS_BYTES_PER_S) -> dict:
    return {"word_bits": width, "block_size": 1, "read_power_W": read_power_W, "write_power_W": write_power_W,
            "read_bytes_per_s": read_bytes_per_s, "write_bytes_per_s": write_bytes_per_s}


def _timing(a: dict) -> dict:
    """A ``width``-bit access takes its bytes over the drive's bandwidth."""
    return {op: (a["word_bits"] / 8 / a[f"{op}_bytes_per_s"], a[f"{op}_bytes_per_s"] / (a["word_bits"] / 8))
            for op in ("read", "write")}


DiskModel = component_model(
    DiskPlugin(), "disk", ["Disk", "SSD", "NVMe"], _model_attributes, ["read", "write"], _timing,
    doc="hwcomponents model of an NVMe SSD read/written in ``width``-bit accesses (numbers from "
        ":class:`DiskPlugin`); ``get_models(DiskModel)`` makes it usable in hwcomponents.")
