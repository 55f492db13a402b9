// Drives the official @langchain/langgraph-sdk against a running `foldwise serve`.
//
// Usage: node tests/js/conformance.mjs <gateway-url> [api-key]
//
// Runs the named SDK calls of tests/test_sdk_conformance.py in order, each in its own
// try/catch, and prints one JSON line per call: {call, ok, status?, error?, detail}. `detail`
// is a small summary of the result (`summarize`), the same shape the Python harness produces,
// so one set of shape checks covers both clients.
import { Client } from "@langchain/langgraph-sdk";

const STREAM_MODES = [
  "values",
  "updates",
  "messages",
  "messages-tuple",
  "events",
  "debug",
  "tasks",
  "checkpoints",
  "custom",
];
const ASSISTANT = "agent";

/** Summarize a result: kinds, sorted keys, status and message counts (mirrors Python). */
export function summarize(value) {
  if (value === null || value === undefined) return { kind: "null" };
  if (Array.isArray(value)) {
    const out = { kind: "array", length: value.length };
    if (value.length) out.item = summarize(value[0]);
    return out;
  }
  if (typeof value === "number") return { kind: "number", value };
  if (typeof value === "string") return { kind: "string" };
  if (typeof value === "boolean") return { kind: "boolean", value };
  const out = { kind: "object", keys: Object.keys(value).sort() };
  if (typeof value.status === "string") out.status = value.status;
  const messages = Array.isArray(value.messages) ? value.messages : value.values?.messages;
  if (Array.isArray(messages)) {
    out.messages = messages.length;
    if (messages.length) out.last_type = messages[messages.length - 1].type ?? null;
  }
  return out;
}

/** Drain an SDK stream into a summary: event names in first-seen order and the part count. */
async function drain(stream) {
  const events = [];
  let count = 0;
  let error = null;
  for await (const part of stream) {
    count += 1;
    const name = String(part.event).split("|")[0];
    if (!events.includes(name)) events.push(name);
    if (name === "error") error = JSON.stringify(part.data);
  }
  if (error !== null) throw new Error(`stream error event: ${error}`);
  return new Drained({ kind: "stream", events, count });
}

/** A drained stream's summary (kept as is, not summarized again). */
class Drained {
  constructor(summary) {
    this.summary = summary;
  }
}

function input(text) {
  return { messages: [{ role: "user", content: text }] };
}

/** The id an earlier call produced, or an error naming that call. */
function needed(id, call) {
  if (!id) throw new Error(`no id: ${call} failed`);
  return id;
}

/** Throws unless the run reads 404 (a rolled-back run is deleted). */
async function gone(client, threadId, runId) {
  try {
    await client.runs.get(threadId, runId);
  } catch (error) {
    if (error?.status === 404) return;
    throw error;
  }
  throw new Error("the rolled-back run is still readable");
}

async function wait(ms) {
  await new Promise((resolve) => setTimeout(resolve, ms));
}

/** The calls, in order; each gets the shared context `ctx` and returns the raw result. */
function calls(client, ctx) {
  const list = [
    ["assistants.search", () => client.assistants.search({ limit: 10 })],
    ["assistants.get", () => client.assistants.get(ASSISTANT)],
    ["assistants.getGraph", () => client.assistants.getGraph(ASSISTANT)],
    ["assistants.getSchemas", () => client.assistants.getSchemas(ASSISTANT)],
    [
      "threads.create",
      async () => {
        const thread = await client.threads.create({ metadata: ctx.metadata });
        ctx.threadId = thread.thread_id;
        return thread;
      },
    ],
    ["threads.get", () => client.threads.get(ctx.threadId)],
    [
      "threads.update",
      () => client.threads.update(ctx.threadId, { metadata: { ...ctx.metadata, step: "update" } }),
    ],
    ["threads.search", () => client.threads.search({ metadata: ctx.metadata, limit: 10 })],
    ["threads.count", () => client.threads.count({ metadata: ctx.metadata })],
    ["runs.wait", () => client.runs.wait(ctx.threadId, ASSISTANT, { input: input("hi") })],
  ];
  for (const mode of STREAM_MODES) {
    list.push([
      `runs.stream[${mode}]`,
      () =>
        drain(
          client.runs.stream(ctx.threadId, ASSISTANT, {
            input: input(`stream ${mode}`),
            streamMode: mode,
          }),
        ),
    ]);
  }
  list.push([
    "runs.stream[subgraphs]",
    () =>
      drain(
        client.runs.stream(ctx.threadId, ASSISTANT, {
          input: input("stream subgraphs"),
          streamMode: ["values", "updates"],
          streamSubgraphs: true,
        }),
      ),
  ]);
  list.push(
    [
      "threads.getState",
      async () => {
        const state = await client.threads.getState(ctx.threadId);
        ctx.checkpoint = state.checkpoint;
        return state;
      },
    ],
    ["threads.getHistory", () => client.threads.getHistory(ctx.threadId, { limit: 3 })],
    [
      "threads.getState[checkpoint_id]",
      () => client.threads.getState(ctx.threadId, ctx.checkpoint.checkpoint_id),
    ],
    [
      "runs.stream[checkpoint]",
      () =>
        drain(
          client.runs.stream(ctx.threadId, ASSISTANT, {
            input: input("from the head"),
            checkpoint: ctx.checkpoint,
            streamMode: ["values", "messages-tuple"],
          }),
        ),
    ],
    [
      "runs.stream[useStream]",
      () => {
        // What useStream (agent-chat-ui) sends once a thread has history.
        const { thread_id: _, ...checkpoint } = ctx.checkpoint;
        return drain(
          client.runs.stream(ctx.threadId, ASSISTANT, {
            input: input("as useStream sends it"),
            checkpoint,
            streamMode: ["values", "messages-tuple"],
            streamResumable: true,
            onDisconnect: "continue",
          }),
        );
      },
    ],
    [
      "runs.wait[input=null]",
      () => client.runs.wait(ctx.threadId, ASSISTANT, { input: null }),
    ],
    [
      "threads.updateState",
      () =>
        client.threads.updateState(ctx.threadId, {
          values: { messages: [{ type: "ai", content: "an edited answer" }] },
          asNode: "model",
        }),
    ],
    [
      "threads.copy",
      async () => {
        const copy = await client.threads.copy(ctx.threadId);
        ctx.copyId = copy.thread_id;
        return copy;
      },
    ],
    [
      "runs.list",
      async () => {
        const runs = await client.runs.list(ctx.threadId, { limit: 10 });
        ctx.listedRunId = runs[0]?.run_id;
        return runs;
      },
    ],
    ["runs.get", () => client.runs.get(ctx.threadId, needed(ctx.listedRunId, "runs.list"))],
    [
      "runs.create",
      async () => {
        const run = await client.runs.create(ctx.threadId, ASSISTANT, { input: input("bg") });
        ctx.runId = run.run_id;
        return run;
      },
    ],
    ["runs.join", () => client.runs.join(ctx.threadId, needed(ctx.runId, "runs.create"))],
    [
      "runs.joinStream",
      async () => {
        const run = await client.runs.create(ctx.threadId, ASSISTANT, { input: input("join") });
        return drain(client.runs.joinStream(ctx.threadId, run.run_id));
      },
    ],
    [
      "runs.cancel",
      async () => {
        const run = await client.runs.create(ctx.threadId, ASSISTANT, { input: input("slow") });
        await wait(200);
        await client.runs.cancel(ctx.threadId, run.run_id, true, "interrupt");
        return client.runs.get(ctx.threadId, run.run_id);
      },
    ],
    [
      "runs.create[enqueue]",
      async () => {
        await client.runs.create(ctx.threadId, ASSISTANT, { input: input("busy enqueue") });
        const run = await client.runs.create(ctx.threadId, ASSISTANT, {
          input: input("queued"),
          multitaskStrategy: "enqueue",
        });
        ctx.queuedId = run.run_id;
        return run;
      },
    ],
    [
      "runs.join[enqueued]",
      () => client.runs.join(ctx.threadId, needed(ctx.queuedId, "runs.create[enqueue]")),
    ],
    [
      "runs.create[rollback]",
      async () => {
        const busy = await client.runs.create(ctx.threadId, ASSISTANT, {
          input: input("busy rollback"),
        });
        await wait(200);
        const run = await client.runs.create(ctx.threadId, ASSISTANT, {
          input: input("instead"),
          multitaskStrategy: "rollback",
        });
        await client.runs.join(ctx.threadId, run.run_id);
        await gone(client, ctx.threadId, busy.run_id);
        return run;
      },
    ],
    [
      "runs.cancel[rollback]",
      async () => {
        const run = await client.runs.create(ctx.threadId, ASSISTANT, { input: input("busy undo") });
        await wait(200);
        await client.runs.cancel(ctx.threadId, run.run_id, true, "rollback");
        await gone(client, ctx.threadId, run.run_id);
        return null;
      },
    ],
    ["runs.wait[stateless]", () => client.runs.wait(null, ASSISTANT, { input: input("once") })],
    [
      "runs.stream[stateless]",
      () =>
        drain(client.runs.stream(null, ASSISTANT, { input: input("once"), streamMode: "values" })),
    ],
    [
      "threads.delete",
      async () => {
        const doomed = await client.threads.create({ metadata: { ...ctx.metadata, doomed: true } });
        await client.threads.delete(doomed.thread_id);
        try {
          await client.threads.get(doomed.thread_id);
        } catch (error) {
          if (error?.status === 404) return null;
          throw error;
        }
        throw new Error("the deleted thread is still readable");
      },
    ],
    ...storeCalls(client),
  );
  return list;
}

/** `client.store.*`: put, get, a missing get, search, namespaces, delete. */
function storeCalls(client) {
  const ns = ["conformance", "js"];
  return [
    ["store.putItem", () => client.store.putItem(ns, "item-1", { n: 1 })],
    ["store.getItem", () => client.store.getItem(ns, "item-1")],
    ["store.getItem[missing]", () => client.store.getItem(ns, "no-such-item")],
    [
      "store.searchItems",
      async () =>
        (await client.store.searchItems(["conformance"], { filter: { n: 1 }, limit: 5 })).items,
    ],
    [
      "store.listNamespaces",
      async () =>
        (await client.store.listNamespaces({ prefix: ["conformance"], maxDepth: 2 })).namespaces,
    ],
    [
      "store.deleteItem",
      async () => {
        await client.store.deleteItem(ns, "item-1");
        return client.store.getItem(ns, "item-1");
      },
    ],
  ];
}

async function main() {
  const [apiUrl, apiKey] = process.argv.slice(2);
  if (!apiUrl) {
    console.error("usage: node conformance.mjs <gateway-url> [api-key]");
    process.exit(2);
  }
  const client = new Client({
    apiUrl,
    apiKey: apiKey || null,
    timeoutMs: 30000,
    callerOptions: { maxRetries: 0 },
  });
  const ctx = { metadata: { suite: "conformance", client: "js" } };
  for (const [call, fn] of calls(client, ctx)) {
    let line;
    try {
      const result = await fn();
      line = { call, ok: true, detail: result instanceof Drained ? result.summary : summarize(result) };
    } catch (error) {
      line = { call, ok: false, error: String(error?.message ?? error).slice(0, 300) };
      if (typeof error?.status === "number") line.status = error.status;
    }
    console.log(JSON.stringify(line));
  }
}

await main();
