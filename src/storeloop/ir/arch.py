"""An architecture: storage levels from the top (Disk, DRAM) down, then the compute level."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, Mapping as MappingT

OFF_CHIP = frozenset({"dram", "disk", "ssd", "nvme", "nic", "network"})
Placement = Literal["on_chip", "off_chip"]


def default_placement(cls: str) -> Placement:
    return "off_chip" if cls.lower() in OFF_CHIP else "on_chip"


@dataclass(frozen=True)
class StorageLevel:
    """One storage level. Bandwidths are in words/cycle per instance; None means unlimited."""

    name: str
    cls: str
    instances: int = 1
    mesh_x: int | None = None          # extent along X of all instances (Timeloop meshX)
    size_words: int | None = None      # None: unbounded
    word_bits: int = 64
    block_size: int = 1
    read_bandwidth: float | None = None
    write_bandwidth: float | None = None
    shared_bandwidth: float | None = None
    page_bytes: int | None = None      # access granularity: a transfer pays whole pages (None: per word)
    cluster_size: int = 1              # instances sharing one wide access (Timeloop's cluster-size)
    attributes: MappingT[str, object] = field(default_factory=dict)
    # where the level was written (file, line, field path), for errors found after loading
    where: tuple | None = field(default=None, compare=False, repr=False)
    placement: Placement | None = None  # None: by class (default_placement)
    # an SSD behind the level (storeloop.model.ssd.SSD): its cycles and energy come from the SSD
    # model and the access pattern of each tile (storeloop.model.disk); shared_bandwidth then holds
    # the SSD's peak (the flat stand-in the mapper bounds with)
    ssd: object | None = None
    # each tensor's rank order in this level's storage, outermost first (rank labels: 'd', 'p+r');
    # a tensor not named is stored in the order the workload declares (storage_order)
    layout: MappingT[str, tuple[str, ...]] = field(default_factory=dict)
    # 'double': a second copy fills while the first is used (priced: twice the area); 'single': a
    # fill waits for the use of the tile before it (serialized in the cycles); None: fills overlap
    # use at no cost, Timeloop's model
    buffering: str | None = None
    layout_where: tuple | None = field(default=None, compare=False, repr=False)   # (file, line, path) of layout:

    @property
    def mesh_x_or_default(self) -> int:
        return self.mesh_x if self.mesh_x is not None else self.instances

    @property
    def off_chip(self) -> bool:
        return (self.placement or default_placement(self.cls)) == "off_chip"


@dataclass(frozen=True)
class ComputeLevel:
    name: str
    cls: str
    instances: int = 1
    mesh_x: int | None = None
    word_bits: int = 64
    cycles_per_op: int = 1             # initiation interval; Timeloop assumes 1
    attributes: MappingT[str, object] = field(default_factory=dict)
    where: tuple | None = field(default=None, compare=False, repr=False)   # (file, line, field path)

    @property
    def mesh_x_or_default(self) -> int:
        return self.mesh_x if self.mesh_x is not None else self.instances


@dataclass(frozen=True)
class SourcedEntry:
    """One validated entry of an input file (a schema object) and where it is: the document (which
    keeps file and line numbers for errors) and the path to the entry in it."""

    entry: object
    doc: object
    loc: tuple


@dataclass(frozen=True)
class TimeloopV04:
    """What a Timeloop v0.4 arch carries beyond its levels: the ``inter_<container>_spatial`` fanouts
    (-> the storage level whose fanout each is), the axis of those that are a row or a column, and
    the per-node map-space constraints, each typed with its implied target and type."""

    spatial_levels: MappingT[str, str] = field(default_factory=dict)
    spatial_axes: MappingT[str, str] = field(default_factory=dict)
    constraints: tuple[SourcedEntry, ...] = ()


@dataclass(frozen=True)
class Arch:
    name: str
    levels: tuple[StorageLevel, ...]   # outermost first
    compute: ComputeLevel
    clock_hz: float | None = None
    technology: str | None = None
    attributes: MappingT[str, object] = field(default_factory=dict)
    timeloop: TimeloopV04 = field(default_factory=TimeloopV04, compare=False, repr=False)

    def level_index(self, name: str) -> int:
        for i, lvl in enumerate(self.levels):
            if lvl.name == name:
                return i
        raise KeyError(name)

    def below(self, i: int) -> StorageLevel | ComputeLevel:
        """The level under storage level ``i``: the next storage level, or the compute units."""
        return self.levels[i + 1] if i + 1 < len(self.levels) else self.compute

    def fanout(self, i: int) -> tuple[int, int, int]:
        """(total, X, Y) spatial fanout from storage level ``i`` to the level below it."""
        parent = self.levels[i]
        child = self.below(i)
        total = child.instances // parent.instances
        fx = max(1, child.mesh_x_or_default // parent.mesh_x_or_default)
        return total, fx, max(1, total // fx)
