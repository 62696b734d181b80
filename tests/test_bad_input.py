"""Malformed inputs reported at the file, line and field, exit 2, never a traceback (issue 12's
reproductions: encoding, YAML reader and nesting, arithmetic range, non-positive quantities,
command-line numbers)."""

import json

import pytest

from conftest import ROOT
from storeloop.cli import main

ARCH = (ROOT / "arch" / "onionchopper.yaml").read_text()
WORKLOAD = (ROOT / "workloads" / "onionpir-64GiB.yaml").read_text()
MAPPING = str(ROOT / "mappings" / "onionchopper-thesis-best.yaml")

ARCH_CASES = {
    "non-utf8-comment": ("# caf\xe9\n" + ARCH, "latin-1", ":1", "UTF-8"),
    "nul-byte": ("arch:\x00\n", "utf-8", ":1", "U+0000"),
    "deep-nesting": ("[" * 20000, "utf-8", "", "nested too deeply"),
    "float-overflow": (ARCH.replace("capacity: 4 KiB ", "capacity: 1e200**2 B "), "utf-8", ":32", "out of range"),
    "power-tower": (ARCH.replace("capacity: 4 KiB ", "capacity: ((((2**256)**256)**256)**256)**256 B "), "utf-8",
                    ":32", "out of range"),
    "zero-bandwidth": (ARCH.replace("read_bandwidth: 4 ", "read_bandwidth: 0 "), "utf-8", ":35", "positive"),
    "negative-bandwidth": (ARCH.replace("shared_bandwidth: 10 GB/s", "shared_bandwidth: -10 GB/s"), "utf-8", ":18",
                           "positive"),
    "negative-capacity": (ARCH.replace("capacity: 4 KiB ", "capacity: -4 KiB "), "utf-8", ":32", "negative"),
    "long-expression": (ARCH.replace("capacity: 4 KiB ", "capacity: " + "+".join(["1"] * 600) + " B "), "utf-8",
                        ":32", "characters"),
    "placement-typo": (ARCH.replace("      class: SRAM\n", "      class: SRAM\n      placement: offchip\n"), "utf-8",
                       ":31", "on_chip"),
    "placement-as-list": (ARCH.replace("      class: SRAM\n", "      class: SRAM\n      placement: [off_chip]\n"),
                          "utf-8", ":31", "placement"),
    "block-larger-than-level": (ARCH.replace("block_size: 1\n      read_bandwidth: 3", "block_size: 64\n      "
                                             "read_bandwidth: 3"), "utf-8", ":43", "larger than the level"),
    "boolean-quantity": (ARCH.replace("read_bandwidth: 4 ", "read_bandwidth: true "), "utf-8", ":35", "bool True"),
    "dram-type-no-plugin-prices": (ARCH.replace("type: LPDDR4", "type: LPDDR99"), "utf-8", ":22",
                                   "attributes.type': type 'LPDDR99' is not one"),
    "sram-larger-than-cacti-models": (ARCH.replace("capacity: 4 KiB ", "capacity: 1e30 words "), "utf-8", ":29",
                                      "levels[2].capacity': size_bits"),
    "word-too-wide": (ARCH.replace("      word_bits: 64\n      block_size: 4", "      word_bits: 1e6\n      block_size: 4"),
                      "utf-8", ":33", "65536 bits"),
}


def check(capsys, code, *needles):
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and len(err.splitlines()) <= 25
    for n in needles:
        assert n in err, err


@pytest.mark.parametrize("case", ARCH_CASES, ids=list(ARCH_CASES))
def test_bad_arch_file(case, tmp_path, capsys):
    text, encoding, line, what = ARCH_CASES[case]
    arch = tmp_path / "arch.yaml"
    arch.write_bytes(text.encode(encoding))
    wl = tmp_path / "w.yaml"
    wl.write_text(WORKLOAD)
    check(capsys, main(["model", str(arch), str(wl), MAPPING]), f"arch.yaml{line}", what)


def test_workload_bits_zero_names_the_workload(tmp_path, capsys):
    wl = tmp_path / "w.yaml"
    wl.write_text(WORKLOAD.replace("  bits: 64", "  bits: 0"))
    check(capsys, main(["model", str(ROOT / "arch" / "onionchopper.yaml"), str(wl), MAPPING]), "w.yaml:", "workload.bits")


@pytest.mark.parametrize("args,needle", [
    (["map", "--time-limit", "nan"], "--time-limit"),
    (["map", "--energy-gap", "nan"], "--energy-gap"),
    (["map", "--energy-gap", "-1"], "--energy-gap"),
    (["map", "--budget", "0"], "--budget"),
], ids=["time-limit-nan", "energy-gap-nan", "energy-gap-negative", "budget-zero"])
def test_bad_numbers_on_the_command_line(args, needle, capsys):
    files = [str(ROOT / "arch" / "onionchopper.yaml"), str(ROOT / "workloads" / "onionpir-1GiB.yaml")]
    check(capsys, main([args[0], *files, *args[1:]]), "command line", needle)


@pytest.mark.parametrize("workers", ["0", "100000"])
def test_sweep_workers_out_of_range_are_refused_before_any_process_starts(workers, tmp_path, capsys):
    check(capsys, main(["sweep", str(ROOT / "sweeps" / "demo.yaml"), "--db", str(tmp_path / "r.sqlite"),
                        "--workers", workers]), "--workers", "1 .. 256")
    assert not (tmp_path / "r.sqlite").exists()


def test_scheme_parameter_must_be_positive(capsys):
    check(capsys, main(["workload", "onionpir", "--db-size", "1GiB", "--param", "ell=-1"]), "--param", "at least 1")


def test_map_out_is_a_folder(tmp_path, capsys):
    files = [str(ROOT / "arch" / "onionchopper.yaml"), str(ROOT / "workloads" / "onionpir-1GiB.yaml")]
    check(capsys, main(["map", *files, "--out", str(tmp_path)]), "--out", "folder")


@pytest.mark.parametrize("option,allowed", [("objective: dleay", "delay,energy"), ("algorithm: greedy", "exhaustive"),
                                            ("time_limit: nan", "seconds"), ("energy_gap: -1", "0.001"),
                                            ("budget: 0", "candidates"), ("budget: 1.5", "candidates")])
def test_bad_sweep_mapper_options_stop_before_any_point(option, allowed, tmp_path, capsys):
    spec = tmp_path / "s.yaml"
    text = (ROOT / "sweeps" / "demo.yaml").read_text().replace("../", str(ROOT) + "/")
    assert "mapper: {budget: 5000000}" in text
    spec.write_text(text.replace("mapper: {budget: 5000000}", "mapper: {budget: 5000000, " + option + "}"
                                 if not option.startswith("budget") else "mapper: {" + option + "}"))
    db = tmp_path / "r.sqlite"
    check(capsys, main(["sweep", str(spec), "--db", str(db)]), "s.yaml:", "sweep.mapper", allowed)
    assert not db.exists()


CORPUS = ROOT / "tests" / "corpus" / "thesis__ssd-einsum__pir-onion"


@pytest.mark.parametrize("role,edit,needle", [
    ("mapping", ("permutation: DMNPQJKC", "permutation: XYZ"), "unknown dimension 'X'"),
    ("mapping", ("permutation: DMNPQJKC", "permutation: DDNPQJKC"), "twice"),
    ("arch", ("version: 0.3", "version: 0.2"), "version"),
    ("arch", ("word-bits: 64", "word-bits: 0"), "word-bits"),
], ids=["permutation-unknown", "permutation-twice", "version-0.2", "word-bits-0"])
def test_bad_timeloop_inputs(role, edit, needle, tmp_path, capsys):
    files = {"arch": CORPUS / "arch.yaml", "workload": CORPUS / "problem.yaml", "mapping": CORPUS / "mapping.yaml",
             "ERT": CORPUS / "ERT.yaml", "ART": CORPUS / "ART.yaml"}
    bad = tmp_path / f"{role}.yaml"
    text = files[role].read_text()
    assert edit[0] in text
    bad.write_text(text.replace(edit[0], edit[1], -1 if "raed" in edit[1] else 1))
    files[role] = bad
    args = ["model", str(files["arch"]), str(files["workload"]), str(files["mapping"]),
            "--ert", str(files["ERT"]), "--art", str(files["ART"])]
    check(capsys, main(args), f"{role}.yaml", needle)


SRAM_TABLE = "  - name: system.PE[0..1].SRAM\n    actions:"
# Timeloop / Accelergy files with a shape, a typo or a semantic slip at some depth (issue 23's
# families: shapes, near-miss keys, missing keys, ranges, duplicates, mapping semantics)
TIMELOOP_FAMILIES = [
    ("ERT", (SRAM_TABLE, "  - name: system.PE[0..1].SRAM\n    Actions:"), "did you mean 'actions'"),
    ("ERT", ("      arguments:\n        address_delta: 0\n        data_delta: 0\n      energy: 0.0001",
             "      arguments: 5\n      energy: 0.0001"), "expected a mapping"),
    ("ERT", ("    - name: read\n", "    - name: raed\n"), "no 'read' action"),          # every read renamed
    ("ART", ("    area: 19262.8", "    aea: 19262.8"), "did you mean 'area'"),
    ("arch", ("        - name: PE[0..1]", "        - name: PE[0..-1]"), "range"),
    ("arch", ("              attributes:\n                width: 256", "              attributes:\n                "
              "size: 512\n                width: 256"), "both 'size' and 'depth'"),
    ("arch", ("      attributes:\n        technology: 45nm", "      attributes: [technology]"), "expected a mapping"),
    ("arch", ("                width: 256", "                Width: 256"), "did you mean 'width'"),
    ("arch", ("        - name: DRAM\n", "        - name: Disk\n"), "used twice"),
    ("workload", ("      - name: A\n        projection:", "      - Name: A\n        projection:"), "did you mean 'name'"),
    ("workload", ("          - [ [M] ]\n          - [ [J] ]", "          - 5\n          - [ [J] ]"), "expected a list"),
    ("workload", ("  instance:\n    M: 1", "  instance: 5\n  xinstance:\n    M: 1"), "xinstance"),
    ("mapping", ("    permutation: DMNPQJKC", "    Permutation: DMNPQJKC"), "did you mean 'permutation'"),
    ("mapping", ("    permutation: JMNPQKCD\n", "    permutation: JMNPQKCD\n    split: abc\n"), "split"),
    ("mapping", ("    permutation: JMNPQKCD\n", "    permutation: JMNPQKCD\n    split: [1]\n"), "split"),
    ("mapping", ("    permutation: JMNPQKCD\n", "    permutation: JMNPQKCD\n    split: true\n"), "split"),
    ("mapping", ("    permutation: JMNPQKCD\n", "    permutation: JMNPQKCD\n    split: '1'\n"), "split"),
    ("mapping", ("  - target: DRAM\n    type: spatial", "  - target: Disk\n    type: temporal\n    factors: M=1\n"
                 "  - target: DRAM\n    type: spatial"), "a second temporal entry"),
    ("mapping", ("    permutation: NJMPQKCD", "    permutation: NJMPQKCD\n  - target: RF\n    type: bypass\n"
                 "    bypass: [A]\n    keep: [A]"), "both kept and bypassed"),
    ("workload", ("dimensions: [ M, N, P, Q, J, K, C, D ]", "dimensions: [ M, N, P, Q, J, K, C, D, D ]"),
     "declared twice"),
    ("workload", ("      - name: B\n", "      - name: A\n"), "data space A is declared twice"),
    ("workload", ("          - [ [J] ]\n          - [ [P] ]", "          - [ ]\n          - [ [P] ]"), "no terms"),
    ("workload", ("    N: 2048", "    N: true"), "bool True"),
    ("workload", ("    N: 2048", "    NN: 2048"), "is 'NN' meant to be N?"),
    ("ERT", ("version: 0.3", "version: 9"), "is not allowed"),
]


@pytest.mark.parametrize("role,edit,needle", TIMELOOP_FAMILIES, ids=[f"{r}-{n[:24]}" for r, _, n in TIMELOOP_FAMILIES])
def test_bad_timeloop_families(role, edit, needle, tmp_path, capsys):
    test_bad_timeloop_inputs(role, edit, needle, tmp_path, capsys)


CONSTRAINT_FAMILIES = [
    (("    keep: [A]", "    keep: [A, B]"), "both kept and bypassed"),
    (("    permutation: DCKJQPNM", "    permutaton: DCKJQPNM"), "did you mean 'permutation'"),
    (("    split: 8", "    splits: 8"), "did you mean 'split'"),
    (("    factors: M=1 N=1 P=1 Q=1 J=1 K=1 C=1 D=32", "    factors: M=1 N=1 P=1 Q=1 J=1 K=1 C=1 D=65"),
     "does not divide its bound 4096"),
    (("    type: bypass", "    type: bypas"), "not allowed"),
    (("mapspace_constraints:", "constraints: {levels: []}\nmapspace_constraints:"), "only one of them"),
    (("mapspace_constraints:\n", "mapspace_constraints:\n  - {target: DRAM, type: utilization, min: 2}\n"),
     "a fraction of the compute units"),
    (("mapspace_constraints:\n", "mapspace_constraints:\n  - {target: DRAM, type: utilization, min: 0.5}\n"
      "  - {target: SRAM, type: parallelism, min: 1.0}\n"), "re-specification of min parallelism"),
]


@pytest.mark.parametrize("edit,needle", CONSTRAINT_FAMILIES, ids=[n[:24] for _, n in CONSTRAINT_FAMILIES])
def test_bad_timeloop_constraints(edit, needle, tmp_path, capsys):
    text = (ROOT / "mappings" / "onionchopper.timeloop-constraints.yaml").read_text()
    assert edit[0] in text
    bad = tmp_path / "c.yaml"
    bad.write_text(text.replace(edit[0], edit[1], 1))
    args = ["map", str(ROOT / "arch" / "onionchopper.yaml"), str(ROOT / "workloads" / "onionpir-64GiB.yaml"),
            "--ert", str(ROOT / "arch" / "onionchopper.ERT.yaml"), "--art", str(ROOT / "arch" / "onionchopper.ART.yaml"),
            "--constraints", str(bad), "--time-limit", "5"]
    check(capsys, main(args), "c.yaml", needle)


def test_timeloop_constraint_types_storeloop_does_not_model_are_noted(tmp_path, capsys):
    text = (ROOT / "mappings" / "onionchopper.timeloop-constraints.yaml").read_text()
    bad = tmp_path / "c.yaml"
    bad.write_text(text + "  - target: DRAM\n    type: no_multicast\n")
    args = ["map", str(ROOT / "arch" / "onionchopper.yaml"), str(ROOT / "workloads" / "onionpir-64GiB.yaml"),
            "--ert", str(ROOT / "arch" / "onionchopper.ERT.yaml"), "--art", str(ROOT / "arch" / "onionchopper.ART.yaml"),
            "--constraints", str(bad), "--time-limit", "5"]
    with pytest.warns(UserWarning, match="no_multicast"):
        assert main(args) == 0


@pytest.mark.parametrize("edit,needle", [
    (("bounds: {M: 1,", "bounds: {m: 8, M: 1,"), "same index"),
    (("= A[m,", "= A[0*m,"), "coefficient 0"),
    (("N: 2048", "N: yes"), "bool True"),            # a YAML 1.1 boolean is not the bound 1
    (("N: 2048", "N: true"), "bool True"),
    (("bits: 64", "bits: 100000"), "65536 bits"),
], ids=["bounds-case-duplicate", "zero-coefficient", "bound-yes", "bound-true", "bits-too-wide"])
def test_bad_einsum_workloads(edit, needle, tmp_path, capsys):
    wl = tmp_path / "w.yaml"
    assert edit[0] in WORKLOAD
    wl.write_text(WORKLOAD.replace(edit[0], edit[1], 1))
    check(capsys, main(["model", str(ROOT / "arch" / "onionchopper.yaml"), str(wl), MAPPING]), "w.yaml:", needle)


def test_a_dimension_with_two_loops_in_one_list_is_refused(tmp_path, capsys):
    mapping = tmp_path / "m.yaml"
    mapping.write_text(open(MAPPING).read().replace("temporal: D=32", "temporal: D=16 D=2"))
    check(capsys, main(["model", str(ROOT / "arch" / "onionchopper.yaml"), str(ROOT / "workloads" / "onionpir-64GiB.yaml"),
                        str(mapping)]), "m.yaml:8", "two loops")


def test_constraints_whose_smallest_tiles_overflow_a_kept_level_are_refused_at_once(tmp_path, capsys):
    """The RF must keep C and run N >= 64 at itself: C's smallest tile (64 words) cannot fit in 32
    words, so no mapping exists; this is said before any search (it used to run to the time limit)."""
    import time

    text = (ROOT / "mappings" / "onionchopper.constraints.yaml").read_text()
    bad = tmp_path / "c.yaml"
    bad.write_text(text.replace('temporal: {N: "1..16"}', 'temporal: {N: "64..2048"}'))
    t0 = time.monotonic()
    check(capsys, main(["map", str(ROOT / "arch" / "onionchopper.yaml"), str(ROOT / "workloads" / "onionpir-64GiB.yaml"),
                        "--constraints", str(bad), "--time-limit", "60"]), "c.yaml", "RF must keep C", "it holds 32")
    assert time.monotonic() - t0 < 10


def test_yaml_alias_bomb_is_refused(tmp_path, capsys):
    lines = ['a: &a ["x","x","x","x","x","x","x","x","x"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    lines.append("sweep: {name: bomb, arch: x, workloads: [y], parameters: {levels.SRAM.capacity: *i}}")
    spec = tmp_path / "bomb.yaml"
    spec.write_text("\n".join(lines) + "\n")
    check(capsys, main(["sweep", str(spec), "--db", str(tmp_path / "r.sqlite")]), "bomb.yaml", "aliases")


def test_bounds_near_10_to_the_18_are_factored_at_once():
    import time

    from storeloop.mapper.space import divisors

    t0 = time.monotonic()
    assert len(divisors(10**18)) == 361 and divisors((2**61 - 1) * (2**31 - 1)) == [1, 2**31 - 1, 2**61 - 1,
                                                                                  (2**61 - 1) * (2**31 - 1)]
    assert time.monotonic() - t0 < 1
    assert all(divisors(n) == [d for d in range(1, n + 1) if n % d == 0] for n in range(1, 500))


# ---------------------------------------------------------------- generated from the repo's files
from mutations import cases as _mutations, run as _run  # noqa: E402

MUTATIONS = _mutations()


def test_at_least_300_mutated_inputs_in_both_formats():
    assert len(MUTATIONS) >= 300
    assert {c.fmt for c in MUTATIONS} == {"native", "timeloop"}
    assert {c.role for c in MUTATIONS if ":" not in c.role} == \
        {"arch", "workload", "mapping", "ert", "art", "constraints", "sweep", "ssd", "query"}
    assert {"arch:ssd", "arch:buffered", "sweep:set", "mapping:uneven"} <= {c.role for c in MUTATIONS}
    assert sum("-below-" in c.id for c in MUTATIONS) == 5
    assert any("-attribute-" in c.id for c in MUTATIONS) and sum("-meaningless-" in c.id for c in MUTATIONS) >= 8
    from mutations import MEANINGLESS                 # each is applied: its text is in a file it mutates
    assert all(any(c.role == role and "-meaningless-" in c.id and bad in c.text for c in MUTATIONS)
               for role, _, bad in MEANINGLESS)
    assert any("-disk_from-" in c.id for c in MUTATIONS) and any("-buffering-" in c.id for c in MUTATIONS) and any("-sweep:set-" in c.id and "-C" in c.id for c in MUTATIONS)
    assert {c.role for c in MUTATIONS if c.role.startswith("system:")} >= \
        {"system:copa", "system:fidr", "system:fidr-baseline", "system:p4-enckv", "system:rotation"}
    assert {c.command for c in MUTATIONS} == {"model", "export", "map", "sweep", "system", "ssd", "map-query"}


@pytest.mark.parametrize("case", MUTATIONS, ids=[c.id for c in MUTATIONS])
def test_mutated_input_is_refused_at_its_file(case, tmp_path):
    code, err, seconds, exc = _run(case, tmp_path)
    assert exc is None, f"{type(exc).__name__}: {exc}"
    assert code == 2, f"exit {code} on a malformed {case.role} file"
    assert "Traceback" not in err and len(err.splitlines()) <= 25, err
    assert f"mutated-{case.role.replace(':', '-')}.yaml" in err, f"the error does not name the mutated file:\n{err}"
    assert seconds < 5, f"{seconds:.1f} s"


def test_attribute_near_miss_is_refused_and_the_documented_override_is_read(tmp_path, capsys):
    arch = tmp_path / "a.yaml"
    arch.write_text(ARCH.replace("vector_access_energy: 20000", "vector_acess_energy: 20000"))
    check(capsys, main(["model", str(arch), str(ROOT / "workloads" / "onionpir-64GiB.yaml"), MAPPING]),
          "a.yaml:21", "did you mean 'vector_access_energy'")
    # the Disk's documented vector_access_energy is what the Disk costs per access
    from storeloop.energy import price
    from storeloop.formats.load import load_arch

    arch.write_text(ARCH.replace("vector_access_energy: 20000", "vector_access_energy: 10000"))
    table = price(load_arch(arch))[0]
    assert table.storage["Disk"].read_pJ == table.storage["Disk"].write_pJ == 10000
    assert "vector_access_energy" in table.storage["Disk"].source


@pytest.mark.parametrize("edit,line,needle", [
    (("attributes: {width: 256,", "attributes: {witdh: 256,"), ":37", "did you mean 'width'?"),
    (("attributes: {type: LPDDR4,", "attributes: {type: LPDDR4, page_polcy: open,"), ":28",
     "did you mean 'page_policy'?"),
    (("    word_bits: 64\n", "    word_bits: 64\n    attributes: {fa_per_stag: 4}\n"), ":52", "did you mean 'fa_per_stage'?"),
    (("vector_access_energy: 20000", "read_power: 25"), ":21", "did you mean 'read_power_W'?"),
])
def test_an_attribute_no_plugin_reads_is_refused_with_a_did_you_mean(edit, line, needle, tmp_path, capsys):
    """Each energy plug-in declares the attributes it reads (hwcomponents' SRAM, the DRAM, ModMAC and
    Disk plug-ins here): a word none of them reads would be dropped silently."""
    arch = tmp_path / "a.yaml"
    assert edit[0] in ARCH
    arch.write_text(ARCH.replace(*edit, 1) if "word_bits" not in edit[0] else
                    ARCH[::-1].replace(edit[0][::-1], edit[1][::-1], 1)[::-1])         # the compute's word_bits
    check(capsys, main(["model", str(arch), str(ROOT / "workloads" / "onionpir-64GiB.yaml"), MAPPING]),
          f"a.yaml{line}", "attributes.", needle)


def test_an_attribute_a_sweep_sets_must_be_read_by_a_plugin(tmp_path, capsys):
    sweep = tmp_path / "s.yaml"
    sweep.write_text((ROOT / "sweeps" / "demo.yaml").read_text().replace("../", str(ROOT) + "/").replace(
        "levels.RF.capacity:", "levels.SRAM.attributes.n_bnaks: [1, 2]\n    levels.RF.capacity:"))
    check(capsys, main(["sweep", str(sweep), "--db", str(tmp_path / "x.sqlite")]), "s.yaml:9",
          "did you mean 'n_banks'?")
    assert not (tmp_path / "x.sqlite").exists()


def test_a_timeloop_arch_keeps_accelergys_open_attributes(tmp_path):
    """Accelergy passes any attribute to its plug-ins: a Timeloop arch's extra ones stay allowed."""
    from storeloop.formats.load import load_arch

    case = ROOT / "tests" / "corpus" / "thesis__ssd-einsum__pir-onion"
    text = (case / "arch.yaml").read_text()
    assert "datawidth" in text
    (tmp_path / "arch.yaml").write_text(text.replace("                datawidth:", "                my_note: 1\n                datawidth:", 1))
    arch = load_arch(tmp_path / "arch.yaml")
    assert any("my_note" in c.attributes for c in (*arch.levels, arch.compute))


def test_mesh_x_must_divide_the_instances(tmp_path, capsys):
    arch = tmp_path / "a.yaml"
    text = ARCH.replace("      class: SRAM\n      instances: 2\n", "      class: SRAM\n      instances: 2\n      mesh_x: 3\n", 1)
    assert "mesh_x: 3" in text
    arch.write_text(text)
    check(capsys, main(["model", str(arch), str(ROOT / "workloads" / "onionpir-64GiB.yaml"), MAPPING]), "a.yaml:", "mesh_x")


def test_output_paths_the_command_cannot_write_are_one_line_errors(tmp_path, capsys):
    taken = tmp_path / "taken.txt"
    taken.write_text("x")
    check(capsys, main(["export", str(ROOT / "arch" / "onionchopper.yaml"), str(ROOT / "workloads" / "onionpir-1GiB.yaml"),
                        "--out", str(taken)]), "taken.txt")
    check(capsys, main(["workload", "onionpir", "--db-size", "1GiB", "--out", str(tmp_path / "no" / "such" / "w.yaml")]),
          "No such file or directory")


@pytest.mark.parametrize("edit,needle", [
    (("attributes: {type: LPDDR4, width: 128}", "attributes: {type: LPDDR99, width: 128}"), "LPDDR99"),
    (("    class: modmac", "    class: quantum"), "no energy plug-in prices component class 'quantum'"),
])
def test_a_component_no_plugin_can_price_is_an_error_at_its_line(edit, needle, tmp_path, capsys):
    arch = tmp_path / "a.yaml"
    text = (ROOT / "arch" / "onionchopper.yaml").read_text()
    assert edit[0] in text
    arch.write_text(text.replace(edit[0], edit[1], 1))
    check(capsys, main(["energy", str(arch)]), "a.yaml:", needle)


@pytest.mark.parametrize("levels,needle", [
    ("    - {level: RF, spatial: {N: 2}}", "fanout to MAC is 1"),
    ("    - {level: Disk, temporal: {D: 8}}\n    - {level: DRAM, temporal: {D: 3}}", "fixed factors of D multiply to 24"),
    ("    - {level: DRAM, temporal: {N: '>=64'}}\n    - {level: SRAM, temporal: {N: '>=64'}}", "at least 4096"),
])
def test_constraints_no_mapping_can_meet_are_refused_before_searching(levels, needle, tmp_path, capsys):
    import time

    cons = tmp_path / "c.yaml"
    cons.write_text("constraints:\n  levels:\n" + levels + "\n")
    t0 = time.monotonic()
    check(capsys, main(["map", str(ROOT / "arch" / "onionchopper.yaml"), str(ROOT / "workloads" / "onionpir-64GiB.yaml"),
                        "--constraints", str(cons), "--time-limit", "30"]), "c.yaml", needle)
    assert time.monotonic() - t0 < 10


TIMELOOP_MAPPER = """\
mapper:
  algorithm: linear-pruned
  optimization-metrics: [delay, energy]
  num-threads: 1
  victory-condition: 100
  timeout: 15000
  live-status: False
  diagnostics: False
"""


def test_a_timeloop_mapper_config_sets_the_search_and_names_what_it_ignores(tmp_path, capsys):
    """Timeloop v3.0.3's mapper section (as its tutorials write it): optimization-metrics choose the
    objective, algorithm the search (linear-pruned: storeloop's complete branch and bound), and
    the keys storeloop's search does not use are named in a note."""
    cfg = tmp_path / "mapper.yaml"
    cfg.write_text(TIMELOOP_MAPPER)
    files = [str(ROOT / "arch" / "onionchopper.yaml"), str(ROOT / "workloads" / "onionpir-1GiB.yaml")]
    with pytest.warns(UserWarning, match="diagnostics, live-status, timeout"):
        assert main(["map", *files, "--mapper", str(cfg), "--json"]) == 0
    search = json.loads(capsys.readouterr().out)["search"]
    assert (search["algorithm"], search["objective"]) == ("exhaustive", "delay,energy")
    assert main(["map", *files, "--mapper", str(cfg), "--objective", "energy", "--json"]) == 0   # a flag wins
    assert json.loads(capsys.readouterr().out)["search"]["objective"] == "energy"


@pytest.mark.parametrize("edit, needle", [
    (("victory-condition", "victory-conditon"), "did you mean 'victory-condition'"),
    (("[delay, energy]", "[energy, delay]"), "no objective for the metrics"),
    (("linear-pruned", "simulated-annealing"), "is not allowed"),
    (("num-threads: 1", "num-threads: 0"), "num-threads"),
    (("mapper:", "mappr:"), "did you mean 'mapper'"),
], ids=["near-miss-key", "metric-order", "unknown-algorithm", "zero-threads", "near-miss-section"])
def test_a_bad_timeloop_mapper_config_is_refused_at_its_line(edit, needle, tmp_path, capsys):
    cfg = tmp_path / "mapper.yaml"
    cfg.write_text(TIMELOOP_MAPPER.replace(*edit))
    files = [str(ROOT / "arch" / "onionchopper.yaml"), str(ROOT / "workloads" / "onionpir-1GiB.yaml")]
    check(capsys, main(["map", *files, "--mapper", str(cfg)]), "mapper.yaml:", needle)


@pytest.mark.parametrize("text, needle", [("42\n", "the int '42'"), ("- arch\n- levels\n", "a list"),
                                          ("just words\n", "the str 'just words'")])
@pytest.mark.parametrize("command", [["energy", "{f}"], ["model", "{f}", "{w}", "{f}"], ["map", "{w}", "{f}"],
                                     ["sweep", "{f}"], ["system", "{f}"], ["ssd", "{f}"]])
def test_a_file_that_is_not_a_mapping_is_named_with_what_it_holds(text, needle, command, tmp_path, capsys):
    f = tmp_path / "odd.yaml"
    f.write_text(text)
    w = ROOT / "workloads" / "onionpir-1GiB.yaml"
    args = [a.format(f=f, w=ROOT / "arch" / "onionchopper.yaml" if command[0] == "map" else w) for a in command]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"{f}:1" in err and needle in err and "top-level key" in err and "Traceback" not in err, err


PIR = ROOT / "tests" / "corpus" / "thesis__ssd-einsum__pir-onion"
CNN = ROOT / "tests" / "corpus" / "a3-dram-glb-pe16-rf-32b__cnn-5x5__b3-r1"


def _edited(tmp_path, src, name, old, new):
    text = src.read_text()
    assert old in text, old
    (tmp_path / name).write_text(text.replace(old, new, 1).replace("../", str(ROOT) + "/"))
    return str(tmp_path / name)


@pytest.mark.parametrize("case", ["no-output", "meshX", "disk-energy", "ert-energy", "min-utilization",
                                  "budget-string", "energy-file-is-an-arch"])
def test_values_that_pass_a_type_but_mean_nothing_are_refused(case, tmp_path, capsys):
    """Issue 30's family: each is a value of the right type that no design can mean."""
    w64 = str(ROOT / "workloads" / "onionpir-64GiB.yaml")
    if case == "no-output":            # Timeloop: the output is the read-write data space
        p = _edited(tmp_path, PIR / "problem.yaml", "problem.yaml", "read-write: True", "read-write: False")
        args, where = ["model", str(PIR / "arch.yaml"), p, str(PIR / "mapping.yaml")], ("problem.yaml:", "read-write")
    elif case == "meshX":              # Timeloop: instances must be a multiple of meshX
        a = _edited(tmp_path, CNN / "arch.yaml", "arch.yaml", "meshX: 4}", "meshX: 3}")
        args = ["model", a, str(CNN / "problem.yaml"), str(CNN / "mapping.yaml"), "--ert", str(CNN / "ERT.yaml")]
        where = ("arch.yaml:21", "meshX 3 does not divide the 16 instances")
    elif case == "disk-energy":
        a = _edited(tmp_path, ROOT / "arch" / "onionchopper.yaml", "a.yaml", "vector_access_energy: 20000",
                    "vector_access_energy: 1e30")
        args, where = ["model", a, w64, MAPPING], ("a.yaml:21", "1 mJ per access")
    elif case == "ert-energy":
        e = _edited(tmp_path, PIR / "ERT.yaml", "ERT.yaml", "energy: 1024\n", "energy: 2e25\n")
        args = ["model", str(PIR / "arch.yaml"), str(PIR / "problem.yaml"), str(PIR / "mapping.yaml"), "--ert", e]
        where = ("ERT.yaml:", "slip of units")
    elif case == "min-utilization":
        c = tmp_path / "c.yaml"
        c.write_text("constraints:\n  min_spatial_utilization: true\n")
        args, where = ["map", str(ROOT / "arch" / "onionchopper.yaml"), w64, "--constraints", str(c)], ("c.yaml:2", "fraction")
    elif case == "budget-string":
        s = _edited(tmp_path, ROOT / "sweeps" / "demo.yaml", "s.yaml", "budget: 5000000", 'budget: "5000000"')
        args, where = ["sweep", s, "--db", str(tmp_path / "x.sqlite")], ("s.yaml:10", "budget")
    else:
        s = _edited(tmp_path, ROOT / "sweeps" / "demo.yaml", "s.yaml", "  mapper: {budget: 5000000}",
                    "  mapper: {budget: 5000000}\n  energy: {ert: ../arch/onionchopper.yaml}")
        args, where = ["sweep", s, "--db", str(tmp_path / "x.sqlite")], ("s.yaml:11", "it holds 'arch:'")
    check(capsys, main(args), *where)
    assert not (tmp_path / "x.sqlite").exists()


def test_an_input_file_above_the_size_limit_is_refused_at_once(tmp_path, capsys):
    import time

    big = tmp_path / "s.yaml"
    text = (ROOT / "sweeps" / "demo.yaml").read_text().replace("../", str(ROOT) + "/")
    big.write_text(text + ("# " + "x" * 1021 + "\n") * (17 * 1024))          # 17 MiB of comments
    t = time.monotonic()
    check(capsys, main(["sweep", str(big), "--db", str(tmp_path / "x.sqlite")]), "s.yaml:1", "17.0 MiB",
          "STORELOOP_MAX_INPUT_BYTES")
    assert time.monotonic() - t < 5 and not (tmp_path / "x.sqlite").exists()


@pytest.mark.parametrize("value,needle", [
    ("{compute: 5}", "expected a mapping"),
    ("{levels: 3}", "expected a list"),
    ("{levels.SRAM.capacity: abc}", "expected a quantity"),
    ("{compute.instances: 3}", "cannot be spread over 2 RFs"),
])
def test_an_arch_set_value_the_arch_cannot_take_is_an_error_at_its_line_in_the_system_file(value, needle, tmp_path,
                                                                                             capsys):
    """A system stage's arch_set goes through the arch schema; its error names the system file's
    line (not the arch file's, whose own lines are fine)."""
    text = (ROOT / "systems" / "onionchopper.yaml").read_text().replace("../", str(ROOT) + "/")
    line = next(x for x in text.splitlines() if x.strip().startswith("arch:"))
    path = tmp_path / "s.yaml"
    path.write_text(text.replace(line, f"{line}\n      arch_set: {value}", 1))
    at = text.splitlines().index(line) + 2
    check(capsys, main(["system", str(path)]), f"s.yaml:{at}", "arch_set", needle)


def test_a_missing_file_gets_a_did_you_mean(capsys):
    check(capsys, main(["model", str(ROOT / "arch" / "onionchopper.yaml"), str(ROOT / "workloads" / "onionpir-64GB.yaml"),
                        MAPPING]), "onionpir-64GB.yaml: no such file", "did you mean", "onionpir-64GiB.yaml")


def test_a_tile_that_does_not_fit_names_the_mapping_line_and_the_level_line(tmp_path, capsys):
    text = (ROOT / "mappings" / "onionchopper-thesis-best.yaml").read_text()
    bad = text.replace("temporal: J=2 N=2 P=2", "temporal: J=2 N=1024 P=2").replace(
        "temporal: C=2 K=2 D=128 J=8 N=512", "temporal: C=2 K=2 D=128 J=8")
    m = tmp_path / "m.yaml"
    m.write_text(bad)
    line = next(i for i, x in enumerate(bad.splitlines(), 1) if "level: SRAM" in x)
    check(capsys, main(["model", str(ROOT / "arch" / "onionchopper.yaml"), str(ROOT / "workloads" / "onionpir-64GiB.yaml"),
                        str(m)]), f"m.yaml:{line}: invalid mapping", "exceeds buffer capacity",
          "onionchopper.yaml:29 (SRAM's")


def test_workload_out_says_what_it_wrote(tmp_path, capsys):
    assert main(["workload", "simplepir", "--db-size", "1GiB", "--out", str(tmp_path / "w.yaml")]) == 0
    assert f"wrote {tmp_path / 'w.yaml'}" in capsys.readouterr().out
