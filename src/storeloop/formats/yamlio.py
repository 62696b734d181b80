"""Safe YAML loading that remembers where every key and item came from.

Mappings load as :class:`LDict` and sequences as :class:`LList`; both carry the file name and
the 1-based line of each key/item, so that validation errors can say "file:line field". Duplicate
keys are an error (PyYAML silently keeps the last one).
"""

from __future__ import annotations

import os

from pathlib import Path
from typing import Any

import yaml

from storeloop.errors import SpecError


class LDict(dict):
    """A dict that knows its file, its own line and the line of each key."""

    file: str | None = None
    line: int | None = None

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lines: dict[Any, int] = {}

    def line_of(self, key: Any) -> int | None:
        return self.lines.get(key, self.line)


class LList(list):
    """A list that knows its file, its own line and the line of each item."""

    file: str | None = None
    line: int | None = None

    def __init__(self, *args: Any):
        super().__init__(*args)
        self.lines: list[int] = []

    def line_of(self, index: int) -> int | None:
        return self.lines[index] if 0 <= index < len(self.lines) else self.line


def copy_doc(value: Any) -> Any:
    """A deep copy of a loaded document (LDict, LList, dicts, lists and scalars), lines kept:
    ``copy.deepcopy``'s result in a third of its time (a sweep copies its arch at every point).
    A node the YAML shares by an alias becomes two copies."""
    if isinstance(value, dict):
        out = type(value)((k, copy_doc(v)) for k, v in value.items())
        if isinstance(value, LDict):
            out.__dict__.update(value.__dict__, lines=dict(value.lines))
        return out
    if isinstance(value, list):
        out = type(value)(copy_doc(v) for v in value)
        if isinstance(value, LList):
            out.__dict__.update(value.__dict__, lines=list(value.lines))
        return out
    return value


# what storeloop writes back (a sweep spec, a mapping) may hold loaded values: they dump as plain YAML
# libyaml's emitter where PyYAML has it (safe_dump's text in a tenth of its time)
_Dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
for _dumper in {yaml.SafeDumper, _Dumper}:
    _dumper.add_representer(LDict, lambda dumper, value: dumper.represent_dict(value))
    _dumper.add_representer(LList, lambda dumper, value: dumper.represent_list(value))


def dumps(value: Any) -> str:
    """``value`` as YAML, keys in their order (``yaml.safe_dump(value, sort_keys=False)``'s text)."""
    return yaml.dump(value, Dumper=_Dumper, sort_keys=False)


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):
    """The safe loader on libyaml's parser where PyYAML has it (it marks lines alike, about ten
    times faster), else PyYAML's own."""

    filename: str | None = None


def _construct_mapping(loader: _Loader, node: yaml.MappingNode) -> LDict:
    loader.flatten_mapping(node)
    out = LDict()
    out.file = loader.filename
    out.line = node.start_mark.line + 1
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        try:
            hash(key)
        except TypeError:
            raise SpecError("a mapping key must be a plain value", file=loader.filename,
                            line=key_node.start_mark.line + 1) from None
        if key in out:
            raise SpecError(f"duplicate key '{key}' (first at line {out.lines[key]})",
                            file=loader.filename, line=key_node.start_mark.line + 1, field=str(key),
                            allowed="each key once per mapping")
        out[key] = loader.construct_object(value_node, deep=True)
        out.lines[key] = key_node.start_mark.line + 1
    return out


def _construct_sequence(loader: _Loader, node: yaml.SequenceNode) -> LList:
    out = LList(loader.construct_object(child, deep=True) for child in node.value)
    out.file = loader.filename
    out.line = node.start_mark.line + 1
    out.lines = [child.start_mark.line + 1 for child in node.value]
    return out


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)

# Timeloop v0.4 architecture nodes are tagged mappings (``- !Component {...}``); they load as plain
# LDicts that remember their tag in ``node_tag`` -- data only, nothing is instantiated.
TIMELOOP_TAGS = ("!Container", "!Component", "!Hierarchical", "!Parallel", "!Pipelined", "!Nothing")


def _construct_tagged(loader: _Loader, node: yaml.Node) -> LDict:
    out = _construct_mapping(loader, node) if isinstance(node, yaml.MappingNode) else LDict()
    out.node_tag = node.tag
    return out


for _tag in TIMELOOP_TAGS:
    _Loader.add_constructor(_tag, _construct_tagged)


MAX_NODES = 1_000_000         # values a document may expand to through aliases (a billion-laughs guard)


def _expanded_size(node: yaml.Node, memo: dict) -> int:
    """Values in ``node`` with every alias expanded (shared nodes counted once per use)."""
    key = id(node)
    if key not in memo:
        memo[key] = 1                 # a recursive alias counts once
        if isinstance(node, yaml.SequenceNode):
            memo[key] = 1 + sum(_expanded_size(n, memo) for n in node.value)
        elif isinstance(node, yaml.MappingNode):
            memo[key] = 1 + sum(_expanded_size(k, memo) + _expanded_size(v, memo) for k, v in node.value)
    return min(memo[key], MAX_NODES + 1)


def loads(text: str, filename: str | None = None) -> Any:
    """Parse YAML text safely into LDict/LList trees (no tags that build objects)."""
    loader = None
    try:
        loader = _Loader(text)           # the reader rejects NUL and other control characters here
        loader.filename = filename
        node = loader.get_single_node()
        if node is None:
            return None
        size = _expanded_size(node, {})
        if size > MAX_NODES:
            raise SpecError(f"the YAML expands to more than {MAX_NODES:,} values through its aliases",
                            file=filename, allowed="a file without alias bombs (&anchor / *alias used sparingly)")
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        if "nesting depth" in str(exc.problem):      # libyaml's parser says so where PyYAML's recurses
            raise SpecError("not valid YAML: nested too deeply", file=filename, line=mark.line + 1 if mark else None,
                            allowed="a few levels of lists and mappings") from None
        raise SpecError(f"not valid YAML: {exc.problem or exc}", file=filename,
                        line=mark.line + 1 if mark else None) from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        c = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise SpecError(f"not valid YAML: control character U+{c:04X} is not allowed in a YAML file",
                        file=filename, line=line) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"not valid YAML: {exc}", file=filename) from None
    except RecursionError:
        raise SpecError("not valid YAML: nested too deeply", file=filename,
                        allowed="a few levels of lists and mappings") from None
    finally:
        if loader is not None:
            loader.dispose()


#: the largest input file read (bytes): the repository's largest is ~100 KB; a sweep of thousands of
#: values is ~1 MB. A bigger file is a slip (a data dump named as an input) and would take minutes
#: and gigabytes to parse before its error; STORELOOP_MAX_INPUT_BYTES raises the limit.
MAX_INPUT_BYTES = 16 * 2**20


def _near_files(path: Path) -> str:
    """What a missing file was probably meant to be: the closest names in its folder."""
    import difflib

    folder = path.parent
    if not folder.is_dir():
        return f"a file in an existing folder ({folder} does not exist)"
    names = sorted(p.name for p in folder.iterdir() if p.is_file() and p.suffix in (".yaml", ".yml"))
    near = difflib.get_close_matches(path.name, names, n=3, cutoff=0.6)
    if near:
        return "did you mean " + ", ".join(str(folder / n) for n in near) + "?"
    return f"one of the YAML files in {folder} ({len(names)}: {', '.join(names[:6])}{', ...' if len(names) > 6 else ''})"


def load(path: str | Path) -> Any:
    path = Path(path)
    try:
        limit = int(os.environ.get("STORELOOP_MAX_INPUT_BYTES") or MAX_INPUT_BYTES)
    except ValueError:
        limit = MAX_INPUT_BYTES
    try:
        size = path.stat().st_size if path.is_file() else 0
        if size > limit:
            raise SpecError(f"the file is {size / 2**20:.1f} MiB, more than an input file may be "
                            f"({limit / 2**20:g} MiB)", file=str(path), line=1,
                            allowed="a storeloop or Timeloop input (set STORELOOP_MAX_INPUT_BYTES to read a "
                                    "larger one)")
        data = path.read_bytes()
    except FileNotFoundError:
        raise SpecError("no such file", file=str(path), allowed=_near_files(path)) from None
    except OSError as exc:
        raise SpecError(f"cannot read file: {exc.strerror}", file=str(path)) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SpecError(f"byte 0x{data[exc.start]:02x} is not UTF-8 text", file=str(path), line=line,
                        allowed="UTF-8 text (save the file as UTF-8)") from None
    doc = loads(text, str(path))
    if doc is None:
        raise SpecError("the file has no YAML document (it is empty or only comments)", file=str(path), line=1)
    if not isinstance(doc, dict):                # every format is a mapping of top-level keys
        kind = "a list" if isinstance(doc, list) else f"the {type(doc).__name__} {str(doc)[:40]!r}"
        raise SpecError(f"the file holds {kind}; a storeloop file is a mapping under one top-level key",
                        file=str(path), line=1, allowed="arch:, workload:, query:, mapping:, constraints:, sweep:, "
                        "system: or ssd: (storeloop), or a Timeloop v0.3/v0.4 file (architecture:, problem:, ...)")
    return doc


def locate(root: Any, loc: tuple[Any, ...]) -> tuple[str | None, int | None]:
    """File and line of the deepest node of ``root`` that ``loc`` reaches."""
    node, file, line = root, getattr(root, "file", None), getattr(root, "line", None)
    for part in loc:
        if isinstance(node, LDict) and part in node:
            line = node.line_of(part)
            node = node[part]
        elif isinstance(node, LList) and isinstance(part, int) and 0 <= part < len(node):
            line = node.line_of(part)
            node = node[part]
        else:
            break
    return file, line


def field_path(loc: tuple[Any, ...]) -> str:
    """('arch', 'levels', 2, 'capacity') -> 'arch.levels[2].capacity'."""
    return ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in loc).replace(".[", "[")


def error_at(root: Any, loc: tuple[Any, ...], message: str, allowed: str | None = None) -> SpecError:
    """A SpecError pointing at ``loc`` (a path of keys/indices) inside ``root``."""
    file, line = locate(root, loc)
    return SpecError(message, file=file, line=line, field=field_path(loc) or None, allowed=allowed)
