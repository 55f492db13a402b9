"""The load area's server: a real `foldwise serve` on the stub, its exit checked, flat RSS.

`served` writes a `foldwise.yaml` pointing `langchain_openai:ChatOpenAI` at the stub (started
with `foldwise.bench._serve.stub_process`), with a small context window so long threads
compact often, runs it with `foldwise.bench._serve.serving` and yields the `ServeProcess`
(URL, pid, log). When it stops (SIGTERM) a non-zero exit or a traceback in its log is a
finding. `flat_rss` judges `RssSampler` samples; `fresh_postgres` gives a PostgreSQL URL with
a new schema, dropped after.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

from foldwise.bench._reliability import Finding
from foldwise.bench._serve import (
    MIB,
    RSS_TOLERANCE,
    ServeProcess,
    child_env,
    rss_growth,
    serving,
    stub_model_entry,
)
from foldwise.bench._serve import write_config as write_yaml

__all__ = ["flat_rss", "fresh_postgres", "served", "write_config"]

CONTEXT_WINDOW = 8000
TRIGGER_TOKENS = 3000


def write_config(workdir: Path, stub_url: str, storage_url: str) -> Path:
    """A `foldwise.yaml` on the stub: an 8,000-token window, compaction above 3,000 tokens.

    Keep 2 messages; everything else as shipped (human messages kept verbatim, the default
    anti-thrash minimum gain), so a long thread compacts every few turns until its kept human
    messages fill the budget, and then whenever the budget requires.
    """
    config = {
        "models": [stub_model_entry(stub_url, stream_usage=True, context_window=CONTEXT_WINDOW)],
        "summarization": {
            "trigger": {"type": "tokens", "value": TRIGGER_TOKENS},
            "keep": {"type": "messages", "value": 2},
            "reserved_output_tokens": 500,
        },
        "storage": {"url": storage_url},
        "offload": {"root": "artifacts"},
    }
    return write_yaml(workdir, config)


@contextlib.contextmanager
def served(
    workdir: Path, stub_url: str, storage_url: str, findings: list[Finding]
) -> Iterator[ServeProcess]:
    """Run `foldwise serve` on the stub and `storage_url` in `workdir`; yield it once healthy.

    On the way out a non-zero exit code or a ``Traceback`` in the server's log is appended to
    `findings` (invariant `clean-exit`).
    """
    config = write_config(workdir, stub_url, storage_url)
    with serving(config, workdir, env=child_env(), check_exit=False) as server:
        yield server
    said = server.log_text()
    if server.returncode != 0:
        detail = f"exit code {server.returncode}: {said[-300:]}"
        findings.append(Finding("server", "clean-exit", detail))
    if "Traceback" in said:
        at = said.index("Traceback")
        findings.append(Finding("server", "no-traceback", said[at : at + 400]))


def flat_rss(samples: Sequence[int], case: str) -> tuple[str, Finding | None]:
    """A note on the samples (MiB) and a finding when the last third grew past the tolerance."""
    thirds = rss_growth(samples)
    if thirds is None:
        return f"RSS {len(samples)} samples (too few to judge)", None
    middle, last = thirds
    share, absolute = RSS_TOLERANCE
    grown = last - middle
    note = (
        f"RSS {samples[0] / MIB:.0f}→{max(samples) / MIB:.0f} MiB peak, median middle third "
        f"{middle / MIB:.1f} MiB, last third {last / MIB:.1f} MiB ({grown / MIB:+.1f} MiB, "
        f"{len(samples)} samples at 1 s)"
    )
    if grown > max(share * middle, absolute):
        detail = f"last third's median RSS grew {grown / MIB:.1f} MiB over the middle third's"
        return note, Finding(case, "rss-flat", detail)
    return note, None


@contextlib.contextmanager
def fresh_postgres(url: str) -> Iterator[str]:
    """`url` with a new ``?schema=`` (dropped afterwards), or `url` itself if it names one."""
    if "schema" in parse_qs(urlsplit(url).query):
        yield url
        return
    import psycopg
    from psycopg import sql

    schema = f"foldwise_load_{uuid.uuid4().hex[:12]}"
    separator = "&" if "?" in url else "?"
    try:
        yield f"{url}{separator}schema={schema}"
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            drop = sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
            conn.execute(drop)
