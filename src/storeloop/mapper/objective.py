"""What the mapper minimizes. Lower bounds of cycles and energy bound every objective below."""

from __future__ import annotations

import numpy as np

from storeloop.errors import SpecError

NAMES = {"delay,energy": "lexicographic: fewest cycles, then least energy (the thesis's criterion)",
         "delay": "fewest cycles", "energy": "least energy", "edp": "energy x delay",
         "area-energy": "area x energy"}


def arch_area_um2(arch, energy) -> float:
    """The area every instance of ``arch``'s levels and compute units takes under ``energy`` (µm²),
    the area the area-energy objective weighs."""
    return sum(energy.storage[lvl.name].area_um2 * lvl.instances for lvl in arch.levels) \
        + energy.compute.area_um2 * arch.compute.instances


class Objective:
    def __init__(self, name: str, area_um2: float = 1.0):
        name = name.replace(" ", "")
        if name not in NAMES:
            raise SpecError(f"unknown objective {name!r}", field="--objective",
                            allowed=", ".join(NAMES))
        self.name, self.area = name, area_um2
        self.lexicographic = name == "delay,energy"

    def score(self, cycles, energy):
        """One number per candidate (the lexicographic objective compares (cycles, energy))."""
        c = np.asarray(cycles, dtype=np.float64)
        e = np.asarray(energy, dtype=np.float64)
        if self.name in ("delay", "delay,energy"):
            return c
        return c * e if self.name == "edp" else e if self.name == "energy" else self.area * e

    def value(self, cycles: int, energy: float) -> float:
        return float(self.score(cycles, energy))

    def argbest(self, cycles, energy) -> int:
        """Index of the best candidate; ties go to the first."""
        if self.lexicographic:
            return int(np.lexsort((np.arange(len(cycles)), energy, cycles))[0])
        return int(np.argmin(self.score(cycles, energy)))

    def order(self, cycles, energy):
        """Indices from best to worst; ties keep the given order."""
        if self.lexicographic:
            return np.lexsort((np.arange(len(cycles)), energy, cycles))
        return np.argsort(self.score(cycles, energy), kind="stable")

    def better(self, cycles, energy, best: tuple) -> bool:
        """Strictly better than ``best`` = (cycles, energy)."""
        if self.lexicographic:
            return (cycles, energy) < best
        return self.score(cycles, energy) < self.score(*best)

    def proven(self, cycles: int, energy: float, cycles_lb: float, energy_lb: float, gap: float) -> str | None:
        """'optimal' or 'energy-gap' when (cycles, energy) needs no more search: its cycles equal
        their lower bound (for cycle-first objectives) and its objective is within ``gap``
        (relative) of the objective of the lower bounds. None otherwise."""
        if self.name in ("delay", "delay,energy") and cycles > cycles_lb:
            return None
        if self.name == "delay":
            return "optimal"
        value, bound = (energy, energy_lb) if self.lexicographic else \
            (self.value(cycles, energy), self.value(cycles_lb, energy_lb))
        if value <= bound:
            return "optimal"
        return "energy-gap" if value <= bound * (1 + gap) else None

    def dominated(self, clb, elb, best: tuple):
        """True where lower bounds (clb, elb) show no candidate can be strictly better than best."""
        bc, be = best
        if self.lexicographic:
            return (clb > bc) | ((clb >= bc) & (elb >= be))
        return self.score(clb, elb) >= self.score(bc, be)
