// The calculator's state machine, without the DOM: which request is on show, which one the
// form holds, what goes to the worker next, and the one public state derived from them.
// calculator.js feeds it events and carries out the effects it returns; tests/js/ runs it
// under Node's built-in test runner.
//
// Public state (data-calc-state), a function of the form and of what is on show:
//   "ready"      every number on the page belongs to the request the form holds
//                (data-calc-key is that request's JSON text), and none is still to come;
//   "invalid"    the form has errors, all of them on show; the numbers are the last good
//                ones, marked as not the form's;
//   "computing"  the form's request is being computed (or waits for the worker): the
//                numbers on show, if any, belong to another request, or are the form's
//                first answer while its allocator replay follows (a second answer);
//   "error"      the worker cannot run (no module workers, failed start, too many crashes),
//                or it answered the form's request with an internal error (a bug in the
//                calculator, not in the inputs: `internal` is true, no field is blamed).
// Whether the worker has started is private (data-calc-worker, for tests and benchmarks):
// the build-time result is "ready" without it when the form holds the default setup.

export const STATES = Object.freeze(["static", "computing", "ready", "invalid", "error"]);

export class CalcMachine {
  // shownKey: the request whose numbers the page already shows (the build-time result when
  // the form holds the default setup), or null.
  constructor({ shownKey = null } = {}) {
    this.worker = "starting"; // "starting" | "up" | "failed"
    this.shownKey = shownKey;
    this.form = null; // {key, blocked, check}
    this.errorsKey = null; // calc's errors for this request are on show
    this.checkedKey = null; // the check of this blocked request has answered
    this.internalKey = null; // this request met a bug in the calculator (internal_error)
    this.inFlight = null; // {id, key, check}
    this.completing = null; // {id, key}: the answer on show waits for the allocator's replay
    this.queued = null; // {key, check}: the newest request waiting for the worker
    this.nextId = 1;
    this.failure = null;
    this.answered = false; // this worker has answered once: later answers take milliseconds
  }

  // The form now holds the request `key` (JSON text; null when it cannot be serialised).
  // blocked: the page itself found errors (empty fields, bad JSON), so no result may be shown;
  // check: send the other fields to calc anyway so that its errors show at once too.
  setForm(key, { blocked = false, check = false } = {}) {
    this.form = { key, blocked, check: blocked && check && key !== null };
    this.errorsKey = null;
    this.checkedKey = null;
    this.internalKey = null;
    if (blocked) {
      this.queued = this.form.check ? { key, check: true } : null;
    } else if (key === this.shownKey) {
      this.queued = null; // already on show: nothing to compute
    } else {
      this.queued = { key, check: false };
    }
    return this.pump();
  }

  workerUp() {
    if (this.worker === "failed") return [];
    this.worker = "up";
    return this.pump();
  }

  // The worker died (crash, time-out) and a new one is starting: what it was computing is
  // sent again, unless the form has moved on.
  workerRestarting() {
    if (this.worker === "failed") return [];
    this.worker = "starting";
    this.answered = false;
    this.completing = null;
    if (this.inFlight && !this.queued && this.isForForm(this.inFlight)) {
      this.queued = { key: this.inFlight.key, check: this.inFlight.check };
    }
    this.inFlight = null;
    return [];
  }

  workerFailed(reason = "") {
    this.worker = "failed";
    this.failure = String(reason);
    this.inFlight = null;
    this.queued = null;
    this.completing = null;
    return [];
  }

  // The worker's answer to request `id`: {result, view}, {error, errors} (bad input) or
  // {internal_error} (a bug: effect "internal", never "errors", so no field is blamed).
  answer(id, out) {
    if (!this.inFlight || id !== this.inFlight.id) return [];
    const done = this.inFlight;
    this.inFlight = null;
    this.answered = true;
    const effects = [];
    if (this.isForForm(done)) {
      const kind = answerKind(out);
      const failed = kind === "input";
      if (kind === "internal") {
        if (done.check) this.checkedKey = done.key;
        else this.internalKey = done.key;
        effects.push({ type: "internal", out, add: done.check });
      } else if (done.check) {
        this.checkedKey = done.key;
        if (failed) effects.push({ type: "errors", out, add: true });
      } else if (failed) {
        this.errorsKey = done.key;
        effects.push({ type: "errors", out, add: false });
      } else {
        this.shownKey = done.key;
        // an answer without the allocator's replay: the worker sends it next ("update")
        this.completing = replayPending(out) ? { id: done.id, key: done.key } : null;
        effects.push({ type: "render", out, key: done.key });
      }
    }
    return effects.concat(this.pump());
  }

  // The worker's second answer to request `id`: the same result with the allocator's replay.
  // Shown while the numbers on show are that request's; a request sent since then dropped it
  // (the worker skips a replay a newer request overtakes, or its update comes too late).
  update(id, out) {
    const waiting = this.completing;
    if (!waiting || waiting.id !== id) return [];
    this.completing = null;
    if (this.shownKey !== waiting.key) return [];
    if (answerKind(out) !== "result") {
      this.internalKey = waiting.key;
      return [{ type: "internal", out, add: false }];
    }
    return [{ type: "render", out, key: waiting.key }];
  }

  isForForm(request) {
    return Boolean(this.form && request.key === this.form.key
                   && request.check === this.form.check && (request.check || !this.form.blocked));
  }

  // One request in flight at most; the newest waiting one replaces older ones.
  pump() {
    if (this.worker !== "up" || this.inFlight || !this.queued) return [];
    const { key, check } = this.queued;
    this.queued = null;
    if (!check && key === this.shownKey) return [];
    const id = this.nextId++;
    this.inFlight = { id, key, check };
    this.completing = null; // the worker drops the replay a newer request overtakes
    return [{ type: "send", id, key, check }];
  }

  get state() {
    if (this.worker === "failed") return "error";
    if (!this.form) return "static";
    if (this.form.blocked) {
      return !this.form.check || this.checkedKey === this.form.key ? "invalid" : "computing";
    }
    if (this.errorsKey === this.form.key) return "invalid";
    if (this.internalKey === this.form.key) return "error";
    // the form's numbers are on show, but one (the allocator replay's) is still to come
    if (this.shownKey === this.form.key) return this.completing ? "computing" : "ready";
    return "computing";
  }

  // A request is in flight or waits for the worker, or the answer on show waits for its
  // allocator replay: an answer is still to come. When false, nothing the worker says can
  // change what is on show until the form changes.
  get pending() {
    return Boolean(this.inFlight || this.queued || this.completing);
  }

  // The form's request met a bug in the calculator (state "error" while the worker is up).
  get internal() {
    return Boolean(this.form && !this.form.blocked && this.internalKey === this.form.key);
  }

  // "current": the numbers on show are the form's; "other": another request's (the default
  // setup while a shared link computes, or the last good one under an error); "none".
  get results() {
    if (this.shownKey === null) return "none";
    return this.form && this.shownKey === this.form.key ? "current" : "other";
  }

  // The results are withdrawn (a "calculating your configuration" note instead) while they
  // belong to another request and no answer is moments away: the worker is starting, has
  // not answered yet (its first answer can take a while), or cannot start at all. Once it
  // has answered, a recompute takes milliseconds: the previous numbers stay meanwhile
  // (state "computing"), so that typing does not blank the results. Under an input error
  // the last good numbers stay, marked.
  get withdrawn() {
    if (this.results !== "other" || this.state === "invalid") return false;
    return this.worker !== "up" || !this.answered;
  }
}

// What a worker answer is: "result" ({result, view}), "input" (calc's {error, errors}) or
// "internal" ({internal_error}, or anything that is neither: a bug either way).
export function answerKind(out) {
  if (!out || typeof out !== "object" || "internal_error" in out) return "internal";
  if ("error" in out) return "input";
  return "view" in out ? "result" : "internal";
}

// Whether an answer left the caching allocator's replay for a second answer
// (calc.memory.allocator_deferred: min_device_pending, in the plan's memory or the estimate).
export function replayPending(out) {
  if (out && typeof out.pending === "boolean") return out.pending; // the worker's lean answer
  const result = out && out.result;
  const memory = result && typeof result === "object" ? result.memory || result : null;
  return Boolean(memory && memory.min_device_pending === true);
}

// The key of a request: its JSON text with the keys sorted, so that two spellings of one
// request (the form's order, the build's order) compare equal.
export function requestKey(request) {
  return JSON.stringify(sortKeys(request));
}

function sortKeys(value) {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === "object") {
    const out = {};
    for (const key of Object.keys(value).sort()) out[key] = sortKeys(value[key]);
    return out;
  }
  return value;
}
