"""Timeloop v0.3 (and v0.4) files: read into storeloop's typed objects (:mod:`.read`: arch and problem,
:mod:`.mapping`, :mod:`.energy`: ERT and ART), written back
(:mod:`.write`) so a real Timeloop can cross-check any result, its mapper config (:mod:`.mapper_config`),
the shapes of its files (:mod:`.schema`) and what timeloop-model printed (:mod:`.stats`)."""

from storeloop.formats.timeloop.energy import check_table, energy_table_from_timeloop
from storeloop.formats.timeloop.mapper_config import mapper_options_from_timeloop
from storeloop.formats.timeloop.mapping import mapping_from_timeloop
from storeloop.formats.timeloop.read import (arch_from_timeloop, is_timeloop_arch, is_timeloop_mapping,
                                             is_timeloop_problem, workload_from_timeloop)
from storeloop.formats.timeloop.stats import parse_stats
from storeloop.formats.timeloop.write import (arch_to_timeloop, component_paths, energy_to_timeloop,
                                              mapping_to_timeloop, workload_to_timeloop)

__all__ = ["arch_from_timeloop", "check_table", "energy_table_from_timeloop", "is_timeloop_arch", "is_timeloop_mapping",
           "is_timeloop_problem", "mapping_from_timeloop", "workload_from_timeloop", "arch_to_timeloop",
           "component_paths", "energy_to_timeloop", "mapping_to_timeloop", "workload_to_timeloop",
           "mapper_options_from_timeloop", "parse_stats"]
