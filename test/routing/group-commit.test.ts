import { randomBytes, randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { ListingRow } from "../../shared/catalog/index.js";
import { CATALOG_MOVED } from "../../shared/catalog/index.js";
import { db } from "../../shared/db/knex.js";
import { UTC_TODAY } from "../../shared/db/prepared.js";
import { refusalOf } from "../../shared/db/refusals.js";
import { groupCommitRows, groupCommitStatements } from "../../shared/observability/metrics.js";
import {
  callTargetOf,
  claimsShareColumns,
  ENDED_ELSEWHERE,
  insertClaimedInvocation,
  insertClaimedInvocations,
  type NewInvocation,
  type RunClaim,
  recordSuccess,
  recordSuccesses,
  type SuccessRecord,
} from "../../shared/routing/store/invocations.js";
import { buildAgent, buildListing, freeInvocationRow, type TestAgent } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// The execute path's group commits (shared/db/group-commit.ts): the grouped claim and the grouped success
// write, row for row, what their single statements write, each row under its own conditions; and
// executes that arrive together are grouped and each answered with its own result.

// Own database: a claim proves the catalog's generation, which any listing another file writes at the
// same time would move.
let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let service: TestService;
let buyer: TestAgent;
let keyId: string;
let seller: TestSeller;

beforeAll(async () => {
  ownDb = await useOwnDatabase("group_commit");
  service = await startService();
  buyer = await buildAgent();
  keyId = (await db()("api_keys").where({ agent_id: buyer.agentId }).first()).id;
  // Echoes its input after a pause, so that executes sent together are in flight together.
  seller = await startSeller(async (call, res) => {
    await new Promise((resolve) => setTimeout(resolve, 30));
    json(res, 200, { echo: call.body?.input ?? call.body });
  });
});
afterAll(async () => {
  await seller.close();
  await service.stop();
  await ownDb?.drop();
});

const TIMING = { maxCallMs: 1000, marginMs: 1000 };
const generation = async () => (await db()("catalog_generation").first()).generation.toString() as string;

function newRow(listing: ListingRow, input: Record<string, unknown>): NewInvocation {
  return {
    ...freeInvocationRow({ agentId: buyer.agentId, apiKeyId: keyId }, listing, input),
    quote_id: null,
    candidate_ids: [listing.id],
    selection: { reason: "top_ranked_candidate", n: input.n },
  };
}

/** What a test compares of two invocations: everything but what differs by nature (id, times, input). */
function comparable(row: Record<string, unknown>) {
  const { id: _i, created_at: _c, started_at: _s, completed_at: _d, input: _n, selection: _e, ...rest } = row;
  return rest;
}

async function written(id: string) {
  const attempt = await db()("invocation_attempts").where({ invocation_id: id });
  return {
    invocation: await db()("invocations").where({ id }).first(),
    outbox: await db()("job_outbox").where({ job_id: id }),
    attempts: attempt.map((a) => ({ ...a, budgetMs: a.deadline_at.getTime() - a.started_at.getTime() })),
    receipts: await db()("receipts").where({ invocation_id: id }),
  };
}

describe("the grouped claim", () => {
  it("writes each row as the single claim does, and nothing for a row whose catalog moved", async () => {
    const listing = await buildListing({ endpointUrl: seller.url, maxLatencyMs: 700 });
    const candidates = [callTargetOf(listing)];
    const current = await generation();
    const stale = (BigInt(current) - 1n).toString();
    const rows = [1, 2, 3, 4].map((n) => newRow(listing, { n }));
    const answers = await insertClaimedInvocations(
      db(),
      rows.map((row, i) => ({ row, proved: { generation: i === 2 ? stale : current, candidates } })),
      TIMING,
    );
    expect(answers.map((a) => a?.invocation.id)).toEqual([rows[0]!.id, rows[1]!.id, undefined, rows[3]!.id]);
    expect(answers.map((a) => a?.invocation.input)).toEqual([{ n: 1 }, { n: 2 }, undefined, { n: 4 }]);
    const moved = await written(rows[2]!.id);
    expect([moved.invocation, moved.outbox, moved.attempts]).toEqual([undefined, [], []]);

    const single = newRow(listing, { n: 5 });
    const alone = await insertClaimedInvocation(db(), single, TIMING, {
      generation: current,
      candidates,
    });
    const reference = await written(single.id);
    for (const [i, answer] of answers.entries()) {
      if (!answer) continue;
      expect(answer.candidates).toEqual(alone!.candidates);
      expect(answer.attempts).toEqual([]);
      expect(comparable(answer.invocation as never)).toEqual(comparable(alone!.invocation as never));
      const got = await written(rows[i]!.id);
      expect(comparable(got.invocation)).toEqual(comparable(reference.invocation));
      expect(got.invocation.input).toEqual({ n: i + 1 });
      expect(got.invocation.selection).toEqual({ reason: "top_ranked_candidate", n: i + 1 });
      // A run claimed here has no outbox row: the recovery sweep finishes it if its process dies.
      expect(got.outbox).toEqual([]);
      expect(got.attempts.map((a) => [a.id, a.attempt_no, a.listing_id, a.status])).toEqual([
        [answer.firstAttempt!.id, 1, listing.id, "running"],
      ]);
      // min(700, maxCallMs 1000) + marginMs 1000, as the single claim sets it.
      expect(got.attempts[0]!.budgetMs).toBeCloseTo(reference.attempts[0]!.budgetMs, -1);
      expect(got.attempts[0]!.budgetMs).toBeCloseTo(1700, -1);
    }
  });

  it("writes nothing of the group when one row cannot be written", async () => {
    const listing = await buildListing({ endpointUrl: seller.url });
    const candidates = [callTargetOf(listing)];
    const current = await generation();
    const good = newRow(listing, { n: 1 });
    const bad = { ...newRow(listing, { n: 2 }), agent_id: randomUUID() }; // no such agent
    await expect(
      insertClaimedInvocations(
        db(),
        [good, bad].map((row) => ({ row, proved: { generation: current, candidates } })),
        TIMING,
      ),
    ).rejects.toThrow();
    expect(await db()("invocations").whereIn("id", [good.id, bad.id])).toEqual([]);
  });

  it("strict, fails the statement when one row's catalog moved, and writes nothing of the group", async () => {
    const listing = await buildListing({ endpointUrl: seller.url });
    const candidates = [callTargetOf(listing)];
    const current = await generation();
    const stale = (BigInt(current) - 1n).toString();
    const rows = [1, 2, 3].map((n) => newRow(listing, { n }));
    const claims = rows.map((row, i) => ({
      row,
      proved: { generation: i === 1 ? stale : current, candidates },
    }));
    const refused = await insertClaimedInvocations(db(), claims, TIMING, { strict: true }).catch((e) => e);
    expect(refusalOf(refused)).toBe(CATALOG_MOVED);
    expect(
      await db()("invocations").whereIn(
        "id",
        rows.map((r) => r.id),
      ),
    ).toEqual([]);
    expect(
      await db()("invocation_attempts").whereIn(
        "invocation_id",
        rows.map((r) => r.id),
      ),
    ).toEqual([]);

    // On one generation, strict writes and answers every row as the plain statement does.
    const fresh = rows.map((row, i) => ({
      row: { ...row, id: randomUUID() },
      proved: { generation: current, candidates },
      n: i,
    }));
    const answers = await insertClaimedInvocations(db(), fresh, TIMING, { strict: true });
    expect(answers.map((a) => a?.invocation.id)).toEqual(fresh.map((c) => c.row.id));
    expect(answers.map((a) => a?.invocation.input)).toEqual([{ n: 1 }, { n: 2 }, { n: 3 }]);
    for (const [i, answer] of answers.entries()) {
      const got = await written(fresh[i]!.row.id);
      expect(got.attempts.map((a) => [a.id, a.status])).toEqual([[answer!.firstAttempt!.id, "running"]]);
    }
  });

  it("stamps each row's spend day as the single claim does, and groups only rows of one column set", async () => {
    const listing = await buildListing({ endpointUrl: seller.url });
    const candidates = [callTargetOf(listing)];
    const current = await generation();
    const stamp = (row: NewInvocation): NewInvocation => ({ ...row, spend_day: UTC_TODAY });
    const stamped = [1, 2].map((n) => stamp(newRow(listing, { n })));
    const plain = newRow(listing, { n: 3 });
    expect(claimsShareColumns(stamped)).toBe(true);
    expect(claimsShareColumns([...stamped, plain])).toBe(false);
    await expect(
      insertClaimedInvocations(
        db(),
        [...stamped, plain].map((row) => ({ row, proved: { generation: current, candidates } })),
        TIMING,
      ),
    ).rejects.toThrow(/column sets differ/);

    await insertClaimedInvocations(
      db(),
      stamped.map((row) => ({ row, proved: { generation: current, candidates } })),
      TIMING,
      { strict: true },
    );
    const single = stamp(newRow(listing, { n: 4 }));
    await insertClaimedInvocation(
      db(),
      single,
      TIMING,
      { generation: current, candidates },
      { strict: true },
    );
    const days = await db().raw(
      "select id, spend_day::text as day, (now() at time zone 'UTC')::date::text as today from invocations where id = any(?)",
      [[...stamped, single].map((r) => r.id)],
    );
    expect(days.rows).toHaveLength(3);
    for (const row of days.rows) expect(row.day).toBe(row.today);
  });
});

describe("the grouped success", () => {
  async function claimed(listing: ListingRow, n: number): Promise<RunClaim> {
    const claim = await insertClaimedInvocation(db(), newRow(listing, { n }), TIMING, {
      generation: await generation(),
      candidates: [callTargetOf(listing)],
    });
    return claim!;
  }
  const record = (claim: RunClaim, output: unknown, proveListing = false): SuccessRecord => ({
    attemptId: claim.firstAttempt!.id,
    invocationId: claim.invocation.id,
    listingId: claim.invocation.listing_id,
    amountMicros: 0n,
    output,
    httpStatus: 200,
    latencyMs: 12,
    evidence: { http_status: 200, latency_ms: 12, listing_id: claim.invocation.listing_id },
    proveListing,
  });

  it("records each success as recordSuccess does, and leaves an invocation already ended alone", async () => {
    const listing = await buildListing({ endpointUrl: seller.url });
    const [a, b, ended, single] = [
      await claimed(listing, 1),
      await claimed(listing, 2),
      await claimed(listing, 3),
      await claimed(listing, 4),
    ];
    await db()("invocations").where({ id: ended.invocation.id }).update({ status: "failed" });
    expect(await db()("listings").where({ id: listing.id }).first("last_success_at")).toEqual({
      last_success_at: null,
    });

    const summaries = await recordSuccesses(db(), [
      record(a, { n: 1 }, true),
      record(b, null),
      record(ended, { n: 3 }),
    ]);
    const reference = await recordSuccess(db(), record(single, { n: 4 }));
    expect(summaries.map((s) => s?.id)).toEqual([a.invocation.id, b.invocation.id, undefined]);
    for (const summary of summaries.slice(0, 2)) {
      const { receipt_id: _r, output: _o, ...rest } = summary!;
      const { receipt_id: _s, output: _p, ...expected } = reference!;
      expect(comparable(rest)).toEqual(comparable(expected));
      expect(summary!.receipt_id).toEqual(expect.any(String));
    }
    expect(summaries[0]!.output).toEqual({ n: 1 });
    // A null output is stored as JSON null, as recordSuccess stores it.
    const nullOutput = await db().raw("select jsonb_typeof(output) as t from invocations where id = ?", [
      b.invocation.id,
    ]);
    expect(nullOutput.rows).toEqual([{ t: "null" }]);

    for (const claim of [a, b]) {
      const got = await written(claim.invocation.id);
      expect(got.invocation.status).toBe("succeeded");
      expect(got.attempts.map((x) => [x.status, x.http_status, x.latency_ms])).toEqual([
        ["succeeded", 200, 12],
      ]);
      expect(got.receipts.map((r) => [r.listing_id, r.amount_micros, r.agent_id])).toEqual([
        [listing.id, "0", buyer.agentId],
      ]);
    }
    const untouched = await written(ended.invocation.id);
    expect([untouched.invocation.status, untouched.attempts[0]!.status, untouched.receipts]).toEqual([
      "failed",
      "succeeded",
      [],
    ]);
    // Only the record that asked proves the listing.
    expect((await db()("listings").where({ id: listing.id }).first()).last_success_at).not.toBeNull();
  });

  it("strict, fails the statement when one invocation had already ended, and writes nothing of the group", async () => {
    const listing = await buildListing({ endpointUrl: seller.url });
    const [a, ended] = [await claimed(listing, 1), await claimed(listing, 2)];
    await db()("invocations").where({ id: ended.invocation.id }).update({ status: "failed" });
    const refused = await recordSuccesses(db(), [record(a, { n: 1 }, true), record(ended, { n: 2 })], {
      strict: true,
    }).catch((e) => e);
    expect(refusalOf(refused)).toBe(ENDED_ELSEWHERE);
    const untouched = await written(a.invocation.id);
    expect([untouched.invocation.status, untouched.attempts[0]!.status, untouched.receipts]).toEqual([
      "running",
      "running",
      [],
    ]);
    expect((await db()("listings").where({ id: listing.id }).first()).last_success_at).toBeNull();

    // Every record writable: each is written, with the receipt id its caller named.
    const b = await claimed(listing, 3);
    const receiptIds = [randomUUID(), randomUUID()];
    const summaries = await recordSuccesses(
      db(),
      [a, b].map((claim, i) => ({ ...record(claim, { n: i }), receiptId: receiptIds[i] })),
      { strict: true },
    );
    expect(summaries.map((s) => [s?.id, s?.receipt_id])).toEqual([
      [a.invocation.id, receiptIds[0]],
      [b.invocation.id, receiptIds[1]],
    ]);
    const receipts = await db()("receipts").whereIn("id", receiptIds).orderBy("id");
    expect(receipts.map((r) => r.invocation_id).sort()).toEqual([a.invocation.id, b.invocation.id].sort());
  });

  it("refuses two records of one invocation, writing nothing", async () => {
    const listing = await buildListing({ endpointUrl: seller.url });
    const claim = await claimed(listing, 1);
    await expect(recordSuccesses(db(), [record(claim, 1), record(claim, 2)])).rejects.toThrow(/twice/);
    expect((await written(claim.invocation.id)).receipts).toEqual([]);
  });
});

describe("executes sent together", () => {
  const counted = async (metric: typeof groupCommitRows, group: string) =>
    (await metric.get()).values.find((v) => v.labels.group === group)?.value ?? 0;

  it("are grouped, and each is answered with its own output, attempt and receipt", async () => {
    const task = `grouped-${randomBytes(4).toString("hex")}`;
    await buildListing({ endpointUrl: seller.url, tags: [task], concurrencyLimit: 100, rateLimit: 10_000 });
    const execute = (n: number) =>
      api("POST", "/api/execute", { key: buyer.apiKey, body: { task, input: { n } } });
    // The first read of the task is kept; the executes after it claim on the proved copy.
    expect((await execute(0)).status).toBe(200);
    const before = {
      claims: [
        await counted(groupCommitStatements, "proved_claims"),
        await counted(groupCommitRows, "proved_claims"),
      ],
      successes: [
        await counted(groupCommitStatements, "free_successes"),
        await counted(groupCommitRows, "free_successes"),
      ],
    };

    const delta = async () => ({
      claimStatements: (await counted(groupCommitStatements, "proved_claims")) - before.claims[0]!,
      claimRows: (await counted(groupCommitRows, "proved_claims")) - before.claims[1]!,
      successStatements: (await counted(groupCommitStatements, "free_successes")) - before.successes[0]!,
      successRows: (await counted(groupCommitRows, "free_successes")) - before.successes[1]!,
    });
    // Grouping needs writes that overlap. A loaded machine now and then serves a burst one request at a
    // time (a fresh-clone run once saw 24 claims in 24 statements), so up to five bursts of 24 are sent
    // until both writes have grouped some; a group commit that never groups fails every burst.
    let sent = 0;
    let counts = await delta();
    for (let burst = 0; burst < 5; burst++) {
      const answers = await Promise.all(Array.from({ length: 24 }, (_, i) => execute(sent + i + 1)));
      for (const [i, res] of answers.entries()) {
        expect(res.status).toBe(200);
        expect(res.body.output).toEqual({ echo: { n: sent + i + 1 } });
        const got = await written(res.body.invocation_id);
        expect(got.invocation.input).toEqual({ n: sent + i + 1 });
        expect(got.attempts.map((a) => a.status)).toEqual(["succeeded"]);
        expect(got.receipts.map((r) => r.id)).toEqual([res.body.receipt_id]);
      }
      sent += answers.length;
      counts = await delta();
      // Every execute's row was written by exactly one statement of each kind.
      expect(counts.claimRows).toBe(sent);
      expect(counts.successRows).toBe(sent);
      if (counts.claimStatements < sent && counts.successStatements < sent) break;
    }
    // Fewer statements than executes, for both writes: rows were grouped.
    expect(counts.claimStatements).toBeLessThan(sent);
    expect(counts.successStatements).toBeLessThan(sent);
  });
});
