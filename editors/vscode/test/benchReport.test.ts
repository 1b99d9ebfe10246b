import assert from "node:assert/strict";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import { findReports, isBenchReport, reportChoices } from "../src/benchReport";

const PAGE = "<!DOCTYPE html><html><head><title>dice bench report</title></head><body></body></html>";

function tree(): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), "dice-reports-"));
  for (const [rel, text] of [
    ["runs/a/report.html", PAGE],
    ["runs/b/report.html", PAGE],
    ["other/report.html", "<html><title>something else</title></html>"],
    ["node_modules/x/report.html", PAGE],
    ["deep/1/2/3/4/5/report.html", PAGE],
  ]) {
    fs.mkdirSync(path.dirname(path.join(root, rel)), { recursive: true });
    fs.writeFileSync(path.join(root, rel), text);
  }
  fs.utimesSync(path.join(root, "runs/a/report.html"), new Date(1000), new Date(1000));
  return root;
}

test("bench reports are found newest first, other report.html files and node_modules skipped", () => {
  const root = tree();
  const found = findReports([root]).map((r) => path.relative(root, r.file));
  assert.deepEqual(found, [path.join("runs", "b", "report.html"), path.join("runs", "a", "report.html")]);
  assert.equal(isBenchReport(path.join(root, "other/report.html")), false);
});

test("the last report opened leads the choices while it exists", () => {
  const root = tree();
  const found = findReports([root]);
  const last = path.join(root, "runs/a/report.html");
  assert.deepEqual(reportChoices(found, last), [last, path.join(root, "runs/b/report.html")]);
  fs.rmSync(last);
  assert.deepEqual(reportChoices(findReports([root]), last), [path.join(root, "runs/b/report.html")]);
});
