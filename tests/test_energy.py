"""Energy plug-ins: hwcomponents/CACTI adapter, the Disk plug-in, discovery, cache and failures."""

import json

import pytest

from storeloop.cli import main
from storeloop.energy import Estimate, Registry, price
from storeloop.energy.cacti import ensure_cacti
from storeloop.energy.hwc import HwComponentsPlugin
from storeloop.errors import StoreloopError
from storeloop.formats.load import load_arch

from conftest import ROOT

ARCH = ROOT / "arch" / "onionchopper.yaml"


@pytest.fixture
def registry(tmp_path):
    return Registry.discover(cache=tmp_path / "cache")


def test_sram_equals_hwcomponents_cacti(registry):
    from hwcomponents_cacti import SRAM

    ensure_cacti(quiet=True)
    attrs = {"technology": 45e-9, "width": 256, "size_bits": 4 * 1024 * 8, "depth": 128}
    est, plugin = registry.estimate("SRAM", attrs)
    ref = SRAM(tech_node=45e-9, width=256, size=4 * 1024 * 8)
    assert plugin == "hwcomponents"
    assert est.actions["read"] == pytest.approx(ref.read().energy * 1e12, rel=1e-12)
    assert est.actions["write"] == pytest.approx(ref.write().energy * 1e12, rel=1e-12)
    assert est.area_um2 == pytest.approx(ref.area * 1e12, rel=1e-12)


def test_disk_energy_is_power_over_bandwidth(registry):
    attrs = {"word_bits": 64, "block_size": 1, "read_power_W": 6.0, "write_power_W": 9.0,
             "read_bytes_per_s": 5e9, "write_bytes_per_s": 4.4e9}
    est, plugin = registry.estimate("Disk", attrs)
    assert plugin == "storeloop-disk"                    # discovered through its entry point
    assert est.actions["read"] == pytest.approx(6.0 / (5e9 * 8) * 64 * 1e12)
    assert est.actions["write"] == pytest.approx(9.0 / (4.4e9 * 8) * 64 * 1e12)
    assert "arch file" in est.source


def test_cache_hit_skips_cacti(registry, tmp_path, monkeypatch):
    attrs = {"technology": 45e-9, "width": 128, "depth": 64, "size_bits": 8192}
    first, _ = registry.estimate("SRAM", attrs)                       # runs CACTI once
    again = Registry.discover(cache=tmp_path / "cache")
    monkeypatch.setattr(HwComponentsPlugin, "estimate", lambda *a: pytest.fail("CACTI called on a cache hit"))
    second, _ = again.estimate("SRAM", attrs)
    assert (again.hits, second) == (1, first)
    assert not any("site-packages" in str(p) for p in (tmp_path / "cache").rglob("*"))


class Broken:
    name, priority, classes = "broken", 9.0, ("sram",)

    def estimate(self, cls, attrs):
        raise RuntimeError("boom")


class Fixed:
    name, priority, classes = "fixed", 1.0, ("sram", "widget")

    def estimate(self, cls, attrs):
        return Estimate({"read": 1.0, "write": 2.0}, 3.0, 0.0, "test")


def test_broken_plugin_warns_and_the_next_one_answers():
    reg = Registry([Broken(), Fixed()], cache=None)
    with pytest.warns(UserWarning, match="broken.*boom"):
        est, plugin = reg.estimate("SRAM", {})
    assert plugin == "fixed" and est.area_um2 == 3.0
    with pytest.raises(StoreloopError, match="a class some plug-in prices: sram, widget"):
        reg.estimate("quantum", {})


def test_energy_cli_and_model_without_ert(capsys):
    assert main(["energy", str(ARCH), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    by = {c["name"]: c for c in doc["components"]}
    assert set(by) == {"Disk", "DRAM", "SRAM", "RF", "MAC"}
    for name in ("SRAM", "RF", "MAC"):
        assert by[name]["area_um2"] > 0 and by[name]["source"]
    assert by["Disk"]["actions"]["read"] == pytest.approx(20000.0)   # 2.5 nJ/B x 8 B
    assert doc["total_area_um2"] == pytest.approx(sum(c["area_um2"] * c["instances"] for c in doc["components"]))
    table, _ = price(load_arch(ARCH))
    assert table.storage["SRAM"].read_pJ > 0
    assert main(["model", str(ARCH), str(ROOT / "workloads/onionpir-64GiB.yaml"),
                 str(ROOT / "mappings/onionchopper-thesis-best.yaml"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["summary"]["cycles"] == 13_811_004_212


def test_modmac_grows_with_pipeline_depth():
    """ModMAC (thesis ch. 4.2.5): shallower stages (fewer full adders each) mean more stages,
    more pipeline registers, so more area and energy per MAC; a stage slower than the clock is refused."""
    from storeloop.energy import Registry

    reg = Registry.discover(use_cache=False)
    base = {"technology": 45e-9, "width": 64, "clock_hz": 2e9}
    est = {g: reg.estimate("modmac", {**base, "fa_per_stage": g})[0] for g in (3, 2, 1)}
    depth = {g: int(e.source.split(" pipeline stages")[0].rsplit(" ", 1)[1]) for g, e in est.items()}
    assert depth[3] < depth[2] < depth[1] == 3 * (3 * 64 - 4) + 4 * 64 + 2 * 64 * 3 + 3 * 64
    assert est[3].area_um2 < est[2].area_um2 < est[1].area_um2
    assert est[3].actions["mac"] < est[2].actions["mac"] < est[1].actions["mac"]
    with pytest.raises(Exception, match="clock period"):
        reg.estimate("modmac", {**base, "fa_per_stage": 4})


def test_dram_from_cacti_has_area_growing_with_capacity():
    """DRAM (thesis's Accelergy change): CACTI main-memory area by capacity, energy by type."""
    reg = Registry.discover(use_cache=False)
    base = {"technology": 45e-9, "width": 64, "word_bits": 64, "block_size": 1}
    small, p1 = reg.estimate("dram", {**base, "type": "DDR4", "size_bits": 2**33})
    big, p2 = reg.estimate("dram", {**base, "type": "DDR4", "size_bits": 2**35})
    assert p1 == p2 == "storeloop-dram"
    assert 0 < small.area_um2 < big.area_um2
    assert big.area_um2 == pytest.approx(4 * small.area_um2)          # four 8 Gb dies instead of one
    assert small.actions["read"] > 0 and "CACTI 7 main memory" in small.source
    lp, _ = reg.estimate("dram", {**base, "type": "LPDDR4", "size_bits": 2**33})
    assert lp.area_um2 == small.area_um2 and "fallback, not CACTI" in lp.source
    with pytest.raises(Exception, match="is not one that the plug-ins for class 'dram' price"):
        reg.estimate("dram", {**base, "type": "SDR0", "size_bits": 2**33})


def test_plugins_work_inside_hwcomponents():
    """storeloop's Disk, DRAM and ModMAC models follow hwcomponents' model contract."""
    from hwcomponents import get_action_cost, get_area, get_models
    from storeloop_disk import DiskModel, DiskPlugin
    from storeloop_dram import CactiDRAMModel, DRAMPlugin
    from storeloop_modmac import ModMACModel, ModMACPlugin

    models = get_models(DiskModel, CactiDRAMModel, ModMACModel, include_installed=False, _return_wrappers=True)
    mac = ModMACPlugin().estimate("modmac", {"technology": 45e-9, "width": 64, "clock_period_ps": 500})
    assert get_area("ModMAC", {"tech_node": 45e-9}, models=models) * 1e12 == pytest.approx(mac.area_um2)
    assert get_action_cost("ModMAC", {"tech_node": 45e-9}, "mac", {}, models=models).energy * 1e12 \
        == pytest.approx(mac.actions["mac"])
    disk = DiskPlugin().estimate("disk", {"word_bits": 64, "block_size": 1})
    assert get_action_cost("Disk", {"width": 64}, "read", {}, models=models).energy * 1e12 \
        == pytest.approx(disk.actions["read"])
    dram = DRAMPlugin().estimate("dram", {"technology": 45e-9, "size_bits": 2**33, "width": 64, "type": "DDR4",
                                          "word_bits": 64, "block_size": 1})
    assert dram.area_um2 > 0
    assert get_area("DRAM", {"tech_node": 45e-9, "size": 2**33, "type": "DDR4"}, models=models) * 1e12 \
        == pytest.approx(dram.area_um2)
    # latency and rate per action come from the plug-in's timing: 8 bytes at 10 GB/s; 500 ps clock
    read = get_action_cost("Disk", {"width": 64, "read_bytes_per_s": 10e9}, "read", {}, models=models)
    assert read.latency == pytest.approx(8 / 10e9) and read.throughput == pytest.approx(10e9 / 8)
    mac_cost = get_action_cost("ModMAC", {"tech_node": 45e-9}, "mac", {}, models=models)
    assert mac_cost.throughput == pytest.approx(2e9) and mac_cost.latency > 500e-12
    # a required parameter the plug-in's model has (DRAM size) is required by hwcomponents too
    with pytest.raises(Exception, match="size"):
        get_area("CactiDRAM", {"tech_node": 45e-9}, models=models)


def test_component_model_adapter_takes_the_parameters_of_its_function():
    """One adapter makes the hwcomponents model of any plug-in: its parameters are the function's
    (hwcomponents reads them from __init__'s code), its actions the estimate's."""
    import inspect

    from storeloop.energy import Estimate
    from storeloop.energy.component_model import component_model

    class Doubler:
        name = "doubler"

        def estimate(self, cls, a):
            return Estimate({"read": 2.0 * a["bits"], "write": 3.0}, a["bits"] * 10.0, 1e-3, "test")

    def attrs(tech_node, width=8):
        return {"bits": width}

    model = component_model(Doubler(), "doubler", ["Doubler"], attrs, ["read", "write"])
    code = model.__init__.__code__
    assert code.co_varnames[1:code.co_argcount] == ("tech_node", "width") and model.__init__.__defaults__ == (8,)
    m = model(tech_node=45e-9, width=16)
    assert m.read().energy == pytest.approx(32e-12) and m.write().energy == pytest.approx(3e-12)
    assert m.area == pytest.approx(160e-12) and m.leak_power == pytest.approx(1e-3)
    assert model.__name__ == "DoublerModel" and inspect.isclass(model)
    with pytest.raises(TypeError, match="plain named"):
        component_model(Doubler(), "doubler", ["Doubler"], lambda **kw: kw, ["read"])
