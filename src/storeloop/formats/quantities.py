"""Safe arithmetic and physical quantities for spec fields.

Spec values such as ``4 * KiB``, ``2**28`` or ``10 GB/s`` are evaluated by a tiny
arithmetic-only interpreter over Python's AST: numbers, + - * / // % **, parentheses and
the unit names below. Nothing in a spec can call a function or touch an attribute.

Decimal prefixes are powers of ten (``GB`` = 10**9 bytes), binary ones powers of two
(``GiB`` = 2**30 bytes); the two are never mixed silently.
"""

from __future__ import annotations

import ast
import functools
import math
import operator
import re

KB, MB, GB, TB = 10**3, 10**6, 10**9, 10**12
KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40

#: Names an expression may use. Sizes are in bytes unless a unit says bits.
NAMES: dict[str, float] = {
    "KB": KB, "MB": MB, "GB": GB, "TB": TB,
    "KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": TiB,
    "K": 10**3, "M": 10**6, "G": 10**9,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
}

_BINOPS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class ExpressionError(ValueError):
    """An expression that is not plain arithmetic over numbers and unit names."""


MAX_TEXT = 1000        # characters of one expression
MAX_BITS = 1024        # every intermediate value stays below 2**1024 (a total budget, not per operator)


def _checked(value: int | float, text: str) -> int | float:
    if isinstance(value, int) and value.bit_length() > MAX_BITS or \
            isinstance(value, float) and not math.isfinite(value):
        raise ExpressionError(f"the value of {text[:60]!r} is out of range (more than 2**{MAX_BITS})")
    return value


def evaluate(text: str, names: dict[str, float] | None = None) -> int | float:
    """Evaluate an arithmetic expression; integers stay integers when exact. Every intermediate
    value must stay below 2**1024 and the text under 1,000 characters."""
    return _plain(text) if names is None and isinstance(text, str) else _evaluate(text, names)


@functools.lru_cache(maxsize=4096)          # without names, the value depends on the text alone
def _plain(text: str) -> int | float:
    return _evaluate(text)


def _evaluate(text: str, names: dict[str, float] | None = None) -> int | float:
    scope = NAMES if names is None else {**NAMES, **names}
    if len(text) > MAX_TEXT:
        raise ExpressionError(f"expression of {len(text):,} characters (at most {MAX_TEXT:,}): {text[:40]!r}...")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except (SyntaxError, ValueError) as exc:
        raise ExpressionError(f"not an arithmetic expression: {text[:60]!r}") from exc
    except (RecursionError, MemoryError):
        raise ExpressionError(f"expression nested too deeply: {text[:40]!r}...") from None

    def walk(node: ast.AST) -> int | float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return _checked(node.value, text)
        if isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and (abs(right) > MAX_BITS or abs(left) > 1 and
                                                 right * math.log2(abs(left)) > MAX_BITS):
                raise ExpressionError(f"the value of {text[:60]!r} is out of range (more than 2**{MAX_BITS})")
            try:
                value = _checked(_BINOPS[type(node.op)](left, right), text)
            except ZeroDivisionError as exc:
                raise ExpressionError(f"division by zero in {text!r}") from exc
            except (OverflowError, ValueError, TypeError) as exc:
                raise ExpressionError(f"cannot evaluate {text[:60]!r}: {exc}") from None
            if isinstance(value, float) and value.is_integer() and abs(value) < 2**53 \
                    and isinstance(node.op, ast.Div) and isinstance(left, int) and isinstance(right, int):
                return int(value)
            return value
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](walk(node.operand))
        if isinstance(node, ast.Name):
            if node.id in scope:
                return scope[node.id]
            raise ExpressionError(f"unknown name {node.id!r} in {text!r} (known: {', '.join(sorted(scope))})")
        raise ExpressionError(f"only numbers, + - * / // % ** and unit names are allowed: {text!r}")

    try:
        return walk(tree)
    except RecursionError:
        raise ExpressionError(f"expression nested too deeply: {text[:40]!r}...") from None


def number(value: object) -> int | float:
    """A YAML scalar as a number: ints and floats pass, strings are evaluated."""
    if isinstance(value, bool):
        raise ExpressionError(f"expected a number, got {value!r}")
    if isinstance(value, (int, float)):
        return _checked(value, repr(value))
    if isinstance(value, str):
        return evaluate(value)
    raise ExpressionError(f"expected a number or an arithmetic expression, got {value!r}")


def integer(value: object) -> int:
    v = number(value)
    if isinstance(v, float):
        if not v.is_integer():
            raise ExpressionError(f"expected a whole number, got {value!r}")
        v = int(v)
    return v


#: size units -> bytes
SIZE_UNITS = {
    "B": 1, "bytes": 1, "byte": 1,
    "KB": KB, "MB": MB, "GB": GB, "TB": TB, "KiB": KiB, "MiB": MiB, "GiB": GiB, "TiB": TiB,
    "bits": 1 / 8, "bit": 1 / 8, "b": 1 / 8,
    "Kb": KB / 8, "Mb": MB / 8, "Gb": GB / 8, "Kib": KiB / 8, "Mib": MiB / 8, "Gib": GiB / 8,
}
FREQ_UNITS = {"Hz": 1, "KHz": 1e3, "kHz": 1e3, "MHz": 1e6, "GHz": 1e9}


def split_unit(value: object) -> tuple[int | float, str | None]:
    """``"10 GB/s"`` -> ``(10, "GB/s")``; a bare number has no unit."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _checked(value, repr(value)), None
    if not isinstance(value, str):
        raise ExpressionError(f"expected a quantity such as '4 KiB' or '10 GB/s', got {value!r}")
    return _split_text(value)


@functools.lru_cache(maxsize=4096)          # a function of the text alone (a sweep repeats its texts)
def _split_text(value: str) -> tuple[int | float, str | None]:
    text = value.strip()
    try:
        return number(text), None
    except ExpressionError:
        pass
    m = re.match(r"^(?P<expr>.*?[\d)\s])\s*(?P<unit>[A-Za-z]+(?:/(?:s|cycle))?)$", text)
    if not m:
        raise ExpressionError(f"expected a quantity such as '4 KiB' or '10 GB/s', got {value!r}")
    return number(m.group("expr")), m.group("unit")


def bytes_of(value: object, *, default_unit: str = "B") -> float:
    """A size in bytes from '4 KiB', '64 bits', '2**20 B' or a bare number (default unit); not negative."""
    amount, unit = split_unit(value)
    if amount < 0:
        raise ExpressionError(f"a size cannot be negative, got {value!r}")
    unit = unit or default_unit
    if unit not in SIZE_UNITS:
        raise ExpressionError(f"unknown size unit {unit!r} (allowed: {', '.join(SIZE_UNITS)})")
    return amount * SIZE_UNITS[unit]


MAX_WORD_BITS = 2**16


def bits_of(value: object) -> int:
    """A word width in bits: '64 bits', '8 B', or a bare number of bits."""
    amount, unit = split_unit(value)
    if unit is None or unit in ("bits", "bit", "b"):
        bits = amount
    elif unit in SIZE_UNITS:
        bits = amount * SIZE_UNITS[unit] * 8
    else:
        raise ExpressionError(f"unknown unit {unit!r} for a width in bits")
    if not float(bits).is_integer() or bits <= 0:
        raise ExpressionError(f"a width in bits must be a positive whole number, got {value!r}")
    if bits > MAX_WORD_BITS:
        raise ExpressionError(f"a width of {value!r} is more than {MAX_WORD_BITS} bits (8 KiB), the widest word "
                              "storeloop prices")
    return int(bits)


def hertz_of(value: object) -> float:
    amount, unit = split_unit(value)
    unit = unit or "Hz"
    if unit not in FREQ_UNITS:
        raise ExpressionError(f"unknown frequency unit {unit!r} (allowed: {', '.join(FREQ_UNITS)})")
    return float(amount * FREQ_UNITS[unit])


#: words/cycle a bandwidth may take: a level slower than 1e-12 words/cycle (or faster than 1e12)
#: is a typo, and its cycle counts would overflow
WPC_RANGE = (1e-12, 1e12)


def words_per_cycle(value: object, *, word_bits: int, clock_hz: float | None) -> float:
    """Bandwidth in words/cycle from 'N words/cycle', 'N B/s' style, or a bare number (words/cycle);
    it must be within :data:`WPC_RANGE`."""
    wpc = _words_per_cycle(value, word_bits=word_bits, clock_hz=clock_hz)
    if not WPC_RANGE[0] <= wpc <= WPC_RANGE[1]:
        raise ExpressionError(f"bandwidth {value!r} is {wpc:g} words/cycle, outside {WPC_RANGE[0]:g} .. "
                              f"{WPC_RANGE[1]:g} words/cycle")
    return wpc


def technology_nm(value: object) -> float:
    """A technology node in nm from '45nm', '45 nm', '0.045um', 45 (nm) or 4.5e-8 (metres); 1 .. 1000 nm."""
    text = str(value).strip().lower().replace(" ", "")
    try:
        if text.endswith("nm"):
            nm = float(text[:-2])
        elif text.endswith("um"):
            nm = float(text[:-2]) * 1e3
        else:
            v = float(text)
            nm = v if v > 1e-3 else v * 1e9
    except ValueError:
        raise ExpressionError(f"technology {value!r} is not a node such as '45nm' or '0.045um'") from None
    if not 1 <= nm <= 1000:
        raise ExpressionError(f"technology {value!r} is {nm:g} nm, outside 1 .. 1000 nm")
    return nm


def _words_per_cycle(value: object, *, word_bits: int, clock_hz: float | None) -> float:
    amount, unit = split_unit(value)
    if not amount > 0:
        raise ExpressionError(f"a bandwidth must be positive, got {value!r}")
    if unit is None or unit in ("words/cycle", "w/cycle"):
        return float(amount)
    if unit.endswith("/cycle"):
        base = unit[: -len("/cycle")]
        if base not in SIZE_UNITS:
            raise ExpressionError(f"unknown bandwidth unit {unit!r}")
        return amount * SIZE_UNITS[base] * 8 / word_bits
    if unit.endswith("/s"):
        base = unit[:-2]
        if base not in SIZE_UNITS:
            raise ExpressionError(f"unknown bandwidth unit {unit!r} (e.g. 'GB/s', 'GiB/s', 'Gb/s')")
        if not clock_hz:
            raise ExpressionError(f"bandwidth {value!r} is per second: the arch needs a 'clock'")
        return amount * SIZE_UNITS[base] * 8 / word_bits / clock_hz
    raise ExpressionError(f"unknown bandwidth unit {unit!r} (allowed: words/cycle, B/cycle, GB/s, GiB/s, Gb/s …)")


def ceil_div(a: int, b: int) -> int:
    return -(-a // b)


TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9, "ps": 1e-12}


def rate_of(value: object) -> float:
    """A data rate in bytes per second from '100 Gb/s', '170 GB/s', '2 GiB/s' or a bare number (B/s);
    positive and finite."""
    amount, unit = split_unit(value)
    if unit is None:
        unit = "B/s"
    if not unit.endswith("/s") or unit[:-2] not in SIZE_UNITS:
        raise ExpressionError(f"{value!r} is not a data rate (e.g. '100 Gb/s', '170 GB/s', '2 GiB/s')")
    rate = float(amount * SIZE_UNITS[unit[:-2]])
    if not (rate > 0 and math.isfinite(rate)):
        raise ExpressionError(f"a data rate must be positive and finite, got {value!r}")
    return rate


def seconds_of(value: object) -> float:
    """A duration in seconds from '10 us', '2 ms', '1.5 s' or a bare number (s); >= 0 and finite."""
    amount, unit = split_unit(value)
    unit = unit or "s"
    if unit not in TIME_UNITS:
        raise ExpressionError(f"unknown time unit {unit!r} (allowed: {', '.join(TIME_UNITS)})")
    t = float(amount * TIME_UNITS[unit])
    if not (t >= 0 and math.isfinite(t)):
        raise ExpressionError(f"a duration must be finite and not negative, got {value!r}")
    return t


def magnitude(value: object) -> float | None:
    """A value in its base unit, to order values as quantities ('1 MiB' after '32 KiB', '500 MB/s'
    before '1 GB/s'): a number, a word count ('32 words'), bytes, bytes/s, Hz or seconds; None for
    anything else."""
    if isinstance(value, str) and value.strip().endswith("words"):
        value = value.strip()[:-len("words")]
    for fn in (number, bytes_of, rate_of, hertz_of, seconds_of):
        try:
            return float(fn(value))
        except (ExpressionError, TypeError, ValueError):
            continue
    return None


def _unit(value, units: dict[str, float], what: str, example: str) -> float:
    """A non-negative quantity in one of ``units`` (name -> factor to the base unit): '3.3 V', '25 mA',
    '5 pJ/bit'; anything else is an ExpressionError naming ``what`` and an ``example``."""
    m = re.match(r"^(?P<expr>.*?[\d)\s])\s*(?P<unit>[A-Za-z]+/[A-Za-z]+)$", value.strip()) \
        if isinstance(value, str) else None
    amount, unit = (number(m.group("expr")), m.group("unit")) if m else split_unit(value)
    if unit not in units:
        raise ExpressionError(f"expected {what} such as '{example}' (units: {', '.join(units)}), got {value!r}")
    x = float(amount * units[unit])
    if not x >= 0:
        raise ExpressionError(f"{what} cannot be negative, got {value!r}")
    return x


VOLTS = {"V": 1.0, "mV": 1e-3}
AMPS = {"A": 1.0, "mA": 1e-3, "uA": 1e-6}
WATTS = {"W": 1.0, "mW": 1e-3}
PER_BYTE = {"J/B": 1.0, "nJ/B": 1e-9, "pJ/B": 1e-12, "pJ/bit": 8e-12, "nJ/bit": 8e-9}
TRANSFERS = {"MT/s": 1e6, "GT/s": 1e9}


def volts(value: object) -> float:
    """Volts from '3.3 V' or '800 mV'."""
    return _unit(value, VOLTS, "a voltage", "3.3 V")


def amps(value: object) -> float:
    """Amperes from '25 mA'."""
    return _unit(value, AMPS, "a current", "25 mA")


def watts(value: object) -> float:
    """Watts from '5 W' or '300 mW'."""
    return _unit(value, WATTS, "a power", "5 W")


def joules_per_byte(value: object) -> float:
    """Joules per byte from '5 pJ/bit' or '2.5 nJ/B'."""
    return _unit(value, PER_BYTE, "an energy per byte", "5 pJ/bit")


def transfers(value: object) -> float:
    """Transfers per second from '1000 MT/s'."""
    return _unit(value, TRANSFERS, "a transfer rate", "1000 MT/s")


__all__ = ["volts", "amps", "watts", "joules_per_byte", "transfers", "evaluate", "number", "integer", "bytes_of", "bits_of", "hertz_of", "words_per_cycle",
           "rate_of", "seconds_of", "magnitude",
           "ExpressionError", "ceil_div"]

