import { randomUUID } from "node:crypto";
import { UnrecoverableError, Worker } from "bullmq";
import { v7 as uuidv7 } from "uuid";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig } from "../../shared/config.js";
import { closeDb, db } from "../../shared/db/knex.js";
import { holdFunds } from "../../shared/money/ledger/flows.js";
import { balances } from "../../shared/money/ledger/ledger.js";
import { closeQueues, enqueue, getQueue } from "../../shared/queues.js";
import { createRedis } from "../../shared/redis.js";
import { holdKey } from "../../shared/routing/paid-invocations.js";
import {
  FULL_PASS_EVERY,
  orphanSweep,
  RECENT_WINDOW_SECONDS,
  recoverOrphanedInvocations,
  sweepScope,
} from "../../shared/routing/recovery.js";
import { x402EdgeSettlement } from "../../shared/x402/index.js";
import { buildAgent, buildListing, insertInvocation, type TestAgent } from "../helpers/factories.js";
import { fundAgent } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { waitFor } from "../helpers/processes.js";

// Found by the chaos run (docs/reliability.md "Chaos"): an executions job that stalled more than BullMQ
// allows is failed in Redis first, and only then does the worker's "failed" handler fail its invocation;
// a worker SIGKILLed in between left the invocation running forever with its buyer's funds held. The
// recovery sweep ends such invocations as the handler would have, and enqueues again one whose job is
// gone. Own database: the sweep reads every open invocation, and other files' jobs live under other prefixes.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let seller: TestAgent;

beforeAll(async () => {
  ownDb = await useOwnDatabase("orphans");
  seller = await buildAgent("seller");
});

afterAll(async () => {
  await getQueue("executions")
    .obliterate({ force: true })
    .catch(() => {});
  await closeQueues();
  await closeDb();
  await ownDb?.drop();
});

/** A funded buyer's paid invocation with its hold, as submitInvoke commits it, created `ageSeconds` ago. */
async function paidInvocation(ageSeconds: number, id: string = randomUUID()) {
  const listing = await buildListing({
    endpointUrl: "http://127.0.0.1:9/never",
    price: 0.5,
    sellerId: seller.agentId,
  });
  const buyer = await buildAgent();
  await fundAgent(buyer.agentId, 1_000_000n);
  const key = await db()("api_keys").where({ agent_id: buyer.agentId }).first();
  await db().transaction(async (trx) => {
    await insertInvocation(trx, {
      id,
      agent_id: buyer.agentId,
      api_key_id: key.id,
      listing_id: listing.id,
      task: listing.slug,
      route: "invoke",
      input: {},
      max_cost_micros: null,
      price_micros: 500_000n,
      hold_micros: 500_000n,
      candidate_ids: [listing.id],
    });
    await holdFunds(
      {
        agentId: buyer.agentId,
        currency: "USDC",
        amountMicros: 500_000n,
        reference: { type: "invocation", id },
        idempotencyKey: holdKey(id),
      },
      trx,
    );
  });
  await db()("invocations")
    .where({ id })
    .update({ created_at: db().raw("now() - make_interval(secs => ?)", [ageSeconds]) });
  return { buyer, id };
}

const statusOf = async (id: string) => (await db()("invocations").where({ id }).first()).status as string;

describe("the executions recovery sweep", () => {
  it("fails an invocation whose job the queue failed for good, releasing its hold, once", async () => {
    const { buyer, id } = await paidInvocation(60);
    // The job fails for good in a worker that has no "failed" handler: the worker killed in that window.
    await enqueue("executions", id, { invocation_id: id });
    const bare = new Worker(
      "executions",
      async () => {
        throw new UnrecoverableError("job stalled more than allowable limit");
      },
      { connection: createRedis("worker"), prefix: getConfig().queuePrefix },
    );
    try {
      await waitFor(
        "the job to fail",
        async () => (await getQueue("executions").getJobState(id)) === "failed",
      );
    } finally {
      await bare.close();
    }
    expect(await statusOf(id)).toBe("queued");
    expect((await balances(buyer.agentId, "USDC")).held).toBe(500_000n);

    expect(await recoverOrphanedInvocations(x402EdgeSettlement)).toEqual({ failed: 1, requeued: 0 });

    const row = await db()("invocations").where({ id }).first();
    expect(row.status).toBe("failed");
    expect(row.error).toMatchObject({ code: "INTERNAL_ERROR" });
    expect(await balances(buyer.agentId, "USDC")).toMatchObject({ available: 1_000_000n, held: 0n });
    const kinds = (await db()("ledger_transactions").where({ reference_id: id })).map((t) => t.kind).sort();
    expect(kinds).toEqual(["hold", "release"]);
    // Nothing left to do on a second sweep (any number of processes may run it).
    expect(await recoverOrphanedInvocations(x402EdgeSettlement)).toEqual({ failed: 0, requeued: 0 });
  });

  it("enqueues again an invocation whose job is gone, and leaves live jobs and young invocations alone", async () => {
    const gone = await paidInvocation(60);
    const live = await paidInvocation(60);
    await enqueue("executions", live.id, { invocation_id: live.id });
    const young = await paidInvocation(0);

    expect(await recoverOrphanedInvocations(x402EdgeSettlement)).toEqual({ failed: 0, requeued: 1 });

    expect(await getQueue("executions").getJobState(gone.id)).toBe("waiting");
    expect(await getQueue("executions").getJobState(young.id)).toBe("unknown");
    for (const { id } of [gone, live, young]) expect(await statusOf(id)).toBe("queued");
    expect(await recoverOrphanedInvocations(x402EdgeSettlement)).toEqual({ failed: 0, requeued: 0 });
  });

  it("reads the recent window by its time-ordered ids on most passes, and every open invocation on a full one", async () => {
    // As the service makes them: a time-ordered id that carries the moment the invocation was created.
    const aged = (seconds: number) => paidInvocation(seconds, uuidv7({ msecs: Date.now() - seconds * 1000 }));
    const old = await aged(RECENT_WINDOW_SECONDS + 5 * 60);
    const recent = await aged(60);
    const queue = getQueue("executions");

    expect(await recoverOrphanedInvocations(x402EdgeSettlement, sweepScope(1))).toEqual({
      failed: 0,
      requeued: 1,
    });
    expect(await queue.getJobState(recent.id)).toBe("waiting");
    expect(await queue.getJobState(old.id)).toBe("unknown");

    expect(await recoverOrphanedInvocations(x402EdgeSettlement, sweepScope(FULL_PASS_EVERY))).toEqual({
      failed: 0,
      requeued: 1,
    });
    expect(await queue.getJobState(old.id)).toBe("waiting");
  });

  it("reaches an orphan behind a backlog of live jobs larger than a pass reads, in every scope", async () => {
    // Only this test's invocations are open (the ones above stay open, with jobs or young).
    await db()("invocations").whereIn("status", ["queued", "running"]).update({ status: "failed" });
    const aged = (seconds: number) => paidInvocation(seconds, uuidv7({ msecs: Date.now() - seconds * 1000 }));
    // Oldest first: two whose jobs wait behind a busy queue, then one whose job is gone.
    const backlog = [await aged(63), await aged(62)];
    for (const { id } of backlog) await enqueue("executions", id, { invocation_id: id });
    const orphan = await aged(61);
    const queue = getQueue("executions");

    // A pass reads two: the full first pass and the first windowed one each read the backlog alone.
    const sweep = orphanSweep(x402EdgeSettlement, 2);
    const first = await sweep();
    expect(first).toMatchObject({ failed: 0, requeued: 0, next: backlog[1]!.id });
    expect(await sweep()).toMatchObject({ failed: 0, requeued: 0, next: backlog[1]!.id });
    expect(await queue.getJobState(orphan.id)).toBe("unknown");
    // The next windowed pass goes on after the backlog, finds the orphan and, a short page, starts over.
    expect(await sweep()).toEqual({ failed: 0, requeued: 1 });
    expect(await queue.getJobState(orphan.id)).toBe("waiting");
    // Without the cursor, the same batch is the backlog every time.
    expect((await recoverOrphanedInvocations(x402EdgeSettlement, sweepScope(1), 2)).next).toBe(
      backlog[1]!.id,
    );
  });
});

describe("the sweep's passes", () => {
  it("are full on a process's first pass and every FULL_PASS_EVERY-th, else the recent window", () => {
    const now = new Date("2026-11-27T08:00:00Z");
    expect(sweepScope(0, now)).toEqual({});
    expect(sweepScope(FULL_PASS_EVERY, now)).toEqual({});
    for (const pass of [1, FULL_PASS_EVERY - 1, FULL_PASS_EVERY + 1])
      expect(sweepScope(pass, now)).toEqual({
        createdSince: new Date(now.getTime() - RECENT_WINDOW_SECONDS * 1000),
      });
  });
});
