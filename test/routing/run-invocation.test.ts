import { randomUUID } from "node:crypto";
import type { Worker } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ListingRow } from "../../shared/catalog/store/listings.js";
import { closeDb, db } from "../../shared/db/knex.js";
import { closeQueues, getQueue } from "../../shared/queues.js";
import { openCall } from "../../shared/routing/call-gate.js";
import { openEarlyGate, RunInProgress } from "../../shared/routing/run-invocation.js";
import {
  type AttemptRow,
  findInvocation,
  type InvocationRow,
  insertAttempt,
  listAttempts,
} from "../../shared/routing/store/invocations.js";
import type { ReceiptRow } from "../../shared/routing/store/receipts.js";
import { processExecution, runExecutionHere, startExecutionsWorker } from "../../workers/executions.js";
import {
  buildAgent,
  buildListing,
  freeInvocationRow,
  insertInvocation,
  type TestAgent,
} from "../helpers/factories.js";
import { json, type SellerHandler, startSeller, type TestSeller } from "../helpers/seller.js";

let buyer: TestAgent;
let apiKeyId: string;

beforeAll(async () => {
  buyer = await buildAgent();
  const key = await db()("api_keys").where({ agent_id: buyer.agentId }).first();
  apiKeyId = key.id;
});
afterAll(async () => {
  await closeQueues();
  await closeDb();
});

/** An invocation committed straight to the database, as submitExecution would, but never enqueued. */
async function createInvocation(
  listing: ListingRow,
  input: Record<string, unknown> = { message: "hello" },
): Promise<InvocationRow> {
  return insertInvocation(db(), freeInvocationRow({ agentId: buyer.agentId, apiKeyId }, listing, input));
}

async function receiptsFor(invocationId: string): Promise<ReceiptRow[]> {
  return db()<ReceiptRow>("receipts").where({ invocation_id: invocationId });
}

async function reload(invocationId: string): Promise<InvocationRow> {
  return (await findInvocation(db(), invocationId))!;
}

function statuses(attempts: AttemptRow[]): string[] {
  return attempts.map((a) => a.status);
}

/** Runs body with a loopback seller, a listing pointing at it, and an invocation of that listing. */
async function withSeller(
  handler: SellerHandler,
  listingOptions: { safeToRetry?: boolean; maxLatencyMs?: number; concurrencyLimit?: number },
  body: (ctx: { seller: TestSeller; listing: ListingRow; invocation: InvocationRow }) => Promise<void>,
): Promise<void> {
  const seller = await startSeller(handler);
  try {
    const listing = await buildListing({ endpointUrl: seller.url, ...listingOptions });
    const invocation = await createInvocation(listing);
    await body({ seller, listing, invocation });
  } finally {
    await seller.close();
  }
}

describe("processExecution with a healthy seller", () => {
  it("succeeds with one receipt, one succeeded attempt, and the invocation protocol on the wire", async () => {
    await withSeller(
      (_call, res) => json(res, 200, { success: true, output: { answer: 42 } }),
      { safeToRetry: true },
      async ({ seller, listing, invocation }) => {
        const outcome = await processExecution({ invocation_id: invocation.id });
        expect(outcome).toBe("succeeded");

        const after = await reload(invocation.id);
        expect(after.status).toBe("succeeded");
        expect(after.output).toEqual({ answer: 42 });
        expect(after.error).toBeNull();
        expect(after.started_at).not.toBeNull();
        expect(after.completed_at).not.toBeNull();

        const receipts = await receiptsFor(invocation.id);
        expect(receipts).toHaveLength(1);
        expect(receipts[0]!.agent_id).toBe(buyer.agentId);
        expect(receipts[0]!.listing_id).toBe(listing.id);
        expect(receipts[0]!.amount_micros).toBe("0");
        expect(receipts[0]!.provider_evidence).toMatchObject({ attempt_no: 1, http_status: 200 });

        const attempts = await listAttempts(db(), invocation.id);
        expect(attempts).toHaveLength(1);
        expect(attempts[0]).toMatchObject({ attempt_no: 1, status: "succeeded", error_code: null });
        expect(attempts[0]!.http_status).toBe(200);
        expect(attempts[0]!.finished_at).not.toBeNull();

        expect(seller.calls).toHaveLength(1);
        expect(seller.calls[0]!.body).toEqual({
          invocation_id: invocation.id,
          listing_id: listing.id,
          attempt: 1,
          input: { message: "hello" },
        });
        expect(seller.calls[0]!.headers["idempotency-key"]).toBe(invocation.id);
        expect(seller.calls[0]!.headers["content-type"]).toContain("application/json");
      },
    );
  });

  it("a plain JSON answer without the success envelope is the output itself", async () => {
    await withSeller(
      (_call, res) => json(res, 200, { plain: true }),
      { safeToRetry: false },
      async ({ invocation }) => {
        expect(await processExecution({ invocation_id: invocation.id })).toBe("succeeded");
        expect((await reload(invocation.id)).output).toEqual({ plain: true });
      },
    );
  });

  it("running it again for the same id answers already_finished without calling the seller or adding a receipt", async () => {
    await withSeller(
      (_call, res) => json(res, 200, { success: true, output: { n: 1 } }),
      { safeToRetry: true },
      async ({ seller, invocation }) => {
        expect(await processExecution({ invocation_id: invocation.id })).toBe("succeeded");
        expect(await processExecution({ invocation_id: invocation.id })).toBe("already_finished");
        expect(seller.calls).toHaveLength(1);
        expect(await receiptsFor(invocation.id)).toHaveLength(1);
        expect(await listAttempts(db(), invocation.id)).toHaveLength(1);
        expect((await reload(invocation.id)).status).toBe("succeeded");
      },
    );
  });

  it("a second run while a call is in flight waits (RunInProgress) and never calls the provider", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => {
      release = resolve;
    });
    await withSeller(
      async (_call, res) => {
        await gate;
        json(res, 200, { success: true, output: { raced: true } });
      },
      { safeToRetry: true },
      async ({ seller, invocation }) => {
        const first = processExecution({ invocation_id: invocation.id });
        await expect.poll(() => seller.calls.length).toBe(1);
        await expect(processExecution({ invocation_id: invocation.id })).rejects.toBeInstanceOf(
          RunInProgress,
        );
        release();
        expect(await first).toBe("succeeded");
        expect(seller.calls).toHaveLength(1);
        expect(await processExecution({ invocation_id: invocation.id })).toBe("already_finished");
        expect(statuses(await listAttempts(db(), invocation.id))).toEqual(["succeeded"]);
        expect(await receiptsFor(invocation.id)).toHaveLength(1);
      },
    );
  });

  it("two runs started together make one call between them and write one receipt", async () => {
    await withSeller(
      (_call, res) => json(res, 200, { success: true, output: { raced: true } }),
      { safeToRetry: false },
      async ({ seller, invocation }) => {
        const outcomes = await Promise.allSettled([
          processExecution({ invocation_id: invocation.id }),
          processExecution({ invocation_id: invocation.id }),
        ]);
        // The loser either saw the live attempt / the taken attempt number (RunInProgress) or the outcome.
        for (const o of outcomes) {
          if (o.status === "rejected") expect(o.reason).toBeInstanceOf(RunInProgress);
          else expect(["succeeded", "already_finished"]).toContain(o.value);
        }
        expect(seller.calls).toHaveLength(1);
        expect((await reload(invocation.id)).status).toBe("succeeded");
        expect(await receiptsFor(invocation.id)).toHaveLength(1);
      },
    );
  });

  it("an invocation already succeeded is skipped: already_finished, no call, no attempt", async () => {
    await withSeller(
      (_call, res) => json(res, 200, { success: true, output: {} }),
      { safeToRetry: true },
      async ({ seller, invocation }) => {
        await db()("invocations")
          .where({ id: invocation.id })
          .update({
            status: "succeeded",
            output: JSON.stringify({ earlier: true }),
            completed_at: db().fn.now(),
          });
        expect(await processExecution({ invocation_id: invocation.id })).toBe("already_finished");
        expect(seller.calls).toHaveLength(0);
        expect(await listAttempts(db(), invocation.id)).toHaveLength(0);
        expect(await receiptsFor(invocation.id)).toHaveLength(0);
        expect((await reload(invocation.id)).output).toEqual({ earlier: true });
      },
    );
  });

  it("an invocation already failed is skipped too", async () => {
    await withSeller(
      (_call, res) => json(res, 200, { success: true, output: {} }),
      { safeToRetry: true },
      async ({ seller, invocation }) => {
        await db()("invocations")
          .where({ id: invocation.id })
          .update({
            status: "failed",
            error: JSON.stringify({ code: "PROVIDER_FAILED", message: "earlier" }),
            completed_at: db().fn.now(),
          });
        expect(await processExecution({ invocation_id: invocation.id })).toBe("already_finished");
        expect(seller.calls).toHaveLength(0);
        expect((await reload(invocation.id)).status).toBe("failed");
      },
    );
  });

  it("an unknown invocation id is already_finished, not an error", async () => {
    expect(await processExecution({ invocation_id: randomUUID() })).toBe("already_finished");
  });
});

// A run here gets the call gate of its first candidate asked while the insert claimed it (submission.ts).
describe("a run with an early call gate", () => {
  const answer = (_call: unknown, res: Parameters<SellerHandler>[1]) =>
    json(res, 200, { success: true, output: { ok: true } });

  /** Whether the listing's one concurrency slot is free: taken and given back at once. */
  async function slotIsFree(listing: ListingRow): Promise<boolean> {
    const gate = await openCall(listing, 5000);
    if (gate.ok) await gate.finish(null);
    return gate.ok;
  }

  it("calls its listing through it (with one slot, a second gate would be refused) and frees it", async () => {
    await withSeller(answer, { concurrencyLimit: 1 }, async ({ seller, listing, invocation }) => {
      const early = openEarlyGate(listing);
      expect(await runExecutionHere(invocation.id, undefined, early)).toBe("succeeded");
      expect(seller.calls).toHaveLength(1);
      expect(await slotIsFree(listing)).toBe(true);
    });
  });

  it("asked for a listing the run does not call first is given back when the run ends", async () => {
    const other = await buildListing({ endpointUrl: "http://127.0.0.1:9/unused", concurrencyLimit: 1 });
    await withSeller(answer, {}, async ({ invocation }) => {
      const early = openEarlyGate(other);
      expect(await runExecutionHere(invocation.id, undefined, early)).toBe("succeeded");
      expect(await slotIsFree(other)).toBe(true);
    });
  });

  it("is given back when the run finds its invocation already finished", async () => {
    await withSeller(answer, { concurrencyLimit: 1 }, async ({ listing, invocation }) => {
      expect(await processExecution({ invocation_id: invocation.id })).toBe("succeeded");
      const early = openEarlyGate(listing);
      expect(await runExecutionHere(invocation.id, undefined, early)).toBe("already_finished");
      expect(await slotIsFree(listing)).toBe(true);
    });
  });
});

describe("processExecution retries", () => {
  it("a safe_to_retry seller answering 500, 500, 200 succeeds on the third attempt", async () => {
    await withSeller(
      (_call, res, index) =>
        index < 2 ? json(res, 500, { error: "boom" }) : json(res, 200, { success: true, output: { ok: 1 } }),
      { safeToRetry: true },
      async ({ seller, invocation }) => {
        expect(await processExecution({ invocation_id: invocation.id })).toBe("succeeded");
        expect(seller.calls).toHaveLength(3);
        expect(seller.calls.map((c) => c.body.attempt)).toEqual([1, 2, 3]);
        expect(seller.calls.map((c) => c.headers["idempotency-key"])).toEqual([
          invocation.id,
          invocation.id,
          invocation.id,
        ]);

        const attempts = await listAttempts(db(), invocation.id);
        expect(attempts.map((a) => a.attempt_no)).toEqual([1, 2, 3]);
        expect(statuses(attempts)).toEqual(["failed", "failed", "succeeded"]);
        expect(attempts.map((a) => a.error_code)).toEqual(["PROVIDER_FAILED", "PROVIDER_FAILED", null]);
        expect(attempts.map((a) => a.http_status)).toEqual([500, 500, 200]);

        const receipts = await receiptsFor(invocation.id);
        expect(receipts).toHaveLength(1);
        expect(receipts[0]!.provider_evidence).toMatchObject({ attempt_no: 3 });
      },
    );
  });

  it("a safe_to_retry seller always answering 500 fails after exactly three calls, with no receipt", async () => {
    await withSeller(
      (_call, res) => json(res, 500, { error: "boom" }),
      { safeToRetry: true },
      async ({ seller, invocation }) => {
        expect(await processExecution({ invocation_id: invocation.id })).toBe("failed");
        expect(seller.calls).toHaveLength(3);
        const after = await reload(invocation.id);
        expect(after.status).toBe("failed");
        expect(after.error?.code).toBe("PROVIDER_FAILED");
        expect(after.error?.message).toContain("500");
        expect(after.output).toBeNull();
        expect(after.completed_at).not.toBeNull();
        expect(statuses(await listAttempts(db(), invocation.id))).toEqual(["failed", "failed", "failed"]);
        expect(await receiptsFor(invocation.id)).toHaveLength(0);
      },
    );
  });

  it("a seller not safe to retry is called exactly once on a 500", async () => {
    await withSeller(
      (_call, res) => json(res, 500, { error: "boom" }),
      { safeToRetry: false },
      async ({ seller, invocation }) => {
        expect(await processExecution({ invocation_id: invocation.id })).toBe("failed");
        expect(seller.calls).toHaveLength(1);
        const after = await reload(invocation.id);
        expect(after.error?.code).toBe("PROVIDER_FAILED");
        const attempts = await listAttempts(db(), invocation.id);
        expect(attempts).toHaveLength(1);
        expect(attempts[0]).toMatchObject({
          status: "failed",
          error_code: "PROVIDER_FAILED",
          http_status: 500,
        });
        expect(await receiptsFor(invocation.id)).toHaveLength(0);
      },
    );
  });
});

describe("processExecution failure classification", () => {
  it.each([
    [503, "PROVIDER_UNAVAILABLE"],
    [429, "PROVIDER_UNAVAILABLE"],
    [502, "PROVIDER_FAILED"],
    [404, "PROVIDER_FAILED"],
  ])("HTTP %i → %s", async (status, code) => {
    await withSeller(
      (_call, res) => json(res, status, { error: "no" }),
      { safeToRetry: false },
      async ({ seller, invocation }) => {
        expect(await processExecution({ invocation_id: invocation.id })).toBe("failed");
        expect(seller.calls).toHaveLength(1);
        expect((await reload(invocation.id)).error?.code).toBe(code);
        const [attempt] = await listAttempts(db(), invocation.id);
        expect(attempt).toMatchObject({ status: "failed", error_code: code, http_status: status });
      },
    );
  });

  it("a safe_to_retry seller answering 503 is retried and ends PROVIDER_UNAVAILABLE", async () => {
    await withSeller(
      (_call, res) => json(res, 503, { error: "busy" }),
      { safeToRetry: true },
      async ({ seller, invocation }) => {
        expect(await processExecution({ invocation_id: invocation.id })).toBe("failed");
        expect(seller.calls).toHaveLength(3);
        expect((await reload(invocation.id)).error?.code).toBe("PROVIDER_UNAVAILABLE");
      },
    );
  });

  it("a 200 answer that is not JSON → PROVIDER_FAILED", async () => {
    await withSeller(
      (_call, res) => {
        res.writeHead(200, { "content-type": "text/plain" });
        res.end("all good, honestly");
      },
      { safeToRetry: false },
      async ({ invocation }) => {
        expect(await processExecution({ invocation_id: invocation.id })).toBe("failed");
        const after = await reload(invocation.id);
        expect(after.error?.code).toBe("PROVIDER_FAILED");
        expect(after.error?.message).toMatch(/not JSON/);
        expect(await receiptsFor(invocation.id)).toHaveLength(0);
      },
    );
  });

  it("{success: false, output: {}} → PROVIDER_FAILED", async () => {
    await withSeller(
      (_call, res) => json(res, 200, { success: false, output: {} }),
      { safeToRetry: false },
      async ({ invocation }) => {
        expect(await processExecution({ invocation_id: invocation.id })).toBe("failed");
        const after = await reload(invocation.id);
        expect(after.error?.code).toBe("PROVIDER_FAILED");
        expect(after.output).toBeNull();
        const [attempt] = await listAttempts(db(), invocation.id);
        expect(attempt).toMatchObject({ status: "failed", error_code: "PROVIDER_FAILED", http_status: 200 });
        expect(await receiptsFor(invocation.id)).toHaveLength(0);
      },
    );
  });

  it("a seller slower than the listing's max_latency_ms → TIMEOUT, without waiting for it", async () => {
    await withSeller(
      async (_call, res) => {
        await new Promise((resolve) => setTimeout(resolve, 1500));
        if (!res.destroyed) json(res, 200, { success: true, output: { late: true } });
      },
      { safeToRetry: false, maxLatencyMs: 300 },
      async ({ seller, invocation }) => {
        const started = Date.now();
        expect(await processExecution({ invocation_id: invocation.id })).toBe("failed");
        expect(Date.now() - started).toBeLessThan(1400);
        expect(seller.calls).toHaveLength(1);
        expect((await reload(invocation.id)).error?.code).toBe("TIMEOUT");
        const [attempt] = await listAttempts(db(), invocation.id);
        expect(attempt).toMatchObject({ status: "failed", error_code: "TIMEOUT" });
        expect(await receiptsFor(invocation.id)).toHaveLength(0);
      },
    );
  });

  it("a refused connection → PROVIDER_UNAVAILABLE", async () => {
    const seller = await startSeller((_call, res) => json(res, 200, {}));
    const url = seller.url;
    await seller.close();
    const listing = await buildListing({ endpointUrl: url, safeToRetry: false });
    const invocation = await createInvocation(listing);
    expect(await processExecution({ invocation_id: invocation.id })).toBe("failed");
    expect((await reload(invocation.id)).error?.code).toBe("PROVIDER_UNAVAILABLE");
    const attempts = await listAttempts(db(), invocation.id);
    expect(attempts).toHaveLength(1);
    expect(attempts[0]).toMatchObject({
      status: "failed",
      error_code: "PROVIDER_UNAVAILABLE",
      http_status: null,
    });
  });

  it("a response larger than PROVIDER_RESPONSE_MAX_BYTES → PROVIDER_FAILED", async () => {
    const huge = JSON.stringify("x".repeat(1_500_000));
    await withSeller(
      (_call, res) => {
        res.on("error", () => {});
        res.writeHead(200, { "content-type": "application/json" });
        res.end(huge);
      },
      { safeToRetry: false },
      async ({ seller, invocation }) => {
        expect(await processExecution({ invocation_id: invocation.id })).toBe("failed");
        expect(seller.calls).toHaveLength(1);
        const after = await reload(invocation.id);
        expect(after.error?.code).toBe("PROVIDER_FAILED");
        expect(after.error?.message).toMatch(/over \d+ bytes/);
        expect(await receiptsFor(invocation.id)).toHaveLength(0);
      },
    );
  });
});

describe("processExecution after a worker died mid-call", () => {
  it("an attempt still inside its deadline is left alone: RunInProgress, no call, nothing abandoned", async () => {
    await withSeller(
      (_call, res) => json(res, 200, { success: true, output: {} }),
      { safeToRetry: true },
      async ({ seller, listing, invocation }) => {
        await db()("invocations").where({ id: invocation.id }).update({ status: "running" });
        await insertAttempt(
          db(),
          { invocation_id: invocation.id, attempt_no: 1, listing_id: listing.id },
          60_000,
        );

        const error = await processExecution({ invocation_id: invocation.id }).catch((e: unknown) => e);
        expect(error).toBeInstanceOf(RunInProgress);
        expect((error as RunInProgress).retryAt.getTime()).toBeGreaterThan(Date.now() + 50_000);
        expect(seller.calls).toHaveLength(0);
        expect(statuses(await listAttempts(db(), invocation.id))).toEqual(["running"]);
      },
    );
  });

  it("safe_to_retry: the running attempt is abandoned and attempt 2 succeeds with one receipt", async () => {
    await withSeller(
      (_call, res) => json(res, 200, { success: true, output: { recovered: true } }),
      { safeToRetry: true },
      async ({ seller, listing, invocation }) => {
        await db()("invocations").where({ id: invocation.id }).update({ status: "running" });
        // Its deadline has passed: the worker that made it is gone.
        await insertAttempt(
          db(),
          { invocation_id: invocation.id, attempt_no: 1, listing_id: listing.id },
          -1000,
        );

        expect(await processExecution({ invocation_id: invocation.id })).toBe("succeeded");
        const attempts = await listAttempts(db(), invocation.id);
        expect(attempts.map((a) => [a.attempt_no, a.status])).toEqual([
          [1, "abandoned"],
          [2, "succeeded"],
        ]);
        expect(attempts[0]!.finished_at).not.toBeNull();
        expect(seller.calls).toHaveLength(1);
        expect(seller.calls[0]!.body.attempt).toBe(2);
        expect(await receiptsFor(invocation.id)).toHaveLength(1);
        expect((await reload(invocation.id)).output).toEqual({ recovered: true });
      },
    );
  });

  it("not safe_to_retry: the invocation fails PROVIDER_FAILED and the seller is never called", async () => {
    await withSeller(
      (_call, res) => json(res, 200, { success: true, output: {} }),
      { safeToRetry: false },
      async ({ seller, listing, invocation }) => {
        await db()("invocations").where({ id: invocation.id }).update({ status: "running" });
        // Its deadline has passed: the worker that made it is gone.
        await insertAttempt(
          db(),
          { invocation_id: invocation.id, attempt_no: 1, listing_id: listing.id },
          -1000,
        );

        expect(await processExecution({ invocation_id: invocation.id })).toBe("failed");
        expect(seller.calls).toHaveLength(0);
        const after = await reload(invocation.id);
        expect(after.status).toBe("failed");
        expect(after.error?.code).toBe("PROVIDER_FAILED");
        expect(statuses(await listAttempts(db(), invocation.id))).toEqual(["abandoned"]);
        expect(await receiptsFor(invocation.id)).toHaveLength(0);
      },
    );
  });
});

describe("executions worker (BullMQ)", () => {
  it("a job with an invalid payload fails at once, without retries", async () => {
    let worker: Worker | undefined;
    try {
      worker = startExecutionsWorker();
      await worker.waitUntilReady();
      const jobId = randomUUID();
      await getQueue("executions").add("executions", { invocation_id: "nope" }, { jobId });
      await expect
        .poll(async () => getQueue("executions").getJobState(jobId), { timeout: 10_000 })
        .toBe("failed");
      const job = await getQueue("executions").getJob(jobId);
      expect(job?.attemptsMade).toBe(1);
      expect(job?.opts.attempts).toBeGreaterThan(1);
      expect(job?.failedReason).toMatch(/invalid job payload/);
    } finally {
      await worker?.close();
    }
  });

  it("a valid job runs the invocation to success through the queue", async () => {
    let worker: Worker | undefined;
    await withSeller(
      (_call, res) => json(res, 200, { success: true, output: { queued: true } }),
      { safeToRetry: true },
      async ({ seller, invocation }) => {
        try {
          worker = startExecutionsWorker();
          await worker.waitUntilReady();
          await getQueue("executions").add(
            "executions",
            { invocation_id: invocation.id },
            { jobId: invocation.id },
          );
          await expect
            .poll(async () => getQueue("executions").getJobState(invocation.id), { timeout: 10_000 })
            .toBe("completed");
          const job = await getQueue("executions").getJob(invocation.id);
          expect(job?.returnvalue).toBe("succeeded");
          expect((await reload(invocation.id)).status).toBe("succeeded");
          expect(await receiptsFor(invocation.id)).toHaveLength(1);
          expect(seller.calls).toHaveLength(1);
        } finally {
          await worker?.close();
        }
      },
    );
  });
});
