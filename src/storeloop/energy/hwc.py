"""storeloop's adapter to the hwcomponents models (CACTI SRAM, Aladdin-based library components)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile

from storeloop.energy.cacti import ensure_cacti
from storeloop.energy.contract import Between, Estimate

PJ, UM2 = 1e12, 1e12          # J -> pJ, m^2 -> um^2


@contextlib.contextmanager
def cacti_scratch():
    """CACTI's input and output files in a private temporary folder for the duration of one
    estimate, not in the installed hwcomponents_cacti package (shared by every worker of a sweep,
    and possibly read-only)."""
    from hwcomponents_cacti import hwcomponents_cacti as hc

    folder = tempfile.mkdtemp(prefix="storeloop-cacti-")
    saved = hc._clean_tmp_dir
    hc._clean_tmp_dir = lambda: folder
    try:
        yield folder
    finally:
        hc._clean_tmp_dir = saved
        shutil.rmtree(folder, ignore_errors=True)


def dram_table_types() -> tuple[str, ...]:
    """The DRAM types hwcomponents-cacti has an energy table for (its DRAM model classes)."""
    import inspect

    import hwcomponents_cacti

    return tuple(sorted(n for n, c in vars(hwcomponents_cacti).items()
                        if inspect.isclass(c) and any(b.__name__ == "_DRAM" for b in c.__mro__[1:])))


class HwComponentsPlugin:
    name = "hwcomponents"
    priority = 0.5
    classes = ("sram", "regfile", "intmac", "adder", "multiplier", "register", "dram")

    def choices(self, cls: str) -> dict:
        """Attribute values it prices, where they form a closed set (see the registry's contract)."""
        if cls == "sram":      # CACTI fails on arrays of 2 GiB and more (its sizes are 32-bit ints)

            return {"size_bits": Between(1, 2**33, "bits: CACTI models SRAMs of up to 1 GiB")}
        return {"type": dram_table_types()} if cls == "dram" else {}

    def attributes(self, cls: str) -> dict:
        """The arch-file attributes it reads beyond storeloop's own (see the registry's contract)."""
        return {"sram": {"n_rdwr_ports": "CACTI read/write ports", "n_banks": "CACTI banks"},
                "dram": {"type": "the DRAM's energy table"}}.get(cls, {})

    def estimate(self, cls: str, a: dict) -> Estimate:
        tech = a["technology"]
        if cls == "sram":
            from hwcomponents_cacti import SRAM

            ensure_cacti()
            width = int(a["width"])
            size = int(a.get("size_bits") or width * int(a["depth"]))
            with cacti_scratch():
                m = SRAM(tech_node=tech, width=width, size=size, n_rw_ports=int(a.get("n_rdwr_ports", 1)),
                         n_banks=int(a.get("n_banks", 1)))
                read, write = m.read().energy, m.write().energy
            return Estimate({"read": read * PJ, "write": write * PJ}, m.area * UM2,
                            m.leak_power, f"hwcomponents-cacti SRAM (CACTI 7) {size} bits x {width}-bit port at "
                                          f"{tech * 1e9:g} nm, per {width}-bit access")
        if cls == "dram":
            import hwcomponents_cacti

            kind = str(a.get("type", "LPDDR4")).upper()
            if kind not in dram_table_types():
                raise ValueError(f"DRAM type {kind!r} unknown to hwcomponents-cacti")
            model = getattr(hwcomponents_cacti, kind)
            m = model()                    # its default bus; energy per bit does not depend on it
            bus = int(m.width)
            bits = int(a["word_bits"]) * int(a["block_size"])
            per_bit = m.read().energy / bus
            return Estimate({"read": per_bit * bits * PJ, "write": m.write().energy / bus * bits * PJ}, 0.0, 0.0,
                            f"hwcomponents-cacti {kind} table: {per_bit * PJ:g} pJ/bit, area 0 (flat per-bit "
                            f"model; the storeloop-dram plug-in prices DRAM with CACTI's main-memory model when installed)")
        from hwcomponents_library.library.aladdin import (AladdinAdder, AladdinIntMAC, AladdinMultiplier,
                                                          AladdinRegister)
        width = int(a.get("width", 64))
        if cls == "regfile":
            depth = int(a["size_bits"] // width if a.get("size_bits") else a["depth"])   # capacity wins
            r = AladdinRegister(tech_node=tech, width=width)
            return Estimate({"read": r.read().energy * PJ, "write": r.write().energy * PJ}, r.area * UM2 * depth,
                            r.leak_power * depth, f"hwcomponents-library AladdinRegister {width} bits x {depth} "
                                                  f"entries at {tech * 1e9:g} nm (Aladdin, ISCA 2014)")
        if cls in ("intmac", "adder", "multiplier"):
            m = {"intmac": lambda: AladdinIntMAC(tech_node=tech, adder_width=width, multiplier_width=width),
                 "adder": lambda: AladdinAdder(tech_node=tech, width=width),
                 "multiplier": lambda: AladdinMultiplier(tech_node=tech, width_a=width, width_b=width)}[cls]()
            e = m.read().energy * PJ
            return Estimate({"mac" if cls == "intmac" else "compute": e}, m.area * UM2, m.leak_power,
                            f"hwcomponents-library Aladdin {cls} {width} bits at {tech * 1e9:g} nm (Aladdin, ISCA 2014)")
        r = AladdinRegister(tech_node=tech, width=width)
        return Estimate({"read": r.read().energy * PJ, "write": r.write().energy * PJ}, r.area * UM2, r.leak_power,
                        f"hwcomponents-library AladdinRegister {width} bits at {tech * 1e9:g} nm")
