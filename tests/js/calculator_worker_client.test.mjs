// The page's side of the worker (docs/assets/calculator/worker-client.js) with fake workers
// and fake timers: adoption of boot.js's worker, restarts, give-up, time-outs. Run by
// tests/js/test_calculator_state_js.py.
import { test } from "node:test";
import assert from "node:assert/strict";
import { COMPUTE_TIMEOUT_MS, MAX_RESTARTS, START_TIMEOUT_MS, WorkerClient } from "../../docs/assets/calculator/worker-client.js";

class FakeWorker {
  constructor() {
    this.sent = [];
    this.terminated = false;
  }
  postMessage(msg) { this.sent.push(msg); }
  terminate() { this.terminated = true; }
  reply(msg) { this.onmessage({ data: msg }); }
  fail() {
    let prevented = false;
    this.onerror({ preventDefault: () => { prevented = true; } });
    return prevented;
  }
}

class FakeTimers {
  constructor() { this.now = 0; this.pending = new Map(); this.next = 1; }
  setTimeout(fn, ms) { const id = this.next++; this.pending.set(id, { at: this.now + ms, fn }); return id; }
  clearTimeout(id) { this.pending.delete(id); }
  advance(ms) {
    this.now += ms;
    for (const [id, t] of [...this.pending].sort((a, b) => a[1].at - b[1].at)) {
      if (t.at <= this.now && this.pending.has(id)) { this.pending.delete(id); t.fn(); }
    }
  }
}

function setup({ booted = null, bootFailed = false, noModule = false, startThrows = false } = {}) {
  const log = [];
  const started = [];
  const timers = new FakeTimers();
  let take = { worker: booted, failed: bootFailed, noModule };
  const client = new WorkerClient({
    init: { type: "init", lang: "en" },
    timers,
    boot: {
      take: () => { const t = take; take = { worker: null, failed: false, noModule }; return t; },
      start: () => {
        if (startThrows) throw new Error("blocked");
        const w = new FakeWorker();
        started.push(w);
        return w;
      },
    },
    on: {
      status: (v) => log.push(["status", v]),
      restarted: (n) => log.push(["restarted", n]),
      restarting: () => log.push(["restarting"]),
      failed: (d) => log.push(["failed", d]),
      ready: () => log.push(["ready"]),
      result: (id, out) => log.push(["result", id, out]),
      message: (msg) => log.push(["message", msg.type]),
    },
  });
  return { client, log, started, timers };
}

test("adopts boot.js's worker, sends init, and reports ready and results", () => {
  const booted = new FakeWorker();
  const { client, log, started } = setup({ booted });
  client.start();
  assert.equal(started.length, 0);
  assert.deepEqual(booted.sent, [{ type: "init", lang: "en" }]);
  assert.equal(client.post({ type: "config" }), false); // not up yet
  booted.reply({ type: "ready", timings: {} });
  assert.equal(client.up, true);
  assert.equal(client.post({ type: "config" }), true);
  client.compute({ type: "compute", id: 1 });
  booted.reply({ type: "result", id: 1, out: { internal_error: {} } }); // passed through as is
  booted.reply({ type: "config-result", id: 2 });
  assert.deepEqual(log, [["status", "starting"], ["ready"], ["result", 1, { internal_error: {} }],
                         ["message", "config-result"]]);
});

test("a boot worker that already failed is replaced", () => {
  const booted = new FakeWorker();
  const { client, log, started } = setup({ booted, bootFailed: true });
  client.start();
  assert.equal(booted.terminated, true);
  assert.equal(started.length, 1);
  assert.deepEqual(log.slice(0, 3), [["status", "starting"], ["restarted", 1], ["restarting"]]);
});

test("no module workers: fails at once, without retrying", () => {
  const { client, log, started } = setup({ noModule: true });
  client.start();
  assert.equal(started.length, 0);
  assert.deepEqual(log, [["status", "starting"], ["status", "failed"], ["failed", "no module workers"]]);
});

test("a worker that cannot be constructed fails with the reason", () => {
  const { client, log } = setup({ startThrows: true });
  client.start();
  assert.deepEqual(log.at(-1), ["failed", "blocked"]);
});

test("crashes and errors restart the worker; after MAX_RESTARTS the page gives up", () => {
  const { client, log, started } = setup();
  client.start();
  started[0].reply({ type: "crashed", id: 1 });
  assert.equal(started[0].terminated, true);
  assert.equal(started[1].fail(), true); // the error event is handled, not reported as uncaught
  for (let i = 2; i < MAX_RESTARTS; i += 1) started[i].reply({ type: "crashed" });
  assert.equal(started.length, MAX_RESTARTS + 1);
  assert.equal(client.restarts, MAX_RESTARTS);
  assert.equal(log.filter((e) => e[0] === "failed").length, 0);
  started[MAX_RESTARTS].reply({ type: "crashed" });
  assert.equal(started.length, MAX_RESTARTS + 1); // no new one
  assert.deepEqual(log.slice(-3), [["restarted", MAX_RESTARTS + 1], ["status", "failed"],
                                   ["failed", "worker failed to start"]]);
});

test("a stalled start and a computation that never answers restart the worker", () => {
  const { client, started, timers } = setup();
  client.start();
  timers.advance(START_TIMEOUT_MS - 1);
  assert.equal(started.length, 1);
  timers.advance(1);
  assert.equal(started.length, 2);
  started[1].reply({ type: "ready", timings: {} });
  timers.advance(START_TIMEOUT_MS); // started: its start timer is gone
  assert.equal(started.length, 2);
  client.compute({ type: "compute", id: 1 });
  timers.advance(COMPUTE_TIMEOUT_MS - 1);
  started[1].reply({ type: "result", id: 1, out: {} }); // in time: its timer is cleared
  timers.advance(COMPUTE_TIMEOUT_MS);
  assert.equal(started.length, 2);
  client.compute({ type: "compute", id: 2 });
  timers.advance(COMPUTE_TIMEOUT_MS);
  assert.equal(started.length, 3);
  assert.equal(client.up, false);
});

test("a worker whose Pyodide failed to start ends in failure; crash() reaches the worker", () => {
  const { client, log, started } = setup();
  client.start();
  client.crash();
  assert.deepEqual(started[0].sent.at(-1), { type: "crash" });
  started[0].reply({ type: "failed", detail: "no wasm" });
  assert.deepEqual(log.slice(-2), [["status", "failed"], ["failed", "no wasm"]]);
  assert.equal(started[0].terminated, true);
});
