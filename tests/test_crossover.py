"""storeloop crossover: where the bound of the best mapping moves along one arch parameter."""

import json

from conftest import ROOT
from storeloop.cli import main

ARCH, WORK = str(ROOT / "arch" / "onionchopper.yaml"), str(ROOT / "workloads" / "onionpir-64GiB.yaml")
ENERGY = ["--ert", str(ROOT / "arch" / "onionchopper.ERT.yaml"), "--art", str(ROOT / "arch" / "onionchopper.ART.yaml")]


def test_the_disk_bandwidth_where_the_macs_start_to_bind(capsys):
    """OnionChopper: the Disk binds at 10 GB/s (13,811,004,212 cycles), the two MACs at 8,589,934,592
    cycles, so with the same Disk traffic the bound moves at 10 GB/s x 13,811,004,212 / 8,589,934,592
    = 16.08 GB/s; the bisection's answer brackets it within 1 %."""
    assert main(["crossover", ARCH, WORK, "levels.Disk.shared_bandwidth", "1 GB/s", "100 GB/s", "--json", *ENERGY]) == 0
    out = json.loads(capsys.readouterr().out)
    lo, hi = (float(out[k].split()[0]) for k in ("low", "high"))
    expected = 10 * 13_811_004_212 / 8_589_934_592
    assert out["moves"] and out["bound_low"] == "Disk" and out["bound_high"] == "MAC (compute)"
    assert lo <= expected <= hi and hi / lo - 1 <= 0.01 and out["cycles_high"] == 8_589_934_592


def test_no_crossover_and_bad_ranges(capsys):
    assert main(["crossover", ARCH, WORK, "levels.Disk.shared_bandwidth", "1 GB/s", "5 GB/s", *ENERGY]) == 0
    assert "does not move" in capsys.readouterr().out
    for low, high, needle in (("5 GB/s", "1 GB/s", "LOW < HIGH"), ("1 GB/s", "100 MHz", "same unit"),
                              ("0 GB/s", "1 GB/s", "not positive")):
        assert main(["crossover", ARCH, WORK, "levels.Disk.shared_bandwidth", low, high, *ENERGY]) == 2
        assert needle in capsys.readouterr().err
    assert main(["crossover", ARCH, WORK, "levels.Dsk.shared_bandwidth", "1 GB/s", "2 GB/s", *ENERGY]) == 2
    assert "Dsk" in capsys.readouterr().err


def test_a_count_is_bisected_in_whole_numbers(capsys):
    """Lanes (SRAM, RF and MAC instances together, a + b as in a sweep): one lane is compute-bound,
    two already reach the Disk's bound; the answer is the pair of neighbouring counts."""
    path = "levels.SRAM.instances+levels.RF.instances+compute.instances"
    assert main(["crossover", ARCH, WORK, path, "1", "64", "--json", *ENERGY]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["low"], out["high"], out["bound_low"], out["bound_high"]) == ("1", "2", "MAC (compute)", "Disk")
    assert out["cycles_low"] == 17_179_869_184 and out["cycles_high"] == 13_811_004_212
