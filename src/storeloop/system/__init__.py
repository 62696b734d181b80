"""Whole systems: devices (CPUs, memories, links, SSDs, FPGAs, switches), stages placed on them,
flows between them, and the published claims they are checked against.

``load_system(path, overrides)`` reads a ``system:`` YAML file (:mod:`storeloop.formats.system`);
``evaluate_system(system)`` finds the binding resource, the throughput, the instances a target
rate needs and whether they fit (:mod:`storeloop.system.analysis`). An einsum stage's per-instance
rate and energy come from storeloop's mapper and model, never from the system file.
"""

from storeloop.system.analysis import SystemResult, evaluate_system
from storeloop.formats.system import load_system
from storeloop.ir.system import System

__all__ = ["System", "SystemResult", "load_system", "evaluate_system"]
