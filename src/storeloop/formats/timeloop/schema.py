"""The shapes of Timeloop v0.3/v0.4 and Accelergy 0.3/0.4 input files, as pydantic models.

Every Timeloop reader validates its document against these before it reads a value: a key that no
version of Timeloop or Accelergy knows is refused with a did-you-mean (``permutaton``, ``aea``,
``Width`` are typos, not options), a mapping where a list goes (and the reverse) is named, and
numbers are numbers. Keys that Timeloop knows but storeloop does not model (``no_multicast``
constraints, a ``max_overbooked_proportion``, ...) are accepted; the reader names them in a note.
Component ``attributes`` stay free-form: Accelergy's compound classes carry any attribute, and
:func:`storeloop.formats.attributes.check_attributes` checks the ones storeloop reads.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, StrictStr

# a number, or arithmetic such as "2**10" / "1e-09"; strict, so a YAML boolean is not read as 0 or 1
Num = StrictInt | StrictFloat | StrictStr
# the format versions of Timeloop and Accelergy files storeloop reads (0.3, 0.4; Accelergy 0.2 tables
# have the same shape)
Version = Literal[0.2, 0.3, 0.4, "0.2", "0.3", "0.4"]


class _TL(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


# --------------------------------------------------------------------- architecture (v0.3)
class Component(_TL):
    name: str = Field(description="'SRAM' or 'PE[0..3]'-style name")
    cls: str = Field(alias="class", description="an Accelergy class: DRAM, SRAM, regfile, intmac, ...")
    subclass: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict, description="Accelergy attributes")
    required_actions: list[str] | None = None


class Node(_TL):
    name: str = Field(description="'system' or 'PE[0..3]'")
    attributes: dict[str, Any] = Field(default_factory=dict)
    local: list[Component] = Field(default_factory=list, description="components at this level of the tree")
    subtree: list["Node"] = Field(default_factory=list, description="nested nodes")


class Architecture(_TL):
    version: Version | None = None
    subtree: list[Node] | None = Field(None, description="v0.3: the tree of nodes")
    nodes: list[dict[str, Any]] | None = Field(None, description="v0.4: !Container / !Component / !Parallel nodes")


# v0.4 nodes (tagged mappings): what a node may carry. Each kind is one Timeloop constraint
# (a ConstraintEntry below without target and type: the node is the target, the key the type).
class V04Constraints(_TL):
    temporal: dict[str, Any] | None = None
    spatial: dict[str, Any] | None = None
    dataspace: dict[str, Any] | None = None
    datatype: dict[str, Any] | None = None
    max_overbooked_proportion: dict[str, Any] | None = None


class V04Node(_TL):
    name: str | None = None
    cls: str | None = Field(None, alias="class")
    subclass: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)
    spatial: dict[str, Num] = Field(default_factory=dict, description="{meshX: 14, meshY: 12}")
    constraints: V04Constraints | None = None
    nodes: list[dict[str, Any]] | None = None
    required_actions: list[str] | None = None
    area_share: Num | None = None
    enabled: bool | None = None


# ------------------------------------------------------------------------------ problem
class Coefficient(_TL):
    name: str
    default: Num


class DataSpace(_TL):
    name: str
    projection: list[list[list[str]]] = Field(description="per rank, terms [dim] or [dim, coefficient]")
    read_write: bool | None = Field(None, alias="read-write")
    read_write_v04: bool | None = Field(None, alias="read_write")


class Shape(_TL):
    name: str | None = None
    dimensions: list[str] = Field(min_length=1)
    coefficients: list[Coefficient] = Field(default_factory=list)
    data_spaces_v03: list[DataSpace] | None = Field(None, alias="data-spaces")
    data_spaces: list[DataSpace] | None = None


class Problem(_TL):
    version: Version | None = None
    shape: Shape
    instance: dict[str, Num] = Field(description="dimension bounds (and coefficient values)")


# ------------------------------------------------------------------------------ mapping
class MappingEntry(_TL):
    target: str | int
    type: Literal["temporal", "spatial", "datatype", "dataspace", "bypass"]
    factors: str | None = None
    permutation: str | None = None
    split: StrictInt | None = Field(None, ge=0, description="the first `split` dims of the permutation run along X")
    keep: list[str] | None = None
    bypass: list[str] | None = None


# --------------------------------------------------------------------------- mapper config
class MapperConfig(_TL):
    """Timeloop v3.0.3's ``mapper:`` section (applications/mapper/mapper.cpp reads these keys)."""

    algorithm: Literal["exhaustive", "linear-pruned", "random", "random-pruned", "hybrid"] | None = None
    optimization_metrics: list[str] | None = Field(None, alias="optimization-metrics",
                                                   description="e.g. [delay, energy] (compared in this order)")
    optimization_metric: str | None = Field(None, alias="optimization-metric")
    num_threads: StrictInt | None = Field(None, alias="num-threads", ge=1, le=1024)
    victory_condition: StrictInt | None = Field(None, alias="victory-condition", ge=1,
                                                description="consecutive valid mappings without improvement")
    # read by Timeloop, not part of storeloop's search: named in a note
    timeout: StrictInt | None = Field(None, ge=0)
    heartbeat: StrictInt | None = Field(None, ge=0)
    search_size: StrictInt | None = Field(None, alias="search-size", ge=0)
    search_size_old: StrictInt | None = Field(None, alias="search_size", ge=0)
    sync_interval: StrictInt | None = Field(None, alias="sync-interval", ge=0)
    log_interval: StrictInt | None = Field(None, alias="log-interval", ge=0)
    log_oaves: bool | None = Field(None, alias="log-oaves")
    log_oaves_mappings: bool | None = Field(None, alias="log-oaves-mappings")
    log_stats: bool | None = Field(None, alias="log-stats")
    log_suboptimal: bool | None = Field(None, alias="log-suboptimal")
    log_all: bool | None = Field(None, alias="log-all")
    live_status: bool | None = Field(None, alias="live-status")
    diagnostics: bool | None = None
    penalize_consecutive_bypass_fails: bool | None = Field(None, alias="penalize-consecutive-bypass-fails")
    emit_whoop_nest: bool | None = Field(None, alias="emit-whoop-nest")
    max_permutations_per_if_visit: StrictInt | None = Field(None, alias="max-permutations-per-if-visit", ge=1)
    out_prefix: str | None = None


#: the storeloop objective of each Timeloop optimization-metrics list
MAPPER_METRICS = {("delay", "energy"): "delay,energy", ("delay",): "delay", ("energy",): "energy", ("edp",): "edp"}


# --------------------------------------------------------------------------- constraints
CONSTRAINT_TYPES = ("temporal", "spatial", "datatype", "dataspace", "bypass", "bypassing",
                    "max_overbooked_proportion", "no_link_transfer", "no_multicast", "no_reduction",
                    "no_multicast_no_reduction", "utilization", "parallelism")
#: the types storeloop's map space honours; the others are noted and ignored
MODELLED_CONSTRAINTS = ("temporal", "spatial", "datatype", "dataspace", "bypass", "bypassing", "utilization",
                       "parallelism")


#: fields of a modelled constraint that Timeloop knows and storeloop's map space does not model
UNMODELLED_FIELDS = ("default_max_factor", "default_min_factor", "remainders", "no_reuse", "no_temporal_reuse",
                     "rmw_first_update", "no_coalesce", "no_link_transfer", "no_multicast_no_reduction")


class ConstraintEntry(_TL):
    target: str | int | None = None
    name: str | None = None
    type: Literal[CONSTRAINT_TYPES]
    factors: str | list[str] | None = Field(None, description="'N=512 J<=8' (v0.3) or [N=512, J<=8] (v0.4)")
    permutation: str | list[str] | None = Field(None, description="innermost first: 'NJ' or [N, J]; "
                                                "after '_' the outermost")
    split: StrictInt | None = Field(None, ge=0, description="the first `split` dims of the permutation run along X")
    keep: list[str] | None = None
    bypass: list[str] | None = None
    proportion: Num | None = None
    min: Num | None = None
    attributes: dict[str, Any] | None = None
    default_max_factor: int | None = Field(None, ge=1)
    default_min_factor: int | None = Field(None, ge=1)
    remainders: int | str | None = None
    no_reuse: list[str] | None = None
    no_temporal_reuse: list[str] | None = None
    rmw_first_update: list[str] | None = None
    no_coalesce: list[str] | None = None
    no_link_transfer: list[str] | None = None
    no_multicast_no_reduction: list[str] | None = None


# ------------------------------------------------------------------- Accelergy ERT / ART
class Action(_TL):
    name: str
    arguments: dict[str, Num] | None = Field(None, description="address_delta / data_delta (0.3), "
                                             "global_cycle_seconds / action_latency_cycles (0.4)")
    energy: Num = Field(description="pJ")


class ERTTable(_TL):
    name: str = Field(description="the component's full name: system.PE[0..1].SRAM")
    actions: list[Action] = Field(min_length=1)


class ERTBody(_TL):
    version: Version | None = None
    tables: list[ERTTable] = Field(min_length=1)


class ARTTable(_TL):
    name: str
    area: Num = Field(description="um^2 per instance")


class ARTBody(_TL):
    version: Version | None = None
    tables: list[ARTTable] = Field(min_length=1)


Node.model_rebuild()
