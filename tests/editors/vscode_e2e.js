// Drives real VS Code (code-server) in headless Chromium with the DICE extension installed:
// open a CUDA file with a compile error, wait for the server's status and diagnostics, run
// "DICE: Profile Kernel" from the command palette, fill a selection, take screenshots.
//
// Run by test_vscode_e2e.py. Input (env): DICE_E2E_URL (code-server with the workspace
// folder), DICE_E2E_PLAYWRIGHT (path of the playwright-core package), DICE_E2E_CHROMIUM,
// DICE_E2E_OUT (folder for result.json and screenshots).
"use strict";

const fs = require("node:fs");
const path = require("node:path");
const { chromium } = require(process.env.DICE_E2E_PLAYWRIGHT);

const OUT = process.env.DICE_E2E_OUT;
const result = { steps: [] };

function step(name, data = {}) {
  result.steps.push({ name, at: new Date().toISOString(), ...data });
  fs.writeFileSync(path.join(OUT, "result.json"), JSON.stringify(result, null, 2));
}

async function runCommand(page, title) {
  await page.keyboard.press("F1");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 30000 });
  await input.fill(">" + title);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: title }).first().waitFor({ timeout: 30000 });
  await page.keyboard.press("Enter");
}

async function openFile(page, name) {
  await page.keyboard.press("Control+P");
  const input = page.locator(".quick-input-widget input");
  await input.waitFor({ state: "visible", timeout: 30000 });
  await input.fill(name);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: name }).first().waitFor({ timeout: 30000 });
  await page.keyboard.press("Enter");
  await page.locator(".tab.active", { hasText: name }).waitFor({ timeout: 30000 });
}

async function goToLine(page, line) {
  await page.keyboard.press("Control+G");
  await page.keyboard.type(String(line));
  await page.keyboard.press("Enter");
}

// The quick-fix menu (Control+.) with the action titled `title`, after `select()`. The menu
// can open before VS Code has the server's actions (it then shows none); ask again, as a user
// would, selecting again first (Escape may also have dropped the selection).
async function codeAction(page, title, select) {
  const action = page.locator(".action-widget .monaco-list-row", { hasText: title });
  for (let attempt = 1; ; attempt++) {
    await select();
    await page.keyboard.press("Control+.");
    try {
      await action.first().waitFor({ timeout: 15000 });
      return action;
    } catch (error) {
      if (attempt === 3) throw error;
      await page.keyboard.press("Escape");
    }
  }
}

/** The visible lines of the editor (Monaco renders spaces as no-break spaces). */
async function editorText(page) {
  const text = await page.locator(".editor-instance .view-lines").first().innerText();
  return text.replace(/\u00a0/g, " ");
}

async function main() {
  const browser = await chromium.launch({
    executablePath: process.env.DICE_E2E_CHROMIUM,
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
      "--disable-component-update", "--disable-sync",
    ],
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 860 } });
  try {
    await page.goto(process.env.DICE_E2E_URL);
    await page.locator(".monaco-workbench").waitFor({ timeout: 120000 });
    step("workbench loaded");

    await openFile(page, "bad.cu");
    const status = page.locator(".statusbar-item", { hasText: "DICE" });
    await status.filter({ hasText: "GPU" }).first().waitFor({ timeout: 120000 });
    step("status bar", { text: await status.first().innerText() });

    await page.keyboard.press("Control+Shift+M"); // the Problems panel
    const problem = page.locator(".markers-panel .monaco-list-row", { hasText: "undefined_name" });
    await problem.first().waitFor({ timeout: 120000 });
    step("diagnostic", { text: await problem.first().innerText() });

    await openFile(page, "saxpy.cu");
    const lens = page.locator(".contentWidgets .codelens-decoration, .codelens-decoration").first();
    await lens.waitFor({ timeout: 60000 });
    step("code lens", { text: await lens.innerText() });

    await goToLine(page, 10);
    await runCommand(page, "DICE: Profile Kernel");
    const verdict = page.locator(".notification-toast", { hasText: "DICE: saxpy:" });
    await verdict.first().waitFor({ timeout: 180000 });
    step("profile", { text: await verdict.first().innerText() });
    await page.screenshot({ path: path.join(OUT, "vscode-profile.png") });

    {
      // The light bulb's "Fill selection with DICE": the job runs in codeAction/resolve and
      // each candidate's verdict comes back as a diagnostic on the selection.
      const action = await codeAction(page, "Fill selection with DICE", async () => {
        await goToLine(page, 12);
        await page.keyboard.press("End");
        await page.keyboard.press("Shift+Home"); // the body of the `if`: y[i] = a * x[i] + y[i];
      });
      step("code actions", { titles: await page.locator(".action-widget .monaco-list-row").allInnerTexts() });
      await action.first().click();
      const verdicts = page.locator(".markers-panel .monaco-list-row", { hasText: "DICE candidate 1" });
      await verdicts.first().waitFor({ timeout: 300000 });
      step("code action fill", { text: await verdicts.first().innerText() });
    }

    {
      const before = await editorText(page);
      await goToLine(page, 12);
      await page.keyboard.press("End");
      await page.keyboard.press("Shift+Home");
      await runCommand(page, "DICE: Fill Selection");
      // Without a GPU no candidate is applied: the extension offers them in a quick pick.
      // With a GPU the best candidate may be applied at once, and announced.
      const pick = page.locator(".quick-input-list .monaco-list-row", { hasText: "candidate 1" });
      const applied = page.locator(".notification-toast", { hasText: "DICE: applied candidate" });
      await pick.or(applied).first().waitFor({ timeout: 300000 });
      if (await pick.count()) {
        step("candidates offered", { titles: await page.locator(".quick-input-list .monaco-list-row").allInnerTexts() });
        await page.screenshot({ path: path.join(OUT, "vscode-candidates.png") });
        await pick.first().click();
      } else {
        step("applied at once", { text: await applied.first().innerText() });
      }
      await page.waitForFunction(
        (old) => document.querySelector(".editor-instance .view-lines").innerText.replace(/\u00a0/g, " ") !== old,
        before,
        { timeout: 60000 },
      );
      step("filled", { before, after: await editorText(page) });
      await page.screenshot({ path: path.join(OUT, "vscode-fill.png") });
    }
    step("done");
  } catch (err) {
    await page.screenshot({ path: path.join(OUT, "failure.png") }).catch(() => undefined);
    result.error = String(err && err.stack ? err.stack : err);
    step("failed");
    process.exitCode = 1;
  } finally {
    await browser.close();
  }
}

main();
