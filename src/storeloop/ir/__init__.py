"""The frozen objects the engines read: an architecture, a workload, a mapping, an energy table.

Loaders (:mod:`storeloop.formats`: storeloop YAML, Timeloop v0.3/v0.4 YAML) and the workload
generators build these; the model, the mapper, the sweeps and the system layer only ever read them.
"""

from storeloop.ir.arch import (OFF_CHIP, Arch, ComputeLevel, Placement, SourcedEntry, StorageLevel, TimeloopV04,
                               default_placement)
from storeloop.ir.energy import ActionCosts, EnergyTable
from storeloop.ir.mapping import LevelMapping, Loop, Mapping
from storeloop.ir.workload import Rank, Tensor, Workload, plain, rank_label

__all__ = ["OFF_CHIP", "Arch", "ComputeLevel", "Placement", "SourcedEntry", "StorageLevel", "TimeloopV04",
           "default_placement", "ActionCosts", "EnergyTable", "LevelMapping", "Loop", "Mapping", "Rank", "Tensor",
           "Workload", "plain", "rank_label"]
