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
