import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "../../shared/db/knex.js";
import { THIS_TRANSACTION } from "../../shared/money/evidence/store.js";
import {
  type AgentMovement,
  captureHold,
  creditDeposit,
  type HoldOutcome,
  holdAndResolveTogether,
  holdFunds,
} from "../../shared/money/ledger/flows.js";
import { accountFor, balances, platformAccount } from "../../shared/money/ledger/ledger.js";
import { findTransactionByKey, transactionEntries } from "../../shared/money/ledger/store.js";
import { buildAgent } from "../helpers/factories.js";
import { holdOf } from "../helpers/money.js";

// Holds captured or released together (holdAndResolveTogether, ledger.ts postTogether): one transaction
// and one flight for the group, each post written as it would be alone, and nothing of the group written
// when any part of it cannot be. Every test builds its own agents; the platform's revenue account is
// shared with other files, so only the entries these posts wrote on it are read.

afterAll(async () => {
  await closeDb();
});

const key = (label: string) => `test:${label}:${randomUUID()}`;

async function agents(n: number): Promise<string[]> {
  return Promise.all(Array.from({ length: n }, async () => (await buildAgent("both")).agentId));
}

/** A posted hold of `amount` from a buyer funded with `funds`. */
async function held(buyer: string, amount: bigint): Promise<AgentMovement> {
  const hold: AgentMovement = {
    agentId: buyer,
    currency: "USDC",
    amountMicros: amount,
    reference: { type: "test", id: randomUUID() },
    idempotencyKey: key("hold"),
  };
  await holdFunds(hold);
  return hold;
}

async function fund(agentId: string, amount: bigint): Promise<void> {
  await creditDeposit({
    agentId,
    currency: "USDC",
    amountMicros: amount,
    reference: { type: "test", id: agentId },
    idempotencyKey: key("deposit"),
  });
}

/**
 * A seller's payable account and the platform's fee account, made ahead: a post in one flight declines
 * an account on first use (on a fresh database no other test has made the fee account yet).
 */
async function payable(seller: string): Promise<void> {
  await accountFor(seller, "seller_payable", "USDC");
  await platformAccount("platform_revenue", "USDC");
}

/** [available, held, payable] of an agent. */
async function money(agentId: string): Promise<bigint[]> {
  const b = await balances(agentId, "USDC");
  return [b.available, b.held, b.payable];
}

/** A transaction's entries, as [account kind, amount, balance before, balance after]. */
async function entriesOf(idempotencyKey: string) {
  const tx = await findTransactionByKey(db(), idempotencyKey);
  if (!tx) return undefined;
  return (await transactionEntries(db(), tx.id)).map((e) => [
    e.kind,
    e.amount_micros,
    e.balance_before_micros,
    e.balance_after_micros,
  ]);
}

const capture = (
  hold: AgentMovement,
  seller: string,
  captureMicros: bigint,
  idempotencyKey = key("capture"),
): HoldOutcome => ({ capture: { ...holdOf(hold), idempotencyKey, sellerAgentId: seller, captureMicros } });
const release = (hold: AgentMovement, idempotencyKey = key("release")): HoldOutcome => ({
  release: { ...holdOf(hold), idempotencyKey },
});

/** The capture with one evidence row of its hold's subject, naming the capture's own transaction. */
function withCaptureEvidence(outcome: HoldOutcome, hold: AgentMovement): HoldOutcome {
  if ("capture" in outcome)
    outcome.capture.evidence = (split) => [
      {
        agent_id: hold.agentId,
        invocation_id: null,
        subject_type: "test",
        subject_id: hold.reference.id,
        state: "capture",
        source: "ledger_capture",
        source_ref: THIS_TRANSACTION,
        amount_micros: split.capturedMicros,
        currency: "USDC",
        details: { seller_micros: split.sellerMicros.toString() },
      },
    ];
  return outcome;
}

const together = (outcomes: HoldOutcome[], before?: (trx: Knex.Transaction) => Promise<unknown>) =>
  db().transaction((trx) => holdAndResolveTogether([], outcomes, trx, before?.(trx)));

describe("holds resolved together", () => {
  it("writes each capture and release as it would alone, balances running from one post to the next", async () => {
    const [a, b, seller] = (await agents(3)) as [string, string, string];
    await fund(a, 1_000n);
    await fund(b, 1_000n);
    await payable(seller);
    const [a1, a2, b1] = [await held(a, 300n), await held(a, 200n), await held(b, 400n)];
    const keys = [key("capture"), key("capture"), key("release")];
    const evidenced = withCaptureEvidence(capture(a1, seller, 300n, keys[0]), a1);

    const results = await together([evidenced, capture(a2, seller, 100n, keys[1]), release(b1, keys[2])]);

    expect(results.map((r) => r.replayed)).toEqual([false, false, false]);
    for (const [i, k] of keys.entries())
      expect((await findTransactionByKey(db(), k!))?.id).toBe(results[i]!.transactionId);
    // a: 1,000 − 300 − 200 held; 300 captured, 100 of 200 captured and 100 returned. b: released whole.
    expect(await money(a)).toEqual([600n, 0n, 0n]);
    expect(await money(b)).toEqual([1_000n, 0n, 0n]);
    // The seller's 97 % of each capture (fee = floor(3 %)), the second post starting where the first ended.
    expect(await money(seller)).toEqual([0n, 0n, 388n]);
    const [first, second, third] = [
      await entriesOf(keys[0]!),
      await entriesOf(keys[1]!),
      await entriesOf(keys[2]!),
    ];
    expect(first!.filter((e) => e[0] !== "platform_revenue")).toEqual([
      ["agent_held", -300n, 500n, 200n],
      ["seller_payable", 291n, 0n, 291n],
    ]);
    expect(second!.filter((e) => e[0] !== "platform_revenue")).toEqual([
      ["agent_held", -200n, 200n, 0n],
      ["seller_payable", 97n, 291n, 388n],
      ["agent_available", 100n, 500n, 600n],
    ]);
    expect(third).toEqual([
      ["agent_held", -400n, 400n, 0n],
      ["agent_available", 400n, 600n, 1_000n],
    ]);
    // The fee on revenue: 9 then 3, the second entry starting at the first's balance after.
    const fees = [first!, second!].map((entries) => entries.find((e) => e[0] === "platform_revenue")!);
    expect(fees.map((e) => e[1])).toEqual([9n, 3n]);
    expect(fees[1]![2]).toBe(fees[0]![3]);
    // The evidence went in with its post, naming that post's transaction.
    const row = await db()("payment_evidence").where({ subject_id: a1.reference.id }).first();
    expect(row).toMatchObject({
      state: "capture",
      source_ref: results[0]!.transactionId,
      amount_micros: "300",
    });
  });

  it("writes nothing when any part cannot be written; each part alone is then answered as before", async () => {
    const [a, b, seller] = (await agents(3)) as [string, string, string];
    await fund(a, 1_000n);
    await fund(b, 1_000n);
    const [a1, b1] = [await held(a, 300n), await held(b, 400n)];
    const good = key("capture");
    const unchanged = async () => {
      expect(await findTransactionByKey(db(), good)).toBeUndefined();
      expect([await money(a), await money(b), await money(seller)]).toEqual([
        [700n, 300n, 0n],
        [600n, 400n, 0n],
        [0n, 0n, 0n],
      ]);
    };

    // An account on first use (the seller's payable): the two-step post alone creates it. The capture's
    // evidence is not written either.
    const evidenced = withCaptureEvidence(capture(a1, seller, 300n, good), a1);
    await expect(together([evidenced, release(b1)])).rejects.toThrow(/account of the post does not exist/);
    await unchanged();
    expect(await db()("payment_evidence").where({ subject_id: a1.reference.id })).toEqual([]);
    await payable(seller);

    // A hold that holds something else than its caller's records say.
    const wrong = release({ ...b1, amountMicros: 399n });
    await expect(together([capture(a1, seller, 300n, good), wrong])).rejects.toThrow(
      /not what its caller expected/,
    );
    await unchanged();

    // A hold already resolved: the write declines what only the two-step post answers.
    await captureHold({
      ...holdOf(b1),
      idempotencyKey: key("capture"),
      sellerAgentId: seller,
      captureMicros: 400n,
    });
    const afterB = [await money(b), await money(seller)];
    await expect(together([capture(a1, seller, 300n, good), release(b1)])).rejects.toThrow();
    expect(await findTransactionByKey(db(), good)).toBeUndefined();
    expect([await money(a), await money(b), await money(seller)]).toEqual([[700n, 300n, 0n], ...afterB]);

    // A statement of the caller's, sent before, that fails.
    await expect(
      together([capture(a1, seller, 300n, good)], (trx) => trx.raw("select 1 / 0")),
    ).rejects.toThrow(/division by zero/);
    expect(await findTransactionByKey(db(), good)).toBeUndefined();

    // Alone, the good capture posts.
    await captureHold({ ...holdOf(a1), idempotencyKey: good, sellerAgentId: seller, captureMicros: 300n });
    expect(await money(a)).toEqual([700n, 0n, 0n]);
  });

  it("refuses a group it cannot send as one flight that ends its transaction, writing nothing", async () => {
    const [a, seller] = (await agents(2)) as [string, string];
    await fund(a, 1_000n);
    await payable(seller);
    const [a1, a2] = [await held(a, 100n), await held(a, 100n)];
    const same = key("capture");
    await expect(
      together([capture(a1, seller, 100n, same), capture(a2, seller, 100n, same)]),
    ).rejects.toThrow(/idempotency key appears twice/);
    await expect(together([capture(a1, seller, 100n), release(a1)])).rejects.toThrow(/resolved twice/);
    // A savepoint cannot send its transaction's COMMIT.
    await expect(
      db().transaction((trx) =>
        trx.transaction((savepoint) => holdAndResolveTogether([], [release(a1)], savepoint)),
      ),
    ).rejects.toThrow(/top-level transaction/);
    expect(await money(a)).toEqual([800n, 200n, 0n]);
    expect(await findTransactionByKey(db(), same)).toBeUndefined();
  });
});

describe("holds made together", () => {
  const movement = (buyer: string, amount: bigint): AgentMovement => ({
    agentId: buyer,
    currency: "USDC",
    amountMicros: amount,
    reference: { type: "test", id: randomUUID() },
    idempotencyKey: key("hold"),
  });

  it("holds for each as it would alone, and nothing at all when one is short", async () => {
    const [a, b] = (await agents(2)) as [string, string];
    await fund(a, 1_000n);
    await fund(b, 1_000n);
    // Each buyer's held account is made by a first hold: a post in one flight declines it.
    await held(a, 1n);
    await held(b, 1n);
    const holds = [movement(a, 300n), movement(a, 200n), movement(b, 400n)];
    const results = await db().transaction((trx) => holdAndResolveTogether(holds, [], trx));
    for (const [i, hold] of holds.entries())
      expect((await findTransactionByKey(db(), hold.idempotencyKey))?.id).toBe(results[i]!.transactionId);
    expect([await money(a), await money(b)]).toEqual([
      [499n, 501n, 0n],
      [599n, 401n, 0n],
    ]);
    expect(await entriesOf(holds[1]!.idempotencyKey)).toEqual([
      ["agent_available", -200n, 699n, 499n],
      ["agent_held", 200n, 301n, 501n],
    ]);

    // b has 599 left: a group asking 600 of it writes nothing, a's hold in it included.
    const short = [movement(a, 100n), movement(b, 600n)];
    await expect(db().transaction((trx) => holdAndResolveTogether(short, [], trx))).rejects.toThrow(
      /below zero/,
    );
    expect(await findTransactionByKey(db(), short[0]!.idempotencyKey)).toBeUndefined();
    expect([await money(a), await money(b)]).toEqual([
      [499n, 501n, 0n],
      [599n, 401n, 0n],
    ]);
  });

  it("writes a group of any size in one statement, each entry running on from the one before", async () => {
    const [a] = (await agents(1)) as [string];
    await fund(a, 1_000n);
    await held(a, 1n);
    // 11 posts in one statement (writeTransactionsInFlight), one balance chain through them.
    const holds = Array.from({ length: 11 }, (_, i) => movement(a, BigInt(10 * (i + 1))));
    const results = await db().transaction((trx) => holdAndResolveTogether(holds, [], trx));
    expect(new Set(results.map((r) => r.transactionId)).size).toBe(11);
    let available = 999n;
    for (const [i, hold] of holds.entries()) {
      const tx = await findTransactionByKey(db(), hold.idempotencyKey);
      expect(tx?.id).toBe(results[i]!.transactionId);
      expect(tx?.reference_id).toBe(hold.reference?.id);
      const entries = await entriesOf(hold.idempotencyKey);
      expect(entries?.[0]).toEqual([
        "agent_available",
        -hold.amountMicros,
        available,
        available - hold.amountMicros,
      ]);
      available -= hold.amountMicros;
    }
    // 1 + 10 + 20 + … + 110 = 661 held.
    expect(await money(a)).toEqual([339n, 661n, 0n]);
  });

  it("holds and outcomes of earlier holds in one transaction: outcomes first, then holds, all or nothing", async () => {
    const [a, seller] = (await agents(2)) as [string, string];
    await fund(a, 1_000n);
    await payable(seller);
    const a1 = await held(a, 300n);
    // 700 available: a hold of 800 fits only after the partial capture below returns 100 of a1's 300.
    const [captured, holds] = [capture(a1, seller, 200n), [movement(a, 800n)]];
    const results = await db().transaction((trx) => holdAndResolveTogether(holds, [captured], trx));
    expect(results.length).toBe(2);
    expect(await money(a)).toEqual([0n, 800n, 0n]);
    expect(await entriesOf(holds[0]!.idempotencyKey)).toEqual([
      ["agent_available", -800n, 800n, 0n],
      ["agent_held", 800n, 0n, 800n],
    ]);
    // One transaction wrote both: the same xmin.
    const { rows } = await db().raw(
      "select count(distinct xmin::text)::int as n from ledger_transactions where id = any(?::uuid[])",
      [results.map((r) => r.transactionId)],
    );
    expect(rows[0].n).toBe(1);

    // A hold short even after the release written with it fails the release too.
    const before = await money(a);
    const [release2, short] = [release(holds[0]!), [movement(a, 900n)]];
    await expect(db().transaction((trx) => holdAndResolveTogether(short, [release2], trx))).rejects.toThrow(
      /below zero/,
    );
    expect(await money(a)).toEqual(before);
  });
});
