// The calculator's state machine (docs/assets/calculator/state.js), without a browser.
// Run by tests/js/test_calculator_state_js.py (node --test), so the project's one test command
// covers it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CalcMachine, answerKind, replayPending, requestKey } from "../../docs/assets/calculator/state.js";

const DEFAULT = requestKey({ model: "llama-3.1-8b", seq_len: 2048 });
const LINK = requestKey({ model: "llama-2-7b", seq_len: 4096 });
const OTHER = requestKey({ model: "llama-2-7b", seq_len: 1024 });
const RESULT = { result: {}, view: ["div", {}] };
const ERROR = { error: { code: "not_positive", field: "seq_len", value: -1 } };
const INTERNAL = { internal_error: { code: "internal_error", stage: "calc", exception: "KeyError",
                                     where: "calc/plan.py:12", calc_version: "0.1.0" } };

const sends = (effects) => effects.filter((e) => e.type === "send");

test("the build-time result is the form's when the form holds the default setup", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  assert.deepEqual(m.setForm(DEFAULT), []);
  assert.equal(m.state, "ready");
  assert.equal(m.results, "current");
  assert.equal(m.withdrawn, false);
  // the worker starting changes nothing public and computes nothing
  assert.deepEqual(m.workerUp(), []);
  assert.equal(m.state, "ready");
});

test("a shared link: the default figures are withdrawn until the link's own arrive", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  assert.deepEqual(m.setForm(LINK), []); // no worker yet: nothing sent
  assert.equal(m.state, "computing");
  assert.equal(m.results, "other");
  assert.equal(m.withdrawn, true);
  const [send] = m.workerUp(); // the worker is up: the link's request goes first
  assert.equal(send.type, "send");
  assert.equal(send.key, LINK);
  // up but not answered: still not "ready", still another request's numbers, still withdrawn
  assert.equal(m.state, "computing");
  assert.equal(m.results, "other");
  assert.equal(m.withdrawn, true);
  const effects = m.answer(send.id, RESULT);
  assert.deepEqual(effects, [{ type: "render", out: RESULT, key: LINK }]);
  assert.equal(m.state, "ready");
  assert.equal(m.shownKey, LINK);
});

test("ready never follows the worker's start alone (the stale-numbers bug)", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(LINK);
  m.workerUp();
  assert.notEqual(m.state, "ready");
});

test("once the worker has answered, an edit keeps the previous numbers while computing", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(LINK);
  const [send] = m.workerUp();
  m.answer(send.id, RESULT);
  m.setForm(OTHER);
  assert.equal(m.state, "computing");
  assert.equal(m.results, "other");
  assert.equal(m.withdrawn, false);
  m.workerRestarting(); // a new worker has to answer first again
  assert.equal(m.withdrawn, true);
});

test("an answer to a request the form has left is dropped; the newest one is sent", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(DEFAULT);
  m.workerUp();
  const [first] = sends(m.setForm(LINK));
  assert.deepEqual(m.setForm(OTHER), []); // one in flight: OTHER waits
  const effects = m.answer(first.id, RESULT);
  assert.equal(effects.length, 1);
  assert.equal(effects[0].type, "send");
  assert.equal(effects[0].key, OTHER);
  assert.equal(m.state, "computing");
  assert.equal(m.shownKey, DEFAULT); // LINK's numbers were never shown
  m.answer(effects[0].id, RESULT);
  assert.equal(m.state, "ready");
  assert.equal(m.shownKey, OTHER);
});

test("back to the request on show: ready at once, a late answer is ignored", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(DEFAULT);
  m.workerUp();
  const [send] = sends(m.setForm(LINK));
  assert.deepEqual(m.setForm(DEFAULT), []);
  assert.equal(m.state, "ready");
  assert.deepEqual(m.answer(send.id, RESULT), []);
  assert.equal(m.shownKey, DEFAULT);
  assert.deepEqual(m.answer(999, RESULT), []); // unknown id
});

test("pending: an answer is still to come while a request is queued or in flight", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(DEFAULT);
  assert.equal(m.pending, false); // the build-time result is the form's: nothing to compute
  m.setForm(LINK);
  assert.equal(m.pending, true); // queued until the worker is up
  const [send] = m.workerUp();
  assert.equal(m.pending, true); // in flight
  const [resend] = sends(m.answer(send.id, RESULT).concat(m.setForm(OTHER)));
  m.setForm(LINK); // back to the numbers on show while OTHER is in flight: ready, not settled
  assert.equal(m.state, "ready");
  assert.equal(m.pending, true);
  m.answer(resend.id, RESULT);
  assert.equal(m.pending, false);
  assert.equal(m.shownKey, LINK);
});

test("calc's errors: invalid, the last good numbers kept and marked", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(DEFAULT);
  m.workerUp();
  const [send] = sends(m.setForm(OTHER));
  assert.deepEqual(m.answer(send.id, ERROR), [{ type: "errors", out: ERROR, add: false }]);
  assert.equal(m.state, "invalid");
  assert.equal(m.results, "other");
  assert.equal(m.withdrawn, false);
  assert.equal(m.shownKey, DEFAULT);
});

test("errors found in the page: invalid at once, or after calc's check of the rest", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(DEFAULT);
  m.workerUp();
  assert.deepEqual(m.setForm(null, { blocked: true, check: true }), []); // nothing to check
  assert.equal(m.state, "invalid");
  const [check] = sends(m.setForm(OTHER, { blocked: true, check: true }));
  assert.equal(check.check, true);
  assert.equal(m.state, "computing");
  // a check's results are never shown; its errors join the page's
  assert.deepEqual(m.answer(check.id, RESULT), []);
  assert.equal(m.state, "invalid");
  assert.equal(m.shownKey, DEFAULT);
  const [again] = sends(m.setForm(LINK, { blocked: true, check: true }));
  assert.deepEqual(m.answer(again.id, ERROR), [{ type: "errors", out: ERROR, add: true }]);
  assert.equal(m.state, "invalid");
  assert.deepEqual(m.setForm(LINK, { blocked: true, check: false }), []);
  assert.equal(m.state, "invalid");
});

test("a valid request while blocked is not confused with the blocked one's check", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.workerUp();
  const [check] = sends(m.setForm(OTHER, { blocked: true, check: true }));
  m.setForm(OTHER); // the same fields, now valid: must compute, not take the check's answer
  assert.deepEqual(m.answer(check.id, RESULT).map((e) => e.type), ["send"]);
  assert.equal(m.state, "computing");
});

test("a crash re-sends what the form still needs; a failure ends in error", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(LINK);
  const [send] = m.workerUp();
  assert.deepEqual(m.workerRestarting(), []);
  assert.equal(m.state, "computing");
  assert.equal(m.withdrawn, true);
  assert.deepEqual(m.answer(send.id, RESULT), []); // the dead worker's id
  const [resend] = m.workerUp();
  assert.equal(resend.key, LINK);
  assert.notEqual(resend.id, send.id);
  m.workerFailed("gone");
  assert.equal(m.state, "error");
  assert.equal(m.results, "other");
  assert.equal(m.withdrawn, true); // never the default's numbers for the link
  assert.deepEqual(m.workerUp(), []);
  assert.equal(m.state, "error");
});

test("a worker that never starts: error, with the default's figures kept when they are the form's", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(DEFAULT);
  m.workerFailed("no module workers");
  assert.equal(m.state, "error");
  assert.equal(m.results, "current");
  assert.equal(m.withdrawn, false);
});

test("a bug in the calculator is an error of that request, not an input error", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(DEFAULT);
  m.workerUp();
  const [send] = sends(m.setForm(OTHER));
  const effects = m.answer(send.id, INTERNAL);
  assert.deepEqual(effects.map((e) => e.type), ["internal"]); // never "errors": no field blamed
  assert.equal(effects[0].out, INTERNAL);
  assert.equal(effects[0].add, false);
  assert.equal(m.state, "error");
  assert.equal(m.internal, true);
  assert.equal(m.results, "other"); // the default's numbers stay, not the form's
  assert.equal(m.withdrawn, false);
  assert.equal(m.shownKey, DEFAULT);
  // the worker is fine: the next edit computes again, and the error goes with it
  const [next] = sends(m.setForm(LINK));
  assert.equal(m.internal, false);
  assert.equal(m.state, "computing");
  assert.deepEqual(m.answer(next.id, RESULT).map((e) => e.type), ["render"]);
  assert.equal(m.state, "ready");
  // back to the request that failed: asked again (a bug may depend on the worker's state)
  assert.equal(sends(m.setForm(OTHER)).length, 1);
});

test("back to the figures on show after a bug: ready, no internal error left", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(DEFAULT);
  m.workerUp();
  const [send] = sends(m.setForm(OTHER));
  m.answer(send.id, INTERNAL);
  assert.deepEqual(m.setForm(DEFAULT), []);
  assert.equal(m.state, "ready");
  assert.equal(m.internal, false);
});

test("a bug met by the check of a blocked form is added to the form's own errors", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(DEFAULT);
  m.workerUp();
  const [check] = sends(m.setForm(OTHER, { blocked: true, check: true }));
  const effects = m.answer(check.id, INTERNAL);
  assert.deepEqual(effects.map((e) => [e.type, e.add]), [["internal", true]]);
  assert.equal(m.state, "invalid"); // the page's own errors still stand
  assert.equal(m.internal, false);
});

test("answers are told apart by their keys", () => {
  assert.equal(answerKind(RESULT), "result");
  assert.equal(answerKind(ERROR), "input");
  assert.equal(answerKind({ error: ERROR.error, errors: [ERROR.error] }), "input");
  assert.equal(answerKind(INTERNAL), "internal");
  // neither a result nor calc's error: the worker's contract broke, a bug too
  assert.equal(answerKind({ result: {} }), "internal");
  assert.equal(answerKind(null), "internal");
  assert.equal(answerKind("text"), "internal");
});

test("request keys ignore key order, keep list order", () => {
  assert.equal(requestKey({ b: 1, a: { d: [2, 1], c: 0 } }), '{"a":{"c":0,"d":[2,1]},"b":1}');
  assert.equal(requestKey({ a: 1, b: 2 }), requestKey({ b: 2, a: 1 }));
  assert.notEqual(requestKey({ a: [1, 2] }), requestKey({ a: [2, 1] }));
});

// An answer without the caching allocator's replay (calc.memory.allocator_deferred), and the
// worker's second answer with it.
const DEFERRED = { result: { memory: { min_device_pending: true } }, view: ["div", {}] };
const COMPLETED = { result: { memory: { min_device_bytes: 1 } }, view: ["div", {}] };

test("a deferred answer is shown at once and waits for its replay", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(LINK);
  const [send] = m.workerUp();
  assert.deepEqual(m.answer(send.id, DEFERRED), [{ type: "render", out: DEFERRED, key: LINK }]);
  // the numbers on show are the form's, but one is still to come: not "ready" yet
  assert.equal(m.results, "current");
  assert.equal(m.state, "computing");
  assert.equal(m.withdrawn, false); // shown meanwhile, not withdrawn
  assert.equal(m.pending, true);
  assert.deepEqual(m.update(send.id, COMPLETED), [{ type: "render", out: COMPLETED, key: LINK }]);
  assert.equal(m.state, "ready");
  assert.equal(m.pending, false);
  assert.deepEqual(m.update(send.id, COMPLETED), []); // once only
});

test("the worker's lean answers say themselves whether a replay follows", () => {
  assert.equal(replayPending({ view: ["div", {}], pending: true }), true);
  assert.equal(replayPending({ view: ["div", {}], pending: false }), false);
  assert.equal(replayPending(DEFERRED), true); // calc's whole response, as before
  assert.equal(replayPending(COMPLETED), false);
  const lean = { view: ["div", {}], pending: true };
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(LINK);
  const [send] = m.workerUp();
  assert.deepEqual(m.answer(send.id, lean), [{ type: "render", out: lean, key: LINK }]);
  assert.equal(m.pending, true);
  const done = { view: ["div", {}], pending: false };
  assert.deepEqual(m.update(send.id, done), [{ type: "render", out: done, key: LINK }]);
  assert.equal(m.state, "ready");
});

test("a newer request drops the replay of the one before", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(LINK);
  const [first] = m.workerUp();
  m.answer(first.id, DEFERRED);
  const [second] = sends(m.setForm(OTHER));
  assert.ok(second);
  assert.deepEqual(m.update(first.id, COMPLETED), []); // too late: not shown
  assert.deepEqual(m.answer(second.id, RESULT), [{ type: "render", out: RESULT, key: OTHER }]);
  assert.equal(m.pending, false);
});

test("a replay that fails is the calculator's bug, no field blamed", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(LINK);
  const [send] = m.workerUp();
  m.answer(send.id, DEFERRED);
  assert.deepEqual(m.update(send.id, INTERNAL), [{ type: "internal", out: INTERNAL, add: false }]);
  assert.equal(m.state, "error");
  assert.equal(m.internal, true);
});

test("a restart forgets the replay it was waiting for", () => {
  const m = new CalcMachine({ shownKey: DEFAULT });
  m.setForm(LINK);
  const [send] = m.workerUp();
  m.answer(send.id, DEFERRED);
  m.workerRestarting();
  assert.equal(m.pending, false);
  assert.deepEqual(m.update(send.id, COMPLETED), []);
});
