"""The mapper's options, typed once: ``storeloop map``'s flags, a sweep file's ``mapper:`` and
:func:`storeloop.mapper.map_workload`'s keywords all go through :class:`MapperOptions`."""

from __future__ import annotations

import math
import os
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, ValidationError, field_validator

from storeloop.errors import SpecError
from storeloop.mapper.objective import NAMES as OBJECTIVES

ALGORITHMS = ("exhaustive", "random-pruned", "random")
# what a sweep point or a system's einsum stage searches with when its file does not say: a budget
# of candidates (the same answer on a quiet or a busy machine) and, as a safety net whose answer
# would depend on the load, a time limit
DEFAULT_BUDGET = 20_000_000
SAFETY_TIME_LIMIT = 600


class MapperOptions(BaseModel):
    """How to search. ``time_limit`` None: no limit; ``energy_gap`` None: the objective's default."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    objective: str = Field("delay,energy", description="delay,energy | delay | energy | edp | area-energy")
    algorithm: Literal["exhaustive", "random-pruned", "random"] = Field(
        "exhaustive", description="exhaustive (branch and bound), random-pruned, random")
    time_limit: StrictFloat | StrictInt | None = Field(None, gt=0, le=86400, description="seconds, a safety net")
    budget: StrictInt | None = Field(None, ge=1, le=10**12, description="candidates the branch and bound may "
                                     "generate (a whole number, such as 20000000): a stop that, unlike the time "
                                     "limit, gives the same answer on a busy machine")
    energy_gap: StrictFloat | StrictInt | None = Field(None, ge=0, le=1, description="a relative gap such as 0.001 (0.1 %); "
                                     "0 proves optimality")
    threads: StrictInt = Field(1, ge=1, le=1024, description="processes for the exhaustive search")
    search_layout: bool = Field(False, strict=True, description="true: the SSD-backed first level's "
                                "layout (rank order per tensor) is searched with the mapping")
    uneven: bool = Field(False, strict=True, description="true: each tensor a level keeps is searched at its "
                         "own temporal loop position there (uneven mappings, mapper/uneven.py)")
    imperfect: bool = Field(False, strict=True, description="true: a dimension's loops need not divide its bound; "
                            "the problems padded to them are searched too (mapper/imperfect.py)")

    @field_validator("objective")
    @classmethod
    def _objective(cls, v: str) -> str:
        if v.replace(" ", "") not in OBJECTIVES:
            raise ValueError(f"unknown objective {v!r}; allowed: {', '.join(OBJECTIVES)}")
        return v.replace(" ", "")

    @field_validator("time_limit", "energy_gap")
    @classmethod
    def _finite(cls, v: float | None) -> float | None:
        if v is not None and not math.isfinite(v):
            raise ValueError(f"{v} is not a finite number")
        return v


FLAGS = {"objective": "--objective", "algorithm": "--algorithm", "time_limit": "--time-limit", "budget": "--budget",
         "energy_gap": "--energy-gap", "threads": "--threads", "search_layout": "--search-layout",
         "uneven": "--uneven", "imperfect": "--imperfect"}


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS says; else all)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:                          # (not on Linux)
        return max(1, os.cpu_count() or 1)


def options(**given) -> MapperOptions:
    """MapperOptions from keywords (command-line flags or the API); a bad value is a SpecError that
    names the option and what it takes."""
    try:
        return MapperOptions(**{k: v for k, v in given.items() if v is not None})
    except ValidationError as exc:
        err = exc.errors()[0]
        name = str(err["loc"][0]) if err["loc"] else "options"
        field = MapperOptions.model_fields.get(name)
        raise SpecError(f"{given.get(name)!r}: {err['msg'].removeprefix('Value error, ')}",
                        field=FLAGS.get(name, name), allowed=field.description if field else None) from None
