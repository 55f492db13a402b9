"""Schema-driven fuzzing: schemathesis generates requests for every operation of `app.openapi()`.

schemathesis is a dev dependency, so it is imported here, when the row runs; without it the
row reports "skipped: schemathesis not installed". Each operation gets `examples` positive
cases (valid by the schema) and `examples` negative ones (each breaking the schema somewhere),
drawn by hypothesis with the row's seed; half of each are aimed at the seeded objects (their
path parameters replaced by the ids of the seeded thread, run, checkpoint, artifact, fact), so
the cases get past the 404s. Every answer goes through `check_response`; `GET /ok` must answer
after each operation. Violations are collected, not raised, so one bad route does not hide the
others (and hypothesis does not shrink: the case printed is the one sent).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

from foldwise.bench._rel_fuzz_target import FuzzTarget, Sent, check_response
from foldwise.bench._reliability import AreaResult, Finding

__all__ = ["run_schema"]

_DESTRUCTIVE = frozenset(
    {("DELETE", "/threads/{thread_id}"), ("DELETE", "/memory/facts/{fact_id}")}
)
"""Operations never aimed at the seeded objects (the cases after them still need them)."""


def _request(case: Any, ids: dict[str, str], aim: bool) -> tuple[dict[str, Any], str]:
    """The httpx arguments of a schemathesis case (`aim`: seeded ids in its path) and a label."""
    if aim and case.path_parameters:
        for name in list(case.path_parameters):
            if name in ids:
                case.path_parameters[name] = ids[name]
    kwargs = case.as_transport_kwargs(base_url="")
    request: dict[str, Any] = {"method": kwargs["method"], "url": kwargs["url"]}
    headers = {
        k: v
        for k, v in (kwargs.get("headers") or {}).items()
        if k.lower() not in ("user-agent", "x-schemathesis-testcaseid", "connection")
    }
    request["headers"] = headers
    if kwargs.get("params"):
        request["params"] = kwargs["params"]
    if "json" in kwargs:
        request["json"] = kwargs["json"]
    elif kwargs.get("data") is not None or kwargs.get("content") is not None:
        request["content"] = kwargs.get("content", kwargs.get("data"))
    label = f"{request['method']} {case.operation.path}"
    return request, label


def _describe(request: dict[str, Any]) -> str:
    shown = {k: v for k, v in request.items() if k in ("url", "params", "json", "content")}
    return repr(shown)[:300]


class _Run:
    """What one row has sent and found so far."""

    def __init__(self, target: FuzzTarget) -> None:
        self.target = target
        self.ids = target.seeded.path_ids()
        self.violations: list[Finding] = []
        self.statuses: Counter[int] = Counter()
        self.sent = 0

    def send(self, case: Any, *, aim: bool, mode: str) -> None:
        """Send one generated case and check the answer."""
        request, label = _request(case, self.ids, aim)
        response = self.target.send(request)
        self.sent += 1
        self.statuses[response.status_code] += 1
        found = check_response(Sent(f"{mode} {label}", response.status_code, response.content))
        self.violations.extend(
            Finding(f.case, f.invariant, f"{f.detail} <- {_describe(request)}") for f in found
        )

    def operation(self, operation: Any, mode: Any, examples: int, seed: int) -> None:
        """Draw `examples` cases of one operation in one generation mode and send each."""
        from hypothesis import HealthCheck, given, settings
        from hypothesis import seed as seeded
        from hypothesis import strategies as st

        aimable = (operation.method.upper(), operation.path) not in _DESTRUCTIVE

        def check(case: Any, aim: bool) -> None:
            self.send(case, aim=aim and aimable, mode=mode.value)

        strategy = operation.as_strategy(generation_mode=mode)
        test = given(case=strategy, aim=st.booleans())(check)
        configured = settings(
            max_examples=examples,
            database=None,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            print_blob=False,
        )(test)
        seeded(seed)(configured)()


def run_schema(target: FuzzTarget, area: str, command: str, examples: int, seed: int) -> AreaResult:
    """Fuzz every operation of the app's schema; one row (see the module docstring)."""
    start = time.perf_counter()
    try:
        import schemathesis
    except ImportError:
        return AreaResult(area, 0, [], command, notes=["skipped: schemathesis not installed"])
    from hypothesis.errors import Unsatisfiable

    schema = schemathesis.openapi.from_dict(target.app.openapi())
    operations = [result.ok() for result in schema.get_all_operations()]  # type: ignore[union-attr]
    run = _Run(target)
    positive_only: list[str] = []
    for operation in operations:
        name = f"{operation.method.upper()} {operation.path}"
        modes = [schemathesis.GenerationMode.POSITIVE]
        if _negatable(operation.definition.raw):
            modes.append(schemathesis.GenerationMode.NEGATIVE)
        else:
            positive_only.append(name)  # only string path parameters: nothing to break
        for mode in modes:
            try:
                run.operation(operation, mode, examples, seed)
            except Unsatisfiable:
                positive_only.append(f"{name} ({mode.value})")
        if not target.healthy():
            run.violations.append(Finding(name, "healthy", "GET /ok failed after the route"))
    notes = [
        f"{len(operations)} operations in the schema; {examples} examples per operation and "
        f"mode (positive, negative); seed {seed}",
        "statuses: " + ", ".join(f"{s}×{n}" for s, n in sorted(run.statuses.items())),
        f"positive cases only for {len(positive_only)} operations (no schema to break)",
    ]
    return AreaResult(area, run.sent, run.violations, command, time.perf_counter() - start, notes)


def _negatable(definition: Any) -> bool:
    """Whether a request can break the operation's schema: a body, or a query or header."""
    if definition.get("requestBody"):
        return True
    return any(p.get("in") != "path" for p in definition.get("parameters", ()))
