"""Conformance: the official JS and Python LangGraph SDKs against `foldwise serve`.

One `foldwise serve` subprocess (ChatOpenAI on the OpenAI stub) for the module; the Python
`langgraph_sdk` and the JS `@langchain/langgraph-sdk` 1.15.0 (tests/js, installed by
`make pytest` with `npm ci`) each run the calls of `tests.conformance.catalogue.CALLS`.
Every call in SUPPORTED must succeed with a LangGraph-shaped result; every call in
EXPECTED_UNSUPPORTED must still fail, so a feature that lands is noticed and moved. The
compatibility table in docs/gateway.md is the one these results render
(``FOLDWISE_WRITE_COMPAT=1`` rewrites it).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from foldwise.bench._serve import serving
from tests.conformance.catalogue import CALLS, render_table, replace_section
from tests.conformance.python_sdk import run_python_client
from tests.support import OpenAIStub
from tests.test_serve_e2e import write_config

ROOT = Path(__file__).resolve().parents[1]
JS_DIR = ROOT / "tests" / "js"
DOCS = ROOT / "docs" / "gateway.md"
CLIENTS = ("js", "python")
ANSWER = "Hello from the conformance stub."
# Read at import: the suite's autouse fixture hides FOLDWISE_* variables from the tests.
WRITE_COMPAT = os.environ.get("FOLDWISE_WRITE_COMPAT") == "1"

# Calls the gateway does not serve (none today). The test fails when one of them starts
# passing: move it to SUPPORTED then.
EXPECTED_UNSUPPORTED: frozenset[str] = frozenset()
SUPPORTED: frozenset[str] = frozenset(
    {
        "assistants.search",
        "assistants.get",
        "assistants.getGraph",
        "assistants.getSchemas",
        "threads.count",
        "runs.stream[messages]",
        "runs.stream[events]",
        "runs.stream[debug]",
        "runs.stream[tasks]",
        "runs.stream[checkpoints]",
        "threads.getState[checkpoint_id]",
        "runs.stream[checkpoint]",
        "runs.stream[useStream]",
        "runs.wait[input=null]",
        "threads.updateState",
        "threads.copy",
        "runs.create",
        "runs.join",
        "runs.joinStream",
        "runs.cancel",
        "runs.create[enqueue]",
        "runs.join[enqueued]",
        "runs.create[rollback]",
        "runs.cancel[rollback]",
        "runs.wait[stateless]",
        "runs.stream[stateless]",
    }
)
SUPPORTED: frozenset[str] = frozenset(c.name for c in CALLS) - EXPECTED_UNSUPPORTED


def brain(body: Mapping[str, Any]) -> Any:
    """The stub's answers: a short reply; a slow one for the run the harness cancels."""
    users = [m for m in body.get("messages") or [] if m.get("role") == "user"]
    latest = str(users[-1].get("content")) if users else ""
    if latest == "slow":
        return {"content": ANSWER, "delay": 5}
    if latest.startswith("busy"):  # keeps the thread busy while the next call queues
        return {"content": ANSWER, "delay": 1}
    return ANSWER


@pytest.fixture(scope="module")
def gateway_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    tmp_path = tmp_path_factory.mktemp("conformance")
    with (
        OpenAIStub(brain, chunk_size=8) as stub,
        serving(write_config(tmp_path, stub), tmp_path, pythonpath=[ROOT]) as server,
    ):
        yield server.url


def _js_missing() -> str | None:
    """Why the JS client cannot run here, or None."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        return f"JS SDK conformance needs {' and '.join(missing)} on PATH"
    if not (JS_DIR / "node_modules" / "@langchain" / "langgraph-sdk").is_dir():
        return "tests/js/node_modules is missing: run `make pytest` (npm ci --prefix tests/js)"
    return None


def _run_js(url: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        ["node", str(JS_DIR / "conformance.mjs"), url],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.fixture(scope="module")
def results(gateway_url: str) -> dict[str, list[dict[str, Any]]]:
    """Each client's result lines, in call order (no node/npm: only Python's)."""
    observed = {"python": asyncio.run(run_python_client(gateway_url))}
    if _js_missing() is None:
        observed["js"] = _run_js(gateway_url)
    return observed


def passing(lines: list[dict[str, Any]]) -> set[str]:
    """The calls that succeeded with a LangGraph-shaped result."""
    checks = {c.name: c.check for c in CALLS}
    return {r["call"] for r in lines if r["ok"] and checks[r["call"]](r.get("detail") or {})}


def _client(results: Mapping[str, list[dict[str, Any]]], client: str) -> list[dict[str, Any]]:
    if client not in results:
        pytest.skip(_js_missing() or f"no results for the {client} client")
    return results[client]


@pytest.mark.parametrize("client", CLIENTS)
def test_every_call_is_run_in_order(results: dict[str, Any], client: str) -> None:
    assert [r["call"] for r in _client(results, client)] == [c.name for c in CALLS]


@pytest.mark.parametrize("client", CLIENTS)
def test_supported_calls_succeed_with_langgraph_shapes(
    results: dict[str, Any], client: str
) -> None:
    lines = _client(results, client)
    ok = passing(lines)
    failing = [r for r in lines if r["call"] in SUPPORTED and r["call"] not in ok]
    assert not failing, json.dumps(failing, indent=1)


@pytest.mark.parametrize("client", CLIENTS)
def test_unsupported_calls_still_fail(results: dict[str, Any], client: str) -> None:
    now_passing = sorted(passing(_client(results, client)) & EXPECTED_UNSUPPORTED)
    assert not now_passing, f"now passing, move to SUPPORTED: {now_passing}"


def test_docs_compatibility_table_matches_the_results(results: dict[str, Any]) -> None:
    for client in CLIENTS:
        _client(results, client)
    table = render_table(results, {client: passing(results[client]) for client in CLIENTS})
    document = DOCS.read_text(encoding="utf-8")
    expected = replace_section(document, table)
    if WRITE_COMPAT:
        DOCS.write_text(expected, encoding="utf-8")
    assert document == expected or WRITE_COMPAT, (
        "docs/gateway.md's compatibility table is stale: rerun with FOLDWISE_WRITE_COMPAT=1"
    )
