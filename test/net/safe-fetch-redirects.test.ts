import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { overrideConfig } from "../../shared/config.js";
import {
  createSafeFetch,
  type FetchFailure,
  isFirstPartyUrl,
  type SafeFetchOptions,
} from "../../shared/net/safe-fetch.js";
import type { ResolvedAddress } from "../../shared/net/url-policy.js";
import { type LoopbackOrigin, startLoopbackOrigin } from "../helpers/loopback-origin.js";

// The only name this file resolves stands in for a public host; it maps to loopback, so it is used
// only while allowlisted. Nothing here asks real DNS or leaves the machine.
async function fakeResolveAll(hostname: string): Promise<ResolvedAddress[]> {
  if (hostname === "fake-public.example") return [{ address: "127.0.0.1", family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
}

const { safeFetch, close } = createSafeFetch({ resolveAll: fakeResolveAll });
const GET: SafeFetchOptions = { method: "GET", headers: {}, timeoutMs: 2_000, maxBytes: 4096 };
const POST: SafeFetchOptions = {
  ...GET,
  method: "POST",
  headers: { "content-type": "text/plain" },
  body: "hi",
};
let a: LoopbackOrigin;
let b: LoopbackOrigin;

beforeAll(async () => {
  [a, b] = await Promise.all([startLoopbackOrigin(), startLoopbackOrigin()]);
});
afterAll(async () => {
  await close();
  await Promise.all([a.close(), b.close()]);
});
beforeEach(() => {
  overrideConfig({ outboundAllowlist: ["127.0.0.1"], firstPartyBaseUrl: "http://127.0.0.1:1" });
});

const text = (r: { body: Buffer }) => r.body.toString("utf8");
const failure = (url: string, options: Partial<SafeFetchOptions> = {}) =>
  safeFetch(url, { ...GET, ...options }).then(
    () => expect.fail(`${url} was fetched`),
    (e: FetchFailure) => e,
  );

describe("allowed calls", () => {
  it("calls an allowlisted loopback server", async () => {
    const response = await safeFetch(`${a.origin}/echo`, POST);
    expect(response.status).toBe(200);
    expect(JSON.parse(text(response))).toMatchObject({ method: "POST", body: "hi" });
    expect(response.latencyMs).toBeGreaterThanOrEqual(0);
  });

  it("refuses the same server once the allowlist is empty", async () => {
    overrideConfig({ outboundAllowlist: [] });
    expect(await failure(`${a.origin}/echo`)).toMatchObject({ kind: "blocked" });
  });

  it("calls an allowlisted name through the injected resolver", async () => {
    overrideConfig({ outboundAllowlist: ["fake-public.example"] });
    const response = await safeFetch(`http://fake-public.example:${a.port}/echo`, GET);
    expect(JSON.parse(text(response))).toMatchObject({ method: "GET" });
  });

  it("calls the trusted first-party origin with an empty allowlist, and only that origin", async () => {
    overrideConfig({ outboundAllowlist: [], firstPartyBaseUrl: a.origin });
    expect(isFirstPartyUrl(`${a.origin}/echo`)).toBe(true);
    expect(isFirstPartyUrl(`${b.origin}/echo`)).toBe(false);
    expect((await safeFetch(`${a.origin}/echo`, { ...GET, trusted: true })).status).toBe(200);
    expect(await failure(`${a.origin}/echo`)).toMatchObject({ kind: "blocked" });
    expect(await failure(`${b.origin}/echo`, { trusted: true })).toMatchObject({ kind: "blocked" });
    const away = `${a.origin}/redirect?status=302&to=${encodeURIComponent(`${b.origin}/echo`)}`;
    const error = await failure(away, { trusted: true, maxRedirects: 1 });
    expect(error.kind).toBe("blocked");
    expect(error.message).toContain(`refused ${b.origin}/echo`);
  });
});

describe("redirects", () => {
  it("follows a chain up to maxRedirects, capped at 5", async () => {
    expect(text(await safeFetch(`${a.origin}/chain/3`, { ...GET, maxRedirects: 3 }))).toBe("end");
    expect(text(await safeFetch(`${a.origin}/chain/5`, { ...GET, maxRedirects: 99 }))).toBe("end");
    const tooLong = await failure(`${a.origin}/chain/6`, { maxRedirects: 99 });
    expect(tooLong).toMatchObject({ kind: "redirect" });
    expect(tooLong.message).toMatch(/more than 5 redirects/);
  });

  it("refuses every redirect by default", async () => {
    const error = await failure(`${a.origin}/chain/1`);
    expect(error).toMatchObject({ kind: "redirect" });
    expect(error.message).toMatch(/HTTP 302.*redirects are not followed/);
  });

  it.each([307, 308])("keeps method and body on %i", async (status) => {
    const response = await safeFetch(`${a.origin}/redirect?status=${status}&to=/echo`, {
      ...POST,
      maxRedirects: 1,
    });
    expect(JSON.parse(text(response))).toMatchObject({ method: "POST", body: "hi" });
  });

  it.each([301, 302, 303])("switches to GET without a body on %i", async (status) => {
    const response = await safeFetch(`${a.origin}/redirect?status=${status}&to=/echo`, {
      ...POST,
      maxRedirects: 1,
    });
    expect(JSON.parse(text(response))).toMatchObject({ method: "GET", body: "" });
    expect(a.seen.at(-1)?.headers["content-type"]).toBeUndefined();
  });

  it("sends authorization only to the origin it was meant for", async () => {
    const headers = { authorization: "Bearer secret" };
    const same = await safeFetch(`${a.origin}/redirect?to=/echo`, { ...GET, headers, maxRedirects: 1 });
    expect(JSON.parse(text(same))).toMatchObject({ authorization: "Bearer secret" });
    const to = encodeURIComponent(`${b.origin}/echo`);
    const other = await safeFetch(`${a.origin}/redirect?to=${to}`, { ...GET, headers, maxRedirects: 1 });
    expect(JSON.parse(text(other))).toMatchObject({ authorization: null });
  });

  it("fails a 3xx without a Location as a redirect", async () => {
    const error = await failure(`${a.origin}/redirect?status=302`, { maxRedirects: 1 });
    expect(error).toMatchObject({ kind: "redirect" });
    expect(error.message).toMatch(/without a usable Location/);
  });
});

describe("time and size", () => {
  it("spends one time budget across all hops", async () => {
    // Each hop alone is well inside the budget; together they are not.
    const started = Date.now();
    const error = await failure(`${a.origin}/chain/4?delay=150`, { timeoutMs: 400, maxRedirects: 5 });
    expect(error).toMatchObject({ kind: "timeout" });
    expect(Date.now() - started).toBeLessThan(1_000);
  });

  it.each(["", "&chunked=1"])("caps the final body size (%s)", async (chunked) => {
    expect((await safeFetch(`${a.origin}/big?bytes=4096${chunked}`, GET)).body.length).toBe(4096);
    const error = await failure(`${a.origin}/big?bytes=4097${chunked}`);
    expect(error).toMatchObject({ kind: "too_large" });
    expect(error.message).toMatch(/over 4096 bytes/);
  });

  it("ends a body that stops arriving at the deadline, as a timeout", async () => {
    const started = Date.now();
    const error = await failure(`${a.origin}/stall`, { timeoutMs: 300 });
    expect(error).toMatchObject({ kind: "timeout" });
    expect(Date.now() - started).toBeLessThan(1_500);
  });

  it("does not count redirect bodies against the size cap", async () => {
    // Each /chain hop answers 10 000 bytes of redirect body; the cap is 4 096.
    expect(text(await safeFetch(`${a.origin}/chain/2`, { ...GET, maxRedirects: 2 }))).toBe("end");
  });
});
