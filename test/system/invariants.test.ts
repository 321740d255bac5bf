import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Knex } from "knex";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { db } from "../../shared/db/knex.js";
import { getQueue } from "../../shared/queues.js";
import { checkInvariants, invariantList } from "../../shared/system/index.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { fundedAgent } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// The invariant checker (docs/reliability.md "Invariants"): silent on a database that real paid, failed
// and free calls went through, and each check names exactly what breaks it when one fact is corrupted.
// Each corruption runs inside a transaction that is rolled back, so the cases do not leak into each
// other; constraints that would refuse a corruption are dropped inside that transaction, because the
// checker must not depend on them. A database of its own: the checker reads every row.

const root = fileURLToPath(new URL("../../", import.meta.url));
let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let okSeller: TestSeller;
let brokenSeller: TestSeller;
let buyer: TestAgent;
let other: TestAgent;
const ids = { succeeded: "", failed: "", free: "", receipt: "", order: "" };

beforeAll(async () => {
  ownDb = await useOwnDatabase("invariants");
  chain = await startLocalChain();
  await usePaidChain(chain);
  service = await startService();
  okSeller = await startSeller((call, res) =>
    json(res, 200, { success: true, output: { got: call.body.input } }),
  );
  brokenSeller = await startSeller((_call, res) => json(res, 500, { error: "boom" }));
  const seller = await buildAgent("seller");
  buyer = await fundedAgent(10);
  other = await buildAgent();
  const paid = await buildListing({ endpointUrl: okSeller.url, price: 0.1, sellerId: seller.agentId });
  const broken = await buildListing({ endpointUrl: brokenSeller.url, price: 0.1, sellerId: seller.agentId });
  const free = await buildListing({ endpointUrl: okSeller.url });
  const ok = await api("POST", `/api/invoke/${paid.id}`, { key: buyer.apiKey, body: { input: { q: 1 } } });
  expect(ok.status).toBe(200);
  ids.succeeded = ok.body.invocation_id;
  ids.receipt = ok.body.receipt_id;
  const failed = await api("POST", `/api/invoke/${broken.id}`, { key: buyer.apiKey, body: { input: {} } });
  expect(failed.status).toBe(502);
  ids.failed = failed.body.error.details.invocation_id;
  const ran = await api("POST", "/api/execute", {
    key: buyer.apiKey,
    body: { task: free.slug, input: {} },
    headers: { "x-idempotency-key": "invariants-free-1" },
  });
  expect(ran.status).toBe(200);
  ids.free = ran.body.invocation_id;
  // A verification order, left queued (no probes worker here): its 5 USDC stay held.
  const order = await api("POST", "/api/verification/orders", {
    key: buyer.apiKey,
    body: { target: okSeller.url, protocol: "http-json" },
  });
  expect(order.status).toBe(202);
  ids.order = order.body.order_id;
});

afterAll(async () => {
  await okSeller?.close();
  await brokenSeller?.close();
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

const check = (q: Knex | Knex.Transaction) =>
  checkInvariants(q, { executions: getQueue("executions"), graceSeconds: 30 });

/** Corrupts inside a transaction, checks, rolls back; returns the names of the checks that fired. */
async function brokenBy(corrupt: (trx: Knex.Transaction) => Promise<unknown>): Promise<string[]> {
  const trx = await db().transaction();
  try {
    await corrupt(trx);
    const report = await check(trx);
    return [...new Set(report.violations.map((v) => v.check))].sort();
  } finally {
    await trx.rollback();
  }
}

async function accountOf(trx: Knex.Transaction, agentId: string, kind: string): Promise<string> {
  const row = await trx("ledger_accounts").where({ owner_agent_id: agentId, kind, currency: "USDC" }).first();
  return row.id;
}

async function holdOf(trx: Knex.Transaction, invocationId: string): Promise<string> {
  return (
    await trx("ledger_transactions")
      .where({ idempotency_key: `ledger:hold:${invocationId}` })
      .first()
  ).id;
}

describe("the invariant checker", () => {
  it("finds nothing wrong after paid, failed and free calls, and lists every invariant it checked", async () => {
    expect(ids.failed).toEqual(expect.any(String));
    const report = await check(db());
    expect(report.violations).toEqual([]);
    expect(report.checks.map((c) => c.name)).toEqual(invariantList().map((c) => c.name));
    expect(report.checks.length).toBeGreaterThanOrEqual(15);
  });

  it("a balance moved without an entry breaks Σ = 0 and the account's history", async () => {
    expect(
      await brokenBy(async (trx) =>
        trx("ledger_accounts")
          .where({ id: await accountOf(trx, buyer.agentId, "agent_available") })
          .increment("balance_micros", 1),
      ),
    ).toEqual(["balance_matches_entries", "ledger_sums_to_zero"]);
  });

  it("an entry that does not balance its transaction", async () => {
    expect(
      await brokenBy(async (trx) => {
        const account = await accountOf(trx, buyer.agentId, "agent_available");
        const balance = BigInt((await trx("ledger_accounts").where({ id: account }).first()).balance_micros);
        await trx("ledger_entries").insert({
          transaction_id: await holdOf(trx, ids.succeeded),
          account_id: account,
          amount_micros: "5",
          balance_before_micros: balance.toString(),
          balance_after_micros: (balance + 5n).toString(),
        });
        await trx("ledger_accounts").where({ id: account }).increment("balance_micros", 5);
      }),
    ).toEqual(["ledger_sums_to_zero", "transaction_balances"]);
  });

  it("a negative balance, even with the constraint that forbids it gone", async () => {
    expect(
      await brokenBy(async (trx) => {
        await trx.raw("alter table ledger_accounts drop constraint ledger_accounts_balance_check");
        const held = await accountOf(trx, buyer.agentId, "agent_held");
        const available = await accountOf(trx, buyer.agentId, "agent_available");
        // Move the held balance and one micro more to available: Σ stays 0, held goes to -1.
        const heldBalance = BigInt((await trx("ledger_accounts").where({ id: held }).first()).balance_micros);
        await trx("ledger_accounts").where({ id: held }).update({ balance_micros: -1 });
        await trx("ledger_accounts")
          .where({ id: available })
          .increment("balance_micros", Number(heldBalance + 1n));
      }),
    ).toEqual(["balance_matches_entries", "no_negative_balance"]);
  });

  it("a hold resolved twice", async () => {
    expect(
      await brokenBy(async (trx) => {
        await trx.raw("drop index ledger_transactions_resolves_once");
        await trx("ledger_transactions").insert({
          kind: "release",
          idempotency_key: `corrupt:${ids.succeeded}`,
          resolves_transaction_id: await holdOf(trx, ids.succeeded),
        });
      }),
    ).toContain("hold_resolved_at_most_once");
  });

  it("an open invocation whose hold is already released, and a failed one whose hold was captured", async () => {
    expect(
      await brokenBy((trx) => trx("invocations").where({ id: ids.failed }).update({ status: "running" })),
    ).toEqual(["paid_invocation_money_state"]);
    expect(
      await brokenBy((trx) => trx("invocations").where({ id: ids.succeeded }).update({ status: "failed" })),
    ).toEqual(["capture_only_on_success", "paid_invocation_money_state"]);
  });

  it("evidence that disagrees with the ledger: a capture without its evidence row, a release without refund", async () => {
    const dropEvidence = (id: string, state: string) => (trx: Knex.Transaction) =>
      trx("payment_evidence").where({ subject_type: "invocation", subject_id: id, state }).delete();
    expect(await brokenBy(dropEvidence(ids.succeeded, "capture"))).toEqual([
      "evidence_matches_money",
      "receipt_has_invocation",
    ]);
    expect(await brokenBy(dropEvidence(ids.failed, "refund"))).toEqual(["evidence_matches_money"]);
    expect(await brokenBy(dropEvidence(ids.failed, "authorization"))).toEqual(["evidence_matches_money"]);
  });

  it("a verification order whose status, charge and ledger disagree", async () => {
    expect(
      await brokenBy((trx) =>
        trx("verification_orders").where({ id: ids.order }).update({ status: "completed" }),
      ),
    ).toEqual(["verification_order_money_state"]);
    expect(
      await brokenBy((trx) =>
        trx("verification_orders").where({ id: ids.order }).update({ charge_state: "captured" }),
      ),
    ).toEqual(["verification_order_money_state"]);
  });

  it("a receipt whose amount is not what was captured, and a second succeeded attempt", async () => {
    expect(
      await brokenBy((trx) => trx("receipts").where({ id: ids.receipt }).increment("amount_micros", 1)),
    ).toEqual(["receipt_has_invocation"]);
    expect(
      await brokenBy(async (trx) => {
        const first = await trx("invocation_attempts").where({ invocation_id: ids.succeeded }).first();
        await trx("invocation_attempts").insert({
          invocation_id: ids.succeeded,
          attempt_no: 99,
          listing_id: first.listing_id,
          status: "succeeded",
        });
      }),
    ).toEqual(["one_receipt_per_invocation"]);
  });

  it("an idempotency key that names another agent's invocation", async () => {
    expect(
      await brokenBy((trx) =>
        trx("idempotency_keys").where({ invocation_id: ids.free }).update({ agent_id: other.agentId }),
      ),
    ).toEqual(["idempotency_key_once"]);
  });

  it("an x402 payment settled for a call that failed, or voided for one that succeeded", async () => {
    const payFor = (invocationId: string, status: string) => async (trx: Knex.Transaction) => {
      const invocation = await trx("invocations").where({ id: invocationId }).first();
      const [quote] = await trx("quotes")
        .insert({
          rail: "x402",
          listing_id: invocation.listing_id,
          task: invocation.task,
          amount_micros: 100_000,
          currency: "USDC",
          expires_at: new Date(),
        })
        .returning("id");
      await trx("x402_payments").insert({
        quote_id: quote.id,
        invocation_id: invocationId,
        listing_id: invocation.listing_id,
        protocol: "x402v2",
        network: "eip155:31337",
        asset: `0x${"33".repeat(20)}`,
        pay_to: `0x${"22".repeat(20)}`,
        amount_micros: 100_000,
        payer: `0x${"44".repeat(20)}`,
        authorization_nonce: `0x${"55".repeat(32)}`,
        valid_after: 0,
        valid_before: 1,
        signature: "0x",
        requirements: {},
        authorization: {},
        status,
        tx_hash: `0x${"66".repeat(32)}`,
        block_number: 1,
      });
    };
    expect(await brokenBy(payFor(ids.failed, "settled"))).toEqual(["x402_payment_matches_outcome"]);
    expect(await brokenBy(payFor(ids.free, "voided"))).toEqual(["x402_payment_matches_outcome"]);
    expect(await brokenBy(payFor(ids.free, "settled"))).toEqual([]);
  });

  it("an on-chain state without its transaction, and a deposit posting for a deposit never credited", async () => {
    expect(
      await brokenBy(async (trx) => {
        await trx.raw("alter table deposits drop constraint deposits_credited_check");
        const [deposit] = await trx("deposits")
          .insert({
            agent_id: buyer.agentId,
            chain_id: 31337,
            tx_hash: `0x${"ab".repeat(32)}`,
            sender_address: `0x${"11".repeat(20)}`,
            platform_address: `0x${"22".repeat(20)}`,
            token_address: `0x${"33".repeat(20)}`,
            status: "credited",
            confirmations_required: 1,
            not_found_deadline_at: new Date(),
          })
          .returning("id");
        await trx("ledger_transactions").insert({
          kind: "deposit",
          idempotency_key: `corrupt:deposit:${deposit.id}`,
          reference_type: "deposit",
          reference_id: deposit.id,
        });
        await trx("deposits").where({ id: deposit.id }).update({ status: "pending" });
        await trx("deposits").insert({
          agent_id: buyer.agentId,
          chain_id: 31337,
          tx_hash: `0x${"cd".repeat(32)}`,
          sender_address: `0x${"11".repeat(20)}`,
          platform_address: `0x${"22".repeat(20)}`,
          token_address: `0x${"33".repeat(20)}`,
          status: "credited",
          amount_micros: 1,
          confirmations_required: 1,
          not_found_deadline_at: new Date(),
        });
      }),
    ).toEqual(["chain_posting_has_state", "chain_state_has_transaction"]);
  });

  it("an invocation awaiting approval with no approval, and an open invocation no job will run", async () => {
    expect(
      await brokenBy((trx) =>
        trx("invocations").where({ id: ids.free }).update({ status: "awaiting_approval" }),
      ),
    ).toEqual(["awaiting_approval_has_approval", "capture_only_on_success"]);
    // Its job completed long ago: marked running again, nothing will ever finish it. (It has a receipt,
    // so the receipt check speaks as well in each of these cases.)
    expect(
      await brokenBy((trx) =>
        trx("invocations")
          .where({ id: ids.free })
          .update({ status: "running", created_at: trx.raw("now() - interval '1 hour'") }),
      ),
    ).toEqual(["capture_only_on_success", "open_invocation_has_live_job"]);
    // Within the grace period, or with an unsent outbox row, it is in flight, not lost.
    expect(
      await brokenBy((trx) => trx("invocations").where({ id: ids.free }).update({ status: "running" })),
    ).toEqual(["capture_only_on_success"]);
    expect(
      await brokenBy(async (trx) => {
        await trx("invocations")
          .where({ id: ids.free })
          .update({ status: "queued", created_at: trx.raw("now() - interval '1 hour'") });
        // As the queue path leaves it before its job is sent (a run here writes no outbox row).
        await trx("job_outbox")
          .insert({ queue: "executions", job_id: ids.free, payload: { invocation_id: ids.free } })
          .onConflict(["queue", "job_id"])
          .merge({ enqueued_at: null });
      }),
    ).toEqual(["capture_only_on_success"]);
  });

  it("npm run check:invariants exits 0 on a sound database and 1 naming each violation", () => {
    const env = { ...process.env, DATABASE_URL: ownDb.url };
    const script = `${root}dist/scripts/check-invariants.js`;
    const sound = spawnSync(process.execPath, [script], { env, encoding: "utf8" });
    expect(sound.status, sound.stderr).toBe(0);
    expect(sound.stdout).toMatch(/invariants checked, 0 violations/);
    const broken = spawnSync(process.execPath, [script], {
      env: { ...env, DATABASE_URL: `${ownDb.url}_missing` },
      encoding: "utf8",
    });
    expect(broken.status).toBe(2);
  });

  it("exits 1 and prints the violation once the database is corrupted for real", async () => {
    await db()("receipts").where({ id: ids.receipt }).increment("amount_micros", 1);
    const script = `${root}dist/scripts/check-invariants.js`;
    const result = spawnSync(process.execPath, [script], {
      env: { ...process.env, DATABASE_URL: ownDb.url },
      encoding: "utf8",
    });
    expect(result.status, result.stderr).toBe(1);
    expect(result.stdout).toMatch(
      new RegExp(`VIOLATION receipt_has_invocation: receipt ${ids.receipt}: amount`),
    );
  });
});
