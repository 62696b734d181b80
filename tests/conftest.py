import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "tests" / "corpus"                       # the in-repo copy (tests/corpus/REFRESH.md)
SHARED = ROOT.parent / "shared" / "validation"           # the source, beside a checkout when present
VALIDATION = Path(os.environ["STORELOOP_VALIDATION"]) if os.environ.get("STORELOOP_VALIDATION") else CORPUS


def validation_cases(kind: str = "valid") -> list[Path]:
    """Case folders of the Timeloop corpus: the in-repo copy plus cases only ``shared/`` has yet."""
    roots = [VALIDATION] if os.environ.get("STORELOOP_VALIDATION") else [CORPUS, SHARED]
    if not VALIDATION.is_dir():
        raise RuntimeError(f"validation corpus not found at {VALIDATION}")
    cases: dict[str, Path] = {}
    for root in roots:
        base = root if kind == "valid" else root / "invalid"
        for p in sorted(base.glob("*/expected.json")):
            cases.setdefault(p.parent.name, p.parent)
    return sorted(cases.values(), key=lambda p: p.name)


def every_count(result) -> tuple:
    """A model result's cycles and, per level and tensor, every count it prints: whether the level
    keeps it, its tile, partition and instances, and its reads, fills and updates per instance (two
    results that agree on this price the same but for the per-word energies)."""
    return result.cycles, [(lvl.name, name, t.kept, t.tile, t.partition, t.utilized_instances, t.reads_per_instance,
                            t.fills_per_instance, t.updates_per_instance)
                           for lvl in result.levels for name, t in sorted(lvl.tensors.items())]


@pytest.fixture
def root() -> Path:
    return ROOT


def pytest_terminal_summary(terminalreporter):
    """Say how much of the Timeloop corpus this run checked."""
    counts = {}
    for outcome in ("passed", "failed"):
        for rep in terminalreporter.stats.get(outcome, []):
            for test in ("test_matches_timeloop", "test_invalid_mapping_rejected"):
                if f"::{test}[" in rep.nodeid and rep.when == "call":
                    counts[(test, outcome)] = counts.get((test, outcome), 0) + 1
    if counts:
        terminalreporter.write_line(
            f"Timeloop v3.0.3 corpus ({VALIDATION}): "
            f"{counts.get(('test_matches_timeloop', 'passed'), 0)} valid cases matched, "
            f"{counts.get(('test_matches_timeloop', 'failed'), 0)} mismatched; "
            f"{counts.get(('test_invalid_mapping_rejected', 'passed'), 0)} invalid cases rejected")


def pytest_collection_modifyitems(config, items):
    """Tests marked slow (long runs on real designs) run only with STORELOOP_SLOW=1."""
    if os.environ.get("STORELOOP_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: set STORELOOP_SLOW=1 to run it")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
