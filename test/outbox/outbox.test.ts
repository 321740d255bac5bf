import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { HOUSEKEEPING } from "../../api/housekeeping.js";
import type { ListingRow } from "../../shared/catalog/store/listings.js";
import { db } from "../../shared/db/knex.js";
import { purgeExpired, sweepOutbox } from "../../shared/outbox/outbox.js";
import { markOutboxSent, type OutboxRow } from "../../shared/outbox/store.js";
import { getQueue } from "../../shared/queues.js";
import {
  findInvocation,
  type InvocationRow,
  insertInvocationWithJob,
} from "../../shared/routing/store/invocations.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

let service: TestService;
let buyer: TestAgent;
let apiKeyId: string;
let seller: TestSeller;
let listing: ListingRow;

beforeAll(async () => {
  service = await startService({ worker: true, sweeper: false });
  buyer = await buildAgent();
  apiKeyId = (await db()("api_keys").where({ agent_id: buyer.agentId }).first()).id;
  seller = await startSeller((_call, res) => json(res, 200, { success: true, output: { swept: true } }));
  listing = await buildListing({ endpointUrl: seller.url, safeToRetry: true });
});
afterAll(async () => {
  await seller?.close();
  await service?.stop();
});

/**
 * What the API commits before it enqueues: the invocation and its outbox row, in one transaction, and
 * then nothing (the process "crashed" before enqueue). The row is dated in the future so no sweeper of
 * another test file (they share this database) picks it up before the test says so.
 */
async function commitWithoutEnqueue(): Promise<InvocationRow> {
  return db().transaction(async (trx) => {
    const invocation = await insertInvocationWithJob(
      trx,
      {
        id: randomUUID(),
        agent_id: buyer.agentId,
        api_key_id: apiKeyId,
        listing_id: listing.id,
        task: listing.slug,
        route: "execute",
        input: { n: 1 },
        max_cost_micros: null,
        price_micros: 0n,
      },
      "executions",
    );
    await trx("job_outbox")
      .where({ queue: "executions", job_id: invocation.id })
      .update({ created_at: trx.raw("now() + interval '1 hour'") });
    return invocation;
  });
}

async function outboxRow(invocationId: string): Promise<OutboxRow> {
  return db()<OutboxRow>("job_outbox").where({ queue: "executions", job_id: invocationId }).first() as never;
}

async function makeStale(invocationId: string): Promise<void> {
  await db()("job_outbox")
    .where({ queue: "executions", job_id: invocationId })
    .update({ created_at: db().raw("now() - interval '1 minute'") });
}

async function status(invocationId: string): Promise<string | undefined> {
  return (await findInvocation(db(), invocationId))?.status;
}

async function receiptCount(invocationId: string): Promise<number> {
  return (await db()("receipts").where({ invocation_id: invocationId })).length;
}

function callsFor(invocationId: string): number {
  return seller.calls.filter((c) => c.body?.invocation_id === invocationId).length;
}

/** Leaves nothing half-done for other files' workers (they share this database): ends it as failed. */
async function finishByHand(invocationId: string): Promise<void> {
  await db()("invocations")
    .where({ id: invocationId })
    .update({
      status: "failed",
      error: JSON.stringify({ code: "INTERNAL_ERROR", message: "test cleanup" }),
      completed_at: db().fn.now(),
    });
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe("outbox sweeper (lossless enqueue)", () => {
  it("an invocation committed but never enqueued stays queued until the sweep, then runs exactly once", async () => {
    const invocation = await commitWithoutEnqueue();

    // Nothing reads invocations from the database on its own: without the job it just waits.
    await sleep(700);
    expect(await status(invocation.id)).toBe("queued");
    expect(callsFor(invocation.id)).toBe(0);
    expect((await outboxRow(invocation.id)).enqueued_at).toBeNull();
    expect(await getQueue("executions").getJob(invocation.id)).toBeUndefined();

    await makeStale(invocation.id);
    await sweepOutbox();

    await expect.poll(() => status(invocation.id), { timeout: 10_000 }).toBe("succeeded");
    expect(await receiptCount(invocation.id)).toBe(1);
    expect(callsFor(invocation.id)).toBe(1);
    expect((await outboxRow(invocation.id)).enqueued_at).toBeInstanceOf(Date);
    expect((await findInvocation(db(), invocation.id))?.output).toEqual({ swept: true });

    // A second sweep finds nothing to send for it and changes nothing.
    await sweepOutbox();
    await sleep(300);
    expect(await receiptCount(invocation.id)).toBe(1);
    expect(callsFor(invocation.id)).toBe(1);
  });

  it("re-sending a job that already ran (its sent mark lost) neither calls the seller again nor adds a receipt", async () => {
    const invocation = await commitWithoutEnqueue();
    await makeStale(invocation.id);
    await sweepOutbox();
    await expect.poll(() => status(invocation.id), { timeout: 10_000 }).toBe("succeeded");

    await db()("job_outbox")
      .where({ queue: "executions", job_id: invocation.id })
      .update({ enqueued_at: null });
    await sweepOutbox();
    await expect
      .poll(async () => (await outboxRow(invocation.id)).enqueued_at, { timeout: 5_000 })
      .not.toBeNull();
    await sleep(500);
    expect(await receiptCount(invocation.id)).toBe(1);
    expect(callsFor(invocation.id)).toBe(1);
  });

  it("a sent mark commits without waiting for its WAL flush (a mark lost in a crash is the re-send above)", async () => {
    const invocation = await commitWithoutEnqueue();
    const setting = async (q: Knex.Transaction) =>
      (await q.raw("show synchronous_commit")).rows[0].synchronous_commit as string;
    await db().transaction(async (trx) => {
      expect(await setting(trx)).toBe("on");
      await markOutboxSent(trx, "executions", [invocation.id]);
      // The statement set it for its own transaction only (set_config's is_local), as SET LOCAL does.
      expect(await setting(trx)).toBe("off");
    });
    expect((await outboxRow(invocation.id)).enqueued_at).toBeInstanceOf(Date);
    await finishByHand(invocation.id);
  });

  it("a row already sent is not re-sent", async () => {
    const invocation = await commitWithoutEnqueue();
    const sentAt = new Date(Date.now() - 30_000);
    await db()("job_outbox")
      .where({ queue: "executions", job_id: invocation.id })
      .update({ created_at: db().raw("now() - interval '1 minute'"), enqueued_at: sentAt });

    await sweepOutbox();
    await sleep(700);
    expect(await getQueue("executions").getJob(invocation.id)).toBeUndefined();
    expect(await status(invocation.id)).toBe("queued");
    expect(callsFor(invocation.id)).toBe(0);
    expect((await outboxRow(invocation.id)).enqueued_at?.getTime()).toBe(sentAt.getTime());

    await finishByHand(invocation.id);
  });

  it("a row younger than OUTBOX_STALE_AFTER_MS is left for the API's own enqueue", async () => {
    const invocation = await commitWithoutEnqueue();
    await db()("job_outbox")
      .where({ queue: "executions", job_id: invocation.id })
      .update({ created_at: db().fn.now() });
    await sweepOutbox();
    expect((await outboxRow(invocation.id)).enqueued_at).toBeNull();
    expect(await getQueue("executions").getJob(invocation.id)).toBeUndefined();

    // Then the stale row is sent (by this sweep, or by another file's sweeper sharing the database).
    await makeStale(invocation.id);
    await sweepOutbox();
    await expect.poll(() => status(invocation.id), { timeout: 10_000 }).toBe("succeeded");
    expect(await receiptCount(invocation.id)).toBe(1);
  });
});

describe("housekeeping", () => {
  it("deletes quotes never paid that expired over a day ago, and keeps paid and live ones", async () => {
    const listing = await buildListing({ endpointUrl: "http://127.0.0.1:9/x", price: 0.01 });
    const quote = (expiresAt: string, usedAt: string | null) =>
      db()("quotes")
        .insert({
          rail: "tumbler",
          listing_id: listing.id,
          task: listing.slug,
          amount_micros: "10000",
          currency: "tUSDC",
          expires_at: db().raw(`now() + interval '${expiresAt}'`),
          used_at: usedAt ? db().raw(`now() - interval '${usedAt}'`) : null,
        })
        .returning("id")
        .then((rows) => rows[0].id as string);
    const stale = await quote("-2 days", null);
    const paid = await quote("-2 days", "3 days");
    const live = await quote("5 minutes", null);
    const recent = await quote("-1 hour", null);
    await purgeExpired(HOUSEKEEPING);
    const left = (await db()("quotes").whereIn("id", [stale, paid, live, recent]).select("id")).map(
      (r) => r.id,
    );
    expect(left.sort()).toEqual([paid, live, recent].sort());
  });
});
