import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { overrideConfig } from "../../shared/config.js";
import { createLookup } from "../../shared/net/guarded-agent.js";
import { createSafeFetch, FetchFailure, type SafeFetchOptions } from "../../shared/net/safe-fetch.js";
import { checkEndpointUrl, type ResolvedAddress } from "../../shared/net/url-policy.js";
import { type LoopbackOrigin, startLoopbackOrigin } from "../helpers/loopback-origin.js";

// Fake DNS: no test here asks a real resolver or leaves the machine. Names not listed do not resolve.
const DNS: Record<string, string[]> = {
  "evil.example": ["10.0.0.1"],
  "split.example": ["93.184.216.34", "127.0.0.1"],
  "mapped.example": ["::ffff:192.168.0.1"],
  "v6.example": ["2606:4700::1111", "fe80::1"],
  "meta.example": ["169.254.169.254"],
  "empty.example": [],
};
const asked: string[] = [];
async function fakeResolveAll(hostname: string): Promise<ResolvedAddress[]> {
  asked.push(hostname);
  const addresses = DNS[hostname];
  if (!addresses) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND" });
  return addresses.map((address) => ({ address, family: address.includes(":") ? 6 : 4 }));
}

const { safeFetch, close } = createSafeFetch({ resolveAll: fakeResolveAll });
const GET: SafeFetchOptions = { method: "GET", headers: {}, timeoutMs: 2_000, maxBytes: 4096 };
let origin: LoopbackOrigin;

beforeAll(async () => {
  origin = await startLoopbackOrigin();
});
afterAll(async () => {
  await close();
  await origin.close();
});
beforeEach(() => {
  asked.length = 0;
  overrideConfig({ outboundAllowlist: [] });
});

async function refusal(url: string, options: Partial<SafeFetchOptions> = {}): Promise<FetchFailure> {
  const error = await safeFetch(url, { ...GET, ...options }).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error, `${url} was fetched`).toBeInstanceOf(FetchFailure);
  return error as FetchFailure;
}

// [url, what the message must say]. Every one is refused by policy before any socket is opened.
const HOSTILE: [string, RegExp][] = [
  ["http://127.0.0.1/", /127\.0\.0\.1 is not a public address \(loopback range\)/],
  ["http://127.1/", /loopback range/],
  ["http://127.0.1/", /loopback range/],
  ["http://0x7f000001/", /loopback range/],
  ["http://2130706433/", /loopback range/],
  ["http://017700000001/", /loopback range/],
  ["http://0177.0.0.1/", /loopback range/],
  ["http://127.255.255.254:8080/", /loopback range/],
  ["http://[::1]/", /::1 is not a public address \(loopback range\)/],
  ["http://[0:0:0:0:0:0:0:1]/", /loopback range/],
  ["http://[::ffff:127.0.0.1]/", /loopback range/],
  ["http://[::ffff:7f00:1]/", /loopback range/],
  ["http://[::127.0.0.1]/", /reserved range/],
  ["http://localhost/", /refused: localhost/],
  ["http://LOCALHOST./", /refused: localhost/],
  ["http://foo.localhost/", /\.localhost names are local or internal/],
  ["http://0.0.0.0/", /unspecified range/],
  ["http://0/", /unspecified range/],
  ["http://10.0.0.1/", /private range/],
  ["http://10.255.255.255/", /private range/],
  ["http://172.16.0.1/", /private range/],
  ["http://172.31.255.254/", /private range/],
  ["http://192.168.1.1/", /private range/],
  ["http://169.254.169.254/latest/meta-data/", /169\.254\.169\.254 is not a public address \(linkLocal/],
  ["http://2852039166/latest/meta-data/", /169\.254\.169\.254 .*linkLocal range/],
  ["http://[::ffff:169.254.169.254]/", /linkLocal range/],
  ["http://100.64.0.1/", /carrierGradeNat range/],
  ["http://100.127.255.254/", /carrierGradeNat range/],
  ["http://198.18.0.1/", /reserved range/],
  ["http://192.0.2.1/", /reserved range/],
  ["http://224.0.0.1/", /multicast range/],
  ["http://255.255.255.255/", /broadcast range/],
  ["http://240.0.0.1/", /reserved range/],
  ["http://[fc00::1]/", /uniqueLocal range/],
  ["http://[fd12:3456::1]/", /uniqueLocal range/],
  ["http://[fe80::1]/", /linkLocal range/],
  ["http://[fec0::1]/", /deprecatedSiteLocal range/],
  ["http://[ff02::1]/", /multicast range/],
  ["http://[::]/", /unspecified range/],
  ["http://[::ffff:10.0.0.1]/", /private range/],
  ["http://[64:ff9b::a00:1]/", /rfc6052 range/],
  ["http://[2001:db8::1]/", /reserved range/],
  ["http://[2002:7f00:1::]/", /6to4 range/],
  ["http://printer.local/", /\.local names are local or internal/],
  ["http://billing.internal/", /\.internal names are local or internal/],
  ["http://router.localdomain/", /\.localdomain names/],
  ["http://nas.home.arpa/", /\.home\.arpa names/],
  ["http://intranet/", /single-label names/],
  ["http://intranet./", /single-label names/],
  ["https://evil.example/", /evil\.example resolves to 10\.0\.0\.1, which is not a public address \(private/],
  ["http://split.example/", /split\.example resolves to 127\.0\.0\.1.*loopback range/],
  ["http://mapped.example/", /resolves to ::ffff:192\.168\.0\.1.*private range/],
  ["http://v6.example/", /resolves to fe80::1.*linkLocal range/],
  ["http://meta.example/latest/meta-data/", /resolves to 169\.254\.169\.254/],
  ["http://empty.example/", /resolves to no address/],
  ["http://user:pass@example.com/", /must not carry credentials/],
  ["file:///etc/passwd", /must use http or https, not file:/],
  ["gopher://127.0.0.1:70/_x", /must use http or https, not gopher:/],
  ["ftp://example.com/", /must use http or https, not ftp:/],
];

describe("safeFetch refuses hostile URLs", () => {
  it("has a table of at least 40 hostile URLs", () => {
    expect(HOSTILE.length).toBeGreaterThanOrEqual(40);
  });

  it.each(HOSTILE)("refuses %s", async (url, message) => {
    const error = await refusal(url);
    expect(error.kind).toBe("blocked");
    expect(error.message).toMatch(message);
    expect(error.message).toMatch(/^refused /);
  });

  it("asks DNS only for names that pass the name rules, from inside the connect lookup", async () => {
    await refusal("http://intranet/");
    await refusal("http://10.0.0.1/");
    expect(asked).toEqual([]);
    await refusal("http://evil.example/");
    expect(asked).toEqual(["evil.example"]);
  });

  it("checks again at fetch time what passed at publish time (DNS rebinding)", async () => {
    let calls = 0;
    const rebinding = async (): Promise<ResolvedAddress[]> => [
      { address: calls++ === 0 ? "93.184.216.34" : "127.0.0.1", family: 4 },
    ];
    await expect(checkEndpointUrl("http://rebind.example/x", rebinding)).resolves.toBeInstanceOf(URL);
    const rebound = createSafeFetch({ resolveAll: rebinding });
    const error = await rebound.safeFetch("http://rebind.example/x", GET).catch((e: FetchFailure) => e);
    await rebound.close();
    expect(error).toMatchObject({ kind: "blocked" });
    expect((error as FetchFailure).message).toMatch(/resolves to 127\.0\.0\.1/);
  });

  it("reports a name that does not resolve as a connect failure, not a policy refusal", async () => {
    expect(await refusal("http://nowhere.example/")).toMatchObject({ kind: "connect" });
  });
});

describe("redirects to hostile targets", () => {
  beforeEach(() => {
    overrideConfig({ outboundAllowlist: ["127.0.0.1"] });
  });

  const TARGETS: [string, RegExp][] = [
    ["http://10.0.0.1/", /refused http:\/\/10\.0\.0\.1\/: .*private range/],
    ["http://169.254.169.254/latest/meta-data", /169\.254\.169\.254.*linkLocal range/],
    ["http://[::ffff:127.0.0.1]/", /loopback range/],
    ["http://localhost:1/", /refused: localhost/],
    ["http://evil.example/", /resolves to 10\.0\.0\.1/],
    ["file:///etc/passwd", /must use http or https/],
  ];

  it.each(TARGETS)("refuses a redirect from an allowlisted origin to %s", async (to, message) => {
    const from = `${origin.origin}/redirect?status=302&to=${encodeURIComponent(to)}`;
    const error = await refusal(from, { maxRedirects: 5 });
    expect(error.kind).toBe("blocked");
    expect(error.message).toMatch(message);
  });

  it("keeps a redirect a redirect failure when following is off or the chain is too long", async () => {
    const off = await refusal(`${origin.origin}/redirect?to=http://10.0.0.1/`);
    expect(off).toMatchObject({ kind: "redirect" });
    expect(off.message).toMatch(/redirects are not followed/);
    const long = await refusal(`${origin.origin}/chain/4`, { maxRedirects: 3 });
    expect(long).toMatchObject({ kind: "redirect" });
    expect(long.message).toMatch(/more than 3 redirects/);
  });
});

describe("the connect lookup", () => {
  const call = (guarded: boolean, host: string, options: object) =>
    new Promise<unknown[]>((resolve) =>
      createLookup(fakeResolveAll, guarded)(host, options, (...args) => resolve(args)),
    );

  it("passes a public answer through in both the all and the single-address form", async () => {
    const lookup = createLookup(async () => [{ address: "93.184.216.34", family: 4 }], true);
    const all = await new Promise((r) => lookup("ok.example", { all: true }, (...a) => r(a)));
    const one = await new Promise((r) => lookup("ok.example", {}, (...a) => r(a)));
    expect(all).toEqual([null, [{ address: "93.184.216.34", family: 4 }]]);
    expect(one).toEqual([null, "93.184.216.34", 4]);
  });

  it("refuses a private answer when guarded and passes it when exempt", async () => {
    const [guardedError] = await call(true, "evil.example", { all: true });
    expect((guardedError as Error).message).toMatch(/resolves to 10\.0\.0\.1/);
    expect(await call(false, "evil.example", { all: true })).toEqual([
      null,
      [{ address: "10.0.0.1", family: 4 }],
    ]);
  });

  it("refuses local names even when handed one directly", async () => {
    const [error] = await call(true, "db.internal", {});
    expect((error as Error).message).toMatch(/\.internal names/);
    expect(asked).not.toContain("db.internal");
  });
});
