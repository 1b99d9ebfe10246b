// The status bar item fed by the server's dice/status notification.

import * as vscode from "vscode";
import { DiceStatus, statusBarView, stoppedView, StatusBarView } from "./status";

export class DiceStatusBar implements vscode.Disposable {
  private readonly item = vscode.window.createStatusBarItem("dice.status", vscode.StatusBarAlignment.Right, 100);

  constructor() {
    this.item.name = "DICE";
    this.item.command = "dice.showOutput";
  }

  show(status: DiceStatus): void {
    this.render(statusBarView(status));
  }

  showStopped(reason: string): void {
    this.render(stoppedView(reason));
  }

  private render(view: StatusBarView): void {
    this.item.text = view.text;
    this.item.tooltip = view.tooltip;
    this.item.show();
  }

  dispose(): void {
    this.item.dispose();
  }
}
