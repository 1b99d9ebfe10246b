import assert from "node:assert/strict";
import { test } from "node:test";
import { followUp, profileMessage } from "../src/answers";

const candidates = [
  { index: 0, title: "Apply candidate 1: compile error", status: "compile_error", message: "error: x" },
  { index: 1, title: "Apply candidate 2: compiled (no GPU)", status: "no_gpu", message: "compiled" },
];

test("an applied candidate is announced", () => {
  const answer = { job: "3", message: "applied candidate 2: 1.8x faster", best: 1, candidates, applied: true };
  assert.deepEqual(followUp(answer), { kind: "applied", message: "applied candidate 2: 1.8x faster" });
});

test("candidates that were not applied are offered", () => {
  const answer = { job: "3", message: "2 candidate(s), none applied", best: null, candidates, applied: false };
  assert.deepEqual(followUp(answer), { kind: "pick", job: "3", candidates });
});

test("cancelled, failed and empty answers need nothing more (the server showed why)", () => {
  assert.deepEqual(followUp({ job: "3", message: "cancelled", best: null, candidates, cancelled: true }), { kind: "none" });
  assert.deepEqual(followUp({ job: null, message: "select the code", best: null, candidates: [], error: true }), { kind: "none" });
  assert.deepEqual(followUp({ job: "4", message: "no candidate", best: null, candidates: [] }), { kind: "none" });
});

test("answers of another shape are ignored", () => {
  assert.deepEqual(followUp(undefined), { kind: "none" });
  assert.deepEqual(followUp({ applied: true }), { kind: "none" });
});

test("a profile verdict becomes one line; errors and cancellations none", () => {
  const verdict = { status: "no_gpu", message: "compiled; not run (no GPU)", kernel: "saxpy", compiled: true };
  assert.equal(profileMessage(verdict), "DICE: saxpy: compiled; not run (no GPU)");
  assert.equal(profileMessage({ status: "faster", message: "1.8x faster", kernel: null }), "DICE: 1.8x faster");
  assert.equal(profileMessage({ error: "put the cursor inside a __global__ function" }), undefined);
  assert.equal(profileMessage({ cancelled: true, message: "cancelled" }), undefined);
});
