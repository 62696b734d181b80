"""An energy and area table: per level, what each action costs and what one instance takes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping as MappingT


@dataclass(frozen=True)
class ActionCosts:
    """Per-action energy (pJ) and per-instance area (um^2) of one component, with its source."""

    read_pJ: float = 0.0
    write_pJ: float = 0.0
    area_um2: float = 0.0
    source: str = "unpriced"


@dataclass(frozen=True)
class EnergyTable:
    """Per-action costs for the storage levels (by name) and the compute unit."""

    storage: MappingT[str, ActionCosts]
    compute: ActionCosts
    source: str = ""
