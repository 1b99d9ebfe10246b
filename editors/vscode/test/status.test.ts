import assert from "node:assert/strict";
import { test } from "node:test";
import { shortModelName, statusBarView, stoppedView } from "../src/status";

test("idle status names the model and the GPU", () => {
  const view = statusBarView({ model: "builtin", gpu: "NVIDIA H200", busy: false, message: "ready" });
  assert.equal(view.text, "$(pulse) DICE builtin · NVIDIA H200");
  assert.match(view.tooltip, /GPU: NVIDIA H200/);
  assert.match(view.tooltip, /ready/);
});

test("busy status spins and says there is no GPU", () => {
  const view = statusBarView({ model: "/ckpt/DICE-1.7B/", gpu: null, busy: true, message: "decoding block 3/64" });
  assert.equal(view.text, "$(sync~spin) DICE DICE-1.7B · no GPU");
  assert.match(view.tooltip, /compiled, not timed/);
  assert.match(view.tooltip, /decoding block 3\/64/);
});

test("a status without a model yet", () => {
  assert.equal(statusBarView({}).text, "$(pulse) DICE no model · no GPU");
});

test("model names", () => {
  assert.equal(shortModelName("builtin"), "builtin");
  assert.equal(shortModelName("dice://gpu-box:7777"), "gpu-box:7777");
  assert.equal(shortModelName("C:\\models\\DICE-4B"), "DICE-4B");
});

test("stopped view carries the reason", () => {
  assert.deepEqual(stoppedView("dice-lsp was not found on PATH"), {
    text: "$(error) DICE stopped",
    tooltip: "dice-lsp was not found on PATH",
  });
});
