// Finding `dice bench` reports (OUT/report.html) to open: the page is self-contained (inline
// SVG and CSS, no script, a Content-Security-Policy of its own), so a webview shows it as is.

import * as fs from "node:fs";
import * as path from "node:path";

export const REPORT_FILE = "report.html";
const SKIP = new Set([".git", "node_modules", ".venv", "__pycache__"]);

export interface FoundReport {
  file: string;
  modified: number; // ms since the epoch
}

/** Every report.html under `roots`, at most `maxDepth` folders down, newest first. */
export function findReports(roots: string[], maxDepth = 4): FoundReport[] {
  const found: FoundReport[] = [];
  const visit = (dir: string, depth: number): void => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(dir, { withFileTypes: true });
    } catch {
      return; // unreadable: nothing to offer from it
    }
    for (const entry of entries) {
      const full = path.join(dir, entry.name);
      if (entry.isFile() && entry.name === REPORT_FILE && isBenchReport(full)) {
        found.push({ file: full, modified: fs.statSync(full).mtimeMs });
      } else if (entry.isDirectory() && depth < maxDepth && !SKIP.has(entry.name)) {
        visit(full, depth + 1);
      }
    }
  };
  roots.forEach((root) => visit(root, 0));
  return found.sort((a, b) => b.modified - a.modified);
}

/** Whether `file` is a page `dice bench` wrote (its title), not any report.html. */
export function isBenchReport(file: string): boolean {
  try {
    const head = fs.readFileSync(file, { encoding: "utf8" }).slice(0, 2048);
    return head.includes("<title>dice bench report</title>");
  } catch {
    return false;
  }
}

/** The choices to offer, newest first: the last one opened (if it still exists) leads. */
export function reportChoices(found: FoundReport[], last: string | undefined): string[] {
  const files = found.map((r) => r.file);
  if (last !== undefined && isBenchReport(last)) {
    return [last, ...files.filter((f) => f !== last)];
  }
  return files;
}
