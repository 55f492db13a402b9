"""Review 14: regex searches of artifacts saturate the shared default executor (run by hand:
`PYTHONPATH=. python bench/review14_regex_starvation.py`)."""

import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, ".")
from tests.support.gateway import gateway_config, open_gateway
from tests.test_gateway_ui_api import SETTINGS, _model, _run


async def main():
    with tempfile.TemporaryDirectory() as tmp:
        config = gateway_config(Path(tmp), SETTINGS)
        _, factory = _model(config)
        async with open_gateway(config, factory) as (c, _app):
            await c.post("/threads", json={"thread_id": "t"})
            await _run(c, "t", "use tool please")
            art = (await c.get("/threads/t/artifacts")).json()["artifacts"][0]["artifact_id"]

            async def page():
                t = time.perf_counter()
                r = await c.get(f"/threads/t/artifacts/{art}?limit=5")
                assert r.status_code == 200
                return time.perf_counter() - t

            print(f"page read alone: {await page() * 1000:.0f} ms")

            async def evil():
                t = time.perf_counter()
                r = await c.get(
                    f"/threads/t/artifacts/{art}/search",
                    params={"pattern": "(.|.)*!", "regex": "true"},
                )
                return r.json().get("stopped_reason"), time.perf_counter() - t, r.status_code

            for n in (6, 24):
                tasks = [asyncio.create_task(evil()) for _ in range(n)]
                await asyncio.sleep(0.2)
                lat = await page()
                res = await asyncio.gather(*tasks)
                slowest = max(r[1] for r in res)
                statuses = {s: sum(r[2] == s for r in res) for s in sorted({r[2] for r in res})}
                print(
                    f"{n} concurrent regex searches: page read took {lat * 1000:.0f} ms; "
                    f"searches {res[0][0]!r}, slowest {slowest:.1f} s, statuses {statuses}"
                )


asyncio.run(main())
