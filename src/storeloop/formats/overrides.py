"""One home for setting a field of a loaded document by its dotted path: ``--set``, a system's
scenarios and claims' ``at``, a sweep's parameters and scenarios, an einsum stage's ``arch_set``.

Two documents are addressed: an arch (``levels.<name>.<field>``, ``compute.<field>``, ``<field>``, a
plug-in attribute, a level's SSD field or a tensor's layout; :func:`arch_field`) and a system
(list items by name: ``devices.nic.bandwidth``, ``stages.rotation.instances``;
:func:`set_system_field`). A path that names nothing is an error at the file and line that set it;
the value is then checked by the format's own schema when the document is read.
"""

from __future__ import annotations

from typing import Any

from storeloop.errors import SpecError
from storeloop.formats.yamlio import LDict, copy_doc, error_at, loads


def set_arch_field(doc: LDict, path: str, value: Any, root=None, loc=()) -> None:
    """Set ``path`` (a parameter path, :func:`arch_field`) inside a loaded ``arch:`` document."""
    target, fld = arch_field(doc, path, root, loc)
    target[fld] = value


def arch_with(doc: LDict, items) -> LDict:
    """A copy of the ``arch:`` document ``doc`` with each (parameter path, value) of ``items`` set."""
    out = copy_doc(doc)
    for path, value in items:
        set_arch_field(out, path, value)
    return out


def arch_field(arch_doc: LDict, path: str, doc=None, loc=()) -> tuple[dict, str]:
    """The mapping and key a parameter path sets: levels.<name>.<field>, compute.<field>, <field>,
    an attribute the plug-ins read: levels.<name>.attributes.<key>, compute.attributes.<key>, or
    a field of a level's SSD: levels.<name>.ssd.<field> (levels.<name>.ssd.host.lanes), or a
    tensor's layout on a level: levels.<name>.layout.<tensor> (a list of its ranks)."""
    parts = path.split(".")
    a = arch_doc["arch"]
    # a key of a level's (or the compute's) attributes, or a tensor's rank order in a level's layout
    keyed = len(parts) >= 3 and parts[-1] != "" and (parts[-2] == "attributes" or
                                                     (parts[-2] == "layout" and len(parts) == 4))
    if keyed and parts[0] in ("levels", "compute"):
        owner, block = arch_field(arch_doc, ".".join(parts[:-1]), doc, loc)
        if not isinstance(owner.get(block), dict):
            owner[block] = LDict()
        return owner[block], parts[-1]
    if parts[0] == "levels" and len(parts) >= 4 and parts[2] == "ssd":      # a field of a level's SSD
        owner, _ = arch_field(arch_doc, ".".join(parts[:3]), doc, loc)
        for key in parts[2:-1]:
            if not isinstance(owner.get(key), dict):
                raise error_at(doc, loc, f"parameter path {path!r}: level {parts[1]!r} has no {key}: block",
                               allowed=f"levels.{parts[1]}.<field>, or an ssd: field of a level that has one")
            owner = owner[key]
        return owner, parts[-1]
    if parts[0] == "levels" and len(parts) == 3:
        for lvl in a.get("levels") or []:
            if lvl.get("name") == parts[1]:
                return lvl, parts[2]
        raise error_at(doc, loc, f"no level named {parts[1]!r} in the arch",
                       allowed=", ".join(str(lvl.get("name")) for lvl in a.get("levels") or []))
    if parts[0] == "compute" and len(parts) == 2:
        return a["compute"], parts[1]
    if len(parts) == 1:
        return a, parts[0]
    raise error_at(doc, loc, f"cannot read parameter path {path!r}",
                   allowed="levels.<level>.<field>, compute.<field>, <arch field>, levels.<level>.attributes.<key>, "
                           "levels.<level>.ssd.<field> or levels.<level>.layout.<tensor>; "
                           "join several with '+'")


def parse_set(text: str) -> tuple[str, Any]:
    """'devices.nic.bandwidth=200 Gb/s' -> ('devices.nic.bandwidth', '200 Gb/s'); the value is read as YAML."""
    path, sep, value = str(text).partition("=")
    if not sep or not path.strip():
        raise SpecError(f"{text!r} is not PATH=VALUE", field="--set",
                        allowed="e.g. devices.nic.bandwidth=200Gb/s or stages.rotation.instances=12")
    parsed = loads(value, "--set") if value.strip() else None
    if parsed is None:
        raise SpecError(f"{text!r} has no value after '='", field="--set", allowed="PATH=VALUE")
    return path.strip(), parsed


_MAPPING_FIELDS = ("ratios", "scenarios", "bounds", "arch_set", "per_instance", "demands", "fixed", "unit", "pcie")


def set_system_field(doc: Any, path: str, value: Any) -> None:
    """Set ``path`` inside a loaded ``system:`` document: list items are addressed by name
    (devices.nic.bandwidth, stages.rotation.instances, ratios.dedup, target)."""
    node = doc.get("system") if isinstance(doc, dict) else None
    parts = path.split(".")
    for i, part in enumerate(parts[:-1]):       # keys that hold dots: arch_set's paths, demands' resources
        width = {"arch_set": len(parts) - i - 1, "demands": 2}.get(part)
        if width and i + 1 + width <= len(parts):
            parts = parts[:i + 1] + [".".join(parts[i + 1:i + 1 + width])] + parts[i + 1 + width:]
            break
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        if isinstance(node, list):
            match = [item for item in node if isinstance(item, dict) and str(item.get("name")) == part]
            if not match:
                names = [str(item.get("name")) for item in node if isinstance(item, dict)]
                raise SpecError(f"no item named '{part}' in {'.'.join(parts[:i])}", field="--set",
                                allowed=", ".join(names) or "nothing there")
            if last:
                raise SpecError(f"'{path}' names a whole item; set one of its fields", field="--set",
                                allowed=f"{path}.<field>")
            node = match[0]
        elif isinstance(node, dict):
            if last:
                if isinstance(node, LDict) and part not in node.lines:
                    node.lines[part] = node.line
                node[part] = value
                return
            if part not in node:
                if part in _MAPPING_FIELDS:
                    node[part] = LDict()
                else:
                    raise SpecError(f"'{'.'.join(parts[:i + 1])}' is not in the system file", field="--set",
                                    allowed=", ".join(map(str, node)))
            node = node[part]
        else:
            raise SpecError(f"cannot set '{path}': '{'.'.join(parts[:i])}' is a value, not a mapping or list",
                            field="--set")
