// Connecting to a `dice-lsp --tcp` listener instead of starting a server: where it is, and
// the token it wants. Every listener has a token; `dice-lsp --tcp` writes it to a file only
// its user can read, in the folder below, and the client sends it as
// initializationOptions.token. Kept free of `vscode` imports so that it is unit-tested with
// plain node.

import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

export interface TcpAddress {
  host: string;
  port: number;
}

export class TcpSettingError extends Error {}

/** "HOST:PORT", "[IPv6]:PORT" or "PORT" (on 127.0.0.1). */
export function parseTcpAddress(text: string): TcpAddress {
  const trimmed = text.trim();
  const match = /^(?:(?:\[([^\]]+)\]|([^:\s[\]]+)):)?(\d{1,5})$/.exec(trimmed);
  const port = match ? Number(match[3]) : NaN;
  if (!match || port < 1 || port > 65535) {
    throw new TcpSettingError(`dice.tcp: expected HOST:PORT (e.g. 127.0.0.1:2087), got ${JSON.stringify(text)}`);
  }
  return { host: match[1] ?? match[2] ?? "127.0.0.1", port };
}

/** Where `dice-lsp --tcp --port PORT` writes its token unless told otherwise (--token-file). */
export function defaultTokenFile(
  port: number,
  env: NodeJS.ProcessEnv = process.env,
  home: string = os.homedir(),
): string {
  const base = env.XDG_RUNTIME_DIR || env.XDG_CACHE_HOME || path.join(home, ".cache");
  return path.join(base, "dice-lsp", "tcp", `${port}.token`);
}

/** The token in `file`; an error that says where it was looked for and how it gets there. */
export function readToken(file: string): string {
  let token: string;
  try {
    token = fs.readFileSync(file, "utf8").trim();
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    throw new TcpSettingError(
      `cannot read the dice-lsp token from ${file} (${reason}): start \`dice-lsp --tcp\` first, ` +
        "or point dice.tokenFile at its --token-file",
    );
  }
  if (token === "") {
    throw new TcpSettingError(`the dice-lsp token file ${file} is empty`);
  }
  return token;
}
