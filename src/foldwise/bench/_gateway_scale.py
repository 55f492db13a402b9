"""`foldwise bench scale`: throughput of `foldwise serve --workers P` for P = 1, 2, 4.

For each process count, on a fresh database (a new PostgreSQL schema, or a new SQLite file),
one `foldwise serve --workers P` runs on the load stub (`foldwise.bench._rel_load_stub`, a
child process answering in about a millisecond) and N clients drive it for S seconds with each
workload of `foldwise.bench._gateway_scale_load`: `create_wait` (create a thread + `runs/wait`)
and `mixed`. The report gives operations per second, p50 / p99 latency, errors, the speed-up
over one process measured in the same run, the load generator's CPU share and the machine's
load average before and after each row: on a 2-core machine, the server processes, the stub
and the generator share two cores, so more than two processes cannot scale past about 2x.

`write_scale_section` puts the table into a Markdown file between markers
(``docs/deployment.md``), leaving the hand-written text around it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

# The serve / stub / schema helpers, in one place (bench helpers may move to one module).
from foldwise.bench._gateway_scale_load import LoadResult, Workload, run_load
from foldwise.bench._rel_crash_server import ServeLauncher
from foldwise.bench._rel_load_serve import fresh_postgres, write_config
from foldwise.bench._reliability import write_marked
from foldwise.bench._serve import percentile, stub_process

__all__ = [
    "BEGIN_MARK",
    "END_MARK",
    "ScaleReport",
    "ScaleRow",
    "run_scale_benchmark",
    "write_scale_section",
]

Backend = Literal["postgres", "sqlite"]
BEGIN_MARK = "<!-- bench-scale:start -->"
END_MARK = "<!-- bench-scale:end -->"
WORKLOADS: tuple[Workload, ...] = ("create_wait", "mixed")
_CHILD_ENV = {"PYTHONUNBUFFERED": "1", "LANGSMITH_TRACING": "false"}
_START_SECONDS = 300.0


@dataclass
class ScaleRow:
    """One (backend, process count, workload) measurement."""

    backend: str
    processes: int
    workload: str
    clients: int
    seconds: float
    operations: int
    errors: int
    ops_per_second: float
    p50_ms: float
    p99_ms: float
    client_cpu_share: float
    """The load generator's CPU seconds per wall second (1.0 = one core busy)."""
    load_before: float
    load_after: float
    speedup: float | None = None
    """Operations per second over the same backend's and workload's one-process row."""
    kinds: dict[str, dict[str, float]] = field(default_factory=dict)
    """Per operation kind: count, p50 and p99 in ms."""
    error_samples: list[str] = field(default_factory=list)


@dataclass
class ScaleReport:
    """Every row, with the machine it was measured on."""

    rows: list[ScaleRow]
    clients: int
    seconds: float
    cpus: int
    machine: str

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready."""
        return asdict(self)

    def to_markdown(self) -> str:
        """The table, one row per measurement, and how it was measured."""
        lines = [
            f"{self.clients} clients x {self.seconds:g} s per row, on {self.machine} "
            f"({self.cpus} CPUs); each row on a fresh database; load stub ~1 ms per model call.",
            "",
            "| storage | processes | workload | ops/s | speed-up | p50 ms | p99 ms | errors "
            "| client CPU | load avg before → after |",
            "|---|---|---|---|---|---|---|---|---|---|",
        ]
        for r in self.rows:
            speedup = "—" if r.speedup is None else f"{r.speedup:.2f}x"
            lines.append(
                f"| {r.backend} | {r.processes} | {r.workload} | {r.ops_per_second:.1f} "
                f"| {speedup} | {r.p50_ms:.1f} | {r.p99_ms:.1f} | {r.errors} "
                f"| {r.client_cpu_share:.2f} | {r.load_before:.2f} → {r.load_after:.2f} |"
            )
        lines += [
            "",
            "`create_wait`: create a thread + `runs/wait` (one operation). `mixed`: 40 % a turn "
            "on the client's own growing thread, 20 % create + wait, 20 % `runs/stream` read to "
            "its end, 20 % three reads (thread, state, transcript). Client CPU: the load "
            "generator's CPU seconds per second (it shares the machine with the server).",
        ]
        return "\n".join(lines) + "\n"


def _row(backend: str, processes: int, result: LoadResult, loads: tuple[float, float]) -> ScaleRow:
    ms = [x * 1000 for x in result.all_latencies()]
    kinds = {
        kind: {
            "count": float(len(values)),
            "p50_ms": percentile([x * 1000 for x in values], 50),
            "p99_ms": percentile([x * 1000 for x in values], 99),
        }
        for kind, values in sorted(result.latencies.items())
    }
    seconds = max(result.seconds, 1e-9)
    return ScaleRow(
        backend=backend,
        processes=processes,
        workload=result.workload,
        clients=result.clients,
        seconds=round(result.seconds, 2),
        operations=result.operations,
        errors=result.error_count,
        ops_per_second=result.operations / seconds,
        p50_ms=percentile(ms, 50),
        p99_ms=percentile(ms, 99),
        client_cpu_share=result.client_cpu_seconds / seconds,
        load_before=loads[0],
        load_after=loads[1],
        kinds=kinds,
        error_samples=result.errors,
    )


@contextlib.contextmanager
def _database(backend: Backend, postgres_url: str | None, workdir: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{workdir / 'foldwise.db'}"
        return
    if postgres_url is None:
        raise ValueError("the postgres backend needs a URL: --postgres or $FOLDWISE_TEST_POSTGRES")
    with fresh_postgres(postgres_url) as url:
        yield url


def _measure(
    backend: Backend,
    processes: int,
    *,
    stub_url: str,
    postgres_url: str | None,
    clients: int,
    seconds: float,
) -> list[ScaleRow]:
    """One server of `processes` workers on a fresh database; every workload against it."""
    rows = []
    with tempfile.TemporaryDirectory(prefix="foldwise-scale-") as tmp:
        workdir = Path(tmp)
        with _database(backend, postgres_url, workdir) as storage_url:
            config = write_config(workdir, stub_url, storage_url)
            # P cold interpreters: on a busy 2-core machine, minutes.
            launcher = ServeLauncher(workers=processes, start_seconds=_START_SECONDS)
            server = launcher.start(config, workdir, _CHILD_ENV, workdir / "server.log")
            try:
                for workload in WORKLOADS:
                    before = os.getloadavg()[0]
                    result = asyncio.run(
                        run_load(server.url, workload, clients=clients, seconds=seconds)
                    )
                    rows.append(_row(backend, processes, result, (before, os.getloadavg()[0])))
            finally:
                server.stop()
                launcher.close()
    return rows


def _with_speedups(rows: list[ScaleRow]) -> list[ScaleRow]:
    base = {(r.backend, r.workload): r.ops_per_second for r in rows if r.processes == 1}
    for r in rows:
        one = base.get((r.backend, r.workload))
        r.speedup = r.ops_per_second / one if one else None
    return rows


def run_scale_benchmark(
    *,
    processes: Sequence[int] = (1, 2, 4),
    backends: Sequence[Backend] = ("postgres",),
    clients: int = 16,
    seconds: float = 30.0,
    postgres_url: str | None = None,
) -> ScaleReport:
    """Measure every (backend, process count) on a fresh database; see the module docstring.

    Raises:
        ValueError: A bad count, or the postgres backend without a URL.
    """
    if not processes or any(p < 1 for p in processes):
        raise ValueError(f"processes: positive counts, got {list(processes)}")
    if clients < 1 or seconds <= 0:
        raise ValueError("clients must be at least 1 and seconds above 0")
    if "postgres" in backends and postgres_url is None:
        raise ValueError("the postgres backend needs a URL: --postgres or $FOLDWISE_TEST_POSTGRES")
    rows: list[ScaleRow] = []
    with stub_process() as stub:
        for backend in backends:
            for count in processes:
                rows += _measure(
                    backend,
                    count,
                    stub_url=stub.url,
                    postgres_url=postgres_url,
                    clients=clients,
                    seconds=seconds,
                )
    machine = f"{platform.system()} {platform.machine()}"
    return ScaleReport(_with_speedups(rows), clients, seconds, os.cpu_count() or 0, machine)


def write_scale_section(path: Path, report: ScaleReport) -> None:
    """Replace the part of `path` between the markers with the report (appended if absent)."""
    write_marked(path, report.to_markdown(), begin=BEGIN_MARK, end=END_MARK)
