// Which process to start as the DICE language server.
//
// The order is the one users expect from Python tooling: an explicit executable, then an
// explicit interpreter, then the Python extension's active environment, then PATH. Kept free
// of `vscode` imports so that it is unit-tested with plain node.

import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

export const SERVER_EXECUTABLE = process.platform === "win32" ? "dice-lsp.exe" : "dice-lsp";
export const SERVER_MODULE = "dice_lsp.server";

export type ServerSource = "dice.serverPath" | "dice.interpreter" | "Python extension" | "PATH";

export interface ServerCommand {
  command: string;
  args: string[];
  source: ServerSource;
}

export interface ServerLookup {
  serverPath: string; // the dice.serverPath setting, "" when unset
  interpreter: string; // the dice.interpreter setting, "" when unset
  pythonExtensionInterpreter?: string; // the Python extension's active environment, if any
  workspaceFolder?: string; // for relative paths and ${workspaceFolder}
  // Injected so tests need no real Python; defaults probe the machine.
  hasDiceLsp?: (python: string) => boolean;
  findOnPath?: (name: string) => string | undefined;
}

export class ServerNotFoundError extends Error {}

/** `~`, `${workspaceFolder}` and `${userHome}` expanded; a relative path taken from the workspace. */
export function expandPath(p: string, workspaceFolder?: string, home: string = os.homedir()): string {
  let out = p.trim();
  if (out === "~" || out.startsWith("~/")) {
    out = home + out.slice(1);
  }
  out = out.replace(/\$\{userHome\}/g, home);
  if (workspaceFolder !== undefined) {
    out = out.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
    if (!path.isAbsolute(out) && out.includes(path.sep)) {
      out = path.join(workspaceFolder, out);
    }
  }
  return out;
}

function isExecutableFile(p: string): boolean {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return fs.statSync(p).isFile();
  } catch {
    return false;
  }
}

/** The first executable `name` in the PATH directories, like `which`. */
export function findOnPath(name: string, pathEnv: string = process.env.PATH ?? ""): string | undefined {
  for (const dir of pathEnv.split(path.delimiter)) {
    if (dir !== "") {
      const candidate = path.join(dir, name);
      if (isExecutableFile(candidate)) {
        return candidate;
      }
    }
  }
  return undefined;
}

/** True when `python` can import dice_lsp (looked up without importing it: torch is slow). */
export function pythonHasDiceLsp(python: string): boolean {
  const probe = spawnSync(
    python,
    ["-c", "import importlib.util, sys; sys.exit(importlib.util.find_spec('dice_lsp') is None)"],
    { timeout: 15000, stdio: "ignore" },
  );
  return probe.status === 0;
}

const INSTALL_HINT =
  "Install it in a checkout of dice-lsp (it is not on PyPI): `python3 -m venv .venv && " +
  ". .venv/bin/activate && pip install torch==2.13.0 -e .`, then set dice.interpreter to " +
  "that .venv/bin/python or dice.serverPath to its .venv/bin/dice-lsp.";

export function resolveServerCommand(lookup: ServerLookup): ServerCommand {
  const hasDiceLsp = lookup.hasDiceLsp ?? pythonHasDiceLsp;
  const which = lookup.findOnPath ?? ((name: string) => findOnPath(name));

  if (lookup.serverPath.trim() !== "") {
    // An explicit choice is never second-guessed by falling through: say what is wrong.
    const command = expandPath(lookup.serverPath, lookup.workspaceFolder);
    const found = path.isAbsolute(command) ? (isExecutableFile(command) ? command : undefined) : which(command);
    if (found === undefined) {
      throw new ServerNotFoundError(`dice.serverPath is "${lookup.serverPath}", which is not an executable file.`);
    }
    return { command: found, args: [], source: "dice.serverPath" };
  }
  if (lookup.interpreter.trim() !== "") {
    const python = expandPath(lookup.interpreter, lookup.workspaceFolder);
    if (!hasDiceLsp(python)) {
      throw new ServerNotFoundError(
        `dice.interpreter is "${lookup.interpreter}", which cannot import dice_lsp. ${INSTALL_HINT}`,
      );
    }
    return { command: python, args: ["-m", SERVER_MODULE], source: "dice.interpreter" };
  }
  // The Python extension's environment is only a guess at the user's intent: use it when
  // dice-lsp is installed there, otherwise keep looking.
  const envPython = lookup.pythonExtensionInterpreter;
  if (envPython !== undefined && envPython !== "" && hasDiceLsp(envPython)) {
    return { command: envPython, args: ["-m", SERVER_MODULE], source: "Python extension" };
  }
  const onPath = which(SERVER_EXECUTABLE);
  if (onPath !== undefined) {
    return { command: onPath, args: [], source: "PATH" };
  }
  const tried = envPython ? ` (the Python extension's ${envPython} has no dice_lsp either)` : "";
  throw new ServerNotFoundError(`dice-lsp was not found on PATH${tried}. ${INSTALL_HINT}`);
}

/** One line for the output channel: what runs and why it was chosen. */
export function describeServerCommand(cmd: ServerCommand): string {
  return `${[cmd.command, ...cmd.args].join(" ")} (from ${cmd.source})`;
}
