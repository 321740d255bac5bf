import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { getQueue } from "../../shared/queues.js";
import { reserveRunHere, runExecutionsHere } from "../../shared/routing/runs-here.js";
import { listAttempts } from "../../shared/routing/store/invocations.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { waitFor } from "../helpers/processes.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { checkPlatformSignature } from "../helpers/seller-verify.js";
import { startService, type TestService } from "../helpers/service.js";

// Executions run in the request that submitted them when the process also hosts the executions worker
// (shared/routing/runs-here.ts): the insert claims the run, no job reaches the queue, and the outbox row
// is what recovers the run if the process dies mid-run.

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

async function invocationStatus(id: string): Promise<string> {
  return (await db()("invocations").where({ id }).first()).status;
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

  it("answers the result without a queue job, attempt 1 claimed by the insert, the outbox row settled", async () => {
    const res = await execute("echo", { message: "here" });
    expect(res.status).toBe(200);
    expect(res.body.output.echo.message).toBe("here");
    const id = res.body.invocation_id;
    expect(await getQueue("executions").getJob(id)).toBeUndefined();
    const attempts = await listAttempts(db(), id);
    expect(attempts.map((a) => [a.attempt_no, a.status])).toEqual([[1, "succeeded"]]);
    const row = await db()("invocations").where({ id }).first();
    expect(row.started_at).not.toBeNull();
    // The mark is batched (a few ms): once set, the sweeper never sends this job.
    await waitFor("the outbox mark", async () => (await outboxRow(id))?.enqueued_at != null, 5000);
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

describe("a process that dies mid-run", () => {
  // The runner never runs (the process is gone): what the insert committed must be enough to finish.
  let service: TestService;
  let revive!: () => void;
  const dead = new Promise<void>((resolve) => {
    revive = resolve;
  });
  beforeAll(async () => {
    service = await startService({ runHere: () => dead });
  });
  afterAll(async () => {
    revive();
    await service.stop();
  });

  /** A direct invoke whose run dies: 202 after a short wait, its invocation id. */
  async function invokeAndDie(safeToRetry: boolean, input: Record<string, unknown>): Promise<string> {
    overrideConfig({ executeSyncWaitMs: 200 });
    const listing = await buildListing({ endpointUrl: seller.url, maxLatencyMs: 500, safeToRetry });
    const res = await api("POST", `/api/invoke/${listing.id}`, { key: buyer.apiKey, body: { input } });
    expect(res.status).toBe(202);
    return res.body.invocation_id;
  }

  it("is finished by the queue: the sweeper sends its job, the worker waits out attempt 1's deadline", async () => {
    const id = await invokeAndDie(true, { k: 1 });
    // Attempt 1 was recorded by the insert, before any call: a worker must not take it as never made.
    expect((await listAttempts(db(), id)).map((a) => a.status)).toEqual(["running"]);
    await waitFor("the queue's run", async () => (await invocationStatus(id)) === "succeeded", 15000);
    const attempts = await listAttempts(db(), id);
    expect(attempts.map((a) => a.status)).toEqual(["abandoned", "succeeded"]);
    expect(seller.calls.filter((c) => c.body.invocation_id === id)).toHaveLength(1);
  });

  it("never calls a listing that is not safe_to_retry: attempt 1 may have reached it", async () => {
    const id = await invokeAndDie(false, { k: 2 });
    await waitFor("the queue's run", async () => (await invocationStatus(id)) === "failed", 15000);
    expect((await listAttempts(db(), id)).map((a) => a.status)).toEqual(["abandoned"]);
    expect(seller.calls.filter((c) => c.body.invocation_id === id)).toHaveLength(0);
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
