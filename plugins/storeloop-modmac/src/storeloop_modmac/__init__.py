"""The OnionChopper modular multiply-accumulate unit (thesis ch. 4.2), priced from its parts.

Datapath (thesis Fig. 4-2, 4-3, 4-4), for w-bit words (w = 64):

1. p = a * b                      one w x w multiplier (2w-bit product)
2. p * m, split (ch. 4.2.1)       four w x w multipliers on the halves of p and m, then
                                  their sum at the right offsets (a 4w-bit adder chain)
3. q * n (2w x w, low 2w bits)    two w x w multipliers and a 2w-bit adder
4. r = p - q*n; r -= n if r >= n  a 2w-bit subtractor, a w-bit comparator and subtractor
5. accumulate mod n (ch. 4.2.2)   a w-bit adder, comparator and subtractor
   refresh (ch. 4.2.3)            refresh bit, c, n and m ride along in shift registers

Pipelining (ch. 4.2.5): every adder, multiplier and comparator is cut into stages of
``fa_per_stage`` full adders (1-bit comparator cells): a linear N-bit adder has N full-adder
stages, a linear N x N multiplier 3N - 4, an N-bit comparator N. The thesis pipelines to single
full adders (153.58 ps in yosys; comparator cell 100.32 ps) and rounds the clock period to 500 ps.
By default this plug-in puts as many full adders in a stage as the arch's clock period allows
(3 at 2 GHz: the fewest stages that meet timing); ``fa_per_stage: 1`` is the thesis's deepest
pipeline. Stage depth is the sum over the critical path of ceil(chain / fa_per_stage).

Area and energy per MAC: the parts from hwcomponents-library (Aladdin, ISCA 2014) at the arch's
technology node, plus one pipeline register bit (AladdinRegister) per live bit per stage, written
once per MAC. The live bits per segment are this plug-in's estimate (operands and partial
products in flight plus the refresh path), listed in ``SEGMENTS``; they are not from the thesis.
"""

from __future__ import annotations

import math

from storeloop.energy import Estimate
from storeloop.energy.component_model import component_model

FA_PS = 153.58           # thesis ch. 4.2.5, yosys
CMP_BIT_PS = 100.32      # thesis ch. 4.2.5, yosys
PJ, UM2 = 1e12, 1e12


def segments(w: int) -> list[tuple[str, int, int]]:
    """(name, critical-path full-adder chain, live bits per stage) along the pipeline."""
    mult = 3 * w - 4
    side = 1 + w + w + 2 * w                       # refresh, c, n, m
    return [
        ("p = a*b", mult, 4 * w + side),
        ("p*m partial products", mult, 4 * 4 * w + 2 * w + side - 2 * w),
        ("p*m sum (>> k)", 4 * w, 8 * w + 2 * w + side - 2 * w),
        ("q*n partial products", mult, 2 * 4 * w + 2 * w + 1 + 2 * w),
        ("q*n sum", 2 * w, 4 * w + 2 * w + 1 + 2 * w),
        ("p - q*n", 2 * w, 4 * w + 1 + 2 * w),
        ("conditional - n", 2 * w, 2 * w + 1 + 2 * w),   # compare (w cells) then subtract (w)
        ("accumulate mod n", 3 * w, 3 * w + w),            # add, compare, subtract; accumulator
    ]


def pipeline(w: int, fa_per_stage: int) -> tuple[int, int]:
    """(pipeline stages, pipeline register bits) of a w-bit unit cut every ``fa_per_stage`` full adders."""
    stages = [(math.ceil(chain / fa_per_stage), bits) for _, chain, bits in segments(w)]
    return sum(n for n, _ in stages), sum(n * bits for n, bits in stages)


class ModMACPlugin:
    name = "storeloop-modmac"
    version = "0.1.0"
    priority = 1.0
    classes = ("modmac",)

    def attributes(self, cls: str) -> dict:
        """The arch-file attributes it reads (storeloop's registry refuses others, with a did-you-mean)."""
        return {"clock_period_ps": "the clock period the pipeline meets (default: the arch's clock)",
                "fa_per_stage": "full adders per pipeline stage (default: the most the clock allows)"}

    def estimate(self, cls: str, a: dict) -> Estimate:
        from hwcomponents_library.library.aladdin import (AladdinAdder, AladdinComparator, AladdinMultiplier,
                                                          AladdinRegister)
        tech = a["technology"]
        w = int(a.get("width", 64))
        period = float(a.get("clock_period_ps") or (1e12 / a["clock_hz"] if a.get("clock_hz") else 500.0))
        g = int(a.get("fa_per_stage", period // FA_PS))      # default: the fewest stages meeting the clock
        if g < 1 or g * FA_PS > period:
            raise ValueError(f"modmac: {g} full adders per stage take {g * FA_PS:.1f} ps, more than the "
                             f"{period:g} ps clock period; allowed: 1 .. {int(period // FA_PS)} per stage")
        depth, reg_bits = pipeline(w, g)
        mult = AladdinMultiplier(tech_node=tech, width_a=w, width_b=w)
        adders = [AladdinAdder(tech_node=tech, width=x) for x in (4 * w, 2 * w, 2 * w, w, w, w)]
        cmps = [AladdinComparator(tech_node=tech, width=w) for _ in range(2)]
        bit = AladdinRegister(tech_node=tech, width=1)
        parts = [mult] * 7 + adders + cmps
        e_logic = sum(p.read().energy for p in parts) * PJ
        e_regs = reg_bits * bit.write().energy * PJ
        area = (sum(p.area for p in parts) + reg_bits * bit.area) * UM2
        leak = sum(p.leak_power for p in parts) + reg_bits * bit.leak_power
        src = (f"OnionChopper Barrett modular MAC (thesis ch. 4.2): {w}-bit, {depth} pipeline stages at "
               f"{g} full adder(s) per stage ({period:g} ps clock), {reg_bits:,} pipeline register bits; "
               f"7 {w}x{w} multipliers, 6 adders, 2 comparators and registers from hwcomponents-library "
               f"Aladdin at {tech * 1e9:g} nm; per MAC {e_logic:.1f} pJ logic + {e_regs:.1f} pJ registers")
        return Estimate({"mac": e_logic + e_regs}, area, leak, src)


def _model_attributes(tech_node: float, width: int = 64, clock_period_ps: float = 500.0,
                      fa_per_stage: int | None = None) -> dict:
    attrs = {"technology": tech_node, "width": width, "clock_period_ps": clock_period_ps}
    return attrs if fa_per_stage is None else {**attrs, "fa_per_stage": fa_per_stage}


def _timing(a: dict) -> dict:
    """One modular multiply-accumulate: pipelined, one per clock period."""
    period = a["clock_period_ps"] * 1e-12
    depth = pipeline(a["width"], a.get("fa_per_stage") or int(a["clock_period_ps"] // FA_PS))[0]
    return {"mac": (depth * period, 1 / period)}


ModMACModel = component_model(
    ModMACPlugin(), "modmac", ["ModMAC", "BarrettModMAC"], _model_attributes, ["mac"], _timing,
    doc="hwcomponents model of the OnionChopper Barrett modular MAC (numbers from :class:`ModMACPlugin`): "
        "``get_models(ModMACModel)`` makes it usable in hwcomponents.")
