"""The npm SDKs that verify GitHub's, Shopify's, Twilio's, Mollie's, Discord's and Linear's
signatures, and the documented recipes of Standard Webhooks v1a, Twitch and Zoom on Node's
crypto: test oracles.

Installed once into a cache directory (`$HOOKINBOX_TEST_NPM_DIR`, default
`~/.cache/hookinbox-npm-oracles`) with `npm ci` from tests/testing/package.json and its
package-lock.json, so every run judges with the same oracles, transitive packages included
(`make lock` refreshes the lock). `HOOKINBOX_NPM_ORACLES=latest` (set by `make test-latest`)
installs the newest release of each package instead, into a directory of its own, to see
upstream changes on purpose. Without Node or npm the tests that need them are skipped, unless
`HOOKINBOX_REQUIRE_NODE=1` makes that a failure.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent


LOCKED_FILES = ("package.json", "package-lock.json")


def _latest() -> bool:
    return os.environ.get("HOOKINBOX_NPM_ORACLES") == "latest"


def _wanted_files() -> dict[str, str]:
    """What the cache directory must hold: the lock's two files, or (latest) the manifest."""
    if not _latest():
        return {name: (HERE / name).read_text() for name in LOCKED_FILES}
    manifest = json.loads((HERE / "package.json").read_text())
    manifest["dependencies"] = {name: "latest" for name in manifest["dependencies"]}
    return {"package.json": json.dumps(manifest, indent=2) + "\n"}


def oracle_dir() -> Path:
    name = "hookinbox-npm-oracles-latest" if _latest() else "hookinbox-npm-oracles"
    default = Path.home() / ".cache" / name
    target = Path(os.environ.get("HOOKINBOX_TEST_NPM_DIR", default))
    target.parent.mkdir(parents=True, exist_ok=True)
    wanted = _wanted_files()
    if not (
        all((target / f).exists() and (target / f).read_text() == t for f, t in wanted.items())
        and (target / "node_modules").is_dir()
    ):
        if shutil.which("node") is None or shutil.which("npm") is None:
            if os.environ.get("HOOKINBOX_REQUIRE_NODE"):
                pytest.fail("Node and npm are needed for the npm oracles")
            pytest.skip("Node and npm are not installed")
        # Installed beside the target, then renamed into place: two test processes (xdist)
        # may install at once, and neither may see the other's half-made directory.
        staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
        for file, text in wanted.items():
            (staging / file).write_text(text)
        # `npm ci` installs exactly the lock and fails if package.json disagrees with it.
        command = "install" if _latest() else "ci"
        subprocess.run(
            ["npm", command, "--no-audit", "--no-fund", "--silent"],
            cwd=staging,
            check=True,
            timeout=300,
        )
        shutil.rmtree(target, ignore_errors=True)
        try:
            staging.rename(target)
        except OSError:  # another process put its copy there first
            shutil.rmtree(staging, ignore_errors=True)
    script = target / "oracle.mjs"
    if not script.exists() or script.read_text() != (HERE / "oracle.mjs").read_text():
        shutil.copyfile(HERE / "oracle.mjs", script)
    return target


def npm_verifies(
    directory: Path,
    provider: str,
    secret: str,
    headers: dict[str, str],
    body: bytes,
    *,
    url: str | None = None,
    signatures: list[str] | None = None,
) -> dict[str, Any]:
    """The npm SDK's verdict; `url` is the URL called, for providers that sign it (Twilio);
    `signatures` the values of a repeated signature header (Mollie)."""
    request = {
        "provider": provider,
        "secret": secret,
        "headers": headers,
        "body": base64.b64encode(body).decode(),
        "url": url,
        "signatures": signatures,
    }
    done = subprocess.run(
        ["node", str(directory / "oracle.mjs")],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    answer: dict[str, Any] = json.loads(done.stdout)
    return answer


def npm_judges(directory: Path, requests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Several oracle requests in one Node process (each as `npm_verifies` builds it, with
    `body` as bytes; a request with `sign` set answers the headers the recipe signs)."""
    payload = [
        {"headers": {}, "secret": "", **r, "body": base64.b64encode(r["body"]).decode()}
        for r in requests
    ]
    done = subprocess.run(
        ["node", str(directory / "oracle.mjs")],
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    answers: list[dict[str, Any]] = json.loads(done.stdout)
    return answers
