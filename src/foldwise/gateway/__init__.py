"""The foldwise gateway: foldwise agents as a service, with persistent threads.

`create_app(config)` returns a FastAPI application that speaks the LangGraph Server API (the
official `langgraph_sdk` client works unchanged) plus foldwise's own routes: manual compaction,
the full transcript, compaction receipts and the context usage of a thread. `foldwise serve`
runs it with uvicorn. See `docs/gateway.md` for routes, status codes and deployment.

```python
from foldwise import load_config
from foldwise.gateway import create_app

app = create_app(load_config("foldwise.yaml"))   # uvicorn module:app
```
"""

from foldwise.gateway._agents import (
    DEFAULT_ASSISTANT,
    AgentFactory,
    AgentRequest,
    HostedAgent,
    default_agent_factory,
)
from foldwise.gateway._app import DEFAULT_SHUTDOWN_GRACE, app_from_env, create_app
from foldwise.gateway._errors import STATUS_BY_ERROR, status_for
from foldwise.gateway._leases import DEFAULT_LEASE_TTL

__all__ = [
    "DEFAULT_ASSISTANT",
    "DEFAULT_LEASE_TTL",
    "DEFAULT_SHUTDOWN_GRACE",
    "STATUS_BY_ERROR",
    "AgentFactory",
    "AgentRequest",
    "HostedAgent",
    "app_from_env",
    "create_app",
    "default_agent_factory",
    "status_for",
]
