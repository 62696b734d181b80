"""A Timeloop mapper config (``mapper:``) as ``storeloop map``'s options."""

from __future__ import annotations

import difflib
import warnings

from storeloop.formats.timeloop.schema import MAPPER_METRICS, MapperConfig
from storeloop.formats.validate import validate
from storeloop.formats.yamlio import error_at, load

#: the other sections a Timeloop input file may hold beside ``mapper:`` (one file for everything)
OTHER_SECTIONS = ("architecture", "arch", "problem", "mapping", "mapspace", "mapspace_constraints",
                  "architecture_constraints", "arch_constraints", "constraints", "ERT", "ART", "model",
                  "sparse_optimizations", "components", "compound_components", "globals", "variables")


def mapper_options_from_timeloop(path) -> dict:
    """A Timeloop mapper config (``mapper: {algorithm, optimization-metrics, num-threads,
    victory-condition, ...}``) as ``storeloop map``'s options: ``objective``, ``algorithm``,
    ``threads``, ``victory``; the keys Timeloop reads that storeloop's search does not use are
    named in a note."""
    doc = load(path)
    for key in doc if isinstance(doc, dict) else ():
        if key != "mapper" and key not in OTHER_SECTIONS:
            near = difflib.get_close_matches(str(key), ("mapper",) + OTHER_SECTIONS, n=1)
            raise error_at(doc, (key,), f"unknown section '{key}'" + (f"; did you mean '{near[0]}'?" if near else ""),
                           allowed="mapper (and the other sections of a Timeloop input file)")
    if not isinstance(doc, dict) or "mapper" not in doc:
        raise error_at(doc, (), "expected a top-level 'mapper:' mapping (a Timeloop mapper config)",
                       allowed="mapper: {algorithm, optimization-metrics, num-threads, victory-condition, ...}")
    cfg = validate(MapperConfig, doc["mapper"], doc, ("mapper",))
    if cfg.optimization_metric is not None and cfg.optimization_metrics is not None:
        raise error_at(doc, ("mapper", "optimization-metric"), "both optimization-metric and optimization-metrics",
                       allowed="one of them")
    out: dict = {}
    metrics = [cfg.optimization_metric] if cfg.optimization_metric is not None else cfg.optimization_metrics
    if metrics is not None:
        objective = MAPPER_METRICS.get(tuple(str(m) for m in metrics))
        if objective is None:
            key = "optimization-metric" if cfg.optimization_metric is not None else "optimization-metrics"
            raise error_at(doc, ("mapper", key), f"storeloop has no objective for the metrics {list(metrics)}",
                           allowed="[delay, energy], [delay], [energy] or [edp]")
        out["objective"] = objective
    if cfg.algorithm is not None:
        # storeloop's branch and bound covers the whole map space, which contains what Timeloop's
        # exhaustive, linear-pruned and hybrid searches visit; its random searches are Timeloop's
        out["algorithm"] = cfg.algorithm if cfg.algorithm.startswith("random") else "exhaustive"
    if cfg.num_threads is not None:
        out["threads"] = cfg.num_threads
    if cfg.victory_condition is not None:
        out["victory"] = cfg.victory_condition
    unused = sorted(MapperConfig.model_fields[f].alias or f for f in cfg.model_fields_set
                    if f not in ("algorithm", "optimization_metrics", "optimization_metric", "num_threads",
                                 "victory_condition"))
    if unused:
        warnings.warn(f"storeloop: {getattr(doc, 'file', None) or path}: {', '.join(unused)} (Timeloop's mapper "
                      "settings) are not part of storeloop's search; ignored")
    return out

