"""agent-chat-ui for the browser test: built unchanged from its pinned npm package, served.

`tests/browser/` is an npm fixture: its `package.json` and committed `package-lock.json` pin
`create-agent-chat-app` 0.1.6, whose `templates/vite` is agent-chat-ui's Vite front end, and the
packages `vite build` needs to build it (`make pytest` runs `npm ci` there). `build_ui` copies
the template, untouched, to `tests/browser/build/app` (git-ignored; node resolution finds the
fixture's `node_modules` by walking up) and runs `vite build` with the template's own
`vite.config.ts`; the result is reused while the lock file and the build variables are
unchanged. `serve_static` serves the built files on a free loopback port.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

__all__ = [
    "ASSISTANT_ID",
    "CHROMIUM",
    "FIXTURE",
    "build_ui",
    "missing_requirement",
    "serve_static",
]

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "browser"
TEMPLATE = FIXTURE / "node_modules" / "create-agent-chat-app" / "templates" / "vite"
BUILD = FIXTURE / "build"
CHROMIUM = Path("/usr/bin/chromium")
ASSISTANT_ID = "agent"
# Baked into the bundle as the UI's defaults; the test also passes `apiUrl` / `assistantId` in
# the page URL (the thread-history sidebar reads only those), so the gateway's port is free.
BUILD_ENV = {"VITE_API_URL": "http://localhost:8420", "VITE_ASSISTANT_ID": ASSISTANT_ID}


def missing_requirement() -> str | None:
    """Why the agent-chat-ui test cannot run on this machine, or None."""
    if not CHROMIUM.is_file():
        return f"Chromium not found at {CHROMIUM} (Debian package `chromium`; .ci/run installs it)"
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        return f"the agent-chat-ui build needs {' and '.join(missing)} on PATH"
    if (
        not (TEMPLATE / "package.json").is_file()
        or not (FIXTURE / "node_modules/.bin/vite").exists()
    ):
        return "tests/browser/node_modules is missing: run `make pytest` (npm ci in tests/browser)"
    return None


def _fingerprint() -> str:
    lock = (FIXTURE / "package-lock.json").read_bytes()
    extra = json.dumps(BUILD_ENV, sort_keys=True).encode()
    return hashlib.sha256(lock + b"\0" + extra).hexdigest()


def build_ui() -> Path:
    """The built UI's directory (`dist`), building it first unless the last build still fits."""
    app = BUILD / "app"
    dist = app / "dist"
    stamp = BUILD / "stamp"
    fingerprint = _fingerprint()
    if stamp.is_file() and stamp.read_text() == fingerprint and (dist / "index.html").is_file():
        return dist
    shutil.rmtree(BUILD, ignore_errors=True)
    BUILD.mkdir(parents=True)
    shutil.copytree(TEMPLATE, app)
    env = {**os.environ, **BUILD_ENV}
    done = subprocess.run(
        [str(FIXTURE / "node_modules" / ".bin" / "vite"), "build", "--logLevel", "warn"],
        cwd=app,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if done.returncode != 0 or not (dist / "index.html").is_file():
        raise RuntimeError(f"vite build of agent-chat-ui failed:\n{done.stdout}\n{done.stderr}")
    stamp.write_text(fingerprint)
    return dist


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Keep test output quiet."""


@contextmanager
def serve_static(directory: Path) -> Iterator[str]:
    """Serve `directory` on a free loopback port; yield its origin (``http://127.0.0.1:N``)."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
