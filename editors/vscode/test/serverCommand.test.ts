import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import {
  describeServerCommand,
  pythonHasDiceLsp,
  expandPath,
  findOnPath,
  resolveServerCommand,
  SERVER_EXECUTABLE,
  ServerNotFoundError,
} from "../src/serverCommand";

/** A temporary folder holding an executable script `name`. */
function fakeExecutable(name: string): { dir: string; file: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dice-vscode-"));
  const file = path.join(dir, name);
  fs.writeFileSync(file, "#!/bin/sh\nexit 0\n", { mode: 0o755 });
  return { dir, file };
}

const nothingOnPath = () => undefined;

test("dice.serverPath wins over every other source", () => {
  const { file } = fakeExecutable(SERVER_EXECUTABLE);
  const cmd = resolveServerCommand({
    serverPath: file,
    interpreter: "/usr/bin/python3",
    pythonExtensionInterpreter: "/env/bin/python",
    hasDiceLsp: () => true,
    findOnPath: () => "/usr/local/bin/dice-lsp",
  });
  assert.deepEqual(cmd, { command: file, args: [], source: "dice.serverPath" });
});

test("a dice.serverPath that is not executable is an error, not a silent fallback", () => {
  assert.throws(
    () =>
      resolveServerCommand({
        serverPath: "/no/such/dice-lsp",
        interpreter: "",
        hasDiceLsp: () => true,
        findOnPath: () => "/usr/local/bin/dice-lsp",
      }),
    (err: unknown) => err instanceof ServerNotFoundError && /\/no\/such\/dice-lsp/.test(err.message),
  );
});

test("dice.serverPath relative to the workspace and with ${workspaceFolder}", () => {
  const { dir, file } = fakeExecutable(SERVER_EXECUTABLE);
  for (const setting of [`bin${path.sep}..${path.sep}${SERVER_EXECUTABLE}`, "${workspaceFolder}/" + SERVER_EXECUTABLE]) {
    fs.mkdirSync(path.join(dir, "bin"), { recursive: true });
    const cmd = resolveServerCommand({ serverPath: setting, interpreter: "", workspaceFolder: dir, findOnPath: nothingOnPath });
    assert.equal(path.normalize(cmd.command), file);
  }
});

test("dice.interpreter runs the server module", () => {
  const probed: string[] = [];
  const cmd = resolveServerCommand({
    serverPath: "",
    interpreter: "~/venv/bin/python",
    pythonExtensionInterpreter: "/env/bin/python",
    hasDiceLsp: (python) => {
      probed.push(python);
      return true;
    },
    findOnPath: () => "/usr/local/bin/dice-lsp",
  });
  const expected = path.join(os.homedir(), "venv/bin/python");
  assert.deepEqual(cmd, { command: expected, args: ["-m", "dice_lsp.server"], source: "dice.interpreter" });
  assert.deepEqual(probed, [expected]);
});

test("a dice.interpreter without dice_lsp is an error that says how to install it", () => {
  assert.throws(
    () => resolveServerCommand({ serverPath: "", interpreter: "/usr/bin/python3", hasDiceLsp: () => false }),
    (err: unknown) => err instanceof ServerNotFoundError && /cannot import dice_lsp/.test(err.message) &&
      err.message.includes("pip install torch==2.13.0 -e .") && !err.message.includes("pip install dice-lsp"),
  );
});

test("the Python extension's environment is used when dice_lsp is installed there", () => {
  const cmd = resolveServerCommand({
    serverPath: "",
    interpreter: "",
    pythonExtensionInterpreter: "/env/bin/python",
    hasDiceLsp: (python) => python === "/env/bin/python",
    findOnPath: () => "/usr/local/bin/dice-lsp",
  });
  assert.deepEqual(cmd, { command: "/env/bin/python", args: ["-m", "dice_lsp.server"], source: "Python extension" });
});

test("an environment without dice_lsp falls through to PATH", () => {
  const cmd = resolveServerCommand({
    serverPath: "",
    interpreter: "",
    pythonExtensionInterpreter: "/env/bin/python",
    hasDiceLsp: () => false,
    findOnPath: (name) => (name === SERVER_EXECUTABLE ? "/usr/local/bin/dice-lsp" : undefined),
  });
  assert.deepEqual(cmd, { command: "/usr/local/bin/dice-lsp", args: [], source: "PATH" });
});

test("nothing anywhere: the message names what was tried", () => {
  assert.throws(
    () =>
      resolveServerCommand({
        serverPath: "",
        interpreter: "",
        pythonExtensionInterpreter: "/env/bin/python",
        hasDiceLsp: () => false,
        findOnPath: nothingOnPath,
      }),
    (err: unknown) =>
      err instanceof ServerNotFoundError && /not found on PATH/.test(err.message) && /\/env\/bin\/python/.test(err.message),
  );
});

test("findOnPath finds executables only, in PATH order", () => {
  const first = fakeExecutable("tool");
  const second = fakeExecutable("tool");
  const notExec = fs.mkdtempSync(path.join(os.tmpdir(), "dice-vscode-"));
  fs.writeFileSync(path.join(notExec, "tool"), "data", { mode: 0o644 });
  const pathEnv = [notExec, first.dir, second.dir].join(path.delimiter);
  assert.equal(findOnPath("tool", pathEnv), first.file);
  assert.equal(findOnPath("missing", pathEnv), undefined);
});

test("expandPath expands home and workspace, keeps bare command names", () => {
  assert.equal(expandPath("~/x", undefined, "/home/u"), "/home/u/x");
  assert.equal(expandPath("${userHome}/x", undefined, "/home/u"), "/home/u/x");
  assert.equal(expandPath("${workspaceFolder}/.venv/bin/python", "/ws"), "/ws/.venv/bin/python");
  assert.equal(expandPath(".venv/bin/python", "/ws"), path.join("/ws", ".venv/bin/python"));
  assert.equal(expandPath("python3", "/ws"), "python3");
});

test("pythonHasDiceLsp trusts the probe's exit status and survives a missing interpreter", () => {
  const found = fakeExecutable("python-with-dice");
  const missing = path.join(found.dir, "python-without-dice");
  fs.writeFileSync(missing, "#!/bin/sh\nexit 1\n", { mode: 0o755 });
  assert.equal(pythonHasDiceLsp(found.file), true);
  assert.equal(pythonHasDiceLsp(missing), false);
  assert.equal(pythonHasDiceLsp("/no/such/python"), false);
});

test("describeServerCommand says what runs and why", () => {
  assert.equal(
    describeServerCommand({ command: "/env/bin/python", args: ["-m", "dice_lsp.server"], source: "Python extension" }),
    "/env/bin/python -m dice_lsp.server (from Python extension)",
  );
});
