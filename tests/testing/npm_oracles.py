"""The npm SDKs that verify GitHub's and Shopify's signatures, run by Node as test oracles.

Installed once into a cache directory (`$HOOKINBOX_TEST_NPM_DIR`, default
`~/.cache/hookinbox-npm-oracles`) from tests/testing/package.json. Without Node or npm the
tests that need them are skipped, unless `HOOKINBOX_REQUIRE_NODE=1` makes that a failure.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent


def oracle_dir() -> Path:
    default = Path.home() / ".cache" / "hookinbox-npm-oracles"
    target = Path(os.environ.get("HOOKINBOX_TEST_NPM_DIR", default))
    wanted = (HERE / "package.json").read_text()
    installed = target / "package.json"
    if not (
        installed.exists()
        and installed.read_text() == wanted
        and (target / "node_modules").is_dir()
    ):
        if shutil.which("node") is None or shutil.which("npm") is None:
            if os.environ.get("HOOKINBOX_REQUIRE_NODE"):
                pytest.fail("Node and npm are needed for the npm oracles")
            pytest.skip("Node and npm are not installed")
        target.mkdir(parents=True, exist_ok=True)
        installed.write_text(wanted)
        subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--silent"],
            cwd=target,
            check=True,
            timeout=300,
        )
    shutil.copyfile(HERE / "oracle.mjs", target / "oracle.mjs")
    return target


def npm_verifies(
    directory: Path, provider: str, secret: str, headers: dict[str, str], body: bytes
) -> dict[str, Any]:
    request = {
        "provider": provider,
        "secret": secret,
        "headers": headers,
        "body": base64.b64encode(body).decode(),
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
