"""Build the wheel and the sdist, check what they hold, install the wheel in a fresh venv and run it.

    python scripts/check_package.py          # CI runs this after the tests

Checks: the sdist holds every tracked file the tests, examples, benchmarks and docs need; the wheel holds
LICENSE, py.typed and the data registry's checksums, and no top-level package but ``cl_plugins``; in a new virtual
environment (the system's packages visible for torch, the wheel installed without dependencies), from a user's
folder that has an ``integrations`` package of its own, ``cl-plugins --help`` and ``cl-plugins data list`` run,
and a script imports both that package and the adapters, from the installed copy, not this checkout.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SDIST_TREES = ("cl_plugins/", "integrations/", "tests/", "examples/", "benchmarks/", "docs/", "scripts/")


def run(*cmd: str, cwd: Path = ROOT) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"error: {' '.join(cmd)} exited with {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


def check_sdist(sdist: Path) -> None:
    tracked = run("git", "ls-files").splitlines()
    top_level = ("LICENSE", "README.md", "pyproject.toml", "setup.py")
    wanted = {f for f in tracked if f.startswith(SDIST_TREES) or f in top_level}
    with tarfile.open(sdist) as tar:
        held = {name.split("/", 1)[1] for name in tar.getnames() if "/" in name}
    missing = sorted(wanted - held)
    if missing:
        raise SystemExit(f"error: the sdist lacks {len(missing)} tracked files, e.g. {missing[:5]}; see MANIFEST.in")
    print(f"sdist: all {len(wanted)} tracked files of {', '.join(SDIST_TREES)} and the top-level files")


def check_wheel(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    for needed in ("cl_plugins/py.typed", "cl_plugins/integrations/py.typed",
                   "cl_plugins/integrations/data/data_files.json", "cl_plugins/integrations/console.py"):  # fmt: skip
        if needed not in names:
            raise SystemExit(f"error: the wheel lacks {needed}")
    top = {n.split("/", 1)[0] for n in names if not n.split("/", 1)[0].endswith((".dist-info", ".data"))}
    if top != {"cl_plugins"}:
        raise SystemExit(f"error: the wheel installs the top-level names {sorted(top)}; only cl_plugins belongs there")
    meta = next(n for n in names if n.endswith(".dist-info/METADATA"))
    text = zipfile.ZipFile(wheel).read(meta).decode()
    if "License-Expression: MIT" not in text or not any(n.endswith("licenses/LICENSE") for n in names):
        raise SystemExit("error: the wheel's metadata lacks the SPDX licence expression or the LICENSE file")
    print(f"wheel: {len(names)} files, one top-level package (cl_plugins), SPDX licence MIT, LICENSE, py.typed, "
          "data_files.json")  # fmt: skip


def check_installed(wheel: Path, work: Path) -> None:
    venv = work / "venv"
    run(sys.executable, "-m", "venv", "--system-site-packages", str(venv))
    run(str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-deps", str(wheel))
    user = work / "user"  # a user's project with a package of that common name, first on sys.path from here
    (user / "integrations").mkdir(parents=True)
    (user / "integrations" / "__init__.py").write_text('WHO = "the user"\n')
    cli = str(venv / "bin" / "cl-plugins")
    run(cli, "--help", cwd=user)
    listing = run(cli, "data", "list", cwd=user)
    probe = ("import integrations, cl_plugins, cl_plugins.integrations.console as c, "
             "cl_plugins.integrations.hosts as h; assert integrations.WHO == 'the user' and len(h.hosts()) > 5; "
             "print(cl_plugins.__file__); print(c.__file__)")  # fmt: skip
    where = run(str(venv / "bin" / "python"), "-c", probe, cwd=user)
    if any(not line.startswith(str(venv)) for line in where.split()):
        raise SystemExit(f"error: the venv imported the checkout, not the wheel:\n{where}")
    print(f"venv: cl-plugins --help and `cl-plugins data list` ({len(listing.splitlines()) - 1} datasets) ran "
          "from the installed wheel beside a user's own `integrations` package, and a script imported both")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        run(sys.executable, "-m", "build", "--outdir", str(work / "dist"), ".")
        check_sdist(next((work / "dist").glob("*.tar.gz")))
        wheel = next((work / "dist").glob("*.whl"))
        check_wheel(wheel)
        check_installed(wheel, work)


if __name__ == "__main__":
    main()
