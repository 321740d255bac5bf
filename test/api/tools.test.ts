import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ECHO_DEFAULT_MESSAGE } from "../../shared/tools/echo.js";
import { api, errorCode } from "../helpers/http.js";
import { startService, type TestService } from "../helpers/service.js";

let service: TestService;

beforeAll(async () => {
  service = await startService({ worker: false, sweeper: false });
});
afterAll(async () => service.stop());

describe("GET /api/tools/echo", () => {
  it("echoes the message with server facts, without a key", async () => {
    const before = Date.now();
    const res = await api("GET", "/api/tools/echo?message=hello");
    const after = Date.now();
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    expect(res.body.output.echo).toEqual({ message: "hello" });
    const server = res.body.output.server;
    expect(new Date(server.timestamp).toISOString()).toBe(server.timestamp);
    expect(server.platform).toBe("agentmarket");
    expect(Number.isInteger(server.received_at_ms)).toBe(true);
    expect(server.received_at_ms).toBeGreaterThanOrEqual(before);
    expect(server.received_at_ms).toBeLessThanOrEqual(after);
    expect(Number.isInteger(server.processing_time_ms)).toBe(true);
    expect(server.processing_time_ms).toBeGreaterThanOrEqual(0);
    expect(server.node_version).toMatch(/^v\d+\.\d+\.\d+/);
    expect(res.body.output.tip).toEqual(expect.any(String));
  });

  it("reports the headers it received but never credentials", async () => {
    const res = await api("GET", "/api/tools/echo?message=hello", {
      headers: {
        authorization: "Bearer amk_secret_should_not_echo",
        cookie: "session=secret",
        "x-payment": "secret-payment",
        "x-trace-marker": "visible-123",
      },
    });
    expect(res.status).toBe(200);
    const received = res.body.output.headers_received;
    expect(received["x-trace-marker"]).toBe("visible-123");
    const names = Object.keys(received).map((n) => n.toLowerCase());
    expect(names).not.toContain("authorization");
    expect(names).not.toContain("cookie");
    expect(names).not.toContain("x-payment");
    expect(JSON.stringify(res.body)).not.toContain("secret");
  });

  it("uses the fixed probe text when no message is given", async () => {
    const res = await api("GET", "/api/tools/echo");
    expect(res.status).toBe(200);
    expect(ECHO_DEFAULT_MESSAGE.length).toBeGreaterThan(0);
    expect(res.body.output.echo).toEqual({ message: ECHO_DEFAULT_MESSAGE });
  });

  it("accepts a 4000-character message", async () => {
    const message = "x".repeat(4000);
    const res = await api("GET", `/api/tools/echo?message=${message}`);
    expect(res.status).toBe(200);
    expect(res.body.output.echo.message).toBe(message);
  });

  it("rejects a 4001-character message with 400 naming /query/message", async () => {
    const res = await api("GET", `/api/tools/echo?message=${"x".repeat(4001)}`);
    expect(res.status).toBe(400);
    expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
    expect(res.body.error.details.violations.map((v: { path: string }) => v.path)).toContain(
      "/query/message",
    );
  });

  it("keeps the message a string even when it looks like a number", async () => {
    const res = await api("GET", "/api/tools/echo?message=12345");
    expect(res.status).toBe(200);
    expect(res.body.output.echo).toEqual({ message: "12345" });
  });
});

describe("POST /api/tools/echo", () => {
  it("echoes the input of an invocation protocol body", async () => {
    const input = { message: "x", metadata: { a: 1 } };
    const res = await api("POST", "/api/tools/echo", {
      body: { input },
      headers: { authorization: "Bearer amk_secret_should_not_echo" },
    });
    expect(res.status).toBe(200);
    expect(res.body.success).toBe(true);
    expect(res.body.output.echo).toEqual(input);
    expect(res.body.output.server.platform).toBe("agentmarket");
    expect(Object.keys(res.body.output.headers_received)).not.toContain("authorization");
  });

  it("keeps extra input properties", async () => {
    const input = { message: "x", extra: [1, 2], nested: { deep: true } };
    const res = await api("POST", "/api/tools/echo", { body: { input } });
    expect(res.status).toBe(200);
    expect(res.body.output.echo).toEqual(input);
  });

  it.each([
    ["missing input", {}, "/input"],
    ["message too long", { input: { message: "x".repeat(4001) } }, "/input/message"],
    ["metadata not an object", { input: { metadata: "a" } }, "/input/metadata"],
  ])("%s → 400 naming %s", async (_name, body, path) => {
    const res = await api("POST", "/api/tools/echo", { body });
    expect(res.status).toBe(400);
    expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
    expect(res.body.error.details.violations.map((v: { path: string }) => v.path)).toContain(path);
  });
});
