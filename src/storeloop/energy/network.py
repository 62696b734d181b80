"""Network interface (NIC) energy: active power over line rate, like the Disk plug-in.

Attributes on the arch's NIC level: ``power_W`` (the interface's active power, from its
datasheet) and the level's bandwidth. Without ``power_W`` the NIC is left unpriced (0 pJ), and the
source says so: it is the data source outside the accelerator, as Timeloop leaves an unpriced
backing store.
"""

from __future__ import annotations

from storeloop.energy.contract import Estimate


class NetworkPlugin:
    name = "storeloop-network"
    version = "0.2.0"          # (an estimate's cache key: 0.2 marks an unpriced NIC as meant)
    priority = 0.5
    classes = ("nic", "network")

    def attributes(self, cls: str) -> dict:
        return {"power_W": "the interface's active power (W)", "area_um2": "area per instance (um^2)"}

    def estimate(self, cls: str, a: dict) -> Estimate:
        bits = int(a.get("word_bits", 64)) * int(a.get("block_size", 1))
        rate = a.get("read_bytes_per_s") or a.get("shared_bytes_per_s")
        if "power_W" not in a or not rate:
            return Estimate({"read": 0.0, "write": 0.0}, float(a.get("area_um2", 0.0)), 0.0,
                            "NIC not priced: give power_W (datasheet active power) and its bandwidth", unpriced=True)
        per_access = float(a["power_W"]) / (float(rate) * 8) * bits * 1e12
        return Estimate({"read": per_access, "write": per_access}, float(a.get("area_um2", 0.0)), 0.0,
                        f"NIC: {float(a['power_W']):g} W at {float(rate) * 8 / 1e9:g} Gb/s, per {bits}-bit access "
                        f"(power from the arch file)")
