import { createHash } from "node:crypto";
import canonicalize from "canonicalize";
import { createLocalJWKSet, flattenedVerify } from "jose";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { discoveryCheck, type FetchPath } from "../../shared/discovery/index.js";
import { MCP_SERVER_JSON_SCHEMA } from "../../shared/discovery/standards/mcp-server-json.js";
import { createAjv } from "../../shared/kernel/json-schema.js";
import { buildListing } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { waitFor } from "../helpers/processes.js";
import { startService, type TestService } from "../helpers/service.js";

// The fixed discovery paths (docs/discovery.md): every one answers with its media type, validates against
// its standard, links only to URLs that resolve, and round-trips its ETag. Every JSON answer is also
// checked against the route's OpenAPI schema by the api() helper.

const DOCUMENTS: [string, string][] = [
  ["/llms.txt", "text/plain"],
  ["/llms-full.txt", "text/plain"],
  ["/llms-full.sha256", "text/plain"],
  ["/agents.txt", "text/plain"],
  ["/skill.md", "text/markdown"],
  ["/public-proof.json", "application/json"],
  ["/api/index.json", "application/json"],
  ["/api/catalog", "application/json"],
  ["/api/discovery", "application/json"],
  ["/.well-known/agent-marketplace.json", "application/json"],
  ["/.well-known/agent-card.json", "application/json"],
  ["/.well-known/x402/service.json", "application/json"],
  ["/.well-known/mcp/server.json", "application/json"],
  ["/openapi.json", "application/json"],
  ["/openapi.yaml", "application/yaml"],
];

let service: TestService;
let base: string;

beforeAll(async () => {
  // One-second snapshots, so a published listing shows within a test.
  overrideConfig({ discoveryCacheSeconds: 1 });
  service = await startService();
  base = getConfig().publicBaseUrl;
});
afterAll(async () => service.stop());

async function everyPathAnswers(): Promise<void> {
  for (const [path, type] of DOCUMENTS) {
    const res = await api("GET", path);
    expect(res.status, path).toBe(200);
    expect(res.headers.get("content-type"), path).toContain(type);
  }
}

describe("the discovery paths", () => {
  it("all answer 200 with their media type", everyPathAnswers);

  it("still do after a listing is published, and the machine catalog lists it", async () => {
    const listing = await buildListing({ endpointUrl: "http://127.0.0.1:9/never-called", price: 0.02 });
    await everyPathAnswers();
    const entry = await waitFor("the listing in /api/catalog", async () => {
      for (let offset = 0; ; offset += 500) {
        const page = await api("GET", `/api/catalog?limit=500&offset=${offset}`);
        const found = page.body.listings.find((l: { id: string }) => l.id === listing.id);
        if (found || !page.body.has_more) return found;
      }
    });
    expect(entry.pricing.price_usdc).toBe("0.020000");
    expect(entry.input_schema).toEqual(listing.input_schema);
    expect(entry.invoke.keyed.url).toBe(`${base}/api/invoke/${listing.id}`);
    expect(entry.invoke.x402.url).toBe(`${base}/api/x402/invoke/${listing.id}`);
  });

  it("serve the MCP server.json for our /mcp, valid for the registry's schema", async () => {
    const res = await api("GET", "/.well-known/mcp/server.json");
    expect(res.status).toBe(200);
    expect(res.body.remotes[0]).toMatchObject({ type: "streamable-http", url: `${base}/mcp` });
    const validate = createAjv().compile(MCP_SERVER_JSON_SCHEMA);
    expect(validate(res.body), JSON.stringify(validate.errors)).toBe(true);
    const descriptor = await api("GET", "/.well-known/agent-marketplace.json");
    expect(descriptor.body.entry_points.mcp).toBe(`${base}/mcp`);
  });

  it("answer HEAD with the headers and no body, and 304 to a matching If-None-Match", async () => {
    const first = await api("GET", "/llms.txt");
    const etag = first.headers.get("etag");
    expect(etag).toMatch(/^"[0-9a-f]{32}"$/);
    expect(first.headers.get("cache-control")).toBe("public, max-age=1");
    const head = await fetch(`${base}/llms.txt`, { method: "HEAD" });
    expect(head.status).toBe(200);
    expect(head.headers.get("content-type")).toContain("text/plain");
    expect(await head.text()).toBe("");
    const again = await api("GET", "/llms.txt", { headers: { "if-none-match": etag! } });
    if (again.headers.get("etag") === etag) {
      expect(again.status).toBe(304);
      expect(again.text).toBe("");
    } else {
      // The one-second snapshot rolled over between the two reads: a new ETag, a full answer.
      expect(again.status).toBe(200);
    }
    expect((await api("GET", "/llms.txt", { headers: { "if-none-match": '"other"' } })).status).toBe(200);
  });
});

describe("each document against its standard", () => {
  it("llms.txt: H1, blockquote, H2 link sections ending with Optional, links of ours", async () => {
    const { text } = await api("GET", "/llms.txt");
    const lines = text.split("\n");
    expect(lines[0]).toBe("# Agent Market");
    expect(lines[2]).toMatch(/^> \S/);
    const sections = lines.filter((l) => l.startsWith("## ")).map((l) => l.slice(3));
    expect(sections.at(-1)).toBe("Optional");
    for (const line of lines.slice(3).filter((l) => l.startsWith("- "))) {
      expect(line).toMatch(new RegExp(`^- \\[[^\\]]+\\]\\(${base.replace(/[.]/g, "\\.")}/[^)]*\\): .+$`));
    }
  });

  it("llms-full.sha256 is the sha256sum line of the llms-full.txt body", async () => {
    const full = await api("GET", "/llms-full.txt");
    const line = await api("GET", "/llms-full.sha256");
    const digest = createHash("sha256").update(full.text, "utf8").digest("hex");
    if (line.text !== `${digest}  llms-full.txt\n`) {
      // The snapshot rolled over between the reads; read both again.
      const [again, sum] = [await api("GET", "/llms-full.txt"), await api("GET", "/llms-full.sha256")];
      expect(sum.text).toBe(
        `${createHash("sha256").update(again.text, "utf8").digest("hex")}  llms-full.txt\n`,
      );
    }
    expect(full.text).toContain(`### POST /api/execute`);
    expect(full.text).toContain("SCHEMA_VALIDATION_FAILED: HTTP 400");
    expect(full.text).not.toContain("/api/admin/");
  });

  it("skill.md: YAML front matter with name and description, then curl examples on our URLs", async () => {
    const { text } = await api("GET", "/skill.md");
    const front = /^---\nname: ([a-z0-9-]+)\ndescription: (.+)\n---\n/.exec(text);
    expect(front?.[1]).toBe("agent-market");
    expect(front?.[2]?.length ?? 0).toBeLessThanOrEqual(1024);
    const curls = text.match(/^curl .+$/gm) ?? [];
    expect(curls.length).toBeGreaterThanOrEqual(5);
    for (const curl of curls) expect(curl).toContain(base);
  });

  it("the A2A card is signed by a key of our JWKS, over the JCS form of the card without signatures", async () => {
    const card = (await api("GET", "/.well-known/agent-card.json")).body;
    expect(card.supportedInterfaces[0]).toEqual({
      url: base,
      protocolBinding: "HTTP+JSON",
      protocolVersion: "1.0",
    });
    expect(card.securitySchemes.apiKey.httpAuthSecurityScheme.scheme).toBe("Bearer");
    expect(card.skills.map((s: { id: string }) => s.id)).toEqual(
      expect.arrayContaining(["execute", "tool-echo"]),
    );
    const jwks = createLocalJWKSet((await api("GET", "/.well-known/jwks.json")).body);
    const { signatures, ...unsigned } = card;
    expect(signatures).toHaveLength(1);
    const payload = Buffer.from(canonicalize(unsigned)!, "utf8").toString("base64url");
    const verified = await flattenedVerify({ ...signatures[0], payload }, jwks, { algorithms: ["EdDSA"] });
    expect(verified.protectedHeader).toMatchObject({
      alg: "EdDSA",
      typ: "JOSE",
      jku: `${base}/.well-known/jwks.json`,
    });
    // One changed byte in the card breaks the signature.
    const tampered = Buffer.from(canonicalize({ ...unsigned, name: "Other" })!, "utf8").toString("base64url");
    await expect(
      flattenedVerify({ ...signatures[0], payload: tampered }, jwks, { algorithms: ["EdDSA"] }),
    ).rejects.toThrow();
  });

  it("public-proof.json has figures from live rows, each with when it was computed, and reasons for nulls", async () => {
    const proof = (await api("GET", "/public-proof.json")).body;
    for (const figure of [
      proof.invocations,
      proof.payouts,
      proof.listings,
      proof.hosted_tool_uptime,
      proof.signing_keys,
    ]) {
      expect(new Date(figure.computed_at).toISOString()).toBe(figure.computed_at);
    }
    expect(proof.listings.active).toBeGreaterThan(0);
    expect(proof.signing_keys.kids.length).toBeGreaterThan(0);
    if (proof.hosted_tool_uptime.uptime === null)
      expect(proof.hosted_tool_uptime.uptime_null_reason).toMatch(/^no_/);
    for (const r of proof.invocations.routes) {
      if (r.success_rate === null) expect(r.success_rate_null_reason).toBe("no_finished_invocations");
      else expect(r.success_rate).toBeCloseTo(r.succeeded / (r.succeeded + r.failed));
    }
  });

  it("the OpenAPI document carries x-service-info, x-discovery and x-payment-info in both dialects with a 402", async () => {
    const doc = (await api("GET", "/openapi.json")).body;
    expect(doc["x-service-info"].docs.llms).toBe(`${base}/llms.txt`);
    expect(doc["x-discovery"].llmsTxtUrl).toBe(`${base}/llms.txt`);
    const paid = Object.values(
      doc.paths as Record<string, Record<string, { "x-payment-info"?: unknown; responses: object }>>,
    )
      .flatMap((ops) => Object.values(ops))
      .filter((op) => op["x-payment-info"]);
    expect(paid.length).toBeGreaterThan(0);
    for (const op of paid) {
      expect(op["x-payment-info"]).toMatchObject({
        protocols: expect.arrayContaining(["x402"]),
        pricingMode: expect.any(String),
      });
      expect((op["x-payment-info"] as { offers: unknown[] }).offers.length).toBeGreaterThan(0);
      expect(op.responses).toHaveProperty("402");
    }
  });
});

describe("links and the self-check", () => {
  it("every URL of ours in every document resolves (a crawler follows them all)", async () => {
    const seen = new Set<string>();
    const pattern = new RegExp(`${base.replace(/[.]/g, "\\.")}(/[^\\s"'<>)\\]\`]*)?`, "g");
    for (const [path] of DOCUMENTS) {
      const { text } = await api("GET", path);
      for (const url of text.match(pattern) ?? []) {
        const clean = url.replace(/[.,;:]+$/, "");
        if (!/[{}<>]/.test(clean)) seen.add(clean);
      }
    }
    expect(seen.size).toBeGreaterThan(20);
    for (const url of seen) {
      const res = await fetch(url, { redirect: "manual" });
      expect(res.status, url).not.toBe(404);
      expect(res.status, url).toBeLessThan(500);
    }
  });

  it("/api/discovery/check passes every document and link", async () => {
    const report = (await api("GET", "/api/discovery/check")).body;
    const failed = [
      ...report.documents.filter((d: { ok: boolean }) => !d.ok),
      ...report.links.filter((l: { ok: boolean }) => !l.ok),
    ];
    expect(failed, JSON.stringify(failed)).toEqual([]);
    expect(report.ok).toBe(true);
    expect(report.documents.map((d: { name: string }) => d.name)).toEqual(
      expect.arrayContaining(["index.json", "llms.txt", "agent-card.json", "public-proof.json", "skill.md"]),
    );
  });

  it("reports a deliberately broken document as failed, with the reason", async () => {
    const sources = { baseUrl: base, routes: [], mcp: true };
    const honest: FetchPath = async (path) => {
      const res = await fetch(`${base}${path}`);
      return { status: res.status, contentType: res.headers.get("content-type"), body: await res.text() };
    };
    const breaking: FetchPath = async (path) => {
      const got = await honest(path);
      if (path === "/skill.md")
        return { ...got, body: got.body.replace(/^---\nname: agent-market/, "---\nname: Agent Market") };
      if (path === "/.well-known/agent-card.json")
        return { ...got, body: got.body.replace('"skills"', '"skillz"') };
      return got;
    };
    const report = await discoveryCheck(sources, breaking);
    expect(report.ok).toBe(false);
    const byName = new Map(report.documents.map((d) => [d.name, d]));
    const skill = byName.get("skill.md")!;
    expect(skill.ok).toBe(false);
    expect(skill.checks.find((c) => c.name === "valid")?.reason).toMatch(/name must be/);
    expect(skill.checks.find((c) => c.name === "sha256 as indexed")?.ok).toBe(false);
    const card = byName.get("agent-card.json")!;
    expect(card.checks.find((c) => c.name === "valid")?.reason).toMatch(/skills/);
    expect(byName.get("llms.txt")!.ok).toBe(true);
  });
});
