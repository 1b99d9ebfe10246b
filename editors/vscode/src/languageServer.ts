// The language client's life: resolve the server command, start, restart, stop.

import * as net from "node:net";
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  ExecuteCommandRequest,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  StreamInfo,
} from "vscode-languageclient/node";
import { describeServerCommand, expandPath, resolveServerCommand, ServerCommand } from "./serverCommand";
import { RESTART_SETTINGS, serverConfigurationResults, serverSettings } from "./settings";
import { defaultTokenFile, parseTcpAddress, readToken } from "./tcpConnection";
import { DiceStatus, STATUS_NOTIFICATION } from "./status";
import { DiceStatusBar } from "./statusBar";

export const DOCUMENT_SELECTOR = [
  { scheme: "file", language: "cuda-cpp" },
  { scheme: "file", language: "python" },
  { scheme: "untitled", language: "cuda-cpp" },
];

interface PythonExtensionApi {
  environments?: { getActiveEnvironmentPath(resource?: vscode.Uri): { path: string } | undefined };
}

async function pythonExtensionInterpreter(folder?: vscode.WorkspaceFolder): Promise<string | undefined> {
  const ext = vscode.extensions.getExtension<PythonExtensionApi>("ms-python.python");
  if (ext === undefined) {
    return undefined;
  }
  try {
    const api = ext.isActive ? ext.exports : await ext.activate();
    return api?.environments?.getActiveEnvironmentPath(folder?.uri)?.path;
  } catch {
    return undefined; // a broken Python extension must not keep DICE from starting
  }
}

export class DiceLanguageServer implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly output: vscode.OutputChannel,
    private readonly statusBar: DiceStatusBar,
  ) {
    this.disposables.push(
      vscode.workspace.onDidChangeConfiguration((e) => this.onConfigurationChanged(e)),
    );
  }

  private async resolveCommand(): Promise<ServerCommand> {
    const config = vscode.workspace.getConfiguration("dice");
    const folder = vscode.workspace.workspaceFolders?.[0];
    return resolveServerCommand({
      serverPath: config.get<string>("serverPath", ""),
      interpreter: config.get<string>("interpreter", ""),
      pythonExtensionInterpreter: await pythonExtensionInterpreter(folder),
      workspaceFolder: folder?.uri.fsPath,
    });
  }

  /** How to reach the server: a process to start, or a `dice-lsp --tcp` to connect to (dice.tcp). */
  private async resolveServer(): Promise<{ options: ServerOptions; description: string; token?: string }> {
    const config = vscode.workspace.getConfiguration("dice");
    const tcp = config.get<string>("tcp", "");
    if (tcp.trim() === "") {
      const command: ServerCommand = await this.resolveCommand();
      // No `transport`: TransportKind.stdio would append "--stdio", which dice-lsp does not
      // take; an Executable without one already talks over stdin/stdout.
      return { options: { command: command.command, args: command.args }, description: describeServerCommand(command) };
    }
    const { host, port } = parseTcpAddress(tcp);
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const tokenFile = config.get<string>("tokenFile", "");
    const token = readToken(tokenFile.trim() ? expandPath(tokenFile, folder) : defaultTokenFile(port));
    const connect = (): Promise<StreamInfo> =>
      new Promise((resolve, reject) => {
        const socket = net.connect(port, host);
        socket.once("connect", () => resolve({ reader: socket, writer: socket }));
        socket.once("error", reject);
      });
    return { options: connect, description: `dice-lsp at ${host}:${port} (dice.tcp)`, token };
  }

  async start(): Promise<void> {
    let server: { options: ServerOptions; description: string; token?: string };
    try {
      server = await this.resolveServer();
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      this.output.appendLine(`DICE server not started: ${reason}`);
      this.statusBar.showStopped(reason);
      const choice = await vscode.window.showErrorMessage(reason, "Open Settings");
      if (choice === "Open Settings") {
        await vscode.commands.executeCommand("workbench.action.openSettings", "dice.");
      }
      return;
    }
    this.output.appendLine(`Starting ${server.description}`);
    const serverOptions: ServerOptions = server.options;
    const settings = serverSettings(this.diceSection()) as Record<string, unknown>;
    const clientOptions: LanguageClientOptions = {
      documentSelector: DOCUMENT_SELECTOR,
      outputChannel: this.output,
      // A TCP listener reads its token from here (and takes it out before the settings).
      initializationOptions: server.token === undefined ? settings : { ...settings, token: server.token },
      middleware: {
        workspace: {
          configuration: async (params, token, next) => {
            const results = await next(params, token);
            if (!Array.isArray(results)) {
              return results; // a ResponseError: pass it on
            }
            return serverConfigurationResults(
              params.items.map((item) => item.section),
              results,
            );
          },
        },
      },
    };
    const client = new LanguageClient("dice", "DICE", serverOptions, clientOptions);
    client.onNotification(STATUS_NOTIFICATION, (status: DiceStatus) => this.statusBar.show(status));
    this.client = client;
    this.statusBar.show({ model: null, gpu: null, busy: true, message: "starting the DICE server" });
    try {
      await client.start();
    } catch (err) {
      const reason = `the DICE server failed to start: ${err instanceof Error ? err.message : String(err)}`;
      this.statusBar.showStopped(reason);
      this.output.appendLine(reason);
    }
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client !== undefined && client.isRunning()) {
      await client.stop();
    }
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.start();
  }

  /** Run one of the server's workspace/executeCommand commands. */
  async executeServerCommand(command: string, args: unknown[]): Promise<unknown> {
    if (this.client === undefined || !this.client.isRunning()) {
      void vscode.window.showErrorMessage("The DICE server is not running (DICE: Show Output says why).");
      return undefined;
    }
    return this.client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
  }

  get protocol() {
    return this.client?.code2ProtocolConverter;
  }

  private diceSection(): Record<string, unknown> {
    const config = vscode.workspace.getConfiguration("dice");
    // WorkspaceConfiguration also carries methods (get, has, ...): keep the data only.
    return JSON.parse(JSON.stringify(config)) as Record<string, unknown>;
  }

  private async onConfigurationChanged(e: vscode.ConfigurationChangeEvent): Promise<void> {
    if (!e.affectsConfiguration("dice")) {
      return;
    }
    if (RESTART_SETTINGS.some((key) => e.affectsConfiguration(`dice.${key}`))) {
      await this.restart();
      return;
    }
    if (this.client?.isRunning()) {
      await this.client.sendNotification(DidChangeConfigurationNotification.type, {
        settings: { dice: serverSettings(this.diceSection()) },
      });
    }
  }

  dispose(): void {
    void this.stop();
    this.disposables.forEach((d) => d.dispose());
  }
}
