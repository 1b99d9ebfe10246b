// Entry point: wires the language server, the status bar and the commands together.

import * as vscode from "vscode";
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

/** The argument the server's position commands take: [{uri, position}] at the cursor. */
async function runAtCursor(dice: DiceLanguageServer, command: string): Promise<void> {
  const editor = activeEditor();
  const p2c = dice.protocol;
  if (editor === undefined || p2c === undefined) {
    return;
  }
  await dice.executeServerCommand(command, [
    { uri: p2c.asUri(editor.document.uri), position: p2c.asPosition(editor.selection.active) },
  ]);
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
  await dice.executeServerCommand("dice.fill", [
    { uri: p2c.asUri(editor.document.uri), range: p2c.asRange(editor.selection) },
  ]);
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
  );
  await dice.start();
}

export async function deactivate(): Promise<void> {
  await server?.stop();
}
