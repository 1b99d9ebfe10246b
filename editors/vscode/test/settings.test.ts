import assert from "node:assert/strict";
import { test } from "node:test";
import { serverConfigurationResults, serverSettings } from "../src/settings";

test("client-only keys are not sent to the server", () => {
  assert.deepEqual(serverSettings({ serverPath: "/x", interpreter: "/p", model: "builtin", candidates: 2 }), {
    model: "builtin",
    candidates: 2,
  });
});

test("non-objects pass through for the server to report", () => {
  assert.equal(serverSettings(null), null);
  assert.equal(serverSettings("nonsense"), "nonsense");
});

test("workspace/configuration answers are filtered per requested section", () => {
  const results = serverConfigurationResults(
    ["dice", "editor", undefined],
    [
      { serverPath: "/x", model: "m" },
      { serverPath: "not ours", tabSize: 4 },
      { dice: { interpreter: "/p", steps: 8 }, editor: { tabSize: 4 } },
    ],
  );
  assert.deepEqual(results, [{ model: "m" }, { serverPath: "not ours", tabSize: 4 }, { dice: { steps: 8 }, editor: { tabSize: 4 } }]);
});
