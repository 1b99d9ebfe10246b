import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { defaultTokenFile, parseTcpAddress, readToken, TcpSettingError } from "../src/tcpConnection";

test("dice.tcp takes HOST:PORT, [IPv6]:PORT and a bare port on loopback", () => {
  assert.deepEqual(parseTcpAddress("127.0.0.1:2087"), { host: "127.0.0.1", port: 2087 });
  assert.deepEqual(parseTcpAddress(" gpu-box:7000 "), { host: "gpu-box", port: 7000 });
  assert.deepEqual(parseTcpAddress("[::1]:2087"), { host: "::1", port: 2087 });
  assert.deepEqual(parseTcpAddress("2087"), { host: "127.0.0.1", port: 2087 });
});

test("a dice.tcp that is not an address says what it expected", () => {
  for (const bad of ["host:", ":2087", "a:b:1", "0", "99999", "localhost"]) {
    assert.throws(() => parseTcpAddress(bad), (err: Error) => err instanceof TcpSettingError && /HOST:PORT/.test(err.message));
  }
});

test("the token file is where dice-lsp --tcp writes it", () => {
  const home = "/home/u";
  assert.equal(defaultTokenFile(2087, { XDG_RUNTIME_DIR: "/run/user/1000" }, home), "/run/user/1000/dice-lsp/tcp/2087.token");
  assert.equal(defaultTokenFile(2087, { XDG_CACHE_HOME: "/c" }, home), "/c/dice-lsp/tcp/2087.token");
  assert.equal(defaultTokenFile(2087, {}, home), "/home/u/.cache/dice-lsp/tcp/2087.token");
});

test("the token is read, trimmed; a missing or empty file says how to get one", () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "dice-token-"));
  const file = path.join(dir, "tcp-2087.token");
  fs.writeFileSync(file, "s3cret\n", { mode: 0o600 });
  assert.equal(readToken(file), "s3cret");
  fs.writeFileSync(file, "\n");
  assert.throws(() => readToken(file), /is empty/);
  assert.throws(() => readToken(path.join(dir, "missing.token")), /dice-lsp --tcp/);
});
