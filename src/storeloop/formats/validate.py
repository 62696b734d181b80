"""Validation of a loaded YAML value against a pydantic model, with errors at the file, line and
field of the problem: unknown keys with a did-you-mean and the allowed keys, missing keys, a
mapping where a list goes (and the reverse), values out of range. Every storeloop format's schema
goes through :func:`validate`."""

from __future__ import annotations

import difflib
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, StrictFloat, StrictInt, StrictStr, ValidationError

from storeloop.errors import SpecError
from storeloop.formats.quantities import ExpressionError
from storeloop.formats.yamlio import LDict, error_at


def validate(model: type[BaseModel], value: Any, root: Any, loc: tuple) -> Any:
    """``value`` (at ``loc`` inside ``root``) as ``model``; the first problem as a SpecError at its line."""
    if not isinstance(value, dict):
        raise error_at(root, loc, f"expected a mapping ({{key: value, ...}}), found {shape(value)}",
                       allowed=", ".join(_fields(model)))
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        # one problem per field: a value no member of a union (a number or a quantity) takes is one
        # problem, not one per member
        everything = exc.errors()
        errors = list({_field_loc(e["loc"]): e for e in reversed(everything)}.values())[::-1]
        err = next((e for e in errors if e["type"] == "extra_forbidden"), errors[0])
        field = _field_loc(err["loc"])
        where = loc + field
        msg, allowed = err["msg"].removeprefix("Value error, "), None
        here = [e for e in everything if _field_loc(e["loc"]) == field]      # one per union member, if any
        members = [e["loc"][-1] for e in here if tuple(e["loc"]) != field]
        if members and all(e["type"] in _TYPE_ERRORS for e in here):
            kinds = list(dict.fromkeys(_KIND[_MEMBER.match(m).group(1)] for m in members))
            msg = f"expected {' or '.join(kinds)}, found {shape(err.get('input'))}"
            allowed = _description(model, field)
        elif err["type"] == "extra_forbidden":
            key = str(err["loc"][-1])
            known = _fields(_model_at(model, err["loc"][:-1]))
            near = difflib.get_close_matches(key, known, n=1, cutoff=0.6) or \
                difflib.get_close_matches(key.lower(), known, n=1, cutoff=0.6)
            msg = f"unknown field '{key}'" + (f"; did you mean '{near[0]}'?" if near else "")
            allowed = ", ".join(known)
        elif err["type"] == "missing":
            msg = f"missing required field '{err['loc'][-1]}'"
            allowed = ", ".join(_fields(_model_at(model, err["loc"][:-1])))
        elif err["type"] in ("dict_type", "model_type"):
            msg = f"expected a mapping ({{key: value, ...}}), found {shape(err.get('input'))}"
        elif err["type"] == "list_type":
            msg = f"expected a list ([a, b, ...]), found {shape(err.get('input'))}"
        elif err["type"] == "literal_error":
            allowed = msg.removeprefix("Input should be ")
            msg = f"{err.get('input')!r} is not allowed"
        else:                                   # a value out of range or of the wrong type: say what goes
            allowed = _description(model, err["loc"])
        more = len(errors) - 1
        if more:
            msg += f" (and {more} more problem{'s' if more > 1 else ''})"
        raise error_at(root, where, msg, allowed) from None


# a union's member as pydantic names it at the end of an error's loc, and what to call it
_MEMBER = re.compile(r"^(int|float|str|bool|list|dict)(\[.*\])?$")
_KIND = {"int": "a number", "float": "a number", "str": "a string", "bool": "true or false", "list": "a list",
         "dict": "a mapping"}
_TYPE_ERRORS = ("int_type", "int_parsing", "float_type", "float_parsing", "string_type", "bool_type",
                "bool_parsing", "list_type", "dict_type")


def _field_loc(loc: tuple) -> tuple:
    """An error's location without the union member it names (``bounds.N.int`` -> ``bounds.N``)."""
    loc = tuple(loc)
    while loc and isinstance(loc[-1], str) and _MEMBER.match(loc[-1]):
        loc = loc[:-1]
    return loc


def shape(value: Any) -> str:
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    if value is None:
        return "nothing (null)"
    return f"the {type(value).__name__} {value!r}"[:80]


def _fields(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]


def _description(model: type[BaseModel], loc: tuple) -> str | None:
    """The documented meaning of the field at ``loc`` (its pydantic description), if any."""
    names = [p for p in loc if isinstance(p, str)]
    for i in range(len(names), 0, -1):              # the innermost named field that the model knows
        owner = _model_at(model, tuple(names[:i - 1]))
        f = owner.model_fields.get(names[i - 1])
        if f is not None:
            return f.description
    return None


def _model_at(model: type[BaseModel], loc: tuple) -> type[BaseModel]:
    for part in loc:
        if isinstance(part, int) or part not in model.model_fields:
            continue
        ann = model.model_fields[part].annotation
        args = getattr(ann, "__args__", (ann,))
        nxt = [a for a in args if isinstance(a, type) and issubclass(a, BaseModel)]
        for a in args:                               # dict[str, Model] / list[Model]
            nxt += [b for b in getattr(a, "__args__", ()) if isinstance(b, type) and issubclass(b, BaseModel)]
        if nxt:
            model = nxt[0]
    return model


# strict: YAML booleans (true, yes, on) are not numbers (lax parsing would read true as 1)
Scalar = StrictInt | StrictFloat | StrictStr


class Strict(BaseModel):
    """The base of every storeloop schema: unknown keys are errors, specs are immutable, a field may
    be given by its name or its alias (``word_bits`` / ``word-bits``)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


def checked(fn, v):
    """``v``, once ``fn`` reads it (its ExpressionError as the ValueError pydantic reports)."""
    check_value(fn, v)
    return v


def check_value(fn, v):
    try:
        return fn(v)
    except ExpressionError as exc:
        raise ValueError(str(exc)) from None


def top_level(model: type[BaseModel], doc: LDict, key: str) -> Any:
    if not isinstance(doc, dict) or key not in doc:
        top = ", ".join(map(str, doc)) if isinstance(doc, dict) else type(doc).__name__
        raise SpecError(f"expected a top-level '{key}:' mapping, found: {top}", file=getattr(doc, "file", None),
                        line=1, allowed=f"'{key}:' (storeloop format) or a Timeloop v0.3 file")
    extra = [k for k in doc if k != key]
    if extra:
        raise error_at(doc, (extra[0],), f"unknown top-level key '{extra[0]}'", allowed=f"'{key}'")
    return validate(model, doc[key], doc, (key,))
