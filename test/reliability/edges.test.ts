import { connect } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { api } from "../helpers/http.js";
import { startService, type TestService } from "../helpers/service.js";

// The edges of the HTTP server (docs/reliability.md "Edges"): slow clients are cut off, oversized and
// unparsable requests get the error envelope, bodies are bounded in size and depth, NUL never reaches
// PostgreSQL, and every answer carries the security headers.

let service: TestService;

beforeAll(async () => {
  overrideConfig({ httpHeadersTimeoutMs: 600, httpRequestTimeoutMs: 1200, requestJsonMaxDepth: 16 });
  service = await startService({ worker: false, sweeper: false });
});
afterAll(async () => {
  await service?.stop();
});

/** Sends raw bytes, then reads until the server closes; resolves with what came back and when. */
function raw(chunks: { data: string; afterMs: number }[]): Promise<{ text: string; closedAfterMs: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connect(getConfig().port, "127.0.0.1");
    let text = "";
    socket.on("data", (d) => {
      text += d.toString("utf8");
    });
    socket.on("error", () => {});
    socket.on("close", () => resolve({ text, closedAfterMs: Date.now() - started }));
    for (const c of chunks) setTimeout(() => socket.writable && socket.write(c.data), c.afterMs);
    setTimeout(() => {
      socket.destroy();
      reject(new Error(`still open after 10 s; got: ${text.slice(0, 200)}`));
    }, 10_000);
  });
}

const envelopeOf = (text: string) => JSON.parse(text.slice(text.indexOf("\r\n\r\n") + 4));

describe("slow clients", () => {
  it("a client that never finishes its headers is cut off after HTTP_HEADERS_TIMEOUT_MS", async () => {
    const result = await raw([{ data: "GET /api/health HTTP/1.1\r\nHost: x\r\n", afterMs: 0 }]);
    expect(result.text).not.toMatch(/200 OK/);
    expect(result.closedAfterMs).toBeLessThan(5_000);
  });

  it("a client trickling its body is cut off after HTTP_REQUEST_TIMEOUT_MS, never answered", async () => {
    const head =
      "POST /api/quickstart HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 40\r\n\r\n";
    const chunks = [
      { data: head, afterMs: 0 },
      ...Array.from({ length: 8 }, (_, i) => ({ data: " ", afterMs: 200 * (i + 1) })),
    ];
    const result = await raw(chunks);
    expect(result.text).not.toMatch(/201 Created/);
    expect(result.closedAfterMs).toBeLessThan(5_000);
  });
});

describe("requests the server refuses before any route", () => {
  it("a URL over 16 KiB is 431 HEADERS_TOO_LARGE in the error envelope", async () => {
    const result = await raw([
      { data: `GET /api/capabilities?search=${"a".repeat(20_000)} HTTP/1.1\r\nHost: x\r\n\r\n`, afterMs: 0 },
    ]);
    expect(result.text).toMatch(/^HTTP\/1\.1 431 /);
    expect(envelopeOf(result.text)).toMatchObject({
      success: false,
      error: { code: "HEADERS_TOO_LARGE", retryable: false, request_id: expect.any(String) },
    });
  });

  it("an unparsable request line is 400 in the error envelope", async () => {
    const result = await raw([{ data: "GARBAGE\r\n\r\n", afterMs: 0 }]);
    expect(result.text).toMatch(/^HTTP\/1\.1 400 /);
    expect(envelopeOf(result.text).error.code).toBe("SCHEMA_VALIDATION_FAILED");
  });
});

describe("bodies", () => {
  it("JSON nested deeper than REQUEST_JSON_MAX_DEPTH is refused with the limit named; 16 levels pass", async () => {
    const nest = (n: number) => `${'{"a":'.repeat(n)}1${"}".repeat(n)}`;
    const deep = await api("POST", "/api/tools/echo", { raw: `{"input":{"metadata":${nest(100_000)}}}` });
    expect(deep.status).toBe(400);
    expect(deep.body.error.details.violations[0].message).toMatch(/at most 16 levels/);
    const fine = await api("POST", "/api/tools/echo", { raw: `{"input":{"metadata":${nest(13)}}}` });
    expect(fine.status).toBe(200);
  });

  it("a string with U+0000 is refused with its path, in a body or a query, before it reaches PostgreSQL", async () => {
    const body = await api("POST", "/api/quickstart", { body: { name: "a\u0000b", intent: "buyer" } });
    expect(body.status).toBe(400);
    expect(body.body.error.details.violations).toEqual([
      { path: "/name", message: "must not contain U+0000 (NUL)" },
    ]);
    const query = await api("GET", "/api/tumbler/execute/match?task=a%00b", { key: "amk_x" });
    expect([400, 401]).toContain(query.status);
    const keyed = await api("POST", "/api/quickstart", { body: { name: "ok", intent: "buyer" } });
    const matched = await api("GET", "/api/tumbler/execute/match?task=a%00b", { key: keyed.body.api_key });
    expect(matched.status).toBe(400);
    expect(matched.body.error.details.violations[0]).toEqual({
      path: "/query/task",
      message: "must not contain U+0000 (NUL)",
    });
  });

  it("a body over REQUEST_BODY_MAX_BYTES is 413, declared in OpenAPI for every route that takes a body", async () => {
    const res = await api("POST", "/api/tools/echo", {
      raw: `{"input":{"message":"${"x".repeat(getConfig().requestBodyMaxBytes)}"}}`,
    });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe("REQUEST_TOO_LARGE");
  });
});

describe("security headers", () => {
  it("every answer, success or error, says nosniff, no framing, no referrer and a closed CSP", async () => {
    for (const path of ["/api/health", "/api/nope", "/openapi.json"]) {
      const res = await api("GET", path);
      expect(res.headers.get("x-content-type-options"), path).toBe("nosniff");
      expect(res.headers.get("x-frame-options"), path).toBe("DENY");
      expect(res.headers.get("referrer-policy"), path).toBe("no-referrer");
      expect(res.headers.get("content-security-policy"), path).toMatch(/default-src 'none'/);
    }
  });
});
