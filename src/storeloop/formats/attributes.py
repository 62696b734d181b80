"""The component attributes storeloop and its plug-ins read, and the values each may take."""

from __future__ import annotations

import functools
import math

from storeloop.energy import declared_attributes
from storeloop.formats.quantities import WPC_RANGE, ExpressionError, integer, number
from storeloop.formats.yamlio import error_at

# numeric attributes the energy models and Timeloop read, and what each must be
_COUNTS = ("width", "depth", "entries", "size", "word-bits", "word_bits", "datawidth", "block-size", "block_size",
           "n_banks", "meshX", "meshY", "cluster-size", "cluster_size")
_PORTS = ("n_rdwr_ports", "n_rd_ports", "n_wr_ports")
_RATES = ("read_bandwidth", "write_bandwidth", "shared_bandwidth")
_ENERGIES = ("vector-access-energy", "vector_access_energy")
# attributes a storeloop arch file may give whatever plug-in prices the component: the numeric ones
# above (storeloop's and Timeloop/Accelergy's, kept for an export) and what
# storeloop.energy.components derives from the level's fields
STORELOOP_ATTRIBUTES = frozenset(_COUNTS + _PORTS + _RATES + _ENERGIES) | {
    "technology", "size_bits", "clock_hz", "read_bytes_per_s", "write_bytes_per_s", "shared_bytes_per_s"}
#: the most energy one access (or action) may cost, and the most area one component may take: more
#: than any memory, drive or unit spends (a 4 KiB flash page costs about 10 uJ; a DRAM die is
#: ~100 mm^2), so a larger number is a slip of units or exponent
MAX_ACTION_PJ = 1e9              # 1 mJ
MAX_AREA_UM2 = 1e12              # 1 m^2


def cluster_size(attrs) -> int:
    """Timeloop's ``cluster-size`` attribute (1 when absent), once check_attributes has passed."""
    return integer(attrs.get("cluster_size", attrs.get("cluster-size", 1)))


def unread_attribute(cls: str, key: str) -> tuple[str, str] | None:
    """(why, allowed) where no energy plug-in of class ``cls`` reads attribute ``key`` (when they all
    declare what they read) and storeloop does not read it either; None where it is read."""
    import difflib

    declared = declared_attributes(cls)
    if declared is None or key in STORELOOP_ATTRIBUTES or key in declared[0]:
        return None
    read = sorted(STORELOOP_ATTRIBUTES | declared[0], key=str.lower)
    near = difflib.get_close_matches(str(key), read, n=1, cutoff=0.6)
    return (f"no energy plug-in of class {cls!r} ({', '.join(declared[1])}) nor storeloop reads attribute {key!r}"
            + (f"; did you mean {near[0]!r}?" if near else ""), ", ".join(read))


_KNOWN = _COUNTS + _PORTS + _RATES + _ENERGIES


@functools.lru_cache(maxsize=4096)
def _near_known(key: str) -> list[str]:
    """The numeric attribute ``key`` may be a slip of (same letters but case, or close)."""
    import difflib

    return [k for k in _KNOWN if k.lower() == key.lower()] or difflib.get_close_matches(key, _KNOWN, n=1, cutoff=0.85)


def check_attributes(doc, loc: tuple, attrs: dict, cls: str | None = None) -> None:
    """Numeric component attributes: counts and widths are positive whole numbers, ports whole
    numbers >= 0, bandwidths positive, energy overrides finite and >= 0 (errors at the attribute).
    With the component's ``cls``: an attribute that no energy plug-in of the class reads (when they
    all declare theirs) and storeloop does not read is refused, with a did-you-mean."""
    for key in attrs if cls is not None else ():
        unread = unread_attribute(cls, key)
        if unread:
            raise error_at(doc, loc + (key,), unread[0], allowed=unread[1])
    for key, value in attrs.items():
        if key not in _KNOWN:
            near = _near_known(str(key))
            if near and near[0].replace("-", "_") != str(key).replace("-", "_"):
                raise error_at(doc, loc + (key,), f"unknown attribute {key!r}; did you mean {near[0]!r}?",
                               allowed=f"{near[0]} (or a model attribute that is not a near-miss of a known one)")
        if key in _COUNTS:
            want, ok = "a positive whole number", lambda v: float(v).is_integer() and v >= 1
        elif key in _PORTS:
            want, ok = "a whole number >= 0", lambda v: float(v).is_integer() and v >= 0
        elif key in _RATES:
            want, ok = f"a number of words/cycle in {WPC_RANGE[0]:g} .. {WPC_RANGE[1]:g}", \
                lambda v: WPC_RANGE[0] <= v <= WPC_RANGE[1]
        elif key in _ENERGIES:
            want, ok = f"a number of pJ in 0 .. {MAX_ACTION_PJ:g} (1 mJ per access)", lambda v: 0 <= v <= MAX_ACTION_PJ
        else:
            continue
        try:
            v = number(value) if key not in _RATES or not isinstance(value, str) else number(value.split()[0])
            good = math.isfinite(v) and ok(v)
        except (ExpressionError, ValueError, IndexError):
            good = False
        if not good:
            raise error_at(doc, loc + (key,), f"attribute {key} = {value!r} is not {want}", allowed=want)
