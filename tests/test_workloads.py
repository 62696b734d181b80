"""OnionPIR workloads by database size (thesis ch. 3.3, 6.1, 6.5)."""

import json
import subprocess
import sys

import pytest

from conftest import ROOT
from storeloop.errors import SpecError
from storeloop.spec.load import load_workload
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
