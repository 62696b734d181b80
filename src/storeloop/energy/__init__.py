"""Per-action energy, area and leakage of every component, from plug-ins (Accelergy's role).

**Contract** (:mod:`storeloop.energy.contract`): a plug-in has a ``name``, a ``priority``, the
``classes`` it prices and ``estimate(cls, attrs) -> Estimate``; optionally ``choices`` and ``attributes``.

Plug-ins are found through the Python entry-point group ``storeloop.energy`` (the packages in
``plugins/`` register there) plus storeloop's own hwcomponents adapter. A plug-in that fails to
load or to estimate is skipped with a warning; a class no plug-in knows is an error listing the
known classes. Estimates are cached as JSON in the user's cache directory
(``$STORELOOP_CACHE`` or ``$XDG_CACHE_HOME/storeloop`` or ``~/.cache/storeloop``), never in
site-packages, keyed by plug-in, class and attributes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import warnings
from dataclasses import asdict, dataclass, field
from importlib.metadata import entry_points
from pathlib import Path

from storeloop.energy.contract import Between, Estimate
from storeloop.energy.hwc import HwComponentsPlugin
from storeloop.energy.network import NetworkPlugin
from storeloop.errors import SpecError, StoreloopError
from storeloop.formats.quantities import number, technology_nm
from storeloop.ir import ActionCosts, Arch, EnergyTable
from storeloop.model.disk import with_ssd_prices

GROUP = "storeloop.energy"


def _allows(declared, value) -> bool:
    if isinstance(declared, Between):
        return declared.allows(value)
    return str(value).casefold() in {str(x).casefold() for x in declared}


# attributes storeloop derives from a level's fields: an error about them is an error at the field
DERIVED = {"size_bits": "capacity", "depth": "capacity"}


@functools.cache
def declared_attributes(cls: str) -> tuple[frozenset, tuple[str, ...]] | None:
    """(the attributes the plug-ins of ``cls`` read, their names), or None where a plug-in of the
    class does not declare them (or none prices it): then any attribute may be given."""
    cands = [p for p in Registry.discover(use_cache=False).plugins if cls.lower() in p.classes]
    if not cands or not all(hasattr(p, "attributes") for p in cands):
        return None
    return frozenset(a for p in cands for a in p.attributes(cls.lower())), tuple(p.name for p in cands)


@dataclass
class Component:
    name: str
    cls: str
    instances: int
    attrs: dict
    estimate: Estimate | None = None
    plugin: str = ""
    where: tuple | None = None          # (file, line, field path) of the component in its arch file
    off_chip: bool = False              # StorageLevel.off_chip (compute units are on chip)


def cache_dir() -> Path:
    base = os.environ.get("STORELOOP_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "storeloop")
    return Path(base) / "energy"


@functools.cache
def _installed_plugins() -> tuple[tuple, tuple[str, ...]]:
    """The plug-ins installed (storeloop's own, then the entry points), found once per process (the
    entry points are read from every installed distribution: ~25 ms a time), and why any failed."""
    found, failed = [HwComponentsPlugin(), NetworkPlugin()], []
    for ep in entry_points(group=GROUP):
        try:
            obj = ep.load()
            found.append(obj() if isinstance(obj, type) else obj)
        except Exception as exc:        # a broken plug-in must not break the others
            failed.append(f"storeloop: energy plug-in {ep.name!r} ({ep.value}) failed to load: {exc}; skipped")
    return tuple(found), tuple(failed)


# (cache folder, plug-ins, class, attributes) -> (estimate and plug-in, warnings raised): Registry.estimate
_ANSWERS: dict[tuple, tuple] = {}


@dataclass
class Registry:
    plugins: list = field(default_factory=list)
    cache: Path | None = None
    hits: int = 0
    misses: int = 0

    @classmethod
    def discover(cls, cache: Path | None = None, use_cache: bool = True) -> "Registry":
        found, failed = _installed_plugins()
        for message in failed:             # said at every discovery, as a sweep point's notes keep it
            warnings.warn(message)
        return cls(list(found), (cache or cache_dir()) if use_cache else None)

    def known_classes(self) -> list[str]:
        return sorted({c for p in self.plugins for c in p.classes})

    def estimate(self, cls: str, attrs: dict, where: str = "", located: tuple | None = None) -> tuple[Estimate, str]:
        """An estimate of one component; ``located`` (file, line, field path) puts a failure at the
        component's line in its arch file. With a cache, an answer is kept for the process too
        (:data:`_ANSWERS`, with the warnings it raised, raised again): a sweep prices the same
        components at most of its points."""
        if self.cache is None:
            return self._estimate(cls, attrs, where, located)
        memo = (str(self.cache), tuple(map(id, self.plugins)), cls.lower(),
                json.dumps(attrs, sort_keys=True, default=str))
        if memo in _ANSWERS:
            self.hits += 1
            answer, said = _ANSWERS[memo]
            for message, category in said:
                warnings.warn(message, category)
            return answer
        said = []
        try:
            with warnings.catch_warnings(record=True) as said:
                warnings.simplefilter("always")
                answer = self._estimate(cls, attrs, where, located)
            _ANSWERS[memo] = answer, tuple((w.message, w.category) for w in said)
            return answer
        finally:                   # raised again, also when every plug-in failed (the error follows)
            for w in said:
                warnings.warn(w.message, w.category)

    def _estimate(self, cls: str, attrs: dict, where: str, located: tuple | None) -> tuple[Estimate, str]:

        def failure(message: str, allowed: str) -> StoreloopError:
            if located is not None and located[0] is not None:
                return SpecError(message, file=located[0], line=located[1], field=located[2], allowed=allowed)
            return StoreloopError(f"{where}{message}\n  allowed: {allowed}")

        cands = sorted((p for p in self.plugins if cls.lower() in p.classes), key=lambda p: -p.priority)
        if not cands:
            raise failure(f"no energy plug-in prices component class {cls!r}",
                          f"a class some plug-in prices: {', '.join(self.known_classes())}")
        for attr, value in attrs.items():            # closed sets the plug-ins declare (choices)
            declared = [getattr(p, "choices", lambda c: {})(cls.lower()).get(attr) for p in cands]
            if declared and all(d is not None for d in declared) and not any(_allows(d, value) for d in declared):
                at = DERIVED.get(attr, f"attributes.{attr}")
                field = f"{located[2]}.{at}" if located is not None and located[2] else at
                located = located and (located[0], located[1], field)
                allowed = sorted({str(x) for d in declared for x in ([d] if isinstance(d, Between) else d)})
                raise failure(f"{attr} {value!r} is not one that the plug-ins for class {cls!r} price",
                              ", ".join(allowed))
        errors = []
        for p in cands:
            key = hashlib.sha256(json.dumps([p.name, getattr(p, "version", ""), cls.lower(), attrs],
                                            sort_keys=True, default=str).encode()).hexdigest()[:32]
            path = self.cache / f"{key}.json" if self.cache else None
            if path is not None and path.is_file():
                self.hits += 1
                return Estimate(**json.loads(path.read_text())), p.name
            try:
                est = p.estimate(cls.lower(), dict(attrs))
            except Exception as exc:
                warnings.warn(f"storeloop: energy plug-in {p.name!r} failed on {cls!r}: {exc}; trying the next one")
                errors.append(f"{p.name}: {exc}")
                continue
            self.misses += 1
            if path is not None:            # atomic: a reader never sees half a file
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
                tmp.write_text(json.dumps(asdict(est)))
                os.replace(tmp, path)
            return est, p.name
        raise failure(f"every plug-in for class {cls!r} failed: " + "; ".join(errors),
                      "attributes those plug-ins accept (their messages say which)")


def components(arch: Arch) -> list[Component]:
    """The arch's components with the attributes plug-ins see (technology in metres, widths in bits)."""
    tech = _metres(arch.technology or arch.attributes.get("technology") or "45nm")
    out = []
    for lvl in arch.levels:
        a = {"technology": tech, "word_bits": lvl.word_bits, "block_size": lvl.block_size,
             "width": lvl.word_bits * lvl.block_size, "clock_hz": arch.clock_hz}
        if lvl.size_words is not None:
            a["size_bits"] = lvl.size_words * lvl.word_bits
            a["depth"] = lvl.size_words // lvl.block_size
        for k in ("read_bandwidth", "write_bandwidth", "shared_bandwidth"):
            v = getattr(lvl, k)
            if v is not None:
                a[k] = v                                     # words per cycle per instance
                if arch.clock_hz:
                    a[k.replace("bandwidth", "bytes_per_s")] = v * lvl.word_bits / 8 * arch.clock_hz
        a.update({k: v for k, v in lvl.attributes.items() if k not in a or k in ("width", "depth")})
        out.append(Component(lvl.name, lvl.cls, lvl.instances, a, where=lvl.where, off_chip=lvl.off_chip))
    c = arch.compute
    out.append(Component(c.name, c.cls, c.instances,
                         {"technology": tech, "width": c.word_bits, "clock_hz": arch.clock_hz, **dict(c.attributes)},
                         where=c.where))
    return out


def _metres(tech) -> float:
    return technology_nm(tech) * 1e-9


def price(arch: Arch, registry: Registry | None = None) -> tuple[EnergyTable, list[Component]]:
    """An EnergyTable for the model (per block access for storage, per MAC for compute)."""
    reg = registry or Registry.discover()
    comps = components(arch)
    for comp in comps:
        comp.estimate, comp.plugin = reg.estimate(comp.cls, comp.attrs, where=f"arch {arch.name}, component {comp.name}: ",
                                                  located=comp.where)
    for comp in comps:
        e = comp.estimate
        zero = [] if e.unpriced else [k for k, v in e.actions.items() if v == 0] + \
            (["area"] if e.area_um2 == 0 and not comp.off_chip else [])
        if zero:
            warnings.warn(f"storeloop: {comp.name} ({comp.cls}) is priced 0 for {', '.join(zero)} by "
                          f"{comp.plugin}: {e.source}")
    storage = {}
    for comp, lvl in zip(comps[:-1], arch.levels):
        e = comp.estimate
        r, w, src = e.actions.get("read", 0.0), e.actions.get("write", 0.0), f"{comp.plugin}: {e.source}"
        vae = lvl.attributes.get("vector_access_energy", lvl.attributes.get("vector-access-energy"))
        if vae is not None:           # as in Timeloop, the arch's per-access energy overrides the model's

            r = w = float(number(vae))
            src = f"user: vector_access_energy {r:g} pJ per access in the arch (overrides {src})"
        storage[comp.name] = ActionCosts(r, w, e.area_um2, src)
    ce = comps[-1].estimate
    mac = ce.actions.get("mac", ce.actions.get("compute", ce.actions.get("read", 0.0)))

    table = with_ssd_prices(arch, EnergyTable(storage, ActionCosts(mac, 0.0, ce.area_um2,
                                                                   f"{comps[-1].plugin}: {ce.source}"),
                                              source="energy plug-ins: " + ", ".join(
                                                  f"{c.name} " + ("vector_access_energy (arch)" if c.name in storage
                                                                  and storage[c.name].source.startswith("user:")
                                                                  else c.plugin) for c in comps)))
    return double_buffered(arch, table), comps


def double_buffered(arch: Arch, table: EnergyTable) -> EnergyTable:
    """``table`` with each level declared ``buffering: double`` charged a second copy of itself: twice
    the area per instance (a second bank of the declared capacity, which fills while the first is
    used; each access still reaches one bank, so the energy per access is unchanged)."""
    import dataclasses

    doubled = {lvl.name for lvl in arch.levels if lvl.buffering == "double"}
    if not doubled:
        return table
    storage = {name: dataclasses.replace(c, area_um2=2 * c.area_um2,
                                         source=f"{c.source}; area x2: double-buffered (a second copy)")
               if name in doubled else c for name, c in table.storage.items()}
    return dataclasses.replace(table, storage=storage)
