"""Reliability area `isolation`, short form: every route and tool cross-identity, in-process."""

from __future__ import annotations

from pathlib import Path

from foldwise.bench._rel_isolation import run
from foldwise.bench._rel_isolation_routes import OWNED_PARAMS, app_routes, attempt_for
from foldwise.bench._reliability import AreaOptions
from foldwise.gateway import create_app
from tests.support.gateway import gateway_config


def test_every_route_is_enumerated_with_a_known_body(tmp_path: Path) -> None:
    app = create_app(gateway_config(tmp_path, {"memory": {"enabled": True}}))
    routes = app_routes(app)
    assert ("POST", "/assistants") in routes  # include_in_schema=False routes are tried too
    assert not any(path.startswith("/ui") for _, path in routes)
    ids = {name: f"<{name}>" for name in (*OWNED_PARAMS, "assistant_id", "namespace")}
    for method, template in routes:
        attempt = attempt_for(method, template, ids)
        assert attempt.covered, (method, template)
        assert "{" not in attempt.url, attempt.url


def test_short_form(tmp_path: Path) -> None:
    [row] = run(AreaOptions(full=False, workdir=tmp_path, seed=0))
    assert row.violations == [], row.violations[:5]
    assert row.cases >= 200
