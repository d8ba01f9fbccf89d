// The page's side of the worker (worker.js): starts it (adopting the one boot.js started
// while the page was parsed), restarts it when it crashes, errs or stalls, gives up after
// MAX_RESTARTS, and times out a computation that never answers. No DOM: what the page
// shows is left to the callbacks, and tests/js/ drives it with fake workers and timers.

export const MAX_RESTARTS = 3;
export const COMPUTE_TIMEOUT_MS = 15000;
// A worker that has not started after this long (a stalled download) is replaced; after
// MAX_RESTARTS the page says the calculator cannot run here. Generous: a first visit
// downloads about 14 MB.
export const START_TIMEOUT_MS = 120000;

export class WorkerClient {
  // boot.take() -> {worker, failed, noModule}: the worker boot.js started (null when none),
  //   whether it already failed, whether this browser has no module workers at all;
  // boot.start() -> a new module Worker (throws when none can start);
  // init: the "init" message (page language and strings);
  // on: {status(value), restarted(count), restarting(), failed(detail), ready(timings),
  //      result(id, out), message(msg)}; status values "starting", "failed" (and "up",
  //      which ready() sets);
  // timers: {setTimeout, clearTimeout} (tests pass fakes).
  constructor({ boot, init, on, timers = globalThis }) {
    this.boot = boot;
    this.init = init;
    this.on = on;
    this.timers = timers;
    this.worker = null;
    this.restarts = 0;
    this.up = false;
    this.computeTimer = null;
    this.startTimer = null;
  }

  start() {
    this.up = false;
    this.on.status("starting");
    const { worker: booted, failed, noModule } = this.boot.take();
    if (booted && failed) {
      booted.terminate();
      this.restart();
      return;
    }
    if (!booted && noModule) {
      this.fail("no module workers"); // boot.js found none: no use trying again
      return;
    }
    let worker;
    try {
      worker = booted || this.boot.start();
    } catch (err) {
      this.fail(String(err && err.message ? err.message : err));
      return;
    }
    this.worker = worker;
    worker.onmessage = (event) => this.received(event.data);
    worker.onerror = (event) => {
      event.preventDefault();
      this.restart();
    };
    this.clear("startTimer");
    this.startTimer = this.timers.setTimeout(() => this.restart(), START_TIMEOUT_MS);
    worker.postMessage(this.init);
  }

  restart() {
    if (this.worker) this.worker.terminate();
    this.worker = null;
    this.up = false;
    this.clear("computeTimer");
    this.clear("startTimer");
    this.restarts += 1;
    this.on.restarted(this.restarts);
    if (this.restarts > MAX_RESTARTS) {
      this.fail("worker failed to start");
      return;
    }
    this.on.restarting();
    this.start();
  }

  fail(detail) {
    if (this.worker) this.worker.terminate();
    this.worker = null;
    this.up = false;
    this.clear("computeTimer");
    this.clear("startTimer");
    this.on.status("failed");
    this.on.failed(detail);
  }

  // Sends a computation; a worker that does not answer within COMPUTE_TIMEOUT_MS is restarted.
  compute(msg) {
    this.clear("computeTimer");
    this.computeTimer = this.timers.setTimeout(() => this.restart(), COMPUTE_TIMEOUT_MS);
    this.worker.postMessage(msg);
  }

  // Any other message (config import): false when the worker is not up.
  post(msg) {
    if (!this.worker || !this.up) return false;
    this.worker.postMessage(msg);
    return true;
  }

  // Makes the worker die (tests of the restart path: root.calculator.crashWorker).
  crash() {
    if (this.worker) this.worker.postMessage({ type: "crash" });
  }

  received(msg) {
    if (msg.type === "ready") {
      this.clear("startTimer");
      this.up = true;
      this.on.ready(msg.timings); // the page sets status "up" itself, after the timings
    } else if (msg.type === "failed") {
      this.fail(msg.detail);
    } else if (msg.type === "crashed") {
      this.restart();
    } else if (msg.type === "result") {
      this.clear("computeTimer");
      this.on.result(msg.id, msg.out);
    } else {
      this.on.message(msg);
    }
  }

  clear(name) {
    if (this[name] !== null) this.timers.clearTimeout(this[name]);
    this[name] = null;
  }
}
