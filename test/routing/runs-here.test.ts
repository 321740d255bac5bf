import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { getQueue } from "../../shared/queues.js";
import { reserveRunHere, runExecutionsHere } from "../../shared/routing/runs-here.js";
import { listAttempts } from "../../shared/routing/store/invocations.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { checkPlatformSignature } from "../helpers/seller-verify.js";
import { startService, type TestService } from "../helpers/service.js";

// Executions run in the request that submitted them when the process also hosts the executions worker
// (shared/routing/runs-here.ts): the insert claims the run, no job reaches the queue and no outbox row is
// written. What recovers a run whose process dies mid-run is the executions recovery sweep
// (test/routing/runs-here-recovery.test.ts).

let buyer: TestAgent;
let seller: TestSeller;
const original = getConfig();

beforeAll(async () => {
  buyer = await buildAgent();
  seller = await startSeller((call, res) =>
    json(res, 200, { success: true, output: { got: call.body.input } }),
  );
});
afterAll(async () => seller.close());
afterEach(() => overrideConfig(original));

async function outboxRow(invocationId: string) {
  return db()("job_outbox").where({ queue: "executions", job_id: invocationId }).first();
}

async function execute(task: string, input: Record<string, unknown>) {
  return api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input } });
}

describe("a run in the submitting process", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startService();
  });
  afterAll(async () => service.stop());

  it("answers the result without a queue job or an outbox row, attempt 1 claimed by the insert", async () => {
    const res = await execute("echo", { message: "here" });
    expect(res.status).toBe(200);
    expect(res.body.output.echo.message).toBe("here");
    const id = res.body.invocation_id;
    expect(await getQueue("executions").getJob(id)).toBeUndefined();
    const attempts = await listAttempts(db(), id);
    expect(attempts.map((a) => [a.attempt_no, a.status])).toEqual([[1, "succeeded"]]);
    const row = await db()("invocations").where({ id }).first();
    expect(row.started_at).not.toBeNull();
    // Nothing for the outbox sweeper to send, now or later.
    expect(await outboxRow(id)).toBeUndefined();
  });

  it("sends attempt 1 signed while the claim was written: it verifies, with the input in the request's key order", async () => {
    const tag = `runs-here-signed-${Date.now()}`;
    const listing = await buildListing({ endpointUrl: seller.url, tags: [tag] });
    // jsonb keeps shorter keys first: read back from PostgreSQL, this input would be {"k":…,"longer_key":…}.
    const res = await api("POST", "/api/execute", {
      key: buyer.apiKey,
      raw: `{"task":"${tag}","input":{"longer_key":1,"k":{"bb":2,"a":3}}}`,
    });
    expect(res.status).toBe(200);
    const id = res.body.invocation_id;
    const call = seller.calls.find((c) => c.body?.invocation_id === id)!;
    expect(call.raw.toString("utf8")).toBe(
      `{"invocation_id":"${id}","listing_id":"${listing.id}","attempt":1,"input":{"longer_key":1,"k":{"bb":2,"a":3}}}`,
    );
    expect(call.headers["webhook-id"]).toBe(`${id}.1`);
    const jwks = (await api("GET", "/.well-known/jwks.json")).body;
    expect(checkPlatformSignature(call.headers, call.raw, jwks)).toBeNull();
  });

  it("falls back to other candidates as the worker does, and records each attempt", async () => {
    const tag = `runs-here-${Date.now()}`;
    const failing = await startSeller((_call, res) => json(res, 500, { error: "down" }));
    try {
      await buildListing({ endpointUrl: failing.url, tags: [tag], verificationStatus: "verified" });
      await buildListing({ endpointUrl: seller.url, tags: [tag] });
      const res = await execute(tag, { n: 1 });
      expect(res.status).toBe(200);
      expect(res.body.output).toEqual({ got: { n: 1 } });
      const attempts = await listAttempts(db(), res.body.invocation_id);
      expect(attempts.map((a) => a.status)).toEqual(["failed", "succeeded"]);
      expect(failing.calls).toHaveLength(1);
    } finally {
      await failing.close();
    }
  });
});

describe("a run here that throws", () => {
  let service: TestService;
  beforeAll(async () => {
    service = await startService({
      runHere: async () => {
        throw new Error("the run here broke before any call");
      },
    });
  });
  afterAll(async () => service.stop());

  it("is sent through the queue at once, which finishes it as it would a worker's run that threw", async () => {
    // The run may have thrown after its call: attempt 1 stands until its deadline (500 ms + the margin),
    // then the worker closes it as abandoned and calls again, since the listing is safe_to_retry.
    const listing = await buildListing({ endpointUrl: seller.url, maxLatencyMs: 500, safeToRetry: true });
    const res = await api("POST", `/api/invoke/${listing.id}`, {
      key: buyer.apiKey,
      body: { input: { k: 0 } },
    });
    expect(res.status).toBe(200);
    expect(res.body.output).toEqual({ got: { k: 0 } });
    const job = await getQueue("executions").getJob(res.body.invocation_id);
    expect(await job?.getState()).toBe("completed");
    const attempts = await listAttempts(db(), res.body.invocation_id);
    expect(attempts.map((a) => a.status)).toEqual(["abandoned", "succeeded"]);
  });
});

describe("slots", () => {
  it("are bounded: beyond them work goes through the queue, and a released slot is free again", () => {
    const here = runExecutionsHere(async () => {}, 1);
    const first = reserveRunHere();
    expect(first).toBeDefined();
    expect(reserveRunHere()).toBeUndefined();
    first!.release();
    const again = reserveRunHere();
    expect(again).toBeDefined();
    again!.release();
    return here.drain().then(() => expect(reserveRunHere()).toBeUndefined());
  });
});
