"""storeloop beside AccelForge's FFM mapper and ZigZag's LOMA on the same problems, in one run.

The problems: a 256^3 matmul and ResNet-50's conv3_x (``O[n,k,p,q] = W[k,c,r,s] * I[n,c,p+r,q+s]``)
on DRAM -> 64 KiB GLB -> 16 x (64-word RF -> MAC), 16-bit words, bandwidths unconstrained
(``tests/data/arch16.yaml``, ``mm256.yaml``, ``conv3x.yaml``). storeloop's ``map`` runs with its
defaults, one process per usable core as ``storeloop map``'s (FFM runs 2 jobs); on conv3_x with a
120 s limit: it does not prove that layer yet. Every tool gets
the per-word energies storeloop's plug-ins give that arch (written into each tool's format below),
so their answers are priced alike. The peers are installed on demand, each into its own venv under
``bench/.peers/`` (never a dependency of storeloop); a tool that cannot install or run here is
skipped with the reason. Prints each tool's wall time, objective, cycles and claim, and the ratio
of the peers' times to storeloop's, all measured in this run; then whether storeloop's and FFM's
answers agree when priced in one model: storeloop's mapping in AccelForge's model, and FFM's and
ZigZag's mappings in storeloop's (:func:`accelforge_nodes`, :func:`from_accelforge`, :func:`zigzag_nodes`;
a peer's per-tensor storage positions become uneven positions, ``below:``).

The thesis's einsum, ``pir``: OnionPIR's ``C[m,n,p,q,c,d] = A[m,j,p,k,c,d] * B[j,n,k,q,c,d]`` (ch. 3.3)
at a size the peers map (``onionpir-small.yaml``: 8 dimensions, 524,288 computes) on the same arch;
storeloop with ``--objective energy``, the metric both peers minimize.

Another problem, ``imperfect`` (a 97 x 83 x 61 matmul, ``mm-primes.yaml``), runs ``map --imperfect
--objective energy`` beside FFM with its imperfect loops explored: storeloop prices a loop that
overshoots a bound as the padded problem, AccelForge as a shorter last tile, so the same mapping
costs a little more in storeloop's model (the one-model lines show it).

    .venv/bin/python bench/peers.py [matmul] [conv3x] [pir] [imperfect]      (default: matmul, conv3x and pir)
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from storeloop.energy import price                      # noqa: E402
from storeloop.errors import MappingError               # noqa: E402
from storeloop.ir.mapping import LevelMapping, Loop, Mapping  # noqa: E402
from storeloop.model.evaluate import evaluate          # noqa: E402
from storeloop.mapper import map_workload               # noqa: E402
from storeloop.mapper.options import usable_cores       # noqa: E402
from storeloop.formats.load import load_arch, load_workload  # noqa: E402

HOME = ROOT / "bench" / ".peers"
PEERS = {"accelforge": ["accelforge==1.0.467"], "zigzag": ["zigzag-dse==3.9.1", "six"]}

AF_ARCH = """arch:
  nodes:
  - !Memory
    name: DRAM
    size: inf
    leak_power: 0
    area: 0
    tensors: {{keep: ~Intermediates, may_keep: All}}
    actions:
    - {{name: read,  energy: {DRAM_r}e-12, bits_per_action: 16, throughput: inf}}
    - {{name: write, energy: {DRAM_w}e-12, bits_per_action: 16, throughput: inf}}
  - !Memory
    name: GLB
    size: 64 * 1024 * 8
    leak_power: 0
    area: 0
    tensors: {{keep: ~DRAM, may_keep: All}}
    actions:
    - {{name: read,  energy: {GLB_r}e-12, bits_per_action: 16, throughput: inf}}
    - {{name: write, energy: {GLB_w}e-12, bits_per_action: 16, throughput: inf}}
  - !Container
    name: PE
    spatial:
    - {{name: X, fanout: 16}}
  - !Memory
    name: RF
    size: 64 * 16
    leak_power: 0
    area: 0
    tensors: {{may_keep: All}}
    actions:
    - {{name: read,  energy: {RF_r}e-12, bits_per_action: 16, throughput: inf}}
    - {{name: write, energy: {RF_w}e-12, bits_per_action: 16, throughput: inf}}
  - !Compute
    name: MAC
    leak_power: 0
    area: 0
    actions:
    - {{name: compute, energy: {MAC}e-12, throughput: 1e9}}
"""


def af_workload(einsum: str, bounds: dict[str, int], accesses: list[str]) -> str:
    """AccelForge's workload file of one einsum over ``bounds`` (rank variable -> size, 16-bit
    values), its tensor accesses as AccelForge writes them."""
    return ("workload:\n  iteration_space_shape:\n" + "".join(f"    {v}: 0 <= {v} < {n}\n" for v, n in bounds.items())
            + "  bits_per_value: {All: 16}\n  einsums:\n" + f"  - name: {einsum}\n    tensor_accesses:\n"
            + "".join(f"    - {a}\n" for a in accesses))


MATMUL_ACCESSES = ["{name: A, projection: [m, k]}", "{name: B, projection: [k, n]}",
                   "{name: Z, projection: [m, n], output: True}"]
AF_MATMUL = af_workload("Matmul", {"m": 256, "n": 256, "k": 256}, MATMUL_ACCESSES)
AF_CONV = af_workload("Conv", {"n": 1, "k": 128, "c": 128, "p": 28, "q": 28, "r": 3, "s": 3},
                      ["{name: I, projection: {N: n, C: c, H: p+r, W: q+s}}", "{name: W, projection: [k, c, r, s]}",
                       "{name: O, projection: [n, k, p, q], output: True}"])
AF_PIR = af_workload("PIR", {"m": 1, "n": 64, "p": 2, "q": 1, "j": 16, "k": 2, "c": 2, "d": 64},
                     ["{name: A, projection: [m, j, p, k, c, d]}", "{name: B, projection: [j, n, k, q, c, d]}",
                      "{name: C, projection: [m, n, p, q, c, d], output: True}"])
AF_RUN = """import shutil, sys, json, accelforge as af
if shutil.which("dot") is None:
    # AccelForge 1.0 renders each answer to mapping.svg through Graphviz after its search
    # (mapper/FFM/main.py, eval_mapping); where `dot` is missing, that drawing is left empty.
    # It is not part of the search or its numbers (and its time is then not counted).
    import pydot
    pydot.Dot.create = lambda self, *a, **k: b"<svg/>"
af.set_n_parallel_jobs(2, print_message=False)
spec = af.Spec.from_yaml(sys.argv[1], sys.argv[2])
spec.mapper.metrics = af.mapper.Metrics.ENERGY
m = spec.map_workload_to_arch(print_number_of_pmappings=False, print_progress=False)
print(f"RESULT energy_pJ={float(m.energy()) * 1e12:.6f} cycles={float(m.latency()) * 1e9:.0f}")
nodes = [{"node": type(n).__name__, **{k: getattr(n, k) for k in ("tensors", "component", "rank_variable", "tile_shape")
                                      if getattr(n, k, None) is not None}}
         for n in m.data.iloc[0]["Total<SEP>mapping"]().nodes if type(n).__name__ != "Reservation"]
print("NODES " + json.dumps(nodes))
"""
# AccelForge's model pricing one mapping (argv: arch, workload, mapping)
AF_EVAL = """import sys, accelforge as af
r = af.Spec.from_yaml(*sys.argv[1:4]).evaluate_mapping()
print(f"RESULT energy_pJ={float(r.energy()) * 1e12:.6f} cycles={float(r.latency()) * 1e9:.0f}")
"""
# ZigZag charges r_cost/w_cost per access of bandwidth_max bits: cost = per-word energy x max/16
ZZ_ARCH = """name: simple16
memories:
  rf:
    size: 1024
    r_cost: {RF_r4}
    w_cost: {RF_w4}
    area: 0
    latency: 1
    operands: [I1, I2, O]
    ports:
      - {{name: r_port_1, type: read, bandwidth_min: 16, bandwidth_max: 64, allocation: ["I1, tl", "I2, tl", "O, tl", "O, th"]}}
      - {{name: w_port_1, type: write, bandwidth_min: 16, bandwidth_max: 64, allocation: ["I1, fh", "I2, fh", "O, fh", "O, fl"]}}
    served_dimensions: []
  glb:
    size: 524288
    r_cost: {GLB_r16}
    w_cost: {GLB_w16}
    area: 0
    latency: 1
    operands: [I1, I2, O]
    ports:
      - {{name: rw_port_1, type: read_write, bandwidth_min: 16, bandwidth_max: 256, allocation: ["I1, fh", "I1, tl", "I2, fh", "I2, tl", "O, fh", "O, tl", "O, fl", "O, th"]}}
    served_dimensions: [D1]
  dram:
    size: 10000000000
    r_cost: {DRAM_r64}
    w_cost: {DRAM_w64}
    area: 0
    latency: 1
    operands: [I1, I2, O]
    ports:
      - {{name: rw_port_1, type: read_write, bandwidth_min: 16, bandwidth_max: 1024, allocation: ["I1, fh", "I1, tl", "I2, fh", "I2, tl", "O, fh", "O, tl", "O, fl", "O, th"]}}
    served_dimensions: [D1]
operational_array:
  unit_energy: {MAC}
  unit_area: 0
  dimensions: [D1]
  sizes: [16]
"""


def zz_layer(operator: str, equation: str, relations: str, sizes: dict[str, int]) -> str:
    """ZigZag's workload file of one layer: its operator type, equation, dimension relations and
    loop dimensions with their sizes (16-bit operands, both inputs from layer 0)."""
    return (f"- id: 0\n  operator_type: {operator}\n  equation: {equation}\n  dimension_relations: [{relations}]\n"
            f"  loop_dims: [{', '.join(sizes)}]\n  loop_sizes: [{', '.join(map(str, sizes.values()))}]\n"
            "  operand_precision: {W: 16, I: 16, O: 16, O_final: 16}\n  operand_source: {I: 0, W: 0}\n")


ZZ_MATMUL_EQUATION = "O[b][k]+=I[b][c]*W[c][k]"
ZZ_MATMUL = zz_layer("Gemm", ZZ_MATMUL_EQUATION, "", {"B": 256, "C": 256, "K": 256})
ZZ_CONV = zz_layer("Conv", "O[b][k][oy][ox]+=W[k][c][fy][fx]*I[b][c][iy][ix]", "ix=1*ox+1*fx, iy=1*oy+1*fy",
                   {"B": 1, "K": 128, "C": 128, "OY": 28, "OX": 28, "FY": 3, "FX": 3})
ZZ_PIR = zz_layer("Gemm", "O[m][n][p][q][c][d]+=I[m][j][p][k][c][d]*W[j][n][k][q][c][d]", "",
                  {"M": 1, "N": 64, "P": 2, "Q": 1, "J": 16, "K": 2, "C": 2, "D": 64})
# the problems: storeloop's workload file, AccelForge's and ZigZag's workload texts, storeloop's time limit,
# AccelForge's einsum name, storeloop's options and AccelForge's mapper settings beyond the defaults.
# 'imperfect': three primes, where both storeloop (--imperfect: padded, priced as the padded problem)
# and AccelForge (imperfect loops: residual, the last tile shorter) let loops overshoot a bound; both
# minimize energy there
IMPERFECT_AF = ["spec.mapper.explore_imperfect_temporal_loops = True",
                "spec.mapper.explore_imperfect_spatial_loops = True"]
PROBLEMS = {"matmul": ("256^3 matmul", "mm256.yaml", AF_MATMUL, ZZ_MATMUL, None, "Matmul", {}, []),
            "conv3x": ("ResNet-50 conv3_x", "conv3x.yaml", AF_CONV, ZZ_CONV, 120, "Conv", {}, []),
            "imperfect": ("97 x 83 x 61 matmul (imperfect factorization)", "mm-primes.yaml",
                          af_workload("Matmul", {"m": 97, "n": 83, "k": 61}, MATMUL_ACCESSES),
                          zz_layer("Gemm", ZZ_MATMUL_EQUATION, "", {"B": 97, "C": 61, "K": 83}), None, "Matmul",
                          {"imperfect": True, "objective": "energy"}, IMPERFECT_AF),
            "pir": ("OnionPIR einsum (thesis ch. 3.3, scaled down)", "onionpir-small.yaml", AF_PIR, ZZ_PIR, None,
                    "PIR", {"objective": "energy"}, [])}
PEER_TIMEOUT = float(os.environ.get("STORELOOP_PEER_TIMEOUT", 1800))   # seconds a peer may take on one problem
ZZ_MAPPING = """- name: default
  memory_operand_links: {O: O, W: I2, I: I1}
"""
ZZ_RUN = """import sys, json, logging
logging.disable(logging.CRITICAL)
from zigzag.api import get_hardware_performance_zigzag
E, L, cmes = get_hardware_performance_zigzag(sys.argv[2], sys.argv[1], sys.argv[3], opt="energy",
    temporal_mapping_search_engine="loma", lpf_limit=6, nb_spatial_mappings_generated=3,
    dump_folder=sys.argv[4], loma_show_progress_bar=False)
print(f"RESULT energy_pJ={E:.6f} cycles={L:.0f}")
cme = cmes[0][1][0][0]
def plain(m):
    return {str(op): [[(str(d), int(f)) for d, f in level] for level in levels] for op, levels in m.items()}
print("ZZMAP " + json.dumps({"temporal": plain(cme.temporal_mapping.mapping_dic_origin),
                             "spatial": plain(cme.spatial_mapping.mapping_dict_origin)}))
"""
# ZigZag's operands and loop dimensions as storeloop's tensors and dimensions, per problem
ZZ_NAMES = {"matmul": ({"I": "A", "W": "B", "O": "Z"}, {"B": "m", "C": "k", "K": "n"}),
            "imperfect": ({"I": "A", "W": "B", "O": "Z"}, {"B": "m", "C": "k", "K": "n"}),
            "pir": ({"I": "A", "W": "B", "O": "C"}, {d: d.lower() for d in "MNPQJKCD"}),
            "conv3x": ({"I": "I", "W": "W", "O": "O"},
                       {"B": "n", "K": "k", "C": "c", "OY": "p", "OX": "q", "FY": "r", "FX": "s"})}
ZZ_LEVELS = ["RF", "GLB", "DRAM"]               # its memories per operand, innermost first


def accelforge_nodes(arch, workload, mapping) -> list[dict]:
    """storeloop's ``mapping`` as AccelForge mapping nodes (outer to inner) with the same reuse.
    Timeloop keeps a plain tile across the loops just above it that do not index the tensor;
    AccelForge keeps a tile across the loops below its storage node, so each such storage node is
    moved above those loops (a level's innermost loops over other dimensions than its fanout's are
    written below the fanout for that: the same iteration space). A tensor at an uneven position
    stays below its level's loops that lie above its tile, and a windowed tensor where Timeloop
    keeps it. Each loop's tile shape is the product of its dimension's factors below it."""
    items = []                                             # (kind, level, loop or tensor), outer -> inner
    for L, lm in enumerate(mapping.levels):
        kept = [t for t in workload.tensors if lm.keeps(t.name)]
        last = max((lm.outside(t.name) for t in kept), default=0)
        for k in range(last + 1):                          # the level's stores at their positions
            items += [("store", L, t) for t in kept if lm.outside(t.name) == k]
            items += [("temporal", L, lm.temporal[k])] if k < last and lm.temporal[k].factor > 1 else []
        rest = [lp for lp in lm.temporal[last:] if lp.factor > 1]
        fanned = {lp.dim for lp in lm.spatial if lp.factor > 1}
        # the innermost loops over other dimensions than the fanout's go below it (the same
        # iteration space), where a child's storage node can be moved above them
        cut = len(rest)
        while cut > 0 and rest[cut - 1].dim not in fanned:
            cut -= 1
        items += [("temporal", L, lp) for lp in rest[:cut]]
        items += [("spatial", L, lp) for lp in lm.spatial_nest() if lp.factor > 1]
        items += [("temporal", L, lp) for lp in rest[cut:]]
    for j in range(len(items)):
        # (a windowed tensor stays: a loop that does not index it still ends its tile's run of
        # equal moves, so Timeloop's deltas for it change if the loop moves below its tile)
        if items[j][0] != "store" or items[j][1] == 0 or items[j][2].window:
            continue
        k, (_, L, t) = j, items[j]
        while k > 0 and (items[k - 1][0] == "temporal" and items[k - 1][2].dim not in t.dims()
                         or items[k - 1][0] == "store" and items[k - 1][1] == L):
            items[k - 1], items[k] = items[k], items[k - 1]
            k -= 1
    tile = [1] * len(workload.dims)
    nodes = []
    for kind, L, x in reversed(items):
        if kind == "store":
            nodes.append({"node": "Storage", "tensors": [x.name], "component": arch.levels[L].name})
            continue
        tile[x.dim] *= x.factor
        nodes.append({"node": kind.title(), "rank_variable": workload.dims[x.dim].lower(),
                      "tile_shape": tile[x.dim] // x.factor})
    return nodes[::-1]


def accelforge_yaml(nodes: list[dict], einsum: str) -> str:
    """AccelForge's mapping file for ``nodes`` (one PE container, 'X')."""
    lines = []
    for n in nodes:
        if n["node"] == "Storage":
            lines.append(f"  - !Storage {{tensors: [{', '.join(n['tensors'])}], component: {n['component']}}}")
        else:
            spatial = ", name: X, component: PE" if n["node"] == "Spatial" else ""
            lines.append(f"  - !{n['node']} {{rank_variable: {n['rank_variable']}, tile_shape: {n['tile_shape']}{spatial}}}")
    return "mapping:\n  nodes:\n" + "\n".join(lines) + f"\n  - !Compute {{einsum: {einsum}, component: MAC}}\n"


def zigzag_nodes(zz: dict, names: tuple[dict, dict]) -> list[dict] | str:
    """ZigZag's mapping (per operand, per memory innermost first, its temporal loops innermost
    first; its spatial unrolling under the GLB) as AccelForge-style nodes for
    :func:`from_accelforge`: one loop order, each operand's storage nodes at its own boundaries,
    the spatial loops just above the outermost RF node. A string says why it has none."""
    tensors, dims = names
    loops = None
    stores = {}                                            # loops inside -> [(level, tensor)]
    for op, levels in zz["temporal"].items():
        flat = [lp for level in levels for lp in level]
        if loops is not None and flat != loops:
            return "its operands' loop orders differ"
        loops, inside = flat, 0
        for L, level in enumerate(levels[:len(ZZ_LEVELS)]):
            inside += len(level)
            stores.setdefault(inside, []).append((ZZ_LEVELS[L], tensors[op]))
    spatial = {(d, f) for levels in zz["spatial"].values() for level in levels for d, f in level}
    rf = max(k for k, v in stores.items() if any(lv == "RF" for lv, _ in v))
    if any(lv != "RF" for k, v in stores.items() if k < rf for lv, _ in v):
        return "a GLB boundary inside an RF one"
    tile: dict[str, int] = {}
    nodes = []                                             # innermost first, reversed at the end

    def loop(kind: str, d: str, f: int) -> None:
        tile[d] = tile.get(d, 1) * f
        nodes.append({"node": kind, "rank_variable": dims[d], "tile_shape": tile[d] // f})

    for i in range(len(loops) + 1):
        here = stores.get(i, [])
        nodes.extend({"node": "Storage", "tensors": [t], "component": lv} for lv, t in here if lv == "RF")
        if i == rf:
            for d, f in sorted(spatial):
                loop("Spatial", d, f)
        nodes.extend({"node": "Storage", "tensors": [t], "component": lv}
                     for lv, t in sorted(here, key=lambda x: ZZ_LEVELS.index(x[0])) if lv != "RF")
        if i < len(loops):
            loop("Temporal", *loops[i])
    return nodes[::-1]


def from_accelforge(arch, workload, nodes: list[dict]):
    """AccelForge's mapping nodes as a storeloop mapping. A loop between two storage nodes of one
    level, before any loop that stays in the level, belongs to the level above if no tensor stored
    above it at that level has its dimension or a window, and no spatial loop above has it (Timeloop
    reuses a plain tile across such loops: the mapping stays even); else it stays in the level and
    the tensors stored below it there lie below it (uneven positions, ``below:``). Loops below a
    spatial node run in the level under its fanout. A tile shape that does not divide the one above
    (AccelForge's imperfect loops) runs ceil(above / shape) times: an imperfect mapping, priced
    padded."""
    level = {lvl.name: L for L, lvl in enumerate(arch.levels)}
    dim = {d.lower(): i for i, d in enumerate(workload.dims)}
    tile = list(workload.bounds)
    temporal, spatial = [[] for _ in arch.levels], [[] for _ in arch.levels]
    keep, above = [set() for _ in arch.levels], [{} for _ in arch.levels]
    L, stored, imperfect = 0, [], False                    # the deepest level so far, its tensors so far
    for i, n in enumerate(nodes):
        if n["node"] == "Storage":
            lv = level[n["component"]]
            if lv > L:
                L, stored = lv, []
            keep[lv].update(n["tensors"])
            stored += [workload.tensor(t) for t in n["tensors"]]
            above[lv].update({t: len(temporal[lv]) for t in n["tensors"] if temporal[lv]})
            continue
        if n["node"] not in ("Temporal", "Spatial"):
            continue
        d = dim[n["rank_variable"]]
        # (an imperfect loop, a tile shape that does not divide the one above: storeloop pads its last tile)
        imperfect = imperfect or tile[d] % n["tile_shape"] != 0
        f, tile[d] = -(-tile[d] // n["tile_shape"]), n["tile_shape"]
        if f == 1:
            continue
        if n["node"] == "Spatial":        # the next fanout at or below the level so far (or the one the spatial
            # node before this one opened); the loops below it run in its children
            fan = L - 1 if nodes[i - 1]["node"] == "Spatial" else \
                next(x for x in range(L, len(arch.levels)) if arch.fanout(x)[0] > 1)
            spatial[fan].append(Loop(d, f, True, "X"))
            if L <= fan:
                L, stored = fan + 1, []
        elif not temporal[L] and any(m["node"] == "Storage" and level[m["component"]] == L for m in nodes[i + 1:]) \
                and not any(d in t.dims() or t.window for t in stored) \
                and all(lp.dim != d for lp in spatial[L - 1]):
            temporal[L - 1].append(Loop(d, f))
        else:
            temporal[L].append(Loop(d, f))
    return Mapping(tuple(LevelMapping(tuple(temporal[L]), tuple(spatial[L]), frozenset(keep[L]),
                                      tuple(sorted(above[L].items())))
                         for L in range(len(arch.levels))), name="a peer's mapping", imperfect=imperfect)


def venv(tool: str) -> tuple[Path | None, str]:
    """The tool's venv python, installed on first use; (None, why) where it cannot be."""
    py = HOME / tool / "bin" / "python"
    if py.exists() and (HOME / tool / ".installed").exists():
        return py, ""
    steps = [[sys.executable, "-m", "venv", str(HOME / tool)], [str(py), "-m", "pip", "install", "-q", *PEERS[tool]]]
    for cmd in steps:
        p = subprocess.run(cmd, capture_output=True, text=True)
        if p.returncode:
            return None, f"could not install {' '.join(PEERS[tool])}: {(p.stderr or p.stdout).strip().splitlines()[-1:]}"
    (HOME / tool / ".installed").touch()
    return py, ""


def run_peer(tool: str, files: dict[str, str], script: str, args: list[str]) -> dict:
    py, why = venv(tool)
    if py is None:
        return {"skipped": why}
    work = HOME / f"{tool}-run"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    for name, text in {**files, "run.py": script}.items():
        (work / name).write_text(text)
    t0 = time.perf_counter()
    # its own process group: a peer's worker processes (AccelForge's joblib pool) end with it
    p = subprocess.Popen([str(py), "run.py", *args], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True)
    try:
        out, err = p.communicate(timeout=PEER_TIMEOUT)
    except subprocess.TimeoutExpired:
        return {"skipped": f"{tool} did not finish within {PEER_TIMEOUT:g} s"}
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    wall = time.perf_counter() - t0
    m = re.search(r"RESULT energy_pJ=(\S+) cycles=(\S+)", out)
    if p.returncode or not m:
        last = (err or out).strip().splitlines()[-2:]
        return {"skipped": f"{tool} did not run here: {' / '.join(last)}"}
    return {"wall": wall, "energy_pJ": float(m.group(1)), "cycles": int(float(m.group(2))), "out": out}


def compare(key: str) -> None:
    title, wl_file, af_workload, zz_workload, limit, einsum, options, af_settings = PROBLEMS[key]
    arch = load_arch(ROOT / "tests" / "data" / "arch16.yaml")
    work = load_workload(ROOT / "tests" / "data" / wl_file)
    table, _ = price(arch)
    pj = {f"{n}_{a}": getattr(table.storage[n], f"{'read' if a == 'r' else 'write'}_pJ") / lvl.block_size
          for lvl in arch.levels for n in [lvl.name] for a in "rw"}
    pj["MAC"] = table.compute.read_pJ
    zz = dict(pj, RF_r4=pj["RF_r"] * 4, RF_w4=pj["RF_w"] * 4, GLB_r16=pj["GLB_r"] * 16, GLB_w16=pj["GLB_w"] * 16,
              DRAM_r64=pj["DRAM_r"] * 64, DRAM_w64=pj["DRAM_w"] * 64)

    t0 = time.perf_counter()
    out = map_workload(arch, work, table, time_limit=limit, threads=usable_cores(), **options)   # as `map`'s
    sl = {"wall": time.perf_counter() - t0, "energy_pJ": out.result.energy_pJ, "cycles": out.result.cycles,
          "claim": "proven optimal" if out.search["stopped"] == "optimal" else
                   f"stopped {out.search['stopped']}, energy {out.search['energy_gap']:.2%} above its lower bound"}
    flags = " ".join(f"--{k}" if v is True else f"--{k} {v}" for k, v in options.items())
    name = "storeloop map (" + (flags or "defaults") + (f", {limit} s limit)" if limit else ")")
    rows = {name: sl}
    af_files = {"arch.yaml": AF_ARCH.format(**pj), "workload.yaml": af_workload}
    af_run = AF_RUN.replace("m = spec.map_workload_to_arch", "\n".join(af_settings + ["m = spec.map_workload_to_arch"]))
    rows["AccelForge FFM (energy, 2 jobs)"] = dict(
        run_peer("accelforge", af_files, af_run, ["arch.yaml", "workload.yaml"]),
        claim="optimal in its model" + (" (imperfect loops explored)" if af_settings else ""))
    rows["ZigZag LOMA (energy, lpf 6)"] = dict(
        run_peer("zigzag", {"arch.yaml": ZZ_ARCH.format(**zz), "workload.yaml": zz_workload,
                            "mapping.yaml": ZZ_MAPPING}, ZZ_RUN, ["arch.yaml", "workload.yaml", "mapping.yaml", "out"]),
        claim="none")
    print(f"== {title} on DRAM -> 64 KiB GLB -> 16 x (64-word RF -> MAC)")
    print(f"{'tool':46s} {'wall s':>8s} {'energy uJ':>10s} {'cycles':>11s}  claim / ratio")
    for tool, r in rows.items():
        if "skipped" in r:
            print(f"{tool:46s} skipped: {r['skipped']}")
            continue
        ratio = "" if r is sl else f"; {r['wall'] / sl['wall']:.1f}x storeloop's time, " \
                                    f"energy {r['energy_pJ'] / sl['energy_pJ'] - 1:+.2%} against storeloop's"
        print(f"{tool:46s} {r['wall']:8.2f} {r['energy_pJ'] / 1e6:10.3f} {r['cycles']:11,}  {r['claim']}{ratio}")
    one_model(arch, work, table, out, sl, rows["AccelForge FFM (energy, 2 jobs)"], af_files, einsum)
    zz = rows["ZigZag LOMA (energy, lpf 6)"]
    if "skipped" not in zz:
        line = next((x for x in zz["out"].splitlines() if x.startswith("ZZMAP ")), None)
        in_storeloop(arch, work, table, zigzag_nodes(json.loads(line[6:]), ZZ_NAMES[key]) if line
                     else "ZigZag printed no mapping", "ZigZag", sl)
    ran = [(n, r) for n, r in rows.items() if r is not sl and "skipped" not in r]
    print(f"peers on the {title}: " + ("; ".join(f"{n.split()[0]} {r['wall'] / sl['wall']:.1f}x storeloop's time"
                                                    for n, r in ran) if ran else "none ran here"))


def in_storeloop(arch, work, table, nodes, who: str, sl: dict) -> None:
    """A peer's mapping (AccelForge-style nodes, or why it has none) priced by storeloop's model."""
    mine = nodes if isinstance(nodes, str) else from_accelforge(arch, work, nodes)
    if isinstance(mine, str):
        print(f"  {who}'s mapping in storeloop's model: not priced: {mine}")
        return
    try:
        r = evaluate(arch, work, mine, table)
    except MappingError as exc:
        print(f"  {who}'s mapping in storeloop's model: refused: {exc.reason}")
        return
    print(f"  {who}'s mapping in storeloop's model: {r.energy_pJ / 1e6:.3f} uJ, {r.cycles:,} cycles "
          f"({r.energy_pJ / sl['energy_pJ'] - 1:+.3%} against storeloop's answer)")


def one_model(arch, work, table, out, sl: dict, ffm: dict, af_files: dict, einsum: str) -> None:
    """Whether storeloop's and FFM's answers agree when priced in one model: storeloop's mapping in
    AccelForge's model, FFM's mapping in storeloop's."""
    theirs = run_peer("accelforge", {**af_files, "mapping.yaml": accelforge_yaml(accelforge_nodes(arch, work, out.mapping), einsum)},
                      AF_EVAL, ["arch.yaml", "workload.yaml", "mapping.yaml"])
    if "skipped" in theirs:
        print(f"  storeloop's mapping in AccelForge's model: {theirs['skipped']}")
    else:
        than = "" if "skipped" in ffm else f" ({theirs['energy_pJ'] / ffm['energy_pJ'] - 1:+.3%} against FFM's answer)"
        print(f"  storeloop's mapping in AccelForge's model: {theirs['energy_pJ'] / 1e6:.3f} uJ, "
              f"{theirs['cycles']:,} cycles{than}")
    if "skipped" in ffm:
        return
    line = next((x for x in ffm["out"].splitlines() if x.startswith("NODES ")), None)
    in_storeloop(arch, work, table, json.loads(line[6:]) if line else "AccelForge printed no mapping", "FFM", sl)


def main() -> None:
    chosen = sys.argv[1:] or ["matmul", "conv3x", "pir"]
    unknown = [k for k in chosen if k not in PROBLEMS]
    if unknown:
        sys.exit(f"peers.py: unknown problem {unknown[0]!r}; allowed: {', '.join(PROBLEMS)}")
    for key in chosen:
        compare(key)


if __name__ == "__main__":
    os.chdir(ROOT)
    main()
