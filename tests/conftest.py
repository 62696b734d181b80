import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
VALIDATION = Path(os.environ.get("STORELOOP_VALIDATION", ROOT.parent / "shared" / "validation"))


def validation_cases(kind: str = "valid") -> list[Path]:
    """Case folders of the Timeloop corpus; CI must have it (an empty list fails there)."""
    if not VALIDATION.is_dir():
        if os.environ.get("CI"):
            raise RuntimeError(f"validation corpus not found at {VALIDATION}")
        return []
    if kind == "valid":
        return sorted(p.parent for p in VALIDATION.glob("*/expected.json"))
    return sorted(p.parent for p in (VALIDATION / "invalid").glob("*/expected.json"))


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
