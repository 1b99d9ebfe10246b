// What the status bar shows for the server's `dice/status` notification.

export const STATUS_NOTIFICATION = "dice/status";

/** The payload of dice/status, as sent by dice_lsp/status.py. */
export interface DiceStatus {
  model?: string | null;
  gpu?: string | null;
  busy?: boolean;
  message?: string | null;
}

export interface StatusBarView {
  text: string;
  tooltip: string;
}

/** Model names can be long checkpoint paths: keep the last path component. */
export function shortModelName(model: string): string {
  const trimmed = model.replace(/[\\/]+$/, "");
  const parts = trimmed.split(/[\\/]/);
  return parts[parts.length - 1] || trimmed;
}

export function statusBarView(status: DiceStatus): StatusBarView {
  const icon = status.busy ? "$(sync~spin)" : "$(pulse)";
  const model = status.model ? shortModelName(status.model) : "no model";
  const gpu = status.gpu ?? "no GPU";
  const lines = [
    `DICE model: ${status.model ?? "not loaded yet"}`,
    `GPU: ${status.gpu ?? "none (candidates are compiled, not timed)"}`,
  ];
  if (status.message) {
    lines.push(status.message);
  }
  return { text: `${icon} DICE ${model} · ${gpu}`, tooltip: lines.join("\n") };
}

export function stoppedView(reason: string): StatusBarView {
  return { text: "$(error) DICE stopped", tooltip: reason };
}
