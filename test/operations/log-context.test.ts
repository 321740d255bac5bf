import { randomBytes } from "node:crypto";
import { Writable } from "node:stream";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { overrideConfig } from "../../shared/config.js";
import { currentRequestId, logger, redirectLogs, withLogScope } from "../../shared/log.js";
import { getQueue } from "../../shared/queues.js";
import { buildAgent, buildListing } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { json, startSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// Log scopes (shared/log.ts) ride on AsyncLocalStorage only while LOG_CONTEXT or tracing is on: its
// promise hooks are a sixth of an execute's CPU on Node 20. Without them the request's id still reaches
// the request line and the job the request sends through the queue.

const lines: Record<string, unknown>[] = [];
let service: TestService;

beforeAll(async () => {
  redirectLogs(
    new Writable({
      write(chunk, _enc, done) {
        for (const line of String(chunk).split("\n").filter(Boolean)) lines.push(JSON.parse(line));
        done();
      },
    }),
    "info",
  );
  service = await startService({ runHere: false });
});
afterAll(async () => {
  overrideConfig({ logContext: false });
  await service.stop();
});

describe("log scopes", () => {
  it("are kept only while LOG_CONTEXT is on (tracing off)", () => {
    overrideConfig({ logContext: false });
    expect(withLogScope({ request_id: "req-off-0001" }, () => currentRequestId())).toBeUndefined();
    overrideConfig({ logContext: true });
    expect(withLogScope({ request_id: "req-on-0001" }, () => currentRequestId())).toBe("req-on-0001");
    withLogScope({ request_id: "req-on-0002" }, () => logger().warn("inside a scope"));
    expect(lines.find((l) => l.msg === "inside a scope")?.request_id).toBe("req-on-0002");
    overrideConfig({ logContext: false });
  });

  it("off, still put the request's id on its request line and on the job it sends", async () => {
    overrideConfig({ logContext: false });
    const seller = await startSeller((_call, res) => json(res, 200, { ok: true }));
    const requestId = `log-ctx-${randomBytes(6).toString("hex")}`;
    try {
      const buyer = await buildAgent();
      const listing = await buildListing({ endpointUrl: seller.url });
      const res = await api("POST", "/api/execute", {
        key: buyer.apiKey,
        body: { task: listing.slug, input: {} },
        headers: { "x-request-id": requestId },
      });
      expect(res.status).toBe(200);
      const job = await getQueue("executions").getJob(res.body.invocation_id);
      expect(job?.data.meta).toMatchObject({ request_id: requestId });
      expect(lines.some((l) => l.msg === "request" && l.request_id === requestId)).toBe(true);
    } finally {
      await seller.close();
    }
  });
});
