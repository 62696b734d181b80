"""Malformed inputs made by mutating the repository's real files (tests/test_bad_input.py).

Each mutation changes one value on one line of a real input into something no field accepts
(a word where a number goes, a negative, zero-or-negative factors, nan, infinity, a list, an
unknown dimension or tensor) or breaks the document (a truncated file, a tab indent, an unknown
key). Every mutated file must be refused with exit 2 and a one-screen error naming it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CASE = ROOT / "tests" / "corpus" / "thesis__ssd-einsum__pir-onion"
NATIVE = {"arch": ROOT / "arch" / "onionchopper.yaml", "workload": ROOT / "workloads" / "onionpir-64GiB.yaml",
          "mapping": ROOT / "mappings" / "onionchopper-thesis-best.yaml",
          "ert": ROOT / "arch" / "onionchopper.ERT.yaml", "art": ROOT / "arch" / "onionchopper.ART.yaml",
          "constraints": ROOT / "mappings" / "onionchopper.constraints.yaml", "sweep": ROOT / "sweeps" / "demo.yaml",
          "ssd": ROOT / "arch" / "ssd" / "mqsim-reference.yaml",
          "query": ROOT / "workloads" / "onionpir-1GiB.query.yaml",
          # an arch whose Disk embeds an ssd: block (and a layout): mutated in place of the arch
          "arch:ssd": ROOT / "arch" / "onionchopper-ssd.yaml",
          # levels declared buffering: double; a workload set with a weight
          "arch:buffered": ROOT / "tests" / "data" / "onionchopper-buffered.yaml",
          "sweep:set": ROOT / "sweeps" / "workload-set.yaml",
          # a mapping with an uneven position (below:)
          "mapping:uneven": ROOT / "tests" / "data" / "onionchopper-thesis-uneven.yaml"}
TIMELOOP = {"arch": CASE / "arch.yaml", "workload": CASE / "problem.yaml", "mapping": CASE / "mapping.yaml",
            "ert": CASE / "ERT.yaml", "art": CASE / "ART.yaml",
            "constraints": ROOT / "mappings" / "onionchopper.timeloop-constraints.yaml"}
SYSTEMS = {f"system:{p.stem}": p for p in sorted((ROOT / "systems").glob("*.yaml"))}
# the subcommands each input is run through
COMMANDS = {"arch": ("model", "export"), "workload": ("model", "export"), "mapping": ("model", "export"),
            "ert": ("model",), "art": ("model",), "constraints": ("map",), "sweep": ("sweep",), "ssd": ("ssd",),
            "query": ("map-query",), "arch:ssd": ("model",), "arch:buffered": ("model",), "sweep:set": ("sweep",),
            "mapping:uneven": ("model",),
            **{role: ("system",) for role in SYSTEMS}}
# keys whose values are free-form (names, notes, model attributes that storeloop passes through)
FREE = {"name", "source", "einsum", "class", "type", "technology", "version", "target", "level", "clock",
        "assumed", "assumes", "why", "missing", "note", "description"}           # free text of system files
BAD_NUMBERS = ["abc", "-1", "nan", "1e400", "[1, 2]"]
# keys whose value is one of a few words (or a device of the file), and values none of them takes
CHOICES = {"buffering", "disk_from"}
BAD_CHOICES = ["triple", "2", "[double]", "Double"]
BAD_FACTORS = ["{d}=-2", "{d}=0", "{d}=abc", "Z=2", "{d}=1e400"]
# an uneven position (`below: {T: D}`): a dimension without a loop there, an unknown one, an unknown
# tensor, a number, a list instead of the mapping
BAD_POSITIONS = ["{{{t}: Q}}", "{{{t}: ZZ}}", "{{X: {d}}}", "{{{t}: 3}}", "[{t}, {d}]"]
# values of the right type that mean nothing (issue 30): (role, text in the file, its replacement)
MEANINGLESS = [
    ("workload", "read-write: True", "read-write: False"),              # Timeloop: a problem with no output
    ("arch", "vector_access_energy: 20000", "vector_access_energy: 1e30"),   # 10^30 pJ per access
    ("ert", "energy: 1024\n", "energy: 2e25\n"),
    ("constraints", "min_spatial_utilization: 1.0", "min_spatial_utilization: true"),
    ("sweep", "budget: 5000000}", 'budget: "5000000"}'),                 # a string where a count goes
    ("sweep", "budget: 5000000}", "budget: 5000000, uneven: 2}"),         # a number where a yes/no goes
    ("sweep", "budget: 5000000}", 'budget: 5000000, uneven: "yes"}'),     # a string where a yes/no goes
    ("sweep", "budget: 5000000}", "budget: 5000000, imperfect: 1}"),      # a number where a yes/no goes
    ("mapping", "  name: onionchopper-thesis-best\n",                       # a word where a yes/no goes
     "  name: onionchopper-thesis-best\n  imperfect: padded\n"),
    ("system:rotation", "levels.CoreRegs.instances: 1}", "levels.CoreRegs.instances: 2}"),  # 2 register sets, 1 core
    ("system:rotation", "arch_set: {compute.instances: 1,", "arch_set: {compute: 5,"),
]


@dataclass(frozen=True)
class Case:
    id: str
    role: str              # which input is mutated
    fmt: str               # "native" or "timeloop"
    text: str
    command: str = "model"


def _numeric_lines(text: str):
    """(line index, key, value span) of `key: number-ish` lines (not under free-form keys)."""
    for i, line in enumerate(text.splitlines()):
        m = re.match(r"^(\s*-?\s*)([\w-]+):\s+([^#\s{\[][^#]*?)\s*(#.*)?$", line)
        if not m or m.group(2) in FREE:
            continue
        value = m.group(3)
        if re.match(r"^[\d(]", value):
            yield i, m.group(2), m.span(3)


def _factor_lines(text: str):
    for i, line in enumerate(text.splitlines()):
        m = re.match(r"^\s*(-\s*)?(temporal|spatial|factors):\s+(.*\w=\d.*)$", line)
        if m:
            yield i, m


def _flow_entries(text: str):
    """(line index, span) of the numbers in `{K: 1, D: "<=64"}`-style flow mappings."""
    for i, line in enumerate(text.splitlines()):
        if re.search(r"(^|[:,\[])\s*\{", line) and not line.lstrip().startswith("#"):
            for m in re.finditer(r"\b[A-Za-z_]\w*:\s*(\"[^\"]*\d\"|\d+)", line):
                yield i, m.span(1)


def _attribute_keys(lines: list[str]):
    """(line index, span) of the first key of each component's ``attributes:`` (a flow mapping on its
    line, or the first key of its block)."""
    for i, line in enumerate(lines):
        flow = re.match(r"^\s*attributes:\s*\{\s*(\w{4,}):", line)
        if flow:
            yield i, flow.span(1)
        elif re.match(r"^\s*attributes:\s*(#.*)?$", line):
            j = next((j for j in range(i + 1, len(lines)) if not lines[j].strip().startswith("#")), None)
            key = re.match(r"^\s*(\w{4,}):", lines[j]) if j is not None else None
            if key:
                yield j, key.span(1)


def cases() -> list[Case]:
    out: list[Case] = []
    for fmt, files in (("native", NATIVE), ("timeloop", TIMELOOP), ("native", SYSTEMS)):
        for role, path in files.items():
            text = path.read_text()
            if role.startswith("sweep") or role in SYSTEMS:     # the copy lives elsewhere: absolute input paths
                text = text.replace("../", str(ROOT) + "/")
            lines = text.splitlines()
            first = len(out)
            if role in ("constraints", "sweep", "sweep:set", "query"):
                for i, (a, b) in _flow_entries(text):
                    for bad in ("-2", "0", "abc", "1e400"):
                        new = lines[:]
                        new[i] = lines[i][:a] + bad + lines[i][b:]
                        out.append(Case(f"{fmt}-{role}-L{i + 1}-C{a}-{bad}", role, fmt, "\n".join(new) + "\n"))
            numeric = list(_numeric_lines(text))
            if role in ("ert", "art"):          # long tables: their first entries stand for the rest
                numeric = numeric[:6]
            for i, key, (a, b) in numeric:
                for bad in BAD_NUMBERS:
                    new = lines[:]
                    new[i] = lines[i][:a] + bad + lines[i][b:]
                    out.append(Case(f"{fmt}-{role}-L{i + 1}-{key}-{bad}", role, fmt, "\n".join(new) + "\n"))
            for i, line in enumerate(lines):
                m = re.match(r"^\s*(\w+):\s+(\w+)\s*(#.*)?$", line)
                if m and m.group(1) in CHOICES:
                    for bad in BAD_CHOICES:
                        new = lines[:]
                        new[i] = line[:m.start(2)] + bad + line[m.end(2):]
                        out.append(Case(f"{fmt}-{role}-L{i + 1}-{m.group(1)}-{bad}", role, fmt, "\n".join(new) + "\n"))
            if fmt == "native" and role.startswith("arch"):
                for i, (a, b) in _attribute_keys(lines):
                    key = lines[i][a:b]
                    typo = key[0] + key[2] + key[1] + key[3:]          # two letters swapped: witdh
                    new = lines[:]
                    new[i] = lines[i][:a] + typo + lines[i][b:]
                    out.append(Case(f"{fmt}-{role}-L{i + 1}-attribute-{typo}", role, fmt, "\n".join(new) + "\n"))
            for i, m in _factor_lines(text):
                dim = re.search(r"(\w)=\d", m.group(3)).group(1)
                for bad in BAD_FACTORS:
                    if role == "constraints" and fmt == "timeloop" and bad == "{d}=0":
                        continue                # Timeloop: a constraint factor 0 is the whole dimension (legal)
                    new = lines[:]
                    new[i] = re.sub(rf"\b{dim}=\d+", bad.format(d=dim), lines[i], count=1)
                    out.append(Case(f"{fmt}-{role}-L{i + 1}-factor-{bad.format(d=dim)}", role, fmt, "\n".join(new) + "\n"))
            for i, line in enumerate(lines):
                m = re.match(r"^(\s*below:\s+)\{(\w+): (\w+)\}\s*$", line)
                for bad in BAD_POSITIONS if m else ():
                    new = lines[:]
                    new[i] = m.group(1) + bad.format(t=m.group(2), d=m.group(3))
                    out.append(Case(f"{fmt}-{role}-L{i + 1}-below-{bad.format(t=m.group(2), d=m.group(3))}", role, fmt,
                                    "\n".join(new) + "\n"))
            for k, (r, old, bad) in enumerate(m for m in MEANINGLESS if m[0] == role):
                if old in text:
                    out.append(Case(f"{fmt}-{role}-meaningless-{k}", role, fmt, text.replace(old, bad, 1)))
            # the document itself: cut in the middle, a tab indent, an unknown key at the top
            out.append(Case(f"{fmt}-{role}-truncated", role, fmt, text[: len(text) // 2].rsplit("\n", 1)[0] + "\n  x: [\n"))
            out.append(Case(f"{fmt}-{role}-tab", role, fmt, text.replace("\n  ", "\n\t", 1)))
            out.append(Case(f"{fmt}-{role}-empty", role, fmt, "# nothing here\n"))
            made = out[first:]
            out[first:] = [Case(c.id + ("" if cmd == COMMANDS[role][0] else f"-{cmd}"), c.role, c.fmt, c.text, cmd)
                           for cmd in COMMANDS[role] for c in made]
    return out


def run(case: Case, folder: Path) -> tuple[int | None, str, float, BaseException | None]:
    """(exit code, stderr, seconds, exception that escaped) of ``storeloop model`` on the case."""
    import contextlib
    import io
    import time

    from storeloop.cli import main

    files = dict(NATIVE if case.fmt == "native" else TIMELOOP)
    bad = folder / f"mutated-{case.role.replace(':', '-')}.yaml"
    bad.write_text(case.text, encoding="utf-8")
    files[case.role.split(":")[0] if case.role.startswith(("arch:", "sweep:", "mapping:")) else case.role] = bad
    err = io.StringIO()
    t0 = time.monotonic()
    code, exc = None, None
    energy = ["--ert", str(files["ert"]), "--art", str(files["art"])]
    args = {"model": ["model", str(files["arch"]), str(files["workload"]), str(files["mapping"]), *energy],
            "export": ["export", str(files["arch"]), str(files["workload"]), str(files["mapping"]),
                       "--out", str(folder / "export")],
            # the constraints are Timeloop's or storeloop's; the design is OnionChopper either way
            "map": ["map", str(NATIVE["arch"]), str(NATIVE["workload"]), "--ert", str(NATIVE["ert"]),
                    "--art", str(NATIVE["art"]), "--constraints", str(files["constraints"]), "--time-limit", "5"],
            "sweep": ["sweep", str(files.get("sweep", "")), "--db", str(folder / "sweep.sqlite")],
            "system": ["system", str(files.get(case.role, ""))],
            "ssd": ["ssd", str(files.get("ssd", ""))],
            "map-query": ["map", str(NATIVE["arch"]), str(files.get("query", "")), *energy, "--time-limit", "5"]}[case.command]
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main(args)
        except SystemExit as e:
            code = e.code
        except BaseException as e:      # noqa: BLE001 -- a traceback is what the test looks for
            exc = e
    return code, err.getvalue(), time.monotonic() - t0, exc
