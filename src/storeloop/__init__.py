"""storeloop: design-space exploration for accelerators next to storage and networks.

The Python API, for notebooks and scripts (imported lazily: ``import storeloop`` is instant)::

    import storeloop as sl

    arch = sl.load_arch("arch/onionchopper.yaml")            # storeloop or Timeloop v0.3 YAML
    work = sl.load_workload("workloads/onionpir-64GiB.yaml")
    r = sl.evaluate(arch, work, sl.load_mapping("mappings/onionchopper-thesis-best.yaml", arch, work))
    r.cycles, r.time_s, r.energy_J, r.on_chip_area_mm2         # units in the names
    best = sl.map(arch, work)                                   # best.mapping, best.result, best.search
    df = sl.sweep({"name": "mine", "arch": "arch/onionchopper.yaml",
                   "workloads": ["workloads/onionpir-1GiB.yaml"],
                   "parameters": {"levels.RF.capacity": ["16 words", "32 words"]}})
    copa = sl.evaluate_system(sl.load_system("systems/copa.yaml", {"devices.nic.bandwidth": "200 Gb/s"}))
    copa.throughput, copa.bottleneck, copa.stages["multiply"]["instances_to_saturate"], copa.claims

    mine = sl.load_arch("arch/onionchopper.yaml", {"levels.RF.capacity": "64 words"})   # a field set, as a sweep does
    q = sl.map_query(arch, sl.load_query("workloads/onionpir-1GiB.query.yaml"), sl.price(arch))   # every einsum
    sl.crossover("arch/onionchopper.yaml", work, "levels.Disk.shared_bandwidth", "1 GB/s", "100 GB/s")

Energies come from the plug-ins (CACTI, hwcomponents-library, storeloop's own) unless an energy
table is given (``sl.load_energy_table(arch, "ERT.yaml", "ART.yaml")``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# name -> (module, attribute there): everything the command line uses, so a notebook can do the same
_LAZY = {
    # files -> typed objects (storeloop's formats and Timeloop's)
    "load_arch": ("storeloop.formats.load", "load_arch"), "load_workload": ("storeloop.formats.load", "load_workload"),
    "load_query": ("storeloop.formats.load", "load_query"),
    "load_workload_or_query": ("storeloop.formats.load", "load_workload_or_query"),
    "load_mapping": ("storeloop.formats.load", "load_mapping"),
    "load_energy_table": ("storeloop.formats.load", "load_energy_table"),
    "load_constraints": ("storeloop.formats.constraints", "load_constraints"),
    "load_ssd": ("storeloop.formats.ssd", "load_ssd"), "load_sweep": ("storeloop.sweeps", "load_sweep"),
    "load_system": ("storeloop.system", "load_system"),
    "timeloop_mapper_options": ("storeloop.formats.timeloop", "mapper_options_from_timeloop"),
    "mapping_level_line": ("storeloop.formats.load", "mapping_level_line"),
    "mapping_to_native": ("storeloop.formats.mapping", "mapping_to_native"),
    "format_loops": ("storeloop.formats.mapping", "format_loops"),
    "parse_set": ("storeloop.formats.overrides", "parse_set"),
    "bytes_of": ("storeloop.formats.quantities", "bytes_of"), "integer": ("storeloop.formats.quantities", "integer"),
    "magnitude": ("storeloop.formats.quantities", "magnitude"),
    "ExpressionError": ("storeloop.formats.quantities", "ExpressionError"),
    # the model and the mapper
    "price_components": ("storeloop.energy", "price"),     # (the table, each component with its estimate)
    "result_to_json": ("storeloop.model.evaluate", "result_to_json"),
    "MapperOptions": ("storeloop.mapper.options", "MapperOptions"),
    "mapper_options": ("storeloop.mapper.options", "options"),
    "usable_cores": ("storeloop.mapper.options", "usable_cores"),
    "arch_constraints": ("storeloop.mapper.constraints", "arch_constraints"),
    "padding_text": ("storeloop.mapper.imperfect", "padding_text"),
    "map_query": ("storeloop.mapper.query", "map_query"), "crossover": ("storeloop.sweeps.crossover", "crossover"),
    "export_timeloop": ("storeloop.crosscheck", "export"),
    "crosscheck_timeloop": ("storeloop.crosscheck", "crosscheck"),    # (its name is the module's)
    # the Disk as an SSD
    "Stream": ("storeloop.model.ssd", "Stream"), "ssd_performance": ("storeloop.model.ssd", "performance"),
    "ssd_energy_per_request": ("storeloop.model.ssd", "energy_per_request"),
    # sweeps and their stores
    "run_sweep": ("storeloop.sweeps", "run_sweep"), "run_sweeps": ("storeloop.sweeps", "run_sweeps"),
    "read_results": ("storeloop.sweeps", "read_results"),
    "mapped": ("storeloop.sweeps", "mapped"), "best_points": ("storeloop.sweeps", "best_points"),
    "rank_designs": ("storeloop.sweeps", "rank_designs"), "render_results": ("storeloop.sweeps.results", "render_results"),
    "sweep_names": ("storeloop.sweeps.results", "sweep_names"),
    "verify_store": ("storeloop.sweeps.store", "verify_store"),
    "plot_sweep": ("storeloop.plots", "plot_sweep"),
    # systems
    "evaluate_system": ("storeloop.system", "evaluate_system"),
    "system_summary": ("storeloop.system.report", "summary"), "claims_table": ("storeloop.system.report", "claims_table"),
    "si": ("storeloop.system.report", "si"),
}
__all__ = ["price", "evaluate", "map", "sweep", *_LAZY, "__version__"]

if TYPE_CHECKING:                                   # for editors; at run time everything is lazy
    from storeloop.formats.constraints import load_constraints  # noqa: F401
    from storeloop.formats.load import load_arch, load_energy_table, load_mapping, load_query, load_workload  # noqa: F401
    from storeloop.mapper.query import map_query  # noqa: F401
    from storeloop.sweeps import best_points, rank_designs, read_results  # noqa: F401
    from storeloop.sweeps.crossover import crossover  # noqa: F401
    from storeloop.system import evaluate_system, load_system  # noqa: F401


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        module, attribute = _LAZY[name]
        return getattr(importlib.import_module(module), attribute)
    if name == "__version__":
        from importlib.metadata import PackageNotFoundError, version

        try:
            return version("storeloop")
        except PackageNotFoundError:
            return "unknown"
    raise AttributeError(f"module 'storeloop' has no attribute {name!r}")


def price(arch):
    """The :class:`~storeloop.ir.EnergyTable` of ``arch`` from the energy plug-ins: pJ per
    action (per block access for storage, per operation for compute) and µm² per instance, each
    entry with its source."""
    from storeloop.energy import price as _price

    return _price(arch)[0]


def evaluate(arch, workload, mapping, energy=None):
    """Cycles, energy and area of one mapping (a :class:`~storeloop.model.evaluate.Result`: ``cycles``,
    ``time_s``, ``energy_J``, ``area_mm2``, ``on_chip_area_mm2``, per-level ``levels``,
    ``to_dict()``, ``to_frame()``). ``energy``: an EnergyTable (default: :func:`price`). Raises
    MappingError when the mapping cannot run on the arch."""
    from storeloop.model.evaluate import evaluate as _evaluate

    return _evaluate(arch, workload, mapping, energy if energy is not None else price(arch))


def map(arch, workload, energy=None, **options):  # noqa: A001 -- the verb users look for
    """The best mapping of ``workload`` on ``arch`` (a MapResult: ``mapping``, ``result`` as in
    :func:`evaluate`, ``search``: the report with the lower bounds, gaps and why it stopped).
    ``options`` are :func:`storeloop.mapper.map_workload`'s: ``objective`` ("delay,energy",
    "delay", "energy", "edp", "area-energy"), ``budget`` (candidates: a stop that gives the same
    answer on a busy machine), ``time_limit`` (seconds, a safety net),
    ``energy_gap`` (relative), ``constraints``, ``seeds`` (mappings to start from), ``threads``."""
    from storeloop.mapper import map_workload

    return map_workload(arch, workload, energy if energy is not None else price(arch), **options)


def sweep(spec, db=None, *, workers: int = 1, progress: bool = False):
    """Run a sweep and return its current results as a pandas DataFrame (one row per point,
    parameters as columns, numbers with units also split into ``<param>.value``/``<param>.unit``).

    ``spec``: a sweep YAML path, or the ``sweep:`` mapping as a dict (paths relative to the
    current folder; it is written to ``<name>.sweep.yaml`` in the store's folder, so the run
    can be repeated and resumed). ``db``: the store (default ``results/<name>.sqlite``)."""
    from pathlib import Path

    import yaml

    from storeloop.sweeps import load_sweep, mapped, read_results, run_sweep

    if isinstance(spec, dict):
        doc = dict(spec.get("sweep", spec))
        if "arch" in doc:
            doc["arch"] = str(Path(doc["arch"]).resolve())
        if doc.get("workloads") is not None:       # missing: load_sweep says what is needed
            wl = doc["workloads"] if isinstance(doc["workloads"], list) else [doc["workloads"]]
            doc["workloads"] = [{**w, "file": str(Path(w["file"]).resolve())} if isinstance(w, dict) and "file" in w
                                else str(Path(w).resolve()) if isinstance(w, (str, Path)) else w for w in wl]
        if isinstance(doc.get("energy"), dict):
            doc["energy"] = {k: str(Path(v).resolve()) for k, v in doc["energy"].items()}
        path = (Path(db).parent if db is not None else Path("results")) / f"{doc.get('name', 'sweep')}.sweep.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump({"sweep": doc}, sort_keys=False))
        spec = path
    s = load_sweep(spec)
    db = Path(db) if db is not None else Path("results") / f"{s.name}.sqlite"
    run_sweep(s, db, workers=workers, progress=progress)
    return mapped(read_results(db, s.name)).reset_index(drop=True)
