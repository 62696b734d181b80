"""Make hwcomponents-cacti's CACTI binary run on this machine.

hwcomponents-cacti ships a CACTI binary linked against glibc 2.38; on Debian 12 (glibc 2.36) it
fails with "GLIBC_2.38 not found". The package also ships CACTI's C++ source and makefile, so
:func:`ensure_cacti` runs the binary once and, if the loader rejects it, rebuilds it in place
(about 30 s on 2 cores). Without a C++ compiler it raises a clear error.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from storeloop.errors import StoreloopError

_OK: set[Path] = set()


def cacti_dir() -> Path:
    import hwcomponents_cacti

    return Path(hwcomponents_cacti.__file__).resolve().parent / "cacti"


def _runs(binary: Path) -> bool:
    if not binary.is_file():
        return False
    p = subprocess.run([str(binary)], capture_output=True, text=True)
    text = p.stdout + p.stderr
    return "GLIBC" not in text and "GLIBCXX" not in text and "how to use CACTI" in text


def ensure_cacti(quiet: bool = False) -> Path:
    """Path of a working CACTI binary; rebuilds the bundled source when the shipped one fails."""
    d = cacti_dir()
    binary = d / "cacti"
    if d in _OK or _runs(binary):
        _OK.add(d)
        return binary
    if shutil.which("make") is None or shutil.which("g++") is None:
        raise StoreloopError(f"CACTI at {binary} does not run on this machine (built for a newer glibc) and "
                             f"cannot be rebuilt: install make and g++ (Debian: apt install build-essential)")
    if not quiet:
        print("storeloop: CACTI shipped by hwcomponents-cacti does not run here; rebuilding it from its "
              "bundled source (about 30 s)...", file=sys.stderr)
    for obj in ("obj_dbg", "obj_opt"):
        shutil.rmtree(d / obj, ignore_errors=True)
    binary.unlink(missing_ok=True)
    p = subprocess.run(["make", "-j2"], cwd=d, capture_output=True, text=True)
    if p.returncode != 0 or not _runs(binary):
        tail = "\n".join((p.stdout + p.stderr).strip().splitlines()[-5:])
        raise StoreloopError(f"rebuilding CACTI in {d} failed:\n{tail}")
    _OK.add(d)
    return binary


if __name__ == "__main__":          # python -m storeloop.energy.cacti (called by ./run setup)
    print(ensure_cacti())
