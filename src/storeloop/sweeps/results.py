"""A store's rows as a pandas DataFrame, and the thesis's pick per workload and scenario."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from storeloop.errors import SpecError
from storeloop.formats.quantities import ExpressionError, magnitude, split_unit
from storeloop.sweeps.store import NUMERIC, STATUSES, STORE_HELP, failed_checksums, read_store


def read_results(db_path: str | Path, sweep: str | None = None):
    """The store as a pandas DataFrame, one column per parameter (values as written in the spec; a
    parameter with units also gets ``<param>.value``, a number, and ``<param>.unit``). Rows whose
    inputs have changed since (``stale`` = 1) are included; :func:`mapped`, :func:`best_points`
    and the figures leave them out. A row whose cells no longer give its checksum (changed since it
    was written) is left out, with a warning naming its sweep and key."""
    import warnings

    import pandas as pd

    db = read_store(db_path)
    try:
        q = "select * from points" + (" where sweep = ?" if sweep else "")
        df = pd.read_sql_query(q, db, params=(sweep,) if sweep else None)
        bad = failed_checksums(db, sweep)[0]
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as exc:
        raise SpecError(f"cannot read it as a results store ({exc})", file=str(db_path), allowed=STORE_HELP) from None
    finally:
        db.close()
    if bad:
        warnings.warn(f"storeloop: {db_path}: {len(bad)} row(s) changed since they were written (checksum), left "
                      f"out: " + ", ".join(f"sweep {s!r} key {k}" for s, k in bad[:3]) + (", ..." if len(bad) > 3 else "")
                      + f"; storeloop results {db_path} --verify lists them")
        gone = set(bad)
        df = df[[(s, k) not in gone for s, k in zip(df["sweep"], df["key"])]].reset_index(drop=True)
    _check_rows(df, db_path)
    params = pd.DataFrame(df["params"].map(json.loads).tolist(), index=df.index) if len(df) else pd.DataFrame()
    df = pd.concat([df, params], axis=1)
    for col in params.columns:                # "10 GB/s" -> 10.0 in <col>.value, "GB/s" in <col>.unit
        split = [_quantity(v) for v in params[col]]
        if any(u is not None for _, u in split) and all(v is not None for v, _ in split):
            df[f"{col}.value"] = [v for v, _ in split]
            df[f"{col}.unit"] = [u for _, u in split]
    return _readable(df, list(params.columns))


def own_cycles(level: dict) -> int:
    """The cycles one level of a row's ``levels`` JSON needs on its own ports (an SSD: its streams;
    the compute units: their cycles): its ``busy``, without the compute floor Timeloop puts under a
    level's ``cycles``. Rows stored before ``busy`` give their ``cycles``."""
    return level.get("busy", level.get("cycles")) or 0


def _readable(df, params: list[str]):
    """The frame with Result's units (``time_s``, ``energy_J``, ``on_chip_area_mm2``), what binds
    each point (``bound_by``: the level or compute whose own ports need the most cycles; ``runner_up``
    and ``margin``, its cycles over the runner-up's, minus 1) and each level's cycles
    (``cycles.<level>``), parameters first; the stored columns stay, after them."""
    import pandas as pd

    if "cycles" in df and "clock_hz" in df:
        df["time_s"] = pd.to_numeric(df["cycles"]) / pd.to_numeric(df["clock_hz"])
    if "energy_pJ" in df:
        df["energy_J"] = pd.to_numeric(df["energy_pJ"]) / 1e12
    if "on_chip_area_um2" in df:
        df["on_chip_area_mm2"] = pd.to_numeric(df["on_chip_area_um2"]) / 1e6
    if "levels" in df:
        parts = [json.loads(v) if isinstance(v, str) else {} for v in df["levels"]]
        bound, runner, margin, per = [], [], [], {}
        for i, p in enumerate(parts):
            # each by the time its own ports need (own_cycles); the compute units bind on a tie: a
            # level binds only when it is slower than them (Result.bound_by)
            ranked = sorted(((own_cycles(v), bool(v.get("compute")), k) for k, v in p.items()), reverse=True)
            ranked = [(c, k) for c, _, k in ranked]
            for k, v in p.items():
                per.setdefault(f"cycles.{k}", [None] * len(parts))[i] = v.get("cycles")
            bound.append(ranked[0][1] if ranked else None)
            runner.append(ranked[1][1] if len(ranked) > 1 else None)
            margin.append(ranked[0][0] / ranked[1][0] - 1 if len(ranked) > 1 and ranked[1][0] else None)
        df["bound_by"], df["runner_up"], df["margin"] = bound, runner, margin
        for k, v in per.items():
            df[k] = v
    first = ["sweep", "workload"] + params + ["status", "time_s", "energy_J", "on_chip_area_mm2", "bound_by",
                                              "runner_up", "margin"]
    order = [c for c in first if c in df] + [c for c in df if c not in first]
    return df[order]


def render_results(df, fmt: str) -> str | bytes:
    """A results frame as ``table`` (for reading), ``csv``, ``json`` (records) or ``parquet`` (bytes)."""
    if fmt == "table":                         # for reading: no JSON, numbers sorted as quantities
        hidden = ("key", "params", "error", "levels", "result", "scenario", "notes", "mapping", "checksum", "priced_by")
        shown = df.drop(columns=[c for c in hidden if c in df] + [c for c in df if c.endswith((".value", ".unit"))])
        import pandas as pd

        def key(c):                            # a quantity by its size, a number as one, else text
            if f"{c}.value" in df:
                return df[c].map(magnitude).fillna(df[f"{c}.value"])
            num = pd.to_numeric(df[c], errors="coerce")
            return num if num.notna().eq(df[c].notna()).all() else df[c].astype(str)

        if "workload" not in df:              # ranked designs (rank_designs): in their order
            return shown.to_string(max_rows=60, index=False) + "\n"
        params = [c for c in dict.fromkeys(k for p in df.get("params", ()) for k in json.loads(p)) if c in df]
        keys = pd.DataFrame({"sweep": df["sweep"], "workload": df["workload"], **{c: key(c) for c in params}})
        shown = shown.loc[keys.sort_values(list(keys.columns), kind="stable", na_position="last").index]
        return shown.to_string(max_rows=60, index=False) + "\n"
    if fmt == "csv":
        return df.to_csv(index=False)
    if fmt == "json":
        return df.to_json(orient="records", indent=1) + "\n"
    import io

    buf = io.BytesIO()
    try:
        df.to_parquet(buf, index=False)
    except ImportError:
        raise SpecError("writing Parquet needs pyarrow, which is not installed", field="--format",
                        allowed="pip install pyarrow, or --format csv / json") from None
    return buf.getvalue()


def sweep_names(db_path: str | Path) -> list[str]:
    """The names of the sweeps a store holds rows of."""
    db = read_store(db_path)
    try:
        return [n for (n,) in db.execute("select distinct sweep from points order by sweep")]
    finally:
        db.close()


def _check_rows(df, db_path) -> None:
    """Every row as storeloop writes it (a store edited by hand or by another program is refused at
    the first bad cell): numbers in the numeric columns, a known status, the parameters and the
    scenario as JSON objects."""
    import pandas as pd

    def bad(i: int, col: str, why: str, allowed: str) -> SpecError:
        row = df.iloc[i]
        return SpecError(f"row {i + 1} (sweep {row['sweep']!r}, parameters {str(row['params'])[:60]}): {why}",
                         file=str(db_path), field=f"points.{col}", allowed=f"{allowed} ({STORE_HELP})")

    for col in NUMERIC:
        if col in df:
            given = df[col].notna()
            numbers = pd.to_numeric(df[col], errors="coerce")
            wrong = given & (numbers.isna() | df[col].map(lambda v: isinstance(v, (bytes, bool))))
            if wrong.any():
                i = int(wrong.to_numpy().argmax())
                raise bad(i, col, f"{col} is {df[col].iloc[i]!r}, not a number", "a number or empty")
    wrong = ~df["status"].isin(STATUSES)
    if wrong.any():
        i = int(wrong.to_numpy().argmax())
        raise bad(i, "status", f"status {df['status'].iloc[i]!r}", ", ".join(STATUSES))
    for col in ("params", "scenario"):
        for i, v in enumerate(df[col] if col in df else ()):
            if col == "scenario" and pd.isna(v):      # a row of a store written before scenarios
                continue
            try:
                ok = isinstance(json.loads(v), dict)
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise bad(i, col, f"{col} {str(v)[:40]!r} is not a JSON object", "a JSON object of parameter values")


def _quantity(value) -> tuple[float | None, str | None]:
    try:
        amount, unit = split_unit(value)
        return float(amount), unit
    except (ExpressionError, TypeError, ValueError):
        return None, None


def mapped(df):
    """The rows with a result for the current inputs (status ok, not stale)."""
    keep = df["status"] == "ok"
    if "stale" in df:
        keep &= df["stale"] != 1
    return df[keep]


def best_points(df):
    """Per workload and scenario, the thesis's pick (ch. 5.1): fewest cycles, then the least
    area x energy."""
    ok = mapped(df).copy()
    ok["area_energy"] = ok["on_chip_area_um2"] * ok["energy_pJ"]
    group = ["workload"]
    if "scenario" in ok:                       # rows of stores written before scenarios: "{}"
        ok["scenario"] = ok["scenario"].fillna("{}")
        group.append("scenario")
    return ok.sort_values(group + ["cycles", "area_energy"]).groupby(group).head(1)


def rank_designs(df, by: str = "time_s", order: str = "weighted"):
    """Designs ranked across a workload set: one row per design (its parameters) and scenario, with
    ``weighted_<by>``, the weighted mean of ``by`` over the workloads (each row's ``weight``, 1 in
    stores written before weights: a query mix in which workload w is run weight(w) times), and
    ``worst_ratio``, the largest ratio of the design's ``by`` to the best design's on the same
    workload (1: best on every workload), with ``worst_workload`` where it occurs. A design without
    a result on some workload of the set (invalid, not run yet) ranks after those with all, its
    aggregates empty. Sorted by the weighted objective (``order="worst"``: by ``worst_ratio``), then
    on-chip area x weighted energy (the thesis's rule, ch. 5.1, across the set)."""
    import pandas as pd

    ok = mapped(df).copy()
    if not len(ok):
        return pd.DataFrame()
    ok["weight"] = pd.to_numeric(ok["weight"], errors="coerce").fillna(1.0) if "weight" in ok else 1.0
    ok["scenario"] = ok["scenario"].fillna("{}") if "scenario" in ok else "{}"
    ok["_best"] = ok.groupby(["workload", "scenario"])[by].transform("min")
    ok["_ratio"] = ok[by] / ok["_best"]
    workloads = ok.groupby("scenario")["workload"].nunique()
    params = [c for c in dict.fromkeys(k for p in ok["params"] for k in json.loads(p)) if c in ok]
    rows = []
    for (p, scenario), g in ok.groupby(["params", "scenario"], sort=False):
        w = g["weight"]
        worst = g.loc[g["_ratio"].idxmax()]
        complete = g["workload"].nunique() == workloads[scenario]
        agg = lambda col: float((g[col] * w).sum() / w.sum()) if complete else None   # noqa: E731
        rows.append({**{c: g[c].iloc[0] for c in params}, "scenario": scenario, "workloads": g["workload"].nunique(),
                     "complete": complete, f"weighted_{by}": agg(by), "weighted_energy_J": agg("energy_J"),
                     "weighted_time_s": agg("time_s"), "worst_ratio": float(g["_ratio"].max()) if complete else None,
                     "worst_workload": worst["workload"] if complete else None,
                     "on_chip_area_mm2": float(g["on_chip_area_mm2"].iloc[0]),
                     "all_proven": bool((g["cycles_optimal"] == 1).all()), "params": p})
    out = pd.DataFrame(rows)
    out["_ae"] = out["on_chip_area_mm2"] * out["weighted_energy_J"]
    # equal objectives tie (a weighted mean summed in another order may differ in its last bits)
    out["_first"] = out["worst_ratio" if order == "worst" else f"weighted_{by}"].map(
        lambda v: float(f"{v:.12g}") if v == v and v is not None else v)
    out = out.sort_values(["scenario", "complete", "_first", "_ae"], ascending=[True, False, True, True],
                          na_position="last", kind="stable").drop(columns=["_ae", "_first"])
    out.insert(0, "rank", out.groupby("scenario").cumcount() + 1)
    return out.reset_index(drop=True)
