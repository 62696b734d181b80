"""Bad input: every error names the file, the line and the field (timeloopfe-style negative tests)."""

import textwrap

import pytest

from storeloop.errors import SpecError
from storeloop.formats.load import load_arch, load_mapping, load_workload

ARCH = """\
arch:
  name: tiny
  clock: 1 GHz
  levels:
    - name: DRAM
      class: DRAM
      word_bits: 16
      shared_bandwidth: 4
    - name: SRAM
      class: SRAM
      instances: 4
      capacity: 512 B
      word_bits: 16
      block_size: 4
  compute:
    name: MAC
    class: intmac
    instances: 4
    word_bits: 16
"""

WORKLOAD = """\
workload:
  name: mm
  einsum: Z[m,n] = A[m,k] * B[k,n]
  bounds: {M: 8, N: 8, K: 8}
  bits: 16
"""

MAPPING = """\
mapping:
  levels:
    - level: DRAM
      temporal: M=8 N=2 K=8
      spatial: N=4
    - level: SRAM
      temporal: N=1
"""


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


def load_all(tmp_path, arch=ARCH, workload=WORKLOAD, mapping=MAPPING):
    a = load_arch(write(tmp_path, "arch.yaml", arch))
    w = load_workload(write(tmp_path, "workload.yaml", workload))
    return load_mapping(write(tmp_path, "mapping.yaml", mapping), a, w)


def error_of(tmp_path, **files) -> SpecError:
    with pytest.raises(SpecError) as info:
        load_all(tmp_path, **files)
    return info.value


def assert_points(err: SpecError, file: str, line: int, field: str):
    text = str(err)
    assert err.file.endswith(file) and f"{file}:{line}" in text, text
    assert err.line == line, text
    assert err.field == field and f"field '{field}'" in text, text


def test_valid_files_load(tmp_path):
    m = load_all(tmp_path)
    assert len(m.levels) == 2


def test_missing_key(tmp_path):
    err = error_of(tmp_path, arch=ARCH.replace("      class: SRAM\n", ""))
    assert_points(err, "arch.yaml", 9, "arch.levels[1].class")
    assert "missing required field 'class'" in err.message


def test_unknown_key(tmp_path):
    err = error_of(tmp_path, arch=ARCH.replace("      block_size: 4\n", "      block_size: 4\n      colour: red\n"))
    assert_points(err, "arch.yaml", 15, "arch.levels[1].colour")
    assert "unknown field 'colour'" in err.message
    assert "capacity" in err.allowed and "block_size" in err.allowed


def test_wrong_type(tmp_path):
    err = error_of(tmp_path, arch=ARCH.replace("instances: 4\n      capacity", "instances: four\n      capacity"))
    assert_points(err, "arch.yaml", 11, "arch.levels[1].instances")


def test_bad_expression_cannot_run_code(tmp_path):
    err = error_of(tmp_path, arch=ARCH.replace("capacity: 512 B", "capacity: __import__('os').getcwd()"))
    assert_points(err, "arch.yaml", 12, "arch.levels[1].capacity")


def test_arithmetic_and_units(tmp_path):
    a = load_arch(write(tmp_path, "arch.yaml", ARCH.replace("capacity: 512 B", "capacity: 2**8 * 2 B")))
    assert a.levels[1].size_words == 256
    a = load_arch(write(tmp_path, "arch.yaml", ARCH.replace("shared_bandwidth: 4", "shared_bandwidth: 8 GB/s")))
    assert a.levels[0].shared_bandwidth == 4.0   # 8e9 B/s / 1e9 Hz / 2 B per word


def test_duplicate_key(tmp_path):
    err = error_of(tmp_path, workload=WORKLOAD.replace("  bits: 16\n", "  bits: 16\n  bits: 32\n"))
    assert_points(err, "workload.yaml", 6, "bits")
    assert "duplicate key 'bits' (first at line 5)" in err.message


def test_bad_einsum(tmp_path):
    err = error_of(tmp_path, workload=WORKLOAD.replace("Z[m,n] = A[m,k] * B[k,n]", "Z[m,n] = A[m,k] * B[k"))
    assert_points(err, "workload.yaml", 3, "workload.einsum")


def test_missing_bound(tmp_path):
    err = error_of(tmp_path, workload=WORKLOAD.replace("{M: 8, N: 8, K: 8}", "{M: 8, N: 8}"))
    assert_points(err, "workload.yaml", 4, "workload.bounds")
    assert "no bound for index K" in err.message


def test_factor_product_not_bound(tmp_path):
    err = error_of(tmp_path, mapping=MAPPING.replace("M=8 N=2 K=8", "M=4 N=2 K=8"))
    assert_points(err, "mapping.yaml", 2, "mapping.levels")
    assert "factors of M multiply to 4, the bound is 8" in err.message
    assert "M=8" in err.allowed


def test_fanout_exceeded(tmp_path):
    err = error_of(tmp_path, mapping=MAPPING.replace("M=8 N=2 K=8", "M=1 N=2 K=8").replace("spatial: N=4", "spatial: N=4 M=8"))
    assert_points(err, "mapping.yaml", 5, "mapping.levels[0].spatial")
    assert "exceed the fanout 4" in err.message


def test_unknown_level_lists_levels(tmp_path):
    err = error_of(tmp_path, mapping=MAPPING.replace("level: SRAM", "level: GLB"))
    assert_points(err, "mapping.yaml", 6, "mapping.levels[1].level")
    assert err.allowed == "DRAM, SRAM"


def test_not_yaml(tmp_path):
    err = error_of(tmp_path, arch="arch: [unclosed\n")
    assert err.file.endswith("arch.yaml") and err.line is not None
