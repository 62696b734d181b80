"""OnionPIR workloads by database size (thesis ch. 3.3, 6.1, 6.5)."""

import dataclasses
import json
import subprocess
import sys

import pytest

from conftest import ROOT
from storeloop.errors import SpecError
from storeloop.formats.load import load_workload
from storeloop.workloads.pir import onionpir_first_dimension, tensor_elements


def test_onionpir_64GiB_matches_thesis():
    w = onionpir_first_dimension(64 * 2**30)
    assert w.bounds_dict() == {"M": 1, "N": 2048, "P": 2, "Q": 1, "J": 256, "K": 2, "C": 2, "D": 4096}
    assert w.macs == 17_179_869_184                         # thesis ch. 6.1
    assert sum(tensor_elements(w).values()) == 8_631_877_632  # |A| + |B| + |C|, thesis ch. 6.1


@pytest.mark.parametrize("gib_exp", range(-1, 7))
def test_database_is_tensor_B(gib_exp):
    size = int(2**30 * 2.0**gib_exp)
    w = onionpir_first_dimension(size)
    assert tensor_elements(w)["B"] * 8 == size
    assert w.bounds_dict()["N"] == size // (8 * 256 * 2 * 2 * 4096)


def test_too_small_or_ragged_database_is_refused():
    with pytest.raises(SpecError, match="smaller than one column"):
        onionpir_first_dimension(2**20)
    with pytest.raises(SpecError, match="not a whole number of columns"):
        onionpir_first_dimension(2**30 + 2**20)


@pytest.mark.parametrize("size", ["512MiB", "1GiB", "2GiB", "4GiB", "8GiB", "16GiB", "32GiB", "64GiB"])
def test_repository_files_equal_generator(size):
    w = load_workload(ROOT / "workloads" / f"onionpir-{size}.yaml")
    gen = onionpir_first_dimension(int(size[:-3]) * {"MiB": 2**20, "GiB": 2**30}[size[-3:]])
    assert w.bounds_dict() == gen.bounds_dict() and w.macs == gen.macs


def test_cli_json():
    p = subprocess.run([sys.executable, "-m", "storeloop.cli", "workload", "onionpir", "--db-size", "64GiB", "--json"],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["db_size_bytes"] == 64 * 2**30
    first = out["einsums"][0]
    assert first["bounds"]["N"] == 2048 and first["macs"] == 17_179_869_184
    assert sum(first["tensor_elements"].values()) == 8_631_877_632


def test_cli_unknown_scheme_exits_2():
    p = subprocess.run([sys.executable, "-m", "storeloop.cli", "workload", "mulpir", "--db-size", "1GiB"],
                       capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 2 and "allowed: onionpir" in p.stderr and "Traceback" not in p.stderr


# --- the other schemes of Table 3.2, the later OnionPIR dimensions, the rotation pipeline -------------

from storeloop.workloads.pir import fastpir, onionpir, sealpir, simplepir  # noqa: E402

SIZES = [2**29 * 2**k for k in range(8)]          # 512 MiB .. 64 GiB, doubling (thesis ch. 6.5)


@pytest.mark.parametrize("size", SIZES)
def test_table_3_2_bounds(size):
    plaintexts = size // (8 * 2 * 4096)
    s = sealpir(size)[0].bounds_dict()
    assert (s["M"], s["P"], s["Q"], s["K"], s["C"], s["D"]) == (1, 2, 1, 1, 2, 4096)
    assert s["J"] * s["N"] == plaintexts and s["J"] <= s["N"] <= 2 * s["J"]     # ~sqrt(records) each
    p = simplepir(size)[0].bounds_dict()
    assert (p["N"], p["P"], p["Q"], p["K"], p["C"], p["D"]) == (1, 1, 1, 1, 1, 1)
    assert p["M"] * p["J"] == size // 8 and p["J"] <= p["M"] <= 2 * p["J"]
    f = fastpir(size)[0].bounds_dict()
    assert (f["M"], f["P"], f["Q"], f["K"], f["C"], f["D"]) == (1, 2, 1, 1, 2, 4096)
    assert f["N"] == 256 * 8 // 16 and f["J"] * f["N"] == plaintexts          # N = columns, J = ptxts/column


def test_sealpir_64GiB_is_square():
    assert sealpir(64 * 2**30)[0].bounds_dict()["J"] == sealpir(64 * 2**30)[0].bounds_dict()["N"] == 1024


def test_onionpir_later_dimensions_fold_by_four():
    dims = onionpir(64 * 2**30, ell=5)
    assert dims[0].bounds_dict()["N"] == 2048
    ns = [w.bounds_dict()["N"] for w in dims[1:]]
    js = [w.bounds_dict()["J"] for w in dims[1:]]
    assert ns == [512, 128, 32, 8, 2, 1] and js == [4, 4, 4, 4, 4, 2]
    assert all(w.bounds_dict()["K"] == 10 for w in dims[1:])
    later = sum(w.macs for w in dims[1:])
    assert later == sum(n * j for n, j in zip(ns, js)) * 2 * 10 * 2 * 4096
    assert later / dims[0].macs < 0.03              # the first dimension dominates (thesis ch. 3.2: 99.4 %)


def test_invalid_scheme_parameters_are_refused():
    with pytest.raises(SpecError, match="smaller than one plaintext"):
        sealpir(1024)
    with pytest.raises(SpecError, match="not a whole number"):
        fastpir(2**30 + 8)
    with pytest.raises(SpecError, match="slots"):
        fastpir(2**30, record_bytes=3, slot_bits=16)


def test_cli_param_and_unknown_param():
    run = lambda *a: subprocess.run([sys.executable, "-m", "storeloop.cli", "workload", *a],
                                    capture_output=True, text=True, cwd=ROOT)
    p = run("onionpir", "--db-size", "64GiB", "--param", "ell=3", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    assert out["einsums"][0]["bounds"]["N"] == 2048 and out["einsums"][1]["bounds"]["K"] == 6
    p = run("fastpir", "--db-size", "1GiB", "--param", "colour=3")
    assert p.returncode == 2 and "record_bytes" in p.stderr and "Traceback" not in p.stderr


def _workload_files():
    return sorted((ROOT / "workloads").glob("*.yaml"))


@pytest.mark.parametrize("path", _workload_files(), ids=lambda p: p.name)
def test_every_workload_file_maps(path):
    from storeloop.energy import price
    from storeloop.mapper import map_workload
    from storeloop.model.evaluate import evaluate
    from storeloop.formats.load import load_arch

    arch = load_arch(ROOT / "arch" / ("rotation-nic.yaml" if path.name.startswith("rotation") else "onionchopper.yaml"))
    energy = price(arch)[0]
    if path.name.endswith(".query.yaml"):               # a whole query: every einsum at its home
        from storeloop.mapper.query import map_query
        from storeloop.formats.load import load_query

        query = load_query(path)
        out = map_query(arch, query, energy, time_limit=1.0)
        runs = [(dataclasses.replace(arch, levels=arch.levels[[lvl.name for lvl in arch.levels].index(home):]),
                 e.workload, part) for e, home, part in zip(query.einsums, out.homes, out.parts)]
    else:
        w = load_workload(path)
        runs = [(arch, w, map_workload(arch, w, energy, time_limit=1.0))]
    for at, w, part in runs:
        assert part.result.cycles >= part.search["lower_bound_cycles"] > 0
        assert evaluate(at, w, part.mapping, energy).cycles == part.result.cycles


@pytest.mark.parametrize("scheme", ["onionpir", "sealpir", "simplepir", "fastpir"])
def test_batch_shares_the_database_pass(scheme):
    from storeloop.workloads import pir

    one, four = pir.SCHEMES[scheme](2**30)[0], pir.SCHEMES[scheme](2**30, batch=4)[0]
    db = "A" if scheme == "simplepir" else "B"             # SimplePIR's database is A (M rows x J)
    el = {t.name: one.tensor_elements(t) for t in one.tensors}
    el4 = {t.name: four.tensor_elements(t) for t in four.tensors}
    assert el4[db] == el[db]                                # the database is read once for the batch
    assert four.macs == 4 * one.macs
    assert all(el4[t] == 4 * el[t] for t in el if t != db)  # every query has its own input and answer
    assert four.name.endswith("-batch4")


def test_workload_out_writes_every_pass(tmp_path, capsys):
    from storeloop.workloads import pir
    from storeloop.cli import main
    from storeloop.formats.load import load_workload

    out = tmp_path / "q.yaml"
    assert main(["workload", "onionpir", "--db-size", "1GiB", "--param", "batch=2", "--out", str(out)]) == 0
    passes = pir.onionpir(2**30, batch=2)
    files = [out] + [tmp_path / f"q-pass{i}.yaml" for i in range(2, len(passes) + 1)]
    assert len(passes) > 1 and all(f.is_file() for f in files)
    for f, w in zip(files, passes):
        got = load_workload(f)
        assert got.bounds_dict() == w.bounds_dict() and got.name == w.name
    assert f"pass {len(passes)} of {len(passes)}" in capsys.readouterr().out
