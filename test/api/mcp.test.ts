import {
  Client as ClientV2,
  StreamableHTTPClientTransport as TransportV2,
} from "@modelcontextprotocol/client";
import { Client as ClientV1 } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport as TransportV1 } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { MCP_TOOLS } from "../../api/mcp/tools.js";
import { getConfig } from "../../shared/config.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// The MCP transport (docs/mcp.md) driven by the official SDK clients of both lines over HTTP: 1.x
// (protocol 2025-11-25, the legacy era) and 2.x negotiating 2026-07-28 (the modern era).

let service: TestService;
let seller: TestSeller;
let buyer: TestAgent;
let url: URL;

type AnyClient = {
  listTools(): Promise<{
    tools: { name: string; inputSchema: Record<string, unknown>; annotations?: Record<string, unknown> }[];
  }>;
  callTool(params: {
    name: string;
    arguments?: Record<string, unknown>;
    _meta?: Record<string, unknown>;
  }): Promise<{
    isError?: boolean;
    content?: unknown;
    structuredContent?: unknown;
    _meta?: Record<string, unknown>;
  }>;
  close(): Promise<void>;
};

async function v1(key?: string): Promise<AnyClient> {
  const client = new ClientV1({ name: "test-v1", version: "1.0.0" });
  const headers = key ? { authorization: `Bearer ${key}` } : undefined;
  await client.connect(new TransportV1(url, { requestInit: { headers } }));
  return client as unknown as AnyClient;
}

async function v2(key?: string): Promise<AnyClient> {
  const client = new ClientV2(
    { name: "test-v2", version: "2.0.0" },
    { versionNegotiation: { mode: "auto" } },
  );
  const headers = key ? { authorization: `Bearer ${key}` } : undefined;
  await client.connect(new TransportV2(url, { requestInit: { headers } }));
  return client as unknown as AnyClient;
}

const textOf = (result: { content?: unknown }) =>
  ((result.content as { type: string; text: string }[] | undefined) ?? []).map((c) => c.text).join("\n");

beforeAll(async () => {
  service = await startService();
  seller = await startSeller((_call, res) => json(res, 200, { echoed: true }));
  buyer = await buildAgent();
  url = new URL(`http://127.0.0.1:${getConfig().port}/mcp`);
});
afterAll(async () => {
  await seller.close();
  await service.stop();
});

describe.each([
  ["1.x client (2025-11-25)", v1],
  ["2.x client (2026-07-28)", v2],
])("MCP with the %s", (_label, connect) => {
  it("lists every tool with the route's schema and annotations", async () => {
    const client = await connect();
    try {
      const { tools } = await client.listTools();
      expect(tools.map((t) => t.name).sort()).toEqual(MCP_TOOLS.map((t) => t.name).sort());
      const execute = tools.find((t) => t.name === "agentmarket_execute")!;
      expect(execute.inputSchema).toMatchObject({
        type: "object",
        required: expect.arrayContaining(["task", "input"]),
      });
      expect(execute.annotations).toMatchObject({ readOnlyHint: false, openWorldHint: true });
      const call = tools.find((t) => t.name === "agentmarket_call_service")!;
      expect(Object.keys(call.inputSchema.properties as object)).toEqual(
        expect.arrayContaining(["listing_id", "input", "payment_signature"]),
      );
    } finally {
      await client.close();
    }
  });

  it("calls free tools: structuredContent and text", async () => {
    const client = await connect();
    try {
      const echo = await client.callTool({ name: "agentmarket_x402_test", arguments: { message: "hi" } });
      expect(echo.isError).toBeFalsy();
      expect(echo.structuredContent).toMatchObject({ success: true, output: { echo: { message: "hi" } } });
      expect(textOf(echo)).toContain('"message": "hi"');
      const category = `mcp-cat-${Math.random().toString(36).slice(2, 8)}`;
      await buildListing({ endpointUrl: seller.url, category });
      const categories = await client.callTool({ name: "agentmarket_categories", arguments: {} });
      expect((categories.structuredContent as { categories: unknown[] }).categories).toContainEqual({
        category,
        listings: 1,
      });
      const browse = await client.callTool({ name: "agentmarket_browse_services", arguments: { limit: 2 } });
      expect(browse.structuredContent).toMatchObject({ schema: "agentmarket.machine-catalog.v1", limit: 2 });
    } finally {
      await client.close();
    }
  });

  it("refuses bad arguments with isError and the validation message", async () => {
    const client = await connect();
    try {
      const bad = await client.callTool({
        name: "agentmarket_browse_services",
        arguments: { limit: "many" },
      });
      expect(bad.isError).toBe(true);
      expect(textOf(bad)).toMatch(/limit/);
    } finally {
      await client.close();
    }
  });

  it("a keyed tool without a key is a clear error; with the key it runs", async () => {
    const anonymous = await connect();
    try {
      const refused = await anonymous.callTool({ name: "agentmarket_wallet", arguments: {} });
      expect(refused.isError).toBe(true);
      expect(textOf(refused)).toMatch(/^UNAUTHORIZED: /);
    } finally {
      await anonymous.close();
    }
    const keyed = await connect(buyer.apiKey);
    try {
      const listing = await buildListing({ endpointUrl: seller.url });
      const run = await keyed.callTool({
        name: "agentmarket_execute",
        arguments: { task: listing.slug, input: {} },
      });
      expect(run.isError, textOf(run)).toBeFalsy();
      expect(run.structuredContent).toMatchObject({ success: true, output: { echoed: true } });
      const receiptId = (run.structuredContent as { receipt_id: string }).receipt_id;
      const receipt = await keyed.callTool({
        name: "agentmarket_receipt",
        arguments: { receipt_id: receiptId },
      });
      expect(receipt.structuredContent).toMatchObject({ receipt_id: receiptId, outcome: "succeeded" });
    } finally {
      await keyed.close();
    }
  });
});

describe("the /mcp endpoint", () => {
  it("refuses a foreign Host or Origin (DNS rebinding)", async () => {
    const body = JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" });
    const headers = { "content-type": "application/json", accept: "application/json, text/event-stream" };
    const origin = await fetch(url, {
      method: "POST",
      body,
      headers: { ...headers, origin: "https://evil.example" },
    });
    expect(origin.status).toBe(403);
    expect(((await origin.json()) as { error: { code: string } }).error.code).toBe("POLICY_BLOCKED");
  });

  it("answers GET and DELETE as a stateless transport does (405)", async () => {
    expect((await fetch(url, { headers: { accept: "text/event-stream" } })).status).toBe(405);
    expect((await fetch(url, { method: "DELETE" })).status).toBe(405);
  });
});
