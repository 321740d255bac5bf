import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { closeSafeFetch } from "../../shared/net/safe-fetch.js";
import { buildAgent, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { startService, type TestService } from "../helpers/service.js";
import { startJsonTarget, startMcpTarget, type TargetServer } from "../helpers/verification-targets.js";

// Connector records (the agent connector record v1): create, list own, read, disable, and a probe with
// the official MCP client that fills last_probe_at and last_safe_status and never connects an account.

let service: TestService;
let owner: TestAgent;
let openMcp: Awaited<ReturnType<typeof startMcpTarget>>;
let lockedMcp: Awaited<ReturnType<typeof startMcpTarget>>;
let notMcp: TargetServer;

beforeAll(async () => {
  service = await startService({ worker: false, sweeper: false });
  owner = await buildAgent("buyer");
  openMcp = await startMcpTarget({ tools: ["get_positions", "get_quote"] });
  lockedMcp = await startMcpTarget({ requireBearer: true });
  notMcp = await startJsonTarget(200, { hello: "world" });
});

afterAll(async () => {
  for (const s of [openMcp, lockedMcp, notMcp]) await s?.close();
  await closeSafeFetch();
  await service?.stop();
});

const create = (body: Record<string, unknown>, key = owner.apiKey) =>
  api("POST", "/api/connectors", { key, body });

describe("connector records", () => {
  it("creates a record with the spec's fields, risk_level high, never probed yet, extra properties kept", async () => {
    const res = await create({
      connector_type: "trading_connector",
      mcp_server_name: "trading-connector",
      endpoint: openMcp.url,
      deployment_id: "dep-1",
      broker: "example-broker",
      notes: { region: "eu" },
    });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({
      schema: "agentmarket.agent-connector.v1",
      deployment_id: "dep-1",
      connector_type: "trading_connector",
      status: "disconnected",
      mcp_server_name: "trading-connector",
      endpoint: openMcp.url,
      risk_level: "high",
      last_probe_at: null,
      last_safe_status: { schema_probe_available: false, tools_visible: false, requires_connection: true },
      broker: "example-broker",
      notes: { region: "eu" },
    });
    expect(res.body.connector_id).toMatch(/^[0-9a-f-]{36}$/);
    const read = await api("GET", `/api/connectors/${res.body.connector_id}`, { key: owner.apiKey });
    expect(read.body).toEqual(res.body);
  });

  it("enforces the enums, risk_level high only, and refuses fields the service sets; nothing is written", async () => {
    const lister = await buildAgent("buyer");
    const good = { connector_type: "banking_connector", mcp_server_name: "banking-connector" };
    const bad = [
      { ...good, connector_type: "crypto_connector" },
      { ...good, mcp_server_name: "other" },
      { ...good, status: "online" },
      { ...good, risk_level: "low" },
      { mcp_server_name: "banking-connector" },
      { ...good, connector_id: "mine" },
      { ...good, last_safe_status: { tools_visible: true } },
      { ...good, endpoint: "http://10.0.0.7/mcp" },
    ];
    for (const body of bad) {
      const res = await create(body, lister.apiKey);
      expect(res.status, JSON.stringify(body)).toBe(400);
      expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
    }
    expect((await api("GET", "/api/connectors", { key: lister.apiKey })).body.connectors).toEqual([]);
    expect(
      (await create({ ...good, status: "connection_required", risk_level: "high" }, lister.apiKey)).status,
    ).toBe(201);
  });

  it("lists only the caller's own records; another agent's record is a 404 to read, disable or probe", async () => {
    const mine = (await create({ connector_type: "trading_connector", mcp_server_name: "trading-connector" }))
      .body;
    const other = await buildAgent("buyer");
    const theirs = (
      await create(
        { connector_type: "banking_connector", mcp_server_name: "banking-connector" },
        other.apiKey,
      )
    ).body;
    const listed = (await api("GET", "/api/connectors", { key: owner.apiKey })).body.connectors.map(
      (c: { connector_id: string }) => c.connector_id,
    );
    expect(listed).toContain(mine.connector_id);
    expect(listed).not.toContain(theirs.connector_id);
    for (const [method, suffix] of [
      ["GET", ""],
      ["POST", "/disable"],
      ["POST", "/probe"],
    ] as const) {
      const res = await api(method, `/api/connectors/${theirs.connector_id}${suffix}`, { key: owner.apiKey });
      expect(res.status, suffix).toBe(404);
    }
    expect(
      (await api("GET", `/api/connectors/${theirs.connector_id}`, { key: other.apiKey })).body.status,
    ).toBe("disconnected");
    expect((await api("GET", "/api/connectors")).status).toBe(401);
  });

  it("probe: initialize + tools/list through the official client; tools visible, no tool called, no account connected", async () => {
    const c = (
      await create({
        connector_type: "trading_connector",
        mcp_server_name: "trading-connector",
        endpoint: openMcp.url,
      })
    ).body;
    const res = await api("POST", `/api/connectors/${c.connector_id}/probe`, { key: owner.apiKey });
    expect(res.status).toBe(200);
    expect(res.body.last_probe_at).not.toBeNull();
    expect(res.body.status).toBe("disconnected");
    expect(res.body.last_safe_status).toMatchObject({
      schema_probe_available: true,
      tools_visible: true,
      requires_connection: false,
      account_connected: false,
      tools_called: 0,
      tool_count: 2,
    });
    expect(openMcp.toolCalls()).toBe(0);
    for (const r of openMcp.received) expect(r.headers.authorization).toBeUndefined();
  });

  it("probe of a server that wants an account: requires_connection, and nothing is sent to connect one", async () => {
    const c = (
      await create({
        connector_type: "banking_connector",
        mcp_server_name: "banking-connector",
        endpoint: lockedMcp.url,
      })
    ).body;
    const res = await api("POST", `/api/connectors/${c.connector_id}/probe`, { key: owner.apiKey });
    expect(res.body.last_safe_status).toMatchObject({
      schema_probe_available: false,
      tools_visible: false,
      requires_connection: true,
      last_http_status: 401,
    });
    for (const r of lockedMcp.received) expect(r.headers.authorization).toBeUndefined();
    const plain = (
      await create({
        connector_type: "banking_connector",
        mcp_server_name: "banking-connector",
        endpoint: notMcp.url,
      })
    ).body;
    const probed = await api("POST", `/api/connectors/${plain.connector_id}/probe`, { key: owner.apiKey });
    expect(probed.body.last_safe_status.schema_probe_available).toBe(false);
  });

  it("disable: status disabled, kept in the list, and no longer probed (409)", async () => {
    const c = (
      await create({
        connector_type: "trading_connector",
        mcp_server_name: "trading-connector",
        endpoint: openMcp.url,
      })
    ).body;
    const disabled = await api("POST", `/api/connectors/${c.connector_id}/disable`, { key: owner.apiKey });
    expect(disabled.status).toBe(200);
    expect(disabled.body.status).toBe("disabled");
    const before = openMcp.received.length;
    const probe = await api("POST", `/api/connectors/${c.connector_id}/probe`, { key: owner.apiKey });
    expect(probe.status).toBe(409);
    expect(errorCode(probe)).toBe("CONFLICT");
    expect(openMcp.received.length).toBe(before);
    const noEndpoint = (
      await create({ connector_type: "trading_connector", mcp_server_name: "trading-connector" })
    ).body;
    expect(
      (await api("POST", `/api/connectors/${noEndpoint.connector_id}/probe`, { key: owner.apiKey })).status,
    ).toBe(409);
  });
});
