"""`make dist`'s last step: the release files installed and run as a user would run them.

`python -m build` has put the sdist and the wheel built from that sdist in dist/, and twine has
checked them. This takes the wheel and:

1. installs it in a fresh virtual environment with the line docs/install.md gives for a built
   wheel (`pip install 'dist/hookinbox-VERSION-py3-none-any.whl[EXTRAS]'`), at the test lock's
   versions (requirements/test.txt as constraints): a regular install, not an editable one;
2. checks that what that environment imports is the wheel's: `hookinbox` from its
   site-packages, at pyproject.toml's version, with nothing of this source tree on `sys.path`;
3. runs README.md's "A full example" there, twice, in an empty directory;
4. runs `hookinbox demo` there (README.md's quickstart, which `make demo` runs from the
   checkout): the example shop under a simulated Stripe storm, exit 0 only if exactly-once held.

Run from the repository's root with the test venv's python: `python -m tests.packaging.dist_check`
(it reads README.md's example with tests/docs/blocks.py, which needs sybil). Prints a line per
step and its duration; exits 1 at the first failure, with what failed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

from tests.docs.blocks import ROOT, parse, section

DIST = ROOT / "dist"
LOCK = ROOT / "requirements" / "test.txt"
WHEEL_LINE = re.compile(
    r"pip install '(?P<wheel>dist/hookinbox-[^']+\.whl)\[(?P<extras>[a-z,-]+)\]'"
)
"""docs/install.md's line for a built wheel."""
DEMO_EXTRAS = {"server", "simulate"}
"""What `hookinbox demo` needs (its missing-extra line names both)."""
DEMO_TIMEOUT = 600


class Failed(Exception):
    """A step found the release files wrong; its message says how."""


@dataclass(frozen=True)
class Release:
    version: str
    wheel: Path
    sdist: Path


def release_files() -> Release:
    """The one wheel and the one sdist in dist/, of pyproject.toml's version."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    wheels = sorted(DIST.glob("hookinbox-*.whl"))
    sdists = sorted(DIST.glob("hookinbox-*.tar.gz"))
    expected = (
        [DIST / f"hookinbox-{version}-py3-none-any.whl"],
        [DIST / f"hookinbox-{version}.tar.gz"],
    )
    if (wheels, sdists) != expected:
        found = [path.name for path in wheels + sdists]
        raise Failed(f"dist/ should hold the wheel and the sdist of {version}; it holds {found}")
    return Release(version, wheels[0], sdists[0])


def documented_install(release: Release) -> str:
    """The requirement docs/install.md gives for the built wheel; it must name this release's
    wheel and the extras the demo needs."""
    found = WHEEL_LINE.search((ROOT / "docs" / "install.md").read_text())
    if found is None:
        raise Failed("docs/install.md has no `pip install 'dist/hookinbox-...whl[...]'` line")
    named = ROOT / found["wheel"]
    if named != release.wheel:
        raise Failed(
            f"docs/install.md installs {found['wheel']}, the build made {release.wheel.name}"
        )
    extras = set(found["extras"].split(","))
    if not DEMO_EXTRAS <= extras:
        raise Failed(f"docs/install.md's wheel line lacks the demo's extras {sorted(DEMO_EXTRAS)}")
    return found[0].removeprefix("pip install ").strip("'")


def user_environment(venv: Path) -> dict[str, str]:
    """This process's environment less what would reach into the checkout or change what
    hookinbox does (PYTHONPATH, a venv's variables, HOOKINBOX_*), with the venv first on PATH."""
    kept = {
        name: value
        for name, value in os.environ.items()
        if name not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")
        and not name.startswith("HOOKINBOX_")
    }
    kept["PATH"] = f"{venv / 'bin'}{os.pathsep}{kept.get('PATH', '')}"
    kept["PIP_NO_INPUT"] = "1"
    return kept


def run(command: list[str], *, cwd: Path, env: dict[str, str], timeout: float = 600) -> str:
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    if done.returncode != 0:
        raise Failed(f"{' '.join(command)} exited {done.returncode}:\n{done.stdout}{done.stderr}")
    return done.stdout


WHERE = """
import json, sys
from importlib import metadata
import hookinbox
print(json.dumps({
    "file": hookinbox.__file__,
    "version": hookinbox.__version__,
    "path": sys.path,
    "direct_url": json.loads(
        metadata.distribution("hookinbox").read_text("direct_url.json") or "{}"
    ),
}))
"""


def check_isolation(
    python: Path, venv: Path, release: Release, *, cwd: Path, env: dict[str, str]
) -> None:
    """hookinbox is imported from the venv's site-packages, installed from the wheel (not an
    editable install of a directory), at the release's version; no path of the checkout."""
    seen = json.loads(run([str(python), "-c", WHERE], cwd=cwd, env=env))
    if not Path(seen["file"]).resolve().is_relative_to(venv.resolve()):
        raise Failed(f"hookinbox was imported from {seen['file']}, not from the fresh venv")
    if seen["version"] != release.version:
        raise Failed(
            f"the installed hookinbox says {seen['version']}, the release is {release.version}"
        )
    if "archive_info" not in seen["direct_url"]:  # an editable install records "dir_info"
        raise Failed(f"hookinbox was not installed from the wheel: {seen['direct_url']}")
    inside = [
        entry for entry in seen["path"] if entry and Path(entry).resolve().is_relative_to(ROOT)
    ]
    if inside:
        raise Failed(f"the source tree is on sys.path: {inside}")


def readme_example() -> str:
    readme = parse(ROOT / "README.md")
    return "\n".join(example.parsed for example in section(readme, "A full example"))


def verdict(demo_output: str) -> str:
    """The demo's closing sentence (`exactly-once held: ...`), wrapped over lines as printed."""
    lines = demo_output.strip().splitlines()
    starts = [at for at, line in enumerate(lines) if line.startswith("exactly-once")]
    return " ".join(lines[starts[-1] :] if starts else lines[-1:])


def main() -> int:
    started = time.monotonic()

    def done(step: str, since: float) -> None:
        print(f"dist: {step} ({time.monotonic() - since:.1f} s)", flush=True)

    base = Path(tempfile.mkdtemp(prefix="hookinbox-dist-"))
    try:
        release = release_files()
        requirement = documented_install(release)
        venv, workdir = base / "venv", base / "work"
        workdir.mkdir()
        env = user_environment(venv)

        step = time.monotonic()
        run([sys.executable, "-m", "venv", str(venv)], cwd=base, env=env)
        python = venv / "bin" / "python"
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        run([*pip, "-c", str(LOCK), requirement], cwd=ROOT, env=env)  # the path is dist/'s
        done(f"pip install '{requirement}' into a fresh venv", step)

        step = time.monotonic()
        check_isolation(python, venv, release, cwd=workdir, env=env)
        done(f"hookinbox {release.version} imported from the venv's site-packages only", step)

        step = time.monotonic()
        script = workdir / "readme_example.py"
        script.write_text(readme_example())
        for _ in range(2):  # a second run must pass too: the example leaves nothing behind
            run([str(python), script.name], cwd=workdir, env=env)
        done("README.md's full example, twice", step)

        step = time.monotonic()
        demo = run(
            [str(venv / "bin" / "hookinbox"), "demo"], cwd=workdir, env=env, timeout=DEMO_TIMEOUT
        )
        done(f"hookinbox demo: {verdict(demo)}", step)
    except (Failed, subprocess.TimeoutExpired) as error:
        print(f"dist: FAILED: {error}", file=sys.stderr)
        return 1
    finally:
        shutil.rmtree(base, ignore_errors=True)
    seconds = time.monotonic() - started
    print(f"dist: {release.wheel.name} and {release.sdist.name} are good ({seconds:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
