"""The fuzzing area's malformed-transport cases: sizes, nesting, encodings, types, keys, auth.

- sizes: bodies of `MAX_BODY - 1`, `MAX_BODY`, `MAX_BODY + 1` and `4 * MAX_BODY` bytes, with a
  `Content-Length` and chunked without one, and `Content-Length` headers that lie or do not parse;
- nesting: arrays and objects 10 to 20,000 levels deep;
- encodings: invalid UTF-8, lone surrogates (U+D800 escaped), NUL (escaped and raw), overlong
  forms and bidi controls in the string fields that reach a database, and in paths and queries;
- content types: text, form, multipart, XML, other charsets, a BOM, empty and non-object bodies;
- keys: duplicate keys (the last wins) and unknown keys (ignored, or 422 naming them);
- auth: missing, empty, oversized and non-ASCII keys (401), and methods no route has (405).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from foldwise.bench._rel_fuzz_cases import RawCase
from foldwise.bench._rel_fuzz_target import MAX_BODY

__all__ = ["transport_cases"]


def transport_cases(ids: Mapping[str, str]) -> Iterator[RawCase]:
    """The malformed-transport cases against the seeded `ids` (see the module docstring)."""
    yield from _sizes(ids["thread_id"])
    yield from _nesting()
    yield from _encodings(ids)
    yield from _content_types(ids["thread_id"])
    yield from _keys(ids["thread_id"])
    yield from _auth()


def _sizes(thread: str) -> Iterator[RawCase]:
    # Sizes around gateway.max_body_bytes: a thread's metadata padded to an exact size.
    frame = b'{"metadata":{"pad":""}}'
    for size in (MAX_BODY - 1, MAX_BODY, MAX_BODY + 1, MAX_BODY * 4):
        pad = b"x" * (size - len(frame))
        body = frame.replace(b'""', b'"' + pad + b'"')
        expect = frozenset({413}) if size > MAX_BODY else frozenset({200})
        for chunked in (False, True):
            how = "chunked" if chunked else "length"
            yield RawCase(
                "sizes",
                f"size PATCH /threads/id {size} bytes ({how})",
                "PATCH",
                f"/threads/{thread}",
                body,
                expect=expect,
                chunked=chunked,
            )
    # Lengths that do not parse, and lengths that lie (fewer bytes, or past the limit).
    for length in ("abc", "-1", str(2**64), "1e3", " 12", "1", str(MAX_BODY + 1)):
        yield RawCase(
            "sizes",
            f"size Content-Length={length}",
            "POST",
            "/threads/search",
            b"{}",
            headers=(("content-length", length),),
            expect=frozenset({413}) if length == str(MAX_BODY + 1) else None,
        )


def _nesting() -> Iterator[RawCase]:
    # Arrays and objects deeper than any parser's recursion, in a field each route stores.
    targets = (
        ("POST", "/threads", b'{"metadata":{"deep":%s}}', "metadata"),
        ("POST", "/threads/search", b'{"metadata":{"deep":%s}}', "metadata"),
        ("PUT", "/store/items", b'{"namespace":["n"],"key":"k","value":{"deep":%s}}', "value"),
    )
    for depth in (10, 100, 1_000, 5_000, 20_000):
        arrays = b"[" * depth + b"]" * depth
        objects = b'{"a":' * depth + b"1" + b"}" * depth
        for kind, deep in (("arrays", arrays), ("objects", objects)):
            for method, url, template, field in targets:
                name = f"nest {kind}={depth} {method} {url}"
                body = template % deep
                yield RawCase("nesting", name, method, url, body, field=f"{field}|body")


def _encodings(ids: Mapping[str, str]) -> Iterator[RawCase]:
    # Invalid UTF-8, lone surrogates, NUL bytes in strings, paths and queries.
    thread = ids["thread_id"]
    strings = {
        "invalid-utf8": b'"\xff\xfe\xc0\xaf"',
        "lone-surrogate": b'"\\ud800 x \\udfff"',
        "nul": b'"a\\u0000b"',
        "raw-nul": b'"a\x00b"',
        "overlong": b'"\xc0\x80"',
        "bidi": '"\u202eabc\u2066"'.encode(),
    }
    run = f"/threads/{thread}"
    # (method, url, body template, the field a 4xx must name, "body" when unparseable)
    targets = (
        ("POST", "/threads", b'{"thread_id":%s}', "thread_id"),
        ("POST", "/threads", b'{"metadata":{"k":%s}}', "metadata"),
        ("POST", "/threads", b'{"metadata":{%s:1}}', "metadata"),
        ("PATCH", run, b'{"metadata":{"title":%s}}', "metadata"),
        ("POST", "/threads/search", b'{"metadata":{"k":%s}}', "metadata"),
        ("POST", "/threads/search", b'{"ids":[%s]}', "ids"),
        (
            "POST",
            f"{run}/runs/wait",
            b'{"assistant_id":"agent","input":{"messages":[{"role":"user","content":%s}]}}',
            "input",
        ),
        ("POST", f"{run}/runs/wait", b'{"assistant_id":%s}', "assistant_id"),
        (
            "POST",
            f"{run}/runs/wait",
            b'{"assistant_id":"agent","checkpoint_id":%s}',
            "checkpoint_id",
        ),
        ("POST", f"{run}/state", b'{"as_node":%s}', "as_node"),
        ("POST", f"{run}/state", b'{"checkpoint_id":%s,"values":{}}', "checkpoint_id"),
        ("POST", f"{run}/history", b'{"before":%s}', "before"),
        ("POST", f"{run}/state/checkpoint", b'{"checkpoint":{"checkpoint_id":%s}}', "checkpoint"),
        ("PUT", "/store/items", b'{"namespace":["fuzz"],"key":%s,"value":{}}', "key"),
        ("PUT", "/store/items", b'{"namespace":[%s],"key":"k","value":{}}', "namespace"),
        ("PUT", "/store/items", b'{"namespace":["fuzz"],"key":"k","value":{"v":%s}}', "value"),
        ("POST", "/store/items/search", b'{"filter":{"v":%s}}', "filter"),
        ("POST", "/memory/facts", b'{"text":%s}', "text"),
        ("PATCH", f"/memory/facts/{ids['fact_id']}", b'{"text":%s,"expected_revision":1}', "text"),
        ("POST", "/memory/search", b'{"query":%s}', "query"),
        ("POST", "/threads/overview", b'{"query":%s}', "query"),
        ("POST", "/threads/overview", b'{"thread_id":%s}', "thread_id"),
    )
    for label, literal in strings.items():
        for method, url, template, field in targets:
            yield RawCase(
                "encodings",
                f"enc {label} {method} {url} {template[:28]!r}",
                method,
                url,
                template % literal,
                field=f"{field}|body",
            )
    for label, raw in (
        ("nul", "%00"),
        ("invalid-utf8", "%ff%fe"),
        ("surrogate", "%ED%A0%80"),
        ("crlf", "%0D%0ASet-Cookie:x=1"),
    ):
        for url in (
            f"/threads/{thread}/transcript?after_seq={raw}",
            f"/threads/{thread}/context?model_name={raw}",
            f"/threads/{thread}/artifacts/{ids['artifact_id']}/search?pattern={raw}",
            f"/threads/{thread}/artifacts/{ids['artifact_id']}/search?pattern={raw}&regex=true",
            f"/store/items?namespace={raw}&key={raw}",
            f"/memory/facts?agent={raw}",
            f"/memory/facts?status={raw}",
            f"/threads/{thread}/runs/{ids['run_id']}/stream?stream_mode={raw}",
            f"/assistants/agent/graph?xray={raw}",
            f"/ui/{raw}",
        ):
            yield RawCase("encodings", f"enc {label} GET {url[:60]}", "GET", url)


def _content_types(thread: str) -> Iterator[RawCase]:
    # Each route reads JSON whatever the declared type.
    for content_type, body in (
        ("text/plain", b'{"limit": 1}'),
        ("application/x-www-form-urlencoded", b"limit=1&offset=2"),
        (
            "multipart/form-data; boundary=x",
            b"--x\r\nContent-Disposition: form-data; name=a\r\n\r\n1\r\n--x--",
        ),
        ("application/xml", b"<limit>1</limit>"),
        ("application/json; charset=latin-1", '{"metadata": {"k": "caf\u00e9"}}'.encode("latin-1")),
        ("application/json; charset=utf-16", '{"limit": 1}'.encode("utf-16")),
        ("application/json", b"\xef\xbb\xbf{}"),
        ("application/json", b""),
        ("application/json", b"null"),
        ("application/json", b"[]"),
        ("application/json", b'"text"'),
        ("application/json", b"{"),
        ("", b"{}"),
        ("*/*", b"{}"),
    ):
        for url in ("/threads/search", "/threads", "/memory/search", f"/threads/{thread}/compact"):
            yield RawCase(
                "content-types",
                f"type {content_type or 'none'} {url} {body[:16]!r}",
                "POST",
                url,
                body,
                headers=(("content-type", content_type),),
            )


def _keys(thread: str) -> Iterator[RawCase]:
    cases: tuple[tuple[str, bytes, str | None], ...] = (
        ("/threads/search", b'{"limit": 1, "limit": 18446744073709551616}', "limit"),
        ("/threads/search", b'{"offset": 1, "offset": 9223372036854775808}', "offset"),
        (f"/threads/{thread}/compact", b'{"force": true, "force": "yes"}', "force"),
        (f"/threads/{thread}/compact", b'{"force": false, "unknown_key": 1}', "unknown_key"),
        ("/threads/overview", b'{"nope": 1}', "nope"),
        ("/memory/search", b'{"query": "tea", "k": 1, "extra": 2}', "extra"),
        ("/memory/facts", b'{"text": "x", "text": 5}', "text"),
        ("/threads/search", b'{"metadata": {"a": 1, "a": 2}, "zzz": [1, 2]}', None),
        ("/threads", b'{"thread_id": "dup-a", "thread_id": "dup-b", "whatever": {}}', None),
        ("/store/items/search", b'{"limit": 2, "bogus": {"$gt": 1}}', None),
        ("/assistants/search", b'{"graph_id": "agent", "graph_id": 5}', "graph_id"),
    )
    for url, body, field in cases:
        yield RawCase("keys", f"keys POST {url} {body[:40]!r}", "POST", url, body, field=field)


def _auth() -> Iterator[RawCase]:
    # A missing, empty, oversized or non-ASCII key is a 401 (with a detail), then odd methods.
    for headers in (
        (("x-api-key", ""),),
        (("x-api-key", "wrong\x00"),),
        (("authorization", "Bearer " + "k" * 5000),),
        (("x-api-key", "\u00e9"),),
    ):
        yield RawCase(
            "auth",
            f"auth {headers[0][0]}={headers[0][1][:12]!r}",
            "GET",
            "/threads/x/state",
            headers=headers,
            expect=frozenset({401}),
        )
    for method in ("PUT", "PATCH", "DELETE", "OPTIONS", "TRACE"):
        yield RawCase("auth", f"method {method} /threads/search", method, "/threads/search", b"{}")
