import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import path from "node:path";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { recordProbe } from "../../shared/catalog/index.js";
import { overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { buildListing } from "../helpers/factories.js";
import { startService, type TestService } from "../helpers/service.js";

// The pages for people (docs/operations.md "Pages") in real headless Chromium: Debian's `chromium`
// driven by playwright-core (which downloads nothing). Every page at a phone and a desktop width:
// renders, no console error (a CSP violation is one), no serious or critical axe-core violation, and a
// screenshot kept under test-artifacts/pages/. Search, paging and the operator sign-in are used as a
// person would. Without Chromium this file FAILS (.ci/run installs it): it is never skipped.

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const ARTIFACTS = path.resolve("test-artifacts/pages");
const WIDTHS = [
  { name: "phone", width: 390, height: 844 },
  { name: "desktop", width: 1280, height: 900 },
];
const ADMIN_KEY = "admin-key-for-the-pages-test-0123456789abcdef";
const axeSource = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");

let service: TestService;
let browser: BrowserContext;
let profile: string;
let listingId: string;
let listingName: string;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) {
    throw new Error(`no Chromium at ${CHROMIUM}: apt-get install -y chromium (or set CHROMIUM_PATH)`);
  }
  overrideConfig({ adminApiKey: ADMIN_KEY });
  service = await startService();
  const listing = await buildListing({
    endpointUrl: "http://127.0.0.1:9/invoke",
    name: `Pages test translator ${Date.now()}`,
    description: "Translates <b>text</b> & checks the page escapes it",
  });
  listingId = listing.id;
  listingName = listing.name;
  for (const [ok, latency] of [
    [true, 120],
    [true, 95],
    [false, null],
    [true, 140],
  ] as const) {
    await recordProbe(
      db(),
      {
        listing_id: listing.id,
        ok,
        http_status: ok ? 200 : null,
        latency_ms: latency,
        error: ok ? null : "refused",
      },
      3,
    );
  }
  mkdirSync(ARTIFACTS, { recursive: true });
  profile = mkdtempSync(path.join(tmpdir(), "am-chromium-"));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  await service?.stop();
});

interface Visit {
  page: Page;
  errors: string[];
}

async function open(width: (typeof WIDTHS)[number]): Promise<Visit> {
  const page = await browser.newPage();
  await page.setViewportSize({ width: width.width, height: width.height });
  const errors: string[] = [];
  page.on("console", (msg) => {
    if (msg.type() === "error") errors.push(msg.text());
  });
  page.on("pageerror", (err) => errors.push(err.message));
  return { page, errors };
}

/** axe-core, evaluated through the DevTools protocol (the page's CSP allows no script of its own). */
async function seriousViolations(page: Page): Promise<string[]> {
  await page.evaluate(axeSource);
  const result = (await page.evaluate(`axe.run(document, { resultTypes: ["violations"] })`)) as {
    violations: { id: string; impact: string | null; help: string; nodes: { target: string[] }[] }[];
  };
  return result.violations
    .filter((v) => v.impact === "serious" || v.impact === "critical")
    .map((v) => `${v.impact} ${v.id}: ${v.help} (${v.nodes.map((n) => n.target.join(" ")).join(", ")})`);
}

/** Loads a path, checks the answer and the page, saves the screenshot. */
async function check(visit: Visit, urlPath: string, shot: string, status = 200) {
  const response = await visit.page.goto(`${service.baseUrl}${urlPath}`);
  expect(response?.status(), urlPath).toBe(status);
  const headers = response!.headers();
  expect(headers["content-type"]).toMatch(/^text\/html/);
  expect(headers["content-security-policy"]).toMatch(
    /^default-src 'none'; style-src 'nonce-[A-Za-z0-9+/=]+'; img-src 'self' data:; form-action 'self'; base-uri 'none'; frame-ancestors 'none'$/,
  );
  expect(await seriousViolations(visit.page), urlPath).toEqual([]);
  await visit.page.screenshot({ path: path.join(ARTIFACTS, `${shot}.png`), fullPage: true });
  // The nonce'd stylesheet applied (a blocked style would leave the default serif, and a console error).
  const font = await visit.page.evaluate(`getComputedStyle(document.body).fontFamily`);
  expect(String(font)).toContain("system-ui");
}

for (const width of WIDTHS) {
  describe(`pages at ${width.width}px`, () => {
    it("home, catalog, listing and status render without console errors or serious a11y violations", async () => {
      const visit = await open(width);
      try {
        await check(visit, "/", `home-${width.name}`);
        expect(await visit.page.locator("h1").textContent()).toBe("Agent Market");
        expect(await visit.page.locator("pre").first().textContent()).toContain("/api/quickstart");

        await check(visit, "/catalog", `catalog-${width.name}`);
        await check(visit, `/listings/${listingId}`, `listing-${width.name}`);
        expect(await visit.page.locator("h1").textContent()).toBe(listingName);
        // Escaped, not markup: the description's <b> is text.
        expect(await visit.page.locator("main > p").first().textContent()).toContain("<b>text</b> &");
        expect(await visit.page.locator("main b").count()).toBe(0);
        expect(await visit.page.locator('svg[role="img"]').count()).toBe(2);
        expect(await visit.page.locator("svg rect").count()).toBeGreaterThanOrEqual(1);
        expect(await visit.page.locator("svg polyline").count()).toBe(1);

        expect(visit.errors).toEqual([]);
        await check(
          visit,
          "/listings/00000000-0000-4000-8000-000000000000",
          `listing-missing-${width.name}`,
          404,
        );
        expect(await visit.page.locator("h1").textContent()).toBe("No such listing");
        // Chromium logs the 404 answer itself as a failed resource: that one line, and nothing else.
        expect(visit.errors).toEqual([expect.stringMatching(/status of 404/)]);
        visit.errors.splice(0);

        await check(visit, "/status", `status-${width.name}`);
        expect(await visit.page.locator("main").textContent()).toContain("All systems operational");
        expect(await visit.page.locator("main").textContent()).toContain("settlement-confirmations");
        expect(visit.errors).toEqual([]);
      } finally {
        await visit.page.close();
      }
    });

    it("search finds a listing by its name, and lanes and paging are links", async () => {
      const visit = await open(width);
      try {
        await check(visit, "/catalog", `catalog-search-${width.name}`);
        await visit.page.fill("#q", listingName);
        await visit.page.selectOption("#lane", "registry");
        await Promise.all([
          visit.page.waitForURL(/\/catalog\?search=/),
          visit.page.click("button[type=submit]"),
        ]);
        const link = visit.page.locator(`a[href="/listings/${listingId}"]`);
        expect(await link.count()).toBe(1);
        expect(await visit.page.locator("[role=status]").textContent()).toMatch(/of 1$/);
        await visit.page.screenshot({
          path: path.join(ARTIFACTS, `catalog-results-${width.name}.png`),
          fullPage: true,
        });
        await Promise.all([visit.page.waitForURL(`**/listings/${listingId}`), link.click()]);
        expect(await visit.page.locator("h1").textContent()).toBe(listingName);
        expect(visit.errors).toEqual([]);
      } finally {
        await visit.page.close();
      }
    });

    it("the operator signs in with the admin key and sees the money console", async () => {
      const visit = await open(width);
      try {
        await browser.clearCookies();
        await check(visit, "/admin", `admin-sign-in-${width.name}`);
        await visit.page.fill("#token", "not-the-key");
        await visit.page.click("button[type=submit]");
        expect(await visit.page.locator("[role=alert]").textContent()).toContain("not the admin key");
        await visit.page.fill("#token", ADMIN_KEY);
        await Promise.all([
          visit.page.waitForURL(`${service.baseUrl}/admin`),
          visit.page.click("button[type=submit]"),
        ]);
        expect(await visit.page.locator("h1").textContent()).toBe("Money console");
        expect(await seriousViolations(visit.page)).toEqual([]);
        await visit.page.screenshot({
          path: path.join(ARTIFACTS, `admin-console-${width.name}.png`),
          fullPage: true,
        });
        const [cookie] = (await browser.cookies()).filter((c) => c.name === "am_admin");
        expect(cookie).toMatchObject({ httpOnly: true, sameSite: "Strict", path: "/admin" });
        expect(cookie!.value).not.toContain(ADMIN_KEY);
        // 401 from the sign-in form is an expected resource error; nothing else may log an error.
        expect(visit.errors.filter((e) => !/status of 401/.test(e))).toEqual([]);
      } finally {
        await visit.page.close();
      }
    });
  });
}

describe("GET / content negotiation", () => {
  it("agents (no Accept, or text/plain) still get llms.txt", async () => {
    for (const accept of [undefined, "*/*", "text/plain"]) {
      const res = await fetch(`${service.baseUrl}/`, { headers: accept ? { accept } : {} });
      expect(res.status).toBe(200);
      expect(res.headers.get("content-type")).toMatch(/^text\/plain/);
    }
    const browserAccept = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8";
    const res = await fetch(`${service.baseUrl}/`, { headers: { accept: browserAccept } });
    expect(res.headers.get("content-type")).toMatch(/^text\/html/);
  });
});
