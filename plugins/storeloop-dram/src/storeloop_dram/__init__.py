"""DRAM energy and area from CACTI's main-memory model (the OnionChopper thesis's Accelergy change).

Accelergy and AccelForge price DRAM with a flat pJ/bit and area 0. This plug-in runs the CACTI 7
bundled with hwcomponents-cacti in main-memory mode ("comm-dram" cells) for one DRAM die and
scales to the level's capacity:

* area = dies x CACTI's die array area, dies = capacity / ``die_bits`` (default 8 Gb);
* energy per bit read = (burst read energy + activate + precharge amortized over a page) / burst
  bits for ``page_policy: open`` (streaming; default), or everything per burst for ``closed``;
  plus CACTI-IO's interface energy (dynamic + termination power over the pins' bit rate) for the
  types CACTI-IO models (DDR3, DDR4, LPDDR2, WideIO);
* per access of the level: that energy times word_bits x block_size.

Other types (LPDDR4, LPDDR5, DDR5, HBM2, GDDR6) are not in CACTI: their energy per bit falls back
to hwcomponents-cacti's referenced table (the same table Accelergy uses) and says so; their area
is still CACTI's comm-dram array for the capacity. ``dram_node`` (default 22 nm, CACTI's smallest
comm-dram node) is the DRAM process, independent of the accelerator's technology.
"""

from __future__ import annotations

import re
import subprocess

from storeloop.energy import Estimate
from storeloop.energy.component_model import component_model

CACTI_IO = ("DDR3", "DDR4", "LPDDR2", "WIDEIO")                # CACTI-IO interface models
TEMPLATE = """\
-size (bytes) {size}
-block size (bytes) {block}
-associativity 1
-read-write port 1
-exclusive read port 0
-exclusive write port 0
-single ended read ports 0
-UCA bank count {banks}
-technology (u) {node}
-page size (bits) {page}
-burst length {burst}
-internal prefetch width 8
-Data array cell type - "comm-dram"
-Data array peripheral type - "itrs-lstp"
-Tag array cell type - "itrs-hp"
-Tag array peripheral type - "itrs-hp"
-output/input bus width {width}
-operating temperature (K) 350
-cache type "main memory"
-tag size (b) "default"
-access mode (normal, sequential, fast) - "normal"
-design objective (weight delay, dynamic power, leakage power, cycle time, area) 0:0:0:100:0
-deviate (delay, dynamic power, leakage power, cycle time, area) 20:100000:100000:100000:1000000
-Optimize ED or ED^2 (ED, ED^2, NONE): "NONE"
-Cache model (NUCA, UCA)  - "UCA"
-Wire signalling (fullswing, lowswing, default) - "Global_10"
-Wire inside mat - "global"
-Wire outside mat - "global"
-Interconnect projection - "conservative"
-Add ECC - "false"
-Print level (DETAILED, CONCISE) - "DETAILED"
-Print input parameters - "false"
-Force cache config - "false"
-Ndwl 1
-Ndbl 1
-Nspd 0
-Ndcm 1
-Ndsam1 0
-Ndsam2 0
-NUCAdesign objective (weight delay, dynamic power, leakage power, cycle time, area) 100:100:0:0:100
-NUCAdeviate (delay, dynamic power, leakage power, cycle time, area) 10:10000:10000:10000:10000
-Core count 8
-Cache level (L2/L3) - "L3"
-NUCA bank count 0
-dram type "{io}"
-iostate "R"
-addr_timing 0.5
-mem_density {density} Gb
-bus_freq {bus_mhz} MHz
-duty_cycle 1.0
-activity_dq 1.0
-activity_ca 1.0
-num_dq {width}
-num_dqs {dqs}
-num_ca 35
-num_clk 2
-num_mem_dq 1
-mem_data_width 8
"""

FIELDS = {"activate": r"Activate Energy \(nJ\):\s*([\d.eE+-]+)", "read": r"Read Energy \(nJ\):\s*([\d.eE+-]+)",
          "write": r"Write Energy \(nJ\):\s*([\d.eE+-]+)", "precharge": r"Precharge Energy \(nJ\):\s*([\d.eE+-]+)",
          "area_mm2": r"Data array: Area \(mm2\):\s*([\d.eE+-]+)", "io_mw": r"IO Dynamic Power \(mW\) = ([\d.eE+-]+)",
          "term_mw": r"IO Termination and Bias Power \(mW\) = ([\d.eE+-]+)",
          "leak_mw": r"Leakage Power Closed Page \(mW\):\s*([\d.eE+-]+)"}


def run_cacti(die_bytes: int, width: int, burst: int, page: int, node_um: float, io: str, bus_mhz: float) -> dict:
    """CACTI main-memory results for one die (CACTI exits abnormally after printing; the numbers
    it printed are used, and their absence is an error)."""
    from storeloop.energy.cacti import ensure_cacti

    binary = ensure_cacti()
    cfg = binary.parent / f"storeloop-dram-{die_bytes}-{width}-{burst}-{page}-{node_um}-{io}-{bus_mhz:g}.cfg"
    cfg.write_text(TEMPLATE.format(size=die_bytes, block=width * burst // 8, banks=8, node=node_um, page=page,
                                   burst=burst, width=width, io=io, density=max(1, die_bytes * 8 // 2**30),
                                   bus_mhz=bus_mhz, dqs=max(2, width // 4)))
    try:
        p = subprocess.run([str(binary), "-infile", cfg.name], cwd=binary.parent, capture_output=True, text=True,
                           timeout=600)
    finally:
        cfg.unlink(missing_ok=True)
    out = {}
    for k, rx in FIELDS.items():
        m = re.search(rx, p.stdout)
        if m:
            out[k] = float(m.group(1))
    missing = {"activate", "read", "write", "precharge", "area_mm2"} - set(out)
    if missing:
        raise ValueError(f"CACTI main-memory model gave no {', '.join(sorted(missing))} for a {die_bytes} B die "
                         f"at {node_um * 1000:g} nm (exit code {p.returncode})")
    return out


class DRAMPlugin:
    name = "storeloop-dram"
    version = "0.1.0"
    priority = 1.0
    classes = ("dram",)

    def choices(self, cls: str) -> dict:
        """DRAM types it prices: CACTI-IO's interfaces and hwcomponents-cacti's tables; page policies."""
        from storeloop.energy.hwc import dram_table_types

        return {"type": tuple(sorted(set(CACTI_IO) | set(dram_table_types()))), "page_policy": ("open", "closed")}

    def attributes(self, cls: str) -> dict:
        """The arch-file attributes it reads (storeloop's registry refuses others, with a did-you-mean)."""
        return {"type": "DDR3/DDR4/LPDDR4/... (choices)", "burst_length": "burst length (default 8)",
                "page_bits": "row buffer bits (default 8192)", "dram_node": "DRAM process (m, default 22e-9)",
                "die_bits": "bits per die (default 8 Gib)", "page_policy": "open or closed",
                "bus_mhz": "interface clock (MHz)"}

    def estimate(self, cls: str, a: dict) -> Estimate:
        kind = str(a.get("type", "DDR4")).upper()
        width = int(a.get("width", 64))
        burst = int(a.get("burst_length", 8))
        page = int(a.get("page_bits", 8192))
        node = float(a.get("dram_node", 22e-9))
        die_bits = int(a.get("die_bits", 8 * 2**30))
        policy = str(a.get("page_policy", "open"))
        if policy not in ("open", "closed"):
            raise ValueError(f"page_policy {policy!r}; allowed: open, closed")
        if not a.get("size_bits"):
            raise ValueError("a DRAM needs a capacity to be priced by CACTI")
        dies = -(-int(a["size_bits"]) // die_bits)
        die_bytes = min(die_bits, int(a["size_bits"])) // 8
        bus_mhz = float(a.get("bus_mhz", 1600 if kind == "DDR4" else 800))
        r = run_cacti(die_bytes, width, burst, page, round(node * 1e6, 4), {"WIDEIO": "WideIO"}.get(kind, kind if kind in CACTI_IO else "DDR4"), bus_mhz)
        burst_bits = width * burst
        overhead = (r["activate"] + r["precharge"]) * (burst_bits / page if policy == "open" else 1.0)
        bits = int(a.get("word_bits", 64)) * int(a.get("block_size", 1))
        area = dies * r["area_mm2"] * 1e6
        where = (f"CACTI 7 main memory (comm-dram, {node * 1e9:g} nm): {dies} x {die_bits / 2**30:g} Gib die(s) of "
                 f"{r['area_mm2']:.1f} mm2; burst of {burst} x {width} bits, {page}-bit page, {policy} page")
        if kind in CACTI_IO and "io_mw" in r:
            io_pj_bit = (r["io_mw"] + r.get("term_mw", 0.0)) * 1e-3 / (width * 2 * bus_mhz * 1e6) * 1e12
            rd = ((r["read"] + overhead) * 1e3 / burst_bits + io_pj_bit) * bits
            wr = ((r["write"] + overhead) * 1e3 / burst_bits + io_pj_bit) * bits
            src = f"{where}; {kind} interface from CACTI-IO at {bus_mhz:g} MHz ({io_pj_bit:.3g} pJ/bit); per {bits}-bit access"
        else:
            import hwcomponents_cacti

            model = getattr(hwcomponents_cacti, kind, None)
            if model is None:
                raise ValueError(f"DRAM type {kind!r} is neither in CACTI ({', '.join(CACTI_IO)}) nor in "
                                 f"hwcomponents-cacti's table")
            m = model()
            per_bit_rd = m.read().energy / int(m.width) * 1e12
            per_bit_wr = m.write().energy / int(m.width) * 1e12
            rd, wr = per_bit_rd * bits, per_bit_wr * bits
            src = (f"{where} (area); energy: CACTI has no {kind} model, so hwcomponents-cacti's {kind} table "
                   f"({per_bit_rd:g} pJ/bit, the table Accelergy uses) -- a fallback, not CACTI; per {bits}-bit access")
        return Estimate({"read": rd, "write": wr}, area, dies * r.get("leak_mw", 0.0) * 1e-3, src)


def _model_attributes(tech_node: float, size: int, width: int = 64, type: str = "DDR4",
                      page_policy: str = "open") -> dict:
    return {"technology": tech_node, "size_bits": size, "width": width, "type": type, "word_bits": width,
            "block_size": 1, "page_policy": page_policy}


CactiDRAMModel = component_model(
    DRAMPlugin(), "dram", ["DRAM", "CactiDRAM"], _model_attributes, ["read", "write"], class_name="CactiDRAMModel",
    doc="hwcomponents model of a DRAM of ``size`` bits priced by CACTI's main-memory model (numbers from "
        ":class:`DRAMPlugin`, per ``width``-bit access); area is no longer 0.")
