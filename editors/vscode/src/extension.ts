// Entry point: wires the language server, the status bar and the commands together.

import * as vscode from "vscode";
import * as fs from "node:fs";
import * as path from "node:path";
import { followUp, profileMessage } from "./answers";
import { findReports, REPORT_FILE, reportChoices } from "./benchReport";
import { DiceLanguageServer } from "./languageServer";
import { DiceStatusBar } from "./statusBar";

let server: DiceLanguageServer | undefined;

function activeEditor(): vscode.TextEditor | undefined {
  const editor = vscode.window.activeTextEditor;
  if (editor === undefined) {
    void vscode.window.showWarningMessage("DICE: open a CUDA or KernelBench Python file first.");
  }
  return editor;
}

/** Announce an applied candidate, or offer the candidates when none was applied. */
async function afterGenerate(dice: DiceLanguageServer, uri: string, answer: unknown): Promise<void> {
  const next = followUp(answer);
  if (next.kind === "applied") {
    void vscode.window.showInformationMessage(`DICE: ${next.message}`);
  } else if (next.kind === "pick") {
    const choice = await vscode.window.showQuickPick(
      next.candidates.map((c) => ({ label: c.title, detail: c.message, index: c.index })),
      { title: "DICE: no candidate was applied", placeHolder: "Apply one anyway (Escape keeps the code as it is)" },
    );
    if (choice !== undefined) {
      await dice.executeServerCommand("dice.applyCandidate", [{ uri, job: next.job, index: choice.index }]);
    }
  }
}

/** A position command ([{uri, position}] at the cursor): optimize or profile. */
async function runAtCursor(dice: DiceLanguageServer, command: string): Promise<void> {
  const editor = activeEditor();
  const p2c = dice.protocol;
  if (editor === undefined || p2c === undefined) {
    return;
  }
  const uri = p2c.asUri(editor.document.uri);
  const answer = await dice.executeServerCommand(command, [{ uri, position: p2c.asPosition(editor.selection.active) }]);
  if (command === "dice.optimize") {
    await afterGenerate(dice, uri, answer);
  } else {
    const message = profileMessage(answer);
    if (message !== undefined) {
      void vscode.window.showInformationMessage(message);
    }
  }
}

async function fillSelection(dice: DiceLanguageServer): Promise<void> {
  const editor = activeEditor();
  const p2c = dice.protocol;
  if (editor === undefined || p2c === undefined) {
    return;
  }
  if (editor.selection.isEmpty) {
    void vscode.window.showWarningMessage("DICE: select the code to fill (it is replaced by the model's candidates).");
    return;
  }
  const uri = p2c.asUri(editor.document.uri);
  const answer = await dice.executeServerCommand("dice.fill", [{ uri, range: p2c.asRange(editor.selection) }]);
  await afterGenerate(dice, uri, answer);
}

const LAST_REPORT = "dice.lastBenchReport";
const BROWSE = "Choose a report.html…";

/** DICE: Open bench report: the last one opened or one found in the workspace (newest
 * first), or one chosen from disk, shown in a webview (the page runs no script). */
async function openBenchReport(context: vscode.ExtensionContext): Promise<void> {
  const roots = (vscode.workspace.workspaceFolders ?? []).map((f) => f.uri.fsPath);
  const choices = reportChoices(findReports(roots), context.globalState.get<string>(LAST_REPORT));
  let file: string | undefined;
  if (choices.length > 0) {
    const picked = await vscode.window.showQuickPick(
      [...choices.map((c) => ({ label: path.basename(path.dirname(c)), detail: c })), { label: BROWSE, detail: "" }],
      { title: "DICE: open a dice bench report", placeHolder: "newest first" },
    );
    if (picked === undefined) {
      return;
    }
    file = picked.label === BROWSE ? undefined : picked.detail;
  }
  if (file === undefined) {
    const chosen = await vscode.window.showOpenDialog({
      canSelectMany: false,
      filters: { "dice bench report": ["html"] },
      openLabel: "Open report",
      title: `DICE: choose a dice bench ${REPORT_FILE}`,
    });
    if (chosen === undefined || chosen.length === 0) {
      return;
    }
    file = chosen[0].fsPath;
  }
  let page: string;
  try {
    page = fs.readFileSync(file, { encoding: "utf8" });
  } catch (err) {
    void vscode.window.showErrorMessage(`DICE: cannot read ${file}: ${String(err)}`);
    return;
  }
  await context.globalState.update(LAST_REPORT, file);
  const panel = vscode.window.createWebviewPanel(
    "diceBenchReport",
    `DICE bench: ${path.basename(path.dirname(file))}`,
    vscode.ViewColumn.Active,
    { enableScripts: false, localResourceRoots: [] },
  );
  panel.webview.html = page;
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel("DICE");
  const statusBar = new DiceStatusBar();
  const dice = new DiceLanguageServer(output, statusBar);
  server = dice;
  context.subscriptions.push(
    output,
    statusBar,
    dice,
    // The server's own command ids (dice.fill, ...) are registered by the language client;
    // these are the editor-facing commands that build their arguments from the editor.
    vscode.commands.registerCommand("dice.fillSelection", () => fillSelection(dice)),
    vscode.commands.registerCommand("dice.optimizeKernel", () => runAtCursor(dice, "dice.optimize")),
    vscode.commands.registerCommand("dice.profileKernel", () => runAtCursor(dice, "dice.profile")),
    vscode.commands.registerCommand("dice.restartServer", () => dice.restart()),
    vscode.commands.registerCommand("dice.showOutput", () => output.show(true)),
    vscode.commands.registerCommand("dice.openBenchReport", () => openBenchReport(context)),
  );
  await dice.start();
}

export async function deactivate(): Promise<void> {
  await server?.stop();
}
