// End-to-end tests of the web page of `agent serve`, in a real browser: the
// built `agent` binary serves a throw-away SQLite store, and Playwright
// (playwright-core) drives Debian's Chromium. Run by scripts/ui-test.sh; every
// test saves a screenshot under target/ui-screenshots/.
"use strict";

const { test, before, after } = require("node:test");
const assert = require("node:assert/strict");
const { spawn } = require("node:child_process");
const crypto = require("node:crypto");
const fs = require("node:fs");
const os = require("node:os");
const path = require("node:path");
const { chromium } = require("playwright-core");

const root = path.resolve(__dirname, "../..");
const agentBin = process.env.AGENT_BIN || path.join(root, "target/debug/agent");
const chromiumBin = process.env.CHROMIUM || "/usr/bin/chromium";
const shots = path.join(root, "target/ui-screenshots");
const token = `ui-test-${crypto.randomBytes(16).toString("hex")}`;
const WAIT = 20_000;

let dir;
let server;
let base;
let browser;

/** Starts `agent serve` on `listen` and resolves with its address. */
function startServer(listen) {
  return new Promise((resolve, reject) => {
    const child = spawn(agentBin, ["serve", "--listen", listen, "--store", `sqlite://${path.join(dir, "ui.db")}`, "--workers", "2", "--drain", "1", "--allow-adhoc"], {
      cwd: root,
      env: { ...process.env, AGENT_API_TOKENS: token },
      stdio: ["ignore", "ignore", "pipe"],
    });
    let log = "";
    const timer = setTimeout(() => reject(new Error(`agent serve did not start:\n${log}`)), WAIT);
    child.stderr.setEncoding("utf8");
    child.stderr.on("data", (chunk) => {
      log += chunk;
      fs.appendFileSync(path.join(dir, "serve.log"), chunk);
      const match = log.match(/listening on (http:\/\/[0-9.:]+)/);
      if (match && !child.address) {
        child.address = match[1];
        clearTimeout(timer);
        resolve(child);
      }
    });
    child.on("exit", (code) => {
      clearTimeout(timer);
      if (!child.address) reject(new Error(`agent serve exited with ${code}:\n${log}`));
    });
  });
}

function stopServer(child) {
  return new Promise((resolve) => {
    if (child.exitCode !== null) return resolve();
    child.once("exit", () => resolve());
    child.kill("SIGTERM");
  });
}

/** A request to the API with the token, as a script would make it. */
async function apiCall(method, route, body) {
  const response = await fetch(`${base}${route}`, {
    method,
    headers: { Authorization: `Bearer ${token}`, "Content-Type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  assert.ok(response.ok, `${method} ${route}: ${response.status} ${text}`);
  return JSON.parse(text);
}

/** A calculator session whose call waits for approval, created over the API. */
function createApprovalSession(task) {
  return apiCall("POST", "/v1/sessions", {
    task,
    model: "scripted:examples/scripts/calculator.json",
    tools: ["calculator"],
    approve_tools: ["calculator"],
    instructions: "You multiply carefully.",
  });
}

async function newPage(options = {}) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, ...options });
  const page = await context.newPage();
  page.on("pageerror", (err) => console.error(`the page threw: ${err.message}`));
  page.on("console", (message) => console.error(`console: ${message.text()}`));
  return page;
}

async function logIn(page) {
  await page.goto(`${base}/`);
  await page.getByLabel("API token").fill(token);
  await page.getByLabel("API token").press("Enter");
  await page.getByRole("heading", { name: "Sessions" }).waitFor({ timeout: WAIT });
}

async function shot(page, name) {
  await page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
}

function badgeOf(page) {
  return page.locator(".session-head .badge");
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), "agent-ui-"));
  fs.mkdirSync(shots, { recursive: true });
  fs.writeFileSync(
    path.join(dir, "sleep.json"),
    JSON.stringify([
      { type: "tool_call", tool_name: "run_command", arguments: { program: "sleep", args: ["300"] } },
      { type: "finish", answer: "slept" },
    ]),
  );
  server = await startServer("127.0.0.1:0");
  base = server.address;
  browser = await chromium.launch({
    executablePath: chromiumBin,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
});

after(async () => {
  if (browser) await browser.close();
  if (server) await stopServer(server);
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test("the page and its files are served without a token; the API is not", async () => {
  for (const file of ["/", "/ui/app.js", "/ui/app.css"]) {
    const response = await fetch(`${base}${file}`);
    if (response.status !== 200) {
      const headers = JSON.stringify([...response.headers]);
      assert.fail(`${file} answered ${response.status} ${headers}: ${await response.text()}\nserver log:\n${fs.readFileSync(path.join(dir, "serve.log"), "utf8")}`);
    }
    assert.match(response.headers.get("content-security-policy"), /default-src 'self'/);
  }
  assert.equal((await fetch(`${base}/v1/sessions`)).status, 401);
});

test("a wrong token is rejected and nothing but the form is shown", async () => {
  const page = await newPage();
  await page.goto(`${base}/`);
  await page.getByLabel("API token").fill("not-the-token-0123456789");
  await page.getByRole("button", { name: "Log in" }).click();
  await page.getByRole("alert").filter({ hasText: "does not accept that token" }).waitFor({ timeout: WAIT });
  assert.equal(await page.locator("table.sessions").count(), 0);
  assert.equal(await page.evaluate(() => sessionStorage.getItem("agent-token")), null);
  await shot(page, "wrong-token");
  await page.context().close();
});

test("a session that needs approval appears live, survives a server restart, is approved with edited arguments and finishes", async () => {
  const page = await newPage();
  await logIn(page);
  const created = await createApprovalSession("What is 12 times 7?");
  const row = page.locator(`tr[data-session="${created.session_id}"]`);
  await row.locator(".badge", { hasText: "awaiting approval" }).waitFor({ timeout: WAIT });
  await shot(page, "sessions");
  await row.getByRole("link", { name: "What is 12 times 7?" }).click();
  const card = page.locator("article.pending");
  await card.waitFor({ timeout: WAIT });
  await page.locator(".live", { hasText: "live" }).waitFor({ timeout: WAIT });
  await page.locator("dd", { hasText: "You multiply carefully." }).waitFor({ timeout: WAIT });
  await page.locator('li[data-kind="approval_requested"] .transition', { hasText: "awaiting approval" }).waitFor({ timeout: WAIT });
  const before = await page.locator("ol.timeline li[data-seq]").count();

  // A network blip: the server goes away and comes back on the same address.
  await stopServer(server);
  await page.locator(".live", { hasText: "reconnecting" }).waitFor({ timeout: WAIT });
  server = await startServer(new URL(base).host);
  await page.locator(".live", { hasText: "live" }).waitFor({ timeout: WAIT });
  assert.equal(await page.locator("ol.timeline li[data-seq]").count(), before, "the reconnect repeated events");

  await card.getByRole("button", { name: "Edit" }).click();
  const editor = page.getByLabel("Arguments (JSON)");
  const send = page.getByRole("button", { name: "Approve with these arguments" });
  await editor.fill('{"left": 12, "operation": "multiply",');
  await page.getByText("Not JSON").waitFor();
  assert.ok(await send.isDisabled());
  // Valid JSON that does not fit the tool's schema: the server's 422 names the field, inline.
  await editor.fill('{"left": 12, "operation": "multiply", "right": "eight"}');
  await page.getByText("Valid JSON").waitFor();
  await send.click();
  await card.getByRole("alert").filter({ hasText: "The server refused the arguments" }).filter({ hasText: "right" }).waitFor({ timeout: WAIT });
  assert.equal(await page.locator('li[data-kind="approval_decided"]').count(), 0, "refused arguments were recorded");
  await editor.fill('{"left": 12, "operation": "multiply", "right": 8}');
  await page.getByText("Valid JSON").waitFor();
  await send.click();

  await badgeOf(page).filter({ hasText: "finished" }).waitFor({ timeout: WAIT });
  await page.locator('li[data-kind="approval_decided"]', { hasText: "edited arguments" }).waitFor({ timeout: WAIT });
  await page.locator('li[data-kind="action_completed"]', { hasText: "96" }).waitFor({ timeout: WAIT });
  await page.locator(".result", { hasText: "12 times 7 is 84" }).waitFor({ timeout: WAIT });
  const seqs = await page.locator("ol.timeline li[data-seq]").evaluateAll((rows) => rows.map((row) => Number(row.dataset.seq)));
  assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b), "events out of order");
  assert.equal(new Set(seqs).size, seqs.length, "an event shown twice");
  const stored = await apiCall("GET", `/v1/sessions/${created.session_id}/events`);
  assert.deepEqual(seqs, stored.events.map((event) => event.seq), "the timeline is not the log");
  await shot(page, "session-finished");

  // Fork at step 1, continue the fork, approve its call as proposed, see it finish.
  const stepOne = page.locator('li[data-kind="model_responded"][data-step="1"]');
  await stepOne.getByRole("button", { name: /Fork at event/ }).click();
  await page.locator(".notice", { hasText: "is a fork of" }).waitFor({ timeout: WAIT });
  assert.notEqual(page.url(), `${base}/#/sessions/${created.session_id}`);
  await page.locator('li[data-kind="forked"]').waitFor({ timeout: WAIT });
  await page.getByRole("button", { name: "Continue from the fork" }).click();
  const forkCard = page.locator("article.pending");
  await forkCard.waitFor({ timeout: WAIT });
  await forkCard.getByRole("button", { name: "Approve" }).click();
  await badgeOf(page).filter({ hasText: "finished" }).waitFor({ timeout: WAIT });
  await page.locator('li[data-kind="action_completed"]', { hasText: "84" }).waitFor({ timeout: WAIT });
  await shot(page, "forked-and-finished");
  await page.context().close();
});

test("a deny needs a reason, and the denied call never runs", async () => {
  const page = await newPage();
  await logIn(page);
  const created = await createApprovalSession("What is 12 times 7, denied?");
  await page.goto(`${base}/#/sessions/${created.session_id}`);
  const card = page.locator("article.pending");
  await card.waitFor({ timeout: WAIT });
  await card.getByRole("button", { name: "Deny" }).click();
  await page.getByRole("button", { name: "Deny call" }).click();
  await page.getByText("Say why the call is denied").waitFor();
  await page.getByLabel("Reason (the model receives it)").fill("not today");
  await page.getByRole("button", { name: "Deny call" }).click();
  await page.locator('li[data-kind="approval_decided"]', { hasText: "reason: not today" }).waitFor({ timeout: WAIT });
  await badgeOf(page).filter({ hasText: "finished" }).waitFor({ timeout: WAIT });
  assert.equal(await page.locator('li[data-kind="action_completed"]').count(), 0, "a denied call ran");
  await shot(page, "denied");
  await page.context().close();
});

test("a long-running session is cancelled from its page", async () => {
  const page = await newPage();
  await logIn(page);
  const created = await apiCall("POST", "/v1/sessions", {
    task: "Sleep for five minutes",
    model: `scripted:${path.join(dir, "sleep.json")}`,
    tools: ["run_command"],
    allow_cmd: ["sleep"],
  });
  await page.locator(`tr[data-session="${created.session_id}"]`).getByRole("link").click();
  await page.locator('li[data-kind="action_dispatched"]', { hasText: "sleep" }).waitFor({ timeout: WAIT });
  await badgeOf(page).filter({ hasText: "running" }).waitFor({ timeout: WAIT });
  page.once("dialog", (dialog) => dialog.accept());
  await page.getByRole("button", { name: "Cancel session" }).click();
  await badgeOf(page).filter({ hasText: "cancelled" }).waitFor({ timeout: WAIT });
  await page.locator('li[data-kind="cancelled"]').waitFor({ timeout: WAIT });
  assert.equal(await page.getByRole("button", { name: "Cancel session" }).count(), 0);
  await shot(page, "cancelled");
  await page.context().close();
});

test("the list filters by status and searches task text", async () => {
  const page = await newPage();
  await logIn(page);
  await page.getByLabel("Status").selectOption("cancelled");
  await page.locator("tbody tr", { hasText: "Sleep for five minutes" }).waitFor({ timeout: WAIT });
  await page.waitForFunction(() => [...document.querySelectorAll("tbody tr .badge")].every((b) => b.dataset.status === "cancelled"));
  await page.getByLabel("Status").selectOption("");
  await page.getByLabel("Search tasks").fill("denied");
  await page.waitForFunction(() => document.querySelectorAll("tbody tr").length === 1);
  assert.match(await page.locator("tbody tr").innerText(), /denied/);
  await shot(page, "search");
  await page.context().close();
});

test("works from the keyboard on a narrow window, in dark mode", async () => {
  const page = await newPage({ viewport: { width: 420, height: 800 }, colorScheme: "dark" });
  await page.goto(`${base}/`);
  await page.keyboard.type(token);
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Sessions" }).waitFor({ timeout: WAIT });
  const first = page.locator("tbody tr a").first();
  await first.waitFor({ timeout: WAIT });
  for (let tries = 0; tries < 30; tries += 1) {
    await page.keyboard.press("Tab");
    if (await first.evaluate((link) => document.activeElement === link)) break;
  }
  assert.ok(await first.evaluate((link) => document.activeElement === link), "the first session is not reachable with Tab");
  await page.keyboard.press("Enter");
  await page.getByRole("heading", { name: "Timeline" }).waitFor({ timeout: WAIT });
  await page.locator("ol.timeline li[data-seq]").first().waitFor({ timeout: WAIT });
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert.ok(overflow <= 0, `the page is ${overflow}px wider than the window`);
  const background = await page.evaluate(() => getComputedStyle(document.body).backgroundColor);
  assert.equal(background, "rgb(15, 19, 24)", "dark mode does not follow the system");
  await shot(page, "narrow-dark");
  await page.context().close();
});
