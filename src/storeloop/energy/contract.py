"""The energy plug-in contract, written once.

A plug-in is an object (or a class instantiated without arguments) with

* ``name`` (str), ``priority`` (float; the highest that supports a class wins), ``classes``
  (component classes it prices, lower case), and
* ``estimate(cls: str, attrs: dict) -> Estimate`` -- pJ per action, µm² per instance, leakage in W
  and the source of the numbers (plug-in, parameters, datasheet or paper), and optionally
* ``choices(cls: str) -> {attribute: allowed values}`` for attributes whose values form a closed set
  (a DRAM's ``type``) or a range (:class:`Between`: an SRAM's ``size_bits`` CACTI can model). When
  every plug-in of a class declares an attribute's values, a value none of them allows is an error
  at that attribute (a size at the level's capacity) before any plug-in runs, and
* ``attributes(cls: str) -> {attribute: what it is}``: the arch-file attributes it reads for a
  class. When every plug-in of a class declares them, a storeloop arch file's attribute that none
  of them reads and storeloop does not read itself (:data:`storeloop.formats.attributes.STORELOOP_ATTRIBUTES`) is an error at
  its line, with a did-you-mean (``witdh``), when the arch is loaded. Timeloop arch files keep
  Accelergy's open attribute set.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Estimate:
    actions: dict[str, float]          # pJ per action
    area_um2: float
    leak_W: float = 0.0
    source: str = ""
    unpriced: bool = False             # left at 0 on purpose (the source says why): no warning


@dataclass(frozen=True)
class Between:
    """A numeric range a plug-in prices (for ``choices``), with what it is."""

    lo: float
    hi: float
    what: str = ""

    def allows(self, value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool) and self.lo <= value <= self.hi

    def __str__(self) -> str:
        return f"{self.lo:g} .. {self.hi:g}" + (f" ({self.what})" if self.what else "")
