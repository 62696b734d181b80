"""Timeloop v0.4 per-node ``constraints`` are map-space constraints (issue 22, part 4).

A component's constraints target its level; a ``!Container``'s spatial constraint targets the
fanout Timeloop calls ``inter_<container>_spatial`` (storeloop: the fanout of the storage level
above it; a container that is a row or a column is that axis of it). They are read by the same
reader as v0.3 ``mapspace_constraints``, so a factor, permutation or split given both on the arch
and in a constraints file is Timeloop's "re-specification" error.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import pytest

from storeloop.errors import SpecError, StoreloopError
from storeloop.mapper import map_workload
from storeloop.formats.constraints import load_constraints
from storeloop.mapper.constraints import arch_constraints
from storeloop.ir.constraints import Constraints
from storeloop.formats.load import load_arch, load_energy_table, load_mapping, load_workload
from storeloop.ir import ActionCosts, EnergyTable

DESIGNS = Path(__file__).parent / "timeloop-exercises"


def violations(arch, work, mapping, cons) -> list[str]:
    """What in ``mapping`` the constraints forbid, checked loop by loop."""
    out = []
    for L, c in cons.levels.items():
        lm, name = mapping.levels[L], arch.levels[L].name
        for loops, ranges, what in ((lm.temporal, c.temporal, "temporal"), (lm.spatial, c.spatial, "spatial"),
                                    ([lp for lp in lm.spatial if lp.axis == "X"], c.spatial_x, "X"),
                                    ([lp for lp in lm.spatial if lp.axis == "Y"], c.spatial_y, "Y")):
            for d, (lo, hi) in ranges.items():
                f = math.prod(lp.factor for lp in loops if lp.dim == d)
                if not lo <= f <= hi:
                    out.append(f"{name}: {what} {work.dims[d]}={f}, allowed {lo}..{hi}")
        out += [f"{name}: {work.dims[lp.dim]} along {lp.axis}, allowed {c.axis[lp.dim]}"
                for lp in lm.spatial if lp.factor > 1 and c.axis.get(lp.dim, lp.axis) != lp.axis]
        if not c.allows_order([lp.dim for lp in lm.temporal if lp.factor > 1]):
            out.append(f"{name}: loop order {[work.dims[lp.dim] for lp in lm.temporal]}")
        kept = lm.keep if lm.keep is not None else frozenset(t.name for t in work.tensors)
        if (c.keep and not c.keep <= kept) or (c.bypass and c.bypass & kept):
            out.append(f"{name}: keeps {sorted(kept)}")
    return out


def design(name: str):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")              # unmodelled keys are named in warnings
        arch = load_arch(DESIGNS / name / "arch.yaml")
        work = load_workload(DESIGNS / name / "problem.yaml")
        return arch, work, load_mapping(DESIGNS / name / "mapping.yaml", arch, work), arch_constraints(arch, work)


@pytest.mark.parametrize("name", ["design-eyeriss_like", "design-simba_like", "design-simple_output_stationary"])
def test_timeloops_own_best_mapping_meets_the_constraints_of_its_arch(name):
    """The mapping Timeloop's mapper found under these constraints lies in the space they describe."""
    arch, work, mapping, cons = design(name)
    assert cons is not None and len(cons.levels) >= 4
    assert violations(arch, work, mapping, cons) == []


@pytest.mark.xfail(strict=True, reason="the reference mapping (made by a later Timeloop through its Python "
                   "front end) puts C on Y although the PE container says permutation [C, M], split 1, which "
                   "Timeloop v3.0.3's constraints parser reads as C along X")
def test_simple_weight_stationary_reference_mapping_meets_its_split():
    arch, work, mapping, cons = design("design-simple_weight_stationary")
    assert violations(arch, work, mapping, cons) == []


def test_eyeriss_row_and_column_containers_constrain_their_own_axes():
    arch, work, _, cons = design("design-eyeriss_like")
    glb = cons.levels[arch.level_index("shared_glb")]
    dim = {d: i for i, d in enumerate(work.dims)}
    # PE_column (meshX 14): N, C, P, R, S = 1 along X; PE (meshY 12): N, P, Q, R = 1 along Y
    assert {work.dims[d] for d in glb.spatial_x} == {"N", "C", "P", "R", "S"}
    assert {work.dims[d] for d in glb.spatial_y} == {"N", "P", "Q", "R"}
    assert not glb.spatial and not glb.axis
    weights = cons.levels[arch.level_index("weights_spad")]
    assert weights.keep == {"Weights"} and weights.temporal[dim["M"]] == (1, 1)
    # permutation [N, M, P, Q, S, C, R]: innermost first, every dim named
    assert weights.permutation == [dim[d] for d in "RCSQPMN"] and weights.anchor == (0, 7)


V04_ARCH = """\
architecture:
  version: 0.4
  nodes:
  - !Container
    name: system
  - !Component
    name: DRAM
    class: DRAM
    attributes: {type: LPDDR4, width: 64, datawidth: 16}
  - !Component
    name: GLB
    class: SRAM
    attributes: {depth: 256, width: 16, datawidth: 16}
    constraints:
      temporal: {factors: [K=2], permutation: [N]}
  - !Container
    name: PE
    spatial: {meshX: 4}
    constraints:
      spatial: {factors: [M=4]}
  - !Component
    name: RF
    class: regfile
    attributes: {depth: 16, width: 16, datawidth: 16}
    constraints:
      dataspace: {keep: [A], bypass: [B]}
  - !Component
    name: mac
    class: intmac
    attributes: {datawidth: 16}
"""

V04_PROBLEM = """\
problem:
  version: 0.4
  shape:
    name: matmul
    dimensions: [M, N, K]
    data_spaces:
    - {name: A, projection: [[[M]], [[K]]]}
    - {name: B, projection: [[[K]], [[N]]]}
    - {name: Z, projection: [[[M]], [[N]]], read_write: true}
  instance: {M: 8, N: 4, K: 8}
"""


def matmul_case(tmp_path: Path, arch_text: str = V04_ARCH):
    (tmp_path / "arch.yaml").write_text(arch_text)
    (tmp_path / "problem.yaml").write_text(V04_PROBLEM)
    arch, work = load_arch(tmp_path / "arch.yaml"), load_workload(tmp_path / "problem.yaml")
    energy = EnergyTable({"DRAM": ActionCosts(100.0, 100.0, 0.0, "test"), "GLB": ActionCosts(5.0, 5.0, 10.0, "test"),
                          "RF": ActionCosts(0.5, 0.5, 1.0, "test")}, ActionCosts(1.0, 0.0, 1.0, "test"), "test")
    return arch, work, energy


def test_storeloop_map_searches_within_a_v04_archs_own_constraints(tmp_path):
    arch, work, energy = matmul_case(tmp_path)
    cons = arch_constraints(arch, work)
    out = map_workload(arch, work, energy, objective="energy", time_limit=60)
    assert out.search["space"]["user_constraints"]
    assert violations(arch, work, out.mapping, cons) == []
    glb, rf = out.mapping.levels[1], out.mapping.levels[2]
    assert math.prod(lp.factor for lp in glb.temporal if work.dims[lp.dim] == "K") == 2
    n_loops = [i for i, lp in enumerate(glb.temporal) if work.dims[lp.dim] == "N"]
    assert not n_loops or n_loops == [len(glb.temporal) - 1]       # N, when it has a loop, innermost
    assert math.prod(lp.factor for lp in glb.spatial if work.dims[lp.dim] == "M") == 4
    assert "A" in rf.keep and "B" not in rf.keep
    # the space without the arch's constraints holds this one: its optimum is at least as good
    free = map_workload(arch, work, energy, objective="energy", time_limit=60, constraints=Constraints())
    assert not free.search["space"]["user_constraints"]
    assert free.result.energy_pJ <= out.result.energy_pJ


def test_a_constraints_file_that_respecifies_the_archs_permutation_is_refused(tmp_path):
    arch, work, _ = matmul_case(tmp_path)
    (tmp_path / "c.yaml").write_text("mapspace_constraints:\n- {target: GLB, type: temporal, permutation: K}\n"
                                     "- {target: RF, type: temporal, factors: M=1}\n")
    with pytest.raises(SpecError) as e:
        load_constraints(tmp_path / "c.yaml", arch, work)
    msg = str(e.value)
    assert "re-specification of the permutation at GLB" in msg and "arch.yaml:15" in msg and "c.yaml" in msg
    # a field the arch leaves free may be given in the file: both apply
    (tmp_path / "d.yaml").write_text("mapspace_constraints:\n- {target: RF, type: temporal, factors: M=1}\n"
                                     "- {target: inter_PE_spatial, type: spatial, factors: N=1}\n")
    cons = load_constraints(tmp_path / "d.yaml", arch, work)
    glb, rf = cons.levels[arch.level_index("GLB")], cons.levels[arch.level_index("RF")]
    assert rf.keep == {"A"} and rf.temporal == {0: (1, 1)}
    assert glb.spatial_x == {0: (4, 4), 1: (1, 1)} and glb.temporal == {2: (2, 2)}


@pytest.mark.parametrize("where, text", [
    ("compute", V04_ARCH.replace("    attributes: {datawidth: 16}\n",
                                 "    attributes: {datawidth: 16}\n    constraints: {temporal: {factors: [M=1]}}\n")),
    ("container without fanout", V04_ARCH.replace("    name: system\n",
                                                  "    name: system\n    constraints: {spatial: {factors: [M=1]}}\n")),
    ("typo", V04_ARCH.replace("permutation: [N]", "permutaton: [N]")),
    ("kind", V04_ARCH.replace("dataspace: {keep", "datspace: {keep")),
])
def test_bad_node_constraints_are_refused_at_their_line(tmp_path, where, text):
    with pytest.raises(SpecError) as e:
        matmul_case(tmp_path, text)
    assert "arch.yaml" in str(e.value) and e.value.line is not None, where


TUTORIAL = Path(__file__).resolve().parent / "timeloop-exercises" / "design-simple_weight_stationary"


@pytest.mark.parametrize("edit, needle", [
    (("      depth: 192\n      width: 16\n      datawidth: 16", "      depth: 192\n      width: 16\n      datawidth: 0"),
     "arch.yaml:49: field 'architecture.nodes[5].attributes.datawidth'"),
    (("    name: pe_spad\n", "    name: shared_glb\n"), "arch.yaml:44: field 'architecture.nodes[5].name'"),
    (("permutation: [C, M]", "permutation: [C, Z]"), "arch.yaml:39"),
    (("bypass: [Inputs, Outputs], keep: [Weights]", "bypass: [Inputs, Weights], keep: [Weights]"), "both kept and bypassed"),
], ids=["datawidth-zero", "name-twice", "node-permutation-unknown-dim", "node-keep-and-bypass"])
def test_a_bad_v04_node_is_refused_at_its_line_by_model_too(edit, needle, tmp_path, capsys):
    """``storeloop model`` prices a given mapping, but it reads the arch's node attributes and
    constraints all the same: a bad one is an error at the node's own line (a zero datawidth used to
    end in ZeroDivisionError, a bad constraint was never read)."""
    import shutil

    from storeloop.cli import main

    case = tmp_path / "case"
    shutil.copytree(TUTORIAL, case)
    text = (case / "arch.yaml").read_text()
    assert edit[0] in text
    (case / "arch.yaml").write_text(text.replace(edit[0], edit[1], 1))
    code = main(["model", str(case / "arch.yaml"), str(case / "problem.yaml"), str(case / "mapping.yaml"),
                 "--ert", str(case / "ERT.yaml"), "--art", str(case / "ART.yaml")])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err, err


def map_on_the_8x2_mesh(tmp_path, entries: list[str]):
    """(workload, MapResult) of ``storeloop map`` on the corpus's 8x2 MAC mesh (matmul 64) under
    the Timeloop ``mapspace_constraints`` entries given, as the real timeloop-mapper runs were."""
    from conftest import CORPUS

    case = CORPUS / "a8-dram-glb-mac8x2-16b__matmul-64__b3-r3"
    arch, work = load_arch(case / "arch.yaml"), load_workload(case / "problem.yaml")
    energy = load_energy_table(arch, case / "ERT.yaml", case / "ART.yaml")
    (tmp_path / "c.yaml").write_text("mapspace_constraints:\n" + "".join(f"- {e}\n" for e in entries))
    cons = load_constraints(tmp_path / "c.yaml", arch, work)
    return work, map_workload(arch, work, energy, constraints=cons, time_limit=60)


@pytest.mark.parametrize("perm, spatial", [("NM", [("N", 8, "X"), ("M", 2, "Y")]),
                                           ("N", [("N", 8, "X"), ("M", 2, "Y")]),
                                           ("M", None)])
def test_split_reads_as_timeloop_mapper_v3_0_3_reads_it(tmp_path, perm, spatial):
    """On the corpus's 8x2 MAC mesh, with ``factors: M=2 N=8 K=1, split: 1`` at the GLB's fanout,
    a real timeloop-mapper v3.0.3 (this session) put N along X and M along Y for the permutations
    NM and N (the free M goes after the named N, past the split), and found no mapping for M
    (then N=8 must run along the 2-wide Y)."""
    entries = [f"{{target: GLB, type: spatial, factors: M=2 N=8 K=1, permutation: {perm}, split: 1}}",
               "{target: DRAM, type: temporal, factors: M=32 N=8 K=64}"]
    if spatial is None:
        with pytest.raises(StoreloopError, match="no valid mapping"):
            map_on_the_8x2_mesh(tmp_path, entries)
        return
    work, out = map_on_the_8x2_mesh(tmp_path, entries)
    assert [(work.dims[lp.dim], lp.factor, lp.axis) for lp in out.mapping.levels[1].spatial] == spatial


@pytest.mark.parametrize("share, want", [("0.5", None), ("0.25", (66_560, 35.57e6))])
def test_min_utilization_reads_as_timeloop_mapper_v3_0_3_reads_it(tmp_path, share, want):
    """On the corpus's 8x2 MAC mesh with DRAM factors leaving M=2 N=2 for the GLB's 16-unit fanout,
    a real timeloop-mapper v3.0.3 (exhaustive, delay then energy; run this session) found no
    mapping under ``type: utilization, min: 0.5`` and, under ``min: 0.25``, 66,560 cycles and
    35.57 uJ with N=2 along Y and M=2 along X. storeloop's map space says the same."""
    entries = ["{target: DRAM, type: temporal, factors: M=32 N=32 K=64}",
               f"{{target: GLB, type: utilization, min: {share}}}"]
    if want is None:
        with pytest.raises(StoreloopError, match="no valid mapping"):
            map_on_the_8x2_mesh(tmp_path, entries)
        return
    _, out = map_on_the_8x2_mesh(tmp_path, entries)
    assert out.result.cycles == want[0]
    assert out.result.energy_pJ == pytest.approx(want[1], rel=1e-3)
    assert math.prod(lp.factor for lp in out.mapping.levels[1].spatial) == 4
