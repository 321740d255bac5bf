import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { closeDb } from "../../shared/db/knex.js";
import { closeSafeFetch } from "../../shared/net/safe-fetch.js";
import { publishedJwks } from "../../shared/routing/index.js";
import { runProbe } from "../../shared/verification/probes/index.js";
import type { ProbeCheck } from "../../shared/verification/store/orders.js";
import { checkPlatformSignature } from "../helpers/seller-verify.js";
import {
  startJsonTarget,
  startMcpTarget,
  startX402Target,
  type TargetServer,
  X402_PAY_TO,
} from "../helpers/verification-targets.js";

// Each probe against a real local server of its protocol (test/helpers/verification-targets.ts).

const servers: TargetServer[] = [];
const track = <T extends TargetServer>(s: T): T => {
  servers.push(s);
  return s;
};

afterAll(async () => {
  for (const s of servers) await s.close();
  await closeSafeFetch();
  await closeDb();
});

const check = (checks: ProbeCheck[], name: string) => checks.find((c) => c.name === name);
const target = (url: string, outputSchema: Record<string, unknown> | null = null) => ({
  orderId: randomUUID(),
  url,
  outputSchema: outputSchema ? { listingId: randomUUID(), schema: outputSchema } : null,
});

describe("http-json", () => {
  it("verified: a signed POST answered 2xx JSON; the signature checks against our JWKS; no credentials", async () => {
    const server = track(await startJsonTarget(200, { ok: true }));
    const t = target(server.url);
    const result = await runProbe("http-json", t);
    expect(result.verdict).toBe("verified");
    expect(check(result.checks, "status_2xx")?.passed).toBe(true);
    expect(check(result.checks, "json_body")?.passed).toBe(true);
    expect(check(result.checks, "tls")).toMatchObject({ passed: false, observation: { scheme: "http" } });
    const [call] = server.received;
    expect(call!.method).toBe("POST");
    const jwks = await publishedJwks();
    expect(checkPlatformSignature(call!.headers as never, Buffer.from(call!.body), jwks as never)).toBeNull();
    expect(call!.headers.authorization).toBeUndefined();
    expect(call!.headers.cookie).toBeUndefined();
    expect(JSON.parse(call!.body)).toMatchObject({ verification_order_id: t.orderId });
  });

  it("verified only when the answer matches the listing's output_schema; otherwise reachable", async () => {
    const server = track(await startJsonTarget(200, { success: true, output: { total: 3 } }));
    const schema = { type: "object", required: ["total"], properties: { total: { type: "number" } } };
    expect((await runProbe("http-json", target(server.url, schema))).verdict).toBe("verified");
    const strict = { type: "object", required: ["missing"] };
    const result = await runProbe("http-json", target(server.url, strict));
    expect(result.verdict).toBe("reachable");
    expect(check(result.checks, "output_schema")?.passed).toBe(false);
  });

  it("reachable: a non-2xx answer, or 2xx that is not JSON", async () => {
    const failing = track(await startJsonTarget(500, { error: "boom" }));
    expect((await runProbe("http-json", target(failing.url))).verdict).toBe("reachable");
    const html = track(await startJsonTarget(200, "<html>hi</html>", "text/html"));
    const result = await runProbe("http-json", target(html.url));
    expect(result.verdict).toBe("reachable");
    expect(check(result.checks, "json_body")?.passed).toBe(false);
  });

  it("failed: nothing listens there", async () => {
    const server = track(await startJsonTarget(200, {}));
    const url = server.url;
    await server.close();
    servers.splice(servers.indexOf(server), 1);
    const result = await runProbe("http-json", target(url));
    expect(result.verdict).toBe("failed");
    expect(check(result.checks, "reachable")).toMatchObject({
      passed: false,
      observation: { failure: "connect" },
    });
  });

  it("failed without any request: safe fetch refuses a host outside the rules", async () => {
    const result = await runProbe("http-json", target("http://169.254.169.254/latest/meta-data"));
    expect(result.verdict).toBe("failed");
    expect(check(result.checks, "reachable")?.observation.failure).toBe("blocked");
  });
});

describe("x402", () => {
  it("reachable: the official resource server's 402 challenge parses; nothing is ever paid", async () => {
    const server = track(await startX402Target());
    const result = await runProbe("x402", target(server.url));
    expect(result.verdict).toBe("reachable");
    expect(check(result.checks, "challenge_parsed")).toMatchObject({
      passed: true,
      observation: {
        x402_version: 2,
        header: "PAYMENT-REQUIRED",
        accepts: [{ scheme: "exact", network: "eip155:8453", amount: "10000", pay_to: X402_PAY_TO }],
      },
    });
    expect(server.facilitatorCalls()).toBe(0);
    for (const r of server.received) {
      expect(r.headers["payment-signature"]).toBeUndefined();
      expect(r.headers["x-payment"]).toBeUndefined();
      expect(r.headers.authorization).toBeUndefined();
    }
  });

  it("failed: a 200 is not a challenge, and neither is a 402 without a well-formed one", async () => {
    const ok = track(await startJsonTarget(200, { free: true }));
    expect((await runProbe("x402", target(ok.url))).verdict).toBe("failed");
    const bare = track(await startJsonTarget(402, { x402Version: 2, accepts: "not a list" }));
    const result = await runProbe("x402", target(bare.url));
    expect(result.verdict).toBe("failed");
    expect(check(result.checks, "challenge_parsed")?.passed).toBe(false);
  });
});

describe("mcp", () => {
  it("reachable: initialize + tools/list with the official client; no tool is ever called", async () => {
    const server = track(await startMcpTarget());
    const result = await runProbe("mcp", target(server.url));
    expect(result.verdict).toBe("reachable");
    expect(check(result.checks, "initialize")?.observation.server).toEqual({
      name: "test-seller-mcp",
      version: "1.2.3",
    });
    expect(check(result.checks, "tools_list")?.observation).toMatchObject({
      tool_count: 2,
      tools: ["get_quote", "place_order"],
    });
    expect(server.toolCalls()).toBe(0);
    const methods = server.received.map((r) => (r.body ? JSON.parse(r.body).method : null));
    expect(methods).toContain("initialize");
    expect(methods).toContain("tools/list");
    expect(methods).not.toContain("tools/call");
    for (const r of server.received) expect(r.headers.authorization).toBeUndefined();
  });

  it("failed: a server that refuses an unauthenticated client, or a JSON endpoint that is not MCP", async () => {
    const locked = track(await startMcpTarget({ requireBearer: true }));
    expect((await runProbe("mcp", target(locked.url))).verdict).toBe("failed");
    const notMcp = track(await startJsonTarget(200, { hello: "world" }));
    expect((await runProbe("mcp", target(notMcp.url))).verdict).toBe("failed");
  });
});
