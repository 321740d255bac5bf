import { randomUUID } from "node:crypto";
import fc from "fast-check";
import type { Knex } from "knex";
import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "../../shared/db/knex.js";
import { AppError } from "../../shared/errors.js";
import { type PostEvidence, THIS_TRANSACTION } from "../../shared/money/evidence/store.js";
import {
  type AgentMovement,
  captureHold,
  creditDeposit,
  holdFunds,
  postBond,
  recordPayout,
  releaseBond,
  releaseHold,
} from "../../shared/money/ledger/flows.js";
import {
  accountFor,
  balances,
  type Currency,
  HoldAlreadyResolvedError,
  type LedgerReference,
  platformAccount,
  postTransaction,
  retryTransient,
  TakenSinceLock,
} from "../../shared/money/ledger/ledger.js";
import {
  accountsOwnedBy,
  countEntries,
  entriesOfTransactions,
  findTransactionByKey,
  lockAccounts,
  sumEntriesByCurrency,
  transactionEntries,
} from "../../shared/money/ledger/store.js";
import { buildAgent } from "../helpers/factories.js";
import { holdOf } from "../helpers/money.js";
import { waitFor } from "../helpers/processes.js";

// Every test builds its own agents, so files and tests run in parallel on the shared database. The
// platform accounts (revenue, chain clearing) are shared by everyone: tests read only the entries their
// own transactions wrote on them, never those accounts' balances.

afterAll(async () => {
  await closeDb();
});

const ref = (id: string = randomUUID()): LedgerReference => ({ type: "test", id });
const key = (label: string) => `test:${label}:${randomUUID()}`;

/** A movement with a fresh reference and key. */
function mv(
  agentId: string,
  amountMicros: bigint,
  label: string,
  currency: Currency = "USDC",
): AgentMovement {
  return { agentId, currency, amountMicros, reference: ref(), idempotencyKey: key(label) };
}

/** The agent's [available, held, payable, bonds]. */
async function balancesOf(agentId: string, currency: Currency = "USDC"): Promise<bigint[]> {
  const b = await balances(agentId, currency);
  return [b.available, b.held, b.payable, b.bonds];
}

async function agentIds(n: number): Promise<string[]> {
  return Promise.all(Array.from({ length: n }, async () => (await buildAgent("both")).agentId));
}

async function expectPaymentRequired(promise: Promise<unknown>): Promise<AppError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AppError);
  expect((error as AppError).code).toBe("PAYMENT_REQUIRED");
  return error as AppError;
}

/** A posted hold as its records say: its transaction, and its held entry's owner, unit and amount. */
async function readHold(holdKey: string) {
  const hold = await findTransactionByKey(db(), holdKey);
  const held = (await transactionEntries(db(), hold!.id)).find((e) => e.kind === "agent_held")!;
  return {
    transactionId: hold!.id,
    agentId: held.owner_agent_id,
    currency: held.currency,
    amountMicros: held.amount_micros,
    reference: { type: hold!.reference_type, id: hold!.reference_id },
  };
}

async function entryList(transactionId: string) {
  return (await transactionEntries(db(), transactionId)).map((e) => [e.kind, e.amount_micros]);
}

describe("ledger flows", () => {
  it("deposit, hold, capture with the 97/3 split and payout move exact amounts", async () => {
    const [buyer, seller] = (await agentIds(2)) as [string, string];
    const deposit = await creditDeposit(mv(buyer, 5_000_000n, "deposit"));
    expect(deposit.replayed).toBe(false);
    expect(await entryList(deposit.transactionId)).toEqual([
      ["chain_clearing", -5_000_000n],
      ["agent_available", 5_000_000n],
    ]);
    expect(await balancesOf(buyer)).toEqual([5_000_000n, 0n, 0n, 0n]);

    const invocation = ref();
    const held = { ...mv(buyer, 1_234_567n, "hold"), reference: invocation };
    const holdKey = held.idempotencyKey;
    await holdFunds(held);
    expect(await balancesOf(buyer)).toEqual([3_765_433n, 1_234_567n, 0n, 0n]);
    const hold = await readHold(holdKey);
    expect(hold).toMatchObject({
      agentId: buyer,
      currency: "USDC",
      amountMicros: 1_234_567n,
      reference: invocation,
    });

    const captureKey = key("capture");
    const capture = await captureHold({ ...holdOf(held), sellerAgentId: seller, idempotencyKey: captureKey });
    // fee = floor(1_234_567 × 3 / 100) = floor(37_037.01) = 37_037; the seller gets the rest.
    expect(capture).toMatchObject({ replayed: false, feeMicros: 37_037n, sellerMicros: 1_197_530n });
    expect(await balancesOf(buyer)).toEqual([3_765_433n, 0n, 0n, 0n]);
    expect(await balancesOf(seller)).toEqual([0n, 0n, 1_197_530n, 0n]);

    const revenue = await platformAccount("platform_revenue", "USDC");
    const entries = await transactionEntries(db(), capture.transactionId);
    expect(entries.map((e) => [e.kind, e.owner_agent_id, e.amount_micros])).toEqual([
      ["agent_held", buyer, -1_234_567n],
      ["seller_payable", seller, 1_197_530n],
      ["platform_revenue", null, 37_037n],
    ]);
    expect(entries[2]!.account_id).toBe(revenue.id);
    for (const e of entries) expect(e.balance_after_micros).toBe(e.balance_before_micros + e.amount_micros);
    expect(entries[0]).toMatchObject({ balance_before_micros: 1_234_567n, balance_after_micros: 0n });
    expect(await findTransactionByKey(db(), captureKey)).toMatchObject({
      id: capture.transactionId,
      kind: "capture",
      reference_type: invocation.type,
      reference_id: invocation.id,
      resolves_transaction_id: hold!.transactionId,
      metadata: { hold_key: holdKey, seller_agent_id: seller, fee_micros: "37037", seller_micros: "1197530" },
    });

    const payout = await recordPayout(mv(seller, 1_197_530n, "payout"));
    expect(await balancesOf(seller)).toEqual([0n, 0n, 0n, 0n]);
    expect(await entryList(payout.transactionId)).toEqual([
      ["seller_payable", -1_197_530n],
      ["chain_clearing", 1_197_530n],
    ]);
    const error = await expectPaymentRequired(recordPayout(mv(seller, 1n, "payout")));
    expect(error.details).toMatchObject({ account_kind: "seller_payable", available_usdc: "0.000000" });
  });

  it("a first-party capture (no seller) credits both parts to platform revenue, as two entries", async () => {
    const [buyer] = (await agentIds(1)) as [string];
    await creditDeposit(mv(buyer, 100n, "deposit"));
    const hold = mv(buyer, 100n, "hold");
    await holdFunds(hold);
    const capture = await captureHold({
      ...holdOf(hold),
      sellerAgentId: null,
      idempotencyKey: key("capture"),
    });
    expect(capture).toMatchObject({ feeMicros: 3n, sellerMicros: 97n });
    const entries = await transactionEntries(db(), capture.transactionId);
    expect(entries.map((e) => [e.kind, e.amount_micros])).toEqual([
      ["agent_held", -100n],
      ["platform_revenue", 97n],
      ["platform_revenue", 3n],
    ]);
    // Two entries on one account chain their balances: the second starts where the first ended.
    expect(entries[2]!.balance_before_micros).toBe(entries[1]!.balance_after_micros);
  });

  it("a capture too small to carry a fee writes no zero entry", async () => {
    const [buyer, seller] = (await agentIds(2)) as [string, string];
    await creditDeposit(mv(buyer, 33n, "deposit"));
    const hold = mv(buyer, 33n, "hold");
    await holdFunds(hold);
    const capture = await captureHold({
      ...holdOf(hold),
      sellerAgentId: seller,
      idempotencyKey: key("capture"),
    });
    expect(capture).toMatchObject({ feeMicros: 0n, sellerMicros: 33n });
    expect(await entryList(capture.transactionId)).toEqual([
      ["agent_held", -33n],
      ["seller_payable", 33n],
    ]);
  });

  it("release returns a hold to available; a hold resolves once, whichever way", async () => {
    const [buyer, seller] = (await agentIds(2)) as [string, string];
    await creditDeposit(mv(buyer, 1_000n, "deposit"));
    const hold = mv(buyer, 400n, "hold");
    await holdFunds(hold);
    expect(await balancesOf(buyer)).toEqual([600n, 400n, 0n, 0n]);
    const releaseKey = key("release");
    const release = await releaseHold({ ...holdOf(hold), idempotencyKey: releaseKey });
    expect(release.replayed).toBe(false);
    expect(await entryList(release.transactionId)).toEqual([
      ["agent_held", -400n],
      ["agent_available", 400n],
    ]);
    expect(await balancesOf(buyer)).toEqual([1_000n, 0n, 0n, 0n]);

    // The same release again is a replay; a capture or a second release under another key is refused.
    expect(await releaseHold({ ...holdOf(hold), idempotencyKey: releaseKey })).toEqual({
      transactionId: release.transactionId,
      replayed: true,
    });
    await expect(
      captureHold({ ...holdOf(hold), sellerAgentId: seller, idempotencyKey: key("capture") }),
    ).rejects.toBeInstanceOf(HoldAlreadyResolvedError);
    await expect(releaseHold({ ...holdOf(hold), idempotencyKey: key("release") })).rejects.toBeInstanceOf(
      HoldAlreadyResolvedError,
    );
    expect(await balancesOf(buyer)).toEqual([1_000n, 0n, 0n, 0n]);
    expect(await balancesOf(seller)).toEqual([0n, 0n, 0n, 0n]);
    await expect(
      releaseHold({ ...holdOf(hold), holdKey: key("missing"), idempotencyKey: key("release") }),
    ).rejects.toThrow(/no ledger hold/);
  });

  it("bonds move between available and bonds, and a bond larger than available is refused", async () => {
    const [seller] = (await agentIds(1)) as [string];
    await creditDeposit(mv(seller, 1_500_000n, "deposit"));
    await postBond(mv(seller, 1_000_000n, "bond"));
    expect(await balancesOf(seller)).toEqual([500_000n, 0n, 0n, 1_000_000n]);
    const error = await expectPaymentRequired(postBond(mv(seller, 1_000_000n, "bond")));
    expect(error.details).toMatchObject({
      account_kind: "agent_available",
      available_usdc: "0.500000",
      required_usdc: "1.000000",
    });
    await releaseBond(mv(seller, 1_000_000n, "bond-release"));
    expect(await balancesOf(seller)).toEqual([1_500_000n, 0n, 0n, 0n]);
    await expectPaymentRequired(releaseBond(mv(seller, 1n, "bond-release")));
  });

  it("insufficient funds: PAYMENT_REQUIRED with the amounts, and nothing is written", async () => {
    const [buyer] = (await agentIds(1)) as [string];
    await creditDeposit(mv(buyer, 2_500_000n, "deposit"));
    const accounts = [
      (await accountFor(buyer, "agent_available", "USDC")).id,
      (await accountFor(buyer, "agent_held", "USDC")).id,
    ];
    const entriesBefore = await countEntries(db(), accounts);
    const hold = mv(buyer, 2_500_001n, "hold");

    const error = await expectPaymentRequired(holdFunds(hold));
    expect(error.message).toBe("insufficient funds");
    expect(error.spec.status).toBe(402);
    expect(error.details).toEqual({
      account_kind: "agent_available",
      currency: "USDC",
      available_usdc: "2.500000",
      required_usdc: "2.500001",
    });
    expect(await countEntries(db(), accounts)).toBe(entriesBefore);
    expect(await findTransactionByKey(db(), hold.idempotencyKey)).toBeUndefined();
    expect(await balancesOf(buyer)).toEqual([2_500_000n, 0n, 0n, 0n]);

    // The refused key was never recorded, so it can be used once the funds are there.
    await creditDeposit(mv(buyer, 1n, "deposit"));
    expect((await holdFunds(hold)).replayed).toBe(false);
    expect(await balancesOf(buyer)).toEqual([0n, 2_500_001n, 0n, 0n]);
  });

  it("an idempotency key posts once, also when the same post races itself", async () => {
    const [buyer] = (await agentIds(1)) as [string];
    const deposit = mv(buyer, 700n, "deposit");
    const first = await creditDeposit(deposit);
    expect(await creditDeposit(deposit)).toEqual({ transactionId: first.transactionId, replayed: true });
    expect(await balancesOf(buyer)).toEqual([700n, 0n, 0n, 0n]);

    const raced = mv(buyer, 700n, "deposit");
    const results = await Promise.all(Array.from({ length: 8 }, () => creditDeposit(raced)));
    expect(results.filter((r) => !r.replayed)).toHaveLength(1);
    expect(new Set(results.map((r) => r.transactionId)).size).toBe(1);
    expect(await balancesOf(buyer)).toEqual([1_400n, 0n, 0n, 0n]);

    // The same key for a different movement is a programming error, not a replay.
    await expect(creditDeposit({ ...deposit, amountMicros: 701n })).rejects.toThrow(/already used/);
    await expect(holdFunds(deposit)).rejects.toThrow(/already used/);
    expect(await balancesOf(buyer)).toEqual([1_400n, 0n, 0n, 0n]);
  });

  it("a release or capture racing itself under one key resolves the hold once and replays, never 'resolved'", async () => {
    const [buyer, seller] = (await agentIds(2)) as [string, string];
    await creditDeposit(mv(buyer, 100_000n, "deposit"));
    for (let round = 0; round < 200; round++) {
      const hold = mv(buyer, 100n, "hold");
      await holdFunds(hold);
      const resolveKey = key("resolve");
      const resolve = () =>
        round % 2 === 0
          ? releaseHold({ ...holdOf(hold), idempotencyKey: resolveKey })
          : captureHold({ ...holdOf(hold), sellerAgentId: seller, idempotencyKey: resolveKey });
      const results = await Promise.all(Array.from({ length: 4 }, resolve));
      expect(results.filter((r) => !r.replayed)).toHaveLength(1);
      expect(new Set(results.map((r) => r.transactionId)).size).toBe(1);
    }
  });

  it("a capture and a release racing under their own keys: one resolves the hold, the other is told so", async () => {
    const [buyer, seller] = (await agentIds(2)) as [string, string];
    await creditDeposit(mv(buyer, 100_000n, "deposit"));
    let captured = 0;
    for (let round = 0; round < 100; round++) {
      const hold = mv(buyer, 100n, "hold");
      await holdFunds(hold);
      const outcomes = await Promise.allSettled([
        captureHold({ ...holdOf(hold), sellerAgentId: seller, idempotencyKey: key("capture") }),
        releaseHold({ ...holdOf(hold), idempotencyKey: key("release") }),
      ]);
      const won = outcomes.filter((o) => o.status === "fulfilled");
      expect(won).toHaveLength(1);
      const lost = outcomes.find((o) => o.status === "rejected") as PromiseRejectedResult;
      expect(lost.reason).toBeInstanceOf(HoldAlreadyResolvedError);
      if (outcomes[0]!.status === "fulfilled") captured++;
    }
    const [available, held, ,] = await balancesOf(buyer);
    expect(held).toBe(0n);
    expect(available).toBe(100_000n - BigInt(captured) * 100n);
    expect((await balancesOf(seller))[2]).toBe(BigInt(captured) * 97n);
  });

  it("USDC and tUSDC never mix: separate balances, and a leg pair across currencies is refused", async () => {
    const [agent, other] = (await agentIds(2)) as [string, string];
    await creditDeposit(mv(agent, 10n, "deposit", "USDC"));
    await creditDeposit(mv(agent, 99n, "deposit", "tUSDC"));
    expect(await balancesOf(agent, "USDC")).toEqual([10n, 0n, 0n, 0n]);
    expect(await balancesOf(agent, "tUSDC")).toEqual([99n, 0n, 0n, 0n]);

    const usdc = await accountFor(agent, "agent_available", "USDC");
    const tusdc = await accountFor(other, "agent_available", "tUSDC");
    const entriesBefore = await countEntries(db(), [usdc.id, tusdc.id]);
    const transferKey = key("transfer");
    await expect(
      postTransaction({
        kind: "transfer",
        idempotencyKey: transferKey,
        legs: [
          { account: usdc, amountMicros: -5n },
          { account: tusdc, amountMicros: 5n },
        ],
      }),
    ).rejects.toThrow(/cannot mix currencies/);
    expect(await countEntries(db(), [usdc.id, tusdc.id])).toBe(entriesBefore);
    expect(await findTransactionByKey(db(), transferKey)).toBeUndefined();
    expect(await balancesOf(agent, "USDC")).toEqual([10n, 0n, 0n, 0n]);
    expect(await balancesOf(other, "tUSDC")).toEqual([0n, 0n, 0n, 0n]);

    // tUSDC funds never pay for a USDC hold, nor the other way round.
    await expectPaymentRequired(holdFunds(mv(agent, 11n, "hold", "USDC")));
    await expectPaymentRequired(holdFunds(mv(agent, 100n, "hold", "tUSDC")));
  });

  it("creates each account once, also when many callers ask for it at the same time", async () => {
    const [agent] = (await agentIds(1)) as [string];
    const accounts = await Promise.all(
      Array.from({ length: 10 }, () => accountFor(agent, "agent_available", "tUSDC")),
    );
    expect(new Set(accounts.map((a) => a.id)).size).toBe(1);
    expect(accounts[0]).toMatchObject({ owner_agent_id: agent, balance_micros: 0n, allow_negative: false });
    const clearing = await Promise.all(
      Array.from({ length: 5 }, () => platformAccount("chain_clearing", "tUSDC")),
    );
    expect(new Set(clearing.map((a) => a.id)).size).toBe(1);
    expect(clearing[0]).toMatchObject({ owner_agent_id: null, allow_negative: true });
  });

  it("names accounts by key: created on first use, and a replay matches them by key or by id", async () => {
    const [agent] = (await agentIds(1)) as [string];
    expect(await accountsOwnedBy(db(), [agent])).toEqual([]);
    const transferKey = key("keyed");
    const legs = [
      { account: { owner: null, kind: "chain_clearing", currency: "USDC" } as const, amountMicros: -7n },
      { account: { owner: agent, kind: "agent_available", currency: "USDC" } as const, amountMicros: 7n },
    ];
    const first = await postTransaction({ kind: "deposit", idempotencyKey: transferKey, legs });
    expect(first.replayed).toBe(false);
    const [created] = await accountsOwnedBy(db(), [agent]);
    expect(created).toMatchObject({ kind: "agent_available", currency: "USDC", balance_micros: 7n });
    expect(created!.allow_negative).toBe(false);

    // The same legs again, by key and then with the agent's account by id: the first transaction.
    expect(await postTransaction({ kind: "deposit", idempotencyKey: transferKey, legs })).toEqual({
      transactionId: first.transactionId,
      replayed: true,
    });
    const byId = [legs[0]!, { account: { id: created!.id }, amountMicros: 7n }];
    expect(
      (await postTransaction({ kind: "deposit", idempotencyKey: transferKey, legs: byId })).replayed,
    ).toBe(true);
    // The key with another account (the agent's held funds) is a different transaction: a bug.
    const other = [
      legs[0]!,
      { account: { owner: agent, kind: "agent_held", currency: "USDC" } as const, amountMicros: 7n },
    ];
    await expect(
      postTransaction({ kind: "deposit", idempotencyKey: transferKey, legs: other }),
    ).rejects.toThrow(/already used for a different transaction/);
    expect(await balancesOf(agent)).toEqual([7n, 0n, 0n, 0n]);
  });

  it("refuses legs that do not sum to zero, zero legs and single legs as programming errors", async () => {
    const [agent] = (await agentIds(1)) as [string];
    const a = await accountFor(agent, "agent_available", "USDC");
    const b = await accountFor(agent, "agent_held", "USDC");
    const post = (...legs: [{ id: string }, bigint][]) =>
      postTransaction({
        kind: "transfer",
        idempotencyKey: key("bad"),
        legs: legs.map(([account, amountMicros]) => ({ account, amountMicros })),
      });
    await expect(post([a, -5n], [b, 4n])).rejects.toThrow(/sum to zero/);
    await expect(post([a, 0n], [b, 0n])).rejects.toThrow(/non-zero/);
    await expect(post([a, 0n])).rejects.toThrow(/two legs/);
    await expect(post([a, -1n], [{ id: randomUUID() }, 1n])).rejects.toThrow(/does not exist/);
    await expect(holdFunds(mv(agent, 0n, "hold"))).rejects.toThrow(/positive/);
    expect(await countEntries(db(), [a.id, b.id])).toBe(0);
  });
});

describe("evidence written with a post", () => {
  const evidenceOf = (subjectId: string) =>
    db()("payment_evidence").where({ subject_type: "test", subject_id: subjectId });

  it("goes in with the post, naming the posted transaction where asked", async () => {
    const [buyer, seller] = (await agentIds(2)) as [string, string];
    await creditDeposit(mv(buyer, 1_000_000n, "deposit"));
    const subject = randomUUID();
    const row = (state: "authorization" | "execution" | "capture" | "outcome") => ({
      agent_id: buyer,
      subject_type: "test",
      subject_id: subject,
      state,
      source: `test_${state}`,
    });
    const hold = mv(buyer, 100_000n, "hold");
    const held = await holdFunds({
      ...hold,
      evidence: [{ ...row("authorization"), source_ref: THIS_TRANSACTION, amount_micros: 100_000n }],
    });
    const splits: unknown[] = [];
    const captured = await captureHold({
      ...holdOf(hold),
      idempotencyKey: key("capture"),
      sellerAgentId: seller,
      captureMicros: 60_000n,
      evidence: (split) => {
        splits.push(split);
        return [
          { ...row("execution"), source_ref: "attempt-1" },
          { ...row("capture"), source_ref: THIS_TRANSACTION, amount_micros: split.capturedMicros },
          { ...row("outcome"), source_ref: subject, details: { fee: split.feeMicros.toString() } },
        ];
      },
    });
    expect(splits).toEqual([
      { capturedMicros: 60_000n, feeMicros: 1_800n, sellerMicros: 58_200n, returnedMicros: 40_000n },
    ]);
    const rows = await evidenceOf(subject);
    expect(rows.map((r) => [r.state, r.source_ref, r.amount_micros]).sort()).toEqual([
      ["authorization", held.transactionId, "100000"],
      ["capture", captured.transactionId, "60000"],
      ["execution", "attempt-1", null],
      ["outcome", subject, null],
    ]);
    expect(rows.find((r) => r.state === "outcome").details).toEqual({ fee: "1800" });
  });

  it("a replayed post appends it naming the first transaction; a refused or resolved one writes none", async () => {
    const [buyer] = (await agentIds(1)) as [string];
    await creditDeposit(mv(buyer, 1_000n, "deposit"));
    const hold = mv(buyer, 600n, "hold");
    const first = await holdFunds(hold);
    // The first post had no evidence; the replay brings it, and the post's key still posts once.
    const subject = randomUUID();
    const authorization: PostEvidence = {
      agent_id: buyer,
      subject_type: "test",
      subject_id: subject,
      state: "authorization",
      source: "test",
      source_ref: THIS_TRANSACTION,
    };
    expect(await holdFunds({ ...hold, evidence: [authorization] })).toEqual({
      transactionId: first.transactionId,
      replayed: true,
    });
    expect((await evidenceOf(subject)).map((r) => r.source_ref)).toEqual([first.transactionId]);

    const refused = randomUUID();
    await expectPaymentRequired(
      holdFunds({ ...mv(buyer, 600n, "short"), evidence: [{ ...authorization, subject_id: refused }] }),
    );
    await releaseHold({ ...holdOf(hold), idempotencyKey: key("release") });
    const late = randomUUID();
    await expect(
      releaseHold({
        ...holdOf(hold),
        idempotencyKey: key("release-again"),
        evidence: [{ ...authorization, subject_id: late, state: "refund" }],
      }),
    ).rejects.toBeInstanceOf(HoldAlreadyResolvedError);
    expect(await evidenceOf(refused)).toEqual([]);
    expect(await evidenceOf(late)).toEqual([]);
  });
});

describe("ledger inside a caller's transaction", () => {
  it("commits and rolls back with the caller, and a refusal inside it leaves the caller's work intact", async () => {
    const [buyer] = (await agentIds(1)) as [string];

    const failed = mv(buyer, 500n, "deposit");
    await expect(
      db().transaction(async (trx) => {
        await creditDeposit(failed, trx);
        throw new Error("the caller failed after the deposit");
      }),
    ).rejects.toThrow(/caller failed/);
    expect(await findTransactionByKey(db(), failed.idempotencyKey)).toBeUndefined();
    expect(await balancesOf(buyer)).toEqual([0n, 0n, 0n, 0n]);

    await db().transaction(async (trx) => {
      await creditDeposit(mv(buyer, 100n, "deposit"), trx);
      await expectPaymentRequired(holdFunds(mv(buyer, 101n, "hold"), trx));
      await holdFunds(mv(buyer, 60n, "hold"), trx);
      expect(await balances(buyer, "USDC", trx)).toMatchObject({ available: 40n, held: 60n });
    });
    expect(await balancesOf(buyer)).toEqual([40n, 60n, 0n, 0n]);
  });

  it("sends the caller's withWrite statements once, in its transaction, with a post or a replay; never after a refusal", async () => {
    const [buyer] = (await agentIds(1)) as [string];
    await creditDeposit(mv(buyer, 100n, "deposit"));
    // Each call records what its own statement saw: the transaction it ran in.
    const runs: string[] = [];
    const withWriteIn = (trx: Knex.Transaction) => async () => {
      runs.push(String((await trx.raw("select txid_current() as id")).rows[0].id));
    };
    const txid = async (trx: Knex.Transaction) =>
      String((await trx.raw("select txid_current() as id")).rows[0].id);

    const hold = mv(buyer, 60n, "hold");
    const posted = await db().transaction(async (trx) => {
      await holdFunds({ ...hold, withWrite: withWriteIn(trx) }, trx);
      return txid(trx);
    });
    expect(runs).toEqual([posted]);

    const replayed = await db().transaction(async (trx) => {
      await holdFunds({ ...hold, withWrite: withWriteIn(trx) }, trx);
      return txid(trx);
    });
    expect(runs).toEqual([posted, replayed]);

    await db().transaction(async (trx) => {
      await expectPaymentRequired(holdFunds({ ...mv(buyer, 41n, "hold"), withWrite: withWriteIn(trx) }, trx));
    });
    expect(runs).toHaveLength(2);
    expect(await balancesOf(buyer)).toEqual([40n, 60n, 0n, 0n]);

    // Its failure fails the post's transaction, after the write went out: nothing of the post stays.
    const failing = mv(buyer, 10n, "hold");
    await expect(
      db().transaction(async (trx) => {
        await holdFunds(
          { ...failing, withWrite: () => Promise.reject(new Error("the caller's statement failed")) },
          trx,
        );
      }),
    ).rejects.toThrow(/caller's statement failed/);
    expect(await findTransactionByKey(db(), failing.idempotencyKey)).toBeUndefined();
    expect(await balancesOf(buyer)).toEqual([40n, 60n, 0n, 0n]);

    await expect(holdFunds({ ...mv(buyer, 1n, "hold"), withWrite: async () => {} })).rejects.toThrow(
      /withWrite, before and commitWithWrite need the caller's transaction/,
    );
  });

  it("sends its lock behind the caller's `before` statements, and goes on only once they succeeded", async () => {
    const [buyer] = (await agentIds(1)) as [string];
    await creditDeposit(mv(buyer, 100n, "deposit"));
    const txid = async (trx: Knex.Transaction) =>
      String((await trx.raw("select txid_current() as id")).rows[0].id);

    // Succeeded: the post is written, in the caller's transaction, after the caller's statement.
    const hold = mv(buyer, 30n, "hold");
    const [seen, own] = await db().transaction(async (trx) => {
      const before = txid(trx);
      await holdFunds({ ...hold, before }, trx);
      return [await before, await txid(trx)];
    });
    expect(seen).toBe(own);
    expect(await findTransactionByKey(db(), hold.idempotencyKey)).toBeDefined();
    expect(await balancesOf(buyer)).toEqual([70n, 30n, 0n, 0n]);

    // A statement of the caller's that fails: the post fails with its error (not the refused lock's).
    const afterFailedStatement = mv(buyer, 10n, "hold");
    await expect(
      db().transaction(async (trx) => {
        await holdFunds({ ...afterFailedStatement, before: trx.raw("select 1 / 0") }, trx);
      }),
    ).rejects.toThrow(/division by zero/);
    // A caller's check that refuses after its statement succeeded: the post writes nothing.
    const afterRefusal = mv(buyer, 10n, "hold");
    const refused = await db().transaction(async (trx) => {
      const before = trx.raw("select 1").then(() => {
        throw new Error("the caller refused");
      });
      return holdFunds({ ...afterRefusal, before }, trx).catch((error: Error) => error.message);
    });
    expect(refused).toBe("the caller refused");
    for (const m of [afterFailedStatement, afterRefusal])
      expect(await findTransactionByKey(db(), m.idempotencyKey)).toBeUndefined();
    expect(await balancesOf(buyer)).toEqual([70n, 30n, 0n, 0n]);
  });

  it("resolves a hold named by key with what the caller expects it holds, and refuses any other", async () => {
    const [buyer, seller] = (await agentIds(2)) as [string, string];
    await creditDeposit(mv(buyer, 100n, "deposit"));
    const hold = mv(buyer, 40n, "hold");
    const posted = await holdFunds(hold);
    const expected = {
      agentId: buyer,
      currency: "USDC" as const,
      amountMicros: 40n,
      reference: hold.reference,
    };
    const capture = { holdKey: hold.idempotencyKey, sellerAgentId: seller, captureMicros: 25n };

    // Not what it holds (amount, buyer, unit, reference), or no hold under the key: an error, nothing written.
    for (const wrong of [
      { ...expected, amountMicros: 41n },
      { ...expected, agentId: seller },
      { ...expected, currency: "tUSDC" as const },
      { ...expected, reference: ref() },
    ]) {
      const attempt = key("capture");
      await expect(
        db().transaction((trx) => captureHold({ ...capture, expected: wrong, idempotencyKey: attempt }, trx)),
      ).rejects.toThrow(/not what its caller expected/);
      expect(await findTransactionByKey(db(), attempt)).toBeUndefined();
    }
    await expect(
      db().transaction((trx) =>
        captureHold({ ...capture, holdKey: key("hold"), expected, idempotencyKey: key("capture") }, trx),
      ),
    ).rejects.toThrow(/no ledger hold with key/);
    expect(await balancesOf(buyer)).toEqual([60n, 40n, 0n, 0n]);

    // As expected: captured, resolving that hold; the same key replays; another key meets it resolved.
    const captureKey = key("capture");
    const captured = await db().transaction((trx) =>
      captureHold({ ...capture, expected, idempotencyKey: captureKey }, trx),
    );
    expect(captured).toMatchObject({ replayed: false, capturedMicros: 25n, returnedMicros: 15n });
    const row = await findTransactionByKey(db(), captureKey);
    expect(row?.resolves_transaction_id).toBe(posted.transactionId);
    expect(await balancesOf(buyer)).toEqual([75n, 0n, 0n, 0n]);
    const replayed = await db().transaction((trx) =>
      captureHold({ ...capture, expected, idempotencyKey: captureKey }, trx),
    );
    expect(replayed).toMatchObject({ transactionId: captured.transactionId, replayed: true });
    await expect(
      db().transaction((trx) =>
        releaseHold({ holdKey: hold.idempotencyKey, expected, idempotencyKey: key("release") }, trx),
      ),
    ).rejects.toBeInstanceOf(HoldAlreadyResolvedError);
    expect(await balancesOf(buyer)).toEqual([75n, 0n, 0n, 0n]);
  });

  it("commits with its write when that is the caller's last statement, or rolls the caller back whole", async () => {
    const [buyer] = (await agentIds(1)) as [string];
    await creditDeposit(mv(buyer, 100n, "deposit"));
    const setting = () => `test:ledger:${randomUUID()}`;

    // Posted: the caller's earlier row and the post commit together, and the handler's value comes back.
    const kept = setting();
    const hold = mv(buyer, 30n, "hold");
    const value = await db().transaction(async (trx) => {
      await trx("platform_settings").insert({ key: kept, value: "{}" });
      await holdFunds({ ...hold, commitWithWrite: true }, trx);
      return "posted";
    });
    expect(value).toBe("posted");
    expect(await db()("platform_settings").where({ key: kept }).first()).toBeDefined();
    expect(await balancesOf(buyer)).toEqual([70n, 30n, 0n, 0n]);

    // A withWrite statement that fails: rolled back at the COMMIT, the caller's row with it.
    const lost = setting();
    const failing = mv(buyer, 10n, "hold");
    await expect(
      db().transaction(async (trx) => {
        await trx("platform_settings").insert({ key: lost, value: "{}" });
        await holdFunds({ ...failing, commitWithWrite: true, withWrite: () => trx.raw("select 1 / 0") }, trx);
      }),
    ).rejects.toThrow(/division by zero/);
    expect(await db()("platform_settings").where({ key: lost }).first()).toBeUndefined();
    expect(await findTransactionByKey(db(), failing.idempotencyKey)).toBeUndefined();

    // A replay writes nothing, so it sends no COMMIT: the caller may go on, and commits as usual.
    const after = await db().transaction(async (trx) => {
      const replayed = await holdFunds({ ...hold, commitWithWrite: true }, trx);
      await trx.raw("select 1");
      return replayed.replayed;
    });
    expect(after).toBe(true);
    expect(await balancesOf(buyer)).toEqual([70n, 30n, 0n, 0n]);
    await expect(holdFunds({ ...mv(buyer, 1n, "hold"), commitWithWrite: true })).rejects.toThrow(
      /need the caller's transaction/,
    );

    // In a savepoint the COMMIT is its transaction's: the post writes as usual, and the caller goes on.
    const nested = mv(buyer, 5n, "hold");
    await db().transaction(async (trx) => {
      await trx.transaction((savepoint) => holdFunds({ ...nested, commitWithWrite: true }, savepoint));
      await trx.raw("select 1");
    });
    expect(await findTransactionByKey(db(), nested.idempotencyKey)).toBeDefined();
    expect(await balancesOf(buyer)).toEqual([65n, 35n, 0n, 0n]);
  });

  it("a strict write raced since its lock rolls its caller back; run again, it replays or is told the hold is resolved", async () => {
    const [buyer, seller] = (await agentIds(2)) as [string, string];
    await creditDeposit(mv(buyer, 100n, "deposit"));
    // The buyer's accounts, both held first by the post that goes first: the raced post's lock waits on
    // them while holding none that the first needs.
    const accounts = [
      (await accountFor(buyer, "agent_available", "USDC")).id,
      (await accountFor(buyer, "agent_held", "USDC")).id,
    ];
    const waitsForALock = async (pid: number) =>
      (await db().raw("select wait_event_type from pg_stat_activity where pid = ?", [pid])).rows[0]
        ?.wait_event_type === "Lock";
    /**
     * Runs `raced` (retried as a caller retries), whose first attempt's lock waits while `first` posts
     * holding the buyer's accounts: that lock reads the ledger as it was before `first`
     * committed, so its strict write meets what `first` wrote. Answers what each attempt met, and the end.
     */
    async function raceAfterTheLock(
      first: (trx: Knex.Transaction) => Promise<unknown>,
      raced: (trx: Knex.Transaction) => Promise<unknown>,
    ) {
      const met: string[] = [];
      const pids: number[] = [];
      const rows: string[] = [];
      let end!: Promise<unknown>;
      await db().transaction(async (trx) => {
        await lockAccounts(trx, accounts);
        end = retryTransient(() =>
          db().transaction(async (own) => {
            pids.push((await own.raw("select pg_backend_pid() as pid")).rows[0].pid);
            rows.push(`test:ledger:${randomUUID()}`);
            await own("platform_settings").insert({ key: rows.at(-1)!, value: "{}" });
            return raced(own).then(
              (result) => met.push("posted") && result,
              (error: unknown) => {
                met.push(error instanceof TakenSinceLock ? "taken since its lock" : (error as Error).name);
                throw error;
              },
            );
          }),
        );
        end.catch(() => undefined);
        await waitFor(
          "the raced post's lock to wait",
          async () => pids.length > 0 && waitsForALock(pids[0]!),
        );
        await first(trx);
      });
      const ended = await end.then(
        (value) => value,
        (error: unknown) => error,
      );
      const kept = await db()("platform_settings").whereIn("key", rows).pluck("key");
      /** committed: per attempt, whether the row it inserted is there. */
      return { met, committed: rows.map((row) => kept.includes(row)), end: ended };
    }

    // The same key: the raced write rolls its caller back; run again, the post replays.
    const hold = mv(buyer, 40n, "hold");
    const sameKey = await raceAfterTheLock(
      (trx) => holdFunds(hold, trx),
      (trx) => holdFunds({ ...hold, commitWithWrite: true }, trx),
    );
    expect(sameKey.met).toEqual(["taken since its lock", "posted"]);
    expect(sameKey.committed).toEqual([false, true]);
    expect(sameKey.end).toMatchObject({
      transactionId: (await findTransactionByKey(db(), hold.idempotencyKey))!.id,
      replayed: true,
    });
    expect(await balancesOf(buyer)).toEqual([60n, 40n, 0n, 0n]);

    // The same hold under two keys: the raced capture rolls back; run again, it is told the hold is resolved.
    // Another hold keeps the held balance up, else the capture's lock would find it short and be told at once.
    await holdFunds(mv(buyer, 40n, "hold"));
    const expected = {
      agentId: buyer,
      currency: "USDC" as const,
      amountMicros: 40n,
      reference: hold.reference,
    };
    const sameHold = await raceAfterTheLock(
      (trx) => releaseHold({ ...holdOf(hold), idempotencyKey: key("release") }, trx),
      (trx) =>
        captureHold(
          {
            holdKey: hold.idempotencyKey,
            expected,
            sellerAgentId: seller,
            idempotencyKey: key("capture"),
            commitWithWrite: true,
          },
          trx,
        ),
    );
    expect(sameHold.met).toEqual(["taken since its lock", "HoldAlreadyResolvedError"]);
    expect(sameHold.committed).toEqual([false, false]);
    expect(sameHold.end).toBeInstanceOf(HoldAlreadyResolvedError);
    expect(await balancesOf(buyer)).toEqual([60n, 40n, 0n, 0n]);
    expect(await balancesOf(seller)).toEqual([0n, 0n, 0n, 0n]);
  });

  it("does not retry a caller's transaction: a deadlock reaches the caller, who decides", async () => {
    const [left, right] = (await agentIds(2)) as [string, string];
    const a = await accountFor(left, "agent_available", "USDC");
    const b = await accountFor(right, "agent_available", "USDC");
    await creditDeposit(mv(left, 10n, "deposit"));
    await creditDeposit(mv(right, 10n, "deposit"));
    // Each caller first locks one account of its own (outside the ledger's order), then posts a
    // transfer over both: a lock cycle PostgreSQL breaks by failing one of them with 40P01.
    let arrived = 0;
    let release!: () => void;
    const bothLocked = new Promise<void>((resolve) => {
      release = resolve;
    });
    const caller = (first: { id: string }, second: { id: string }) =>
      db().transaction(async (trx) => {
        await lockAccounts(trx, [first.id]);
        if (++arrived === 2) release();
        await bothLocked;
        return postTransaction(
          {
            kind: "transfer",
            idempotencyKey: key("transfer"),
            legs: [
              { account: first, amountMicros: -3n },
              { account: second, amountMicros: 3n },
            ],
          },
          trx,
        );
      });
    const results = await Promise.allSettled([caller(a, b), caller(b, a)]);
    const failed = results.filter((r) => r.status === "rejected");
    expect(failed).toHaveLength(1);
    expect((failed[0] as PromiseRejectedResult).reason).toMatchObject({ code: "40P01" });
    const [leftAvailable] = await balancesOf(left);
    const [rightAvailable] = await balancesOf(right);
    expect(leftAvailable! + rightAvailable!).toBe(20n);
    expect([7n, 13n]).toContain(leftAvailable);
  });
});

describe("ledger under concurrency", () => {
  it("N parallel spends of a whole balance: exactly one succeeds", async () => {
    const [buyer] = (await agentIds(1)) as [string];
    const whole = 3_000_000n;
    await creditDeposit(mv(buyer, whole, "deposit"));
    const results = await Promise.allSettled(
      Array.from({ length: 20 }, () => holdFunds(mv(buyer, whole, "hold"))),
    );
    const ok = results.filter((r) => r.status === "fulfilled");
    const refused = results.filter(
      (r) => r.status === "rejected" && r.reason instanceof AppError && r.reason.code === "PAYMENT_REQUIRED",
    );
    expect(ok).toHaveLength(1);
    expect(refused).toHaveLength(19);
    expect(await balancesOf(buyer)).toEqual([0n, whole, 0n, 0n]);
    const available = await accountFor(buyer, "agent_available", "USDC");
    expect(await countEntries(db(), [available.id])).toBe(2);
  });

  it("opposing concurrent transfers end where they started", async () => {
    const [left, right] = (await agentIds(2)) as [string, string];
    const a = await accountFor(left, "agent_available", "USDC");
    const b = await accountFor(right, "agent_available", "USDC");
    await creditDeposit(mv(left, 50n, "deposit"));
    await creditDeposit(mv(right, 50n, "deposit"));
    const transfer = (from: { id: string }, to: { id: string }) =>
      postTransaction({
        kind: "transfer",
        idempotencyKey: key("transfer"),
        legs: [
          { account: from, amountMicros: -5n },
          { account: to, amountMicros: 5n },
        ],
      });
    await Promise.all(Array.from({ length: 10 }, (_, i) => (i % 2 ? transfer(a, b) : transfer(b, a))));
    expect(await balancesOf(left)).toEqual([50n, 0n, 0n, 0n]);
    expect(await balancesOf(right)).toEqual([50n, 0n, 0n, 0n]);
  });
});

// ---------------------------------------------------------------------------------------------------
// The model test: fast-check generates command sequences; each command runs a batch of operations
// CONCURRENTLY against the real database. Which of them succeed depends on the interleaving, so the
// check is: some serial order of the batch, applied to the model, gives exactly the observed outcomes.
// The model then takes those effects (their sum does not depend on the order). After every step the
// real balances must equal the model's, every transaction's entries sum to zero, the entries of this
// run's transactions sum to zero per currency, no non-negative account is negative, and each account's
// entries chain (before = previous after, last after = balance).

const AGENTS = 3;
const CURRENCIES: Currency[] = ["USDC", "tUSDC"];
const AGENT_KINDS = ["agent_available", "agent_held", "seller_payable", "bonds"] as const;
type AgentKind = (typeof AGENT_KINDS)[number];

type Op =
  | { t: "deposit" | "hold" | "bond" | "payout"; agent: number; cur: Currency; amount: bigint; key: string }
  | { t: "transfer"; from: number; to: number; cur: Currency; amount: bigint; key: string }
  | { t: "capture"; hold: string; seller: number | null; key: string }
  | { t: "release"; hold: string; key: string };
type Outcome = "ok" | "replayed" | "insufficient" | "resolved";

interface HoldState {
  agent: number;
  cur: Currency;
  amount: bigint;
  resolved: boolean;
}

interface LedgerState {
  balances: Map<string, bigint>; // `${agent}|${currency}|${kind}`
  platform: Map<string, bigint>; // `${currency}|${kind}`: this run's effect on the shared accounts
  holds: Map<string, HoldState>; // by hold key, in creation order
  keys: Set<string>; // idempotency keys recorded
}

interface Model {
  agents: string[];
  state: LedgerState;
  transactionIds: Set<string>;
  nextKey: number;
  tag: string;
}

const bKey = (agent: number, cur: Currency, kind: AgentKind) => `${agent}|${cur}|${kind}`;
const get = (m: Map<string, bigint>, k: string) => m.get(k) ?? 0n;
const add = (m: Map<string, bigint>, k: string, amount: bigint) => m.set(k, get(m, k) + amount);

function cloneState(s: LedgerState): LedgerState {
  return {
    balances: new Map(s.balances),
    platform: new Map(s.platform),
    holds: new Map([...s.holds].map(([k, h]) => [k, { ...h }])),
    keys: new Set(s.keys),
  };
}

/** Applies one operation to the model, as the ledger must: the outcome it must report. */
function simulate(s: LedgerState, op: Op): Outcome {
  if (s.keys.has(op.key)) return "replayed";
  const debit = (k: string, amount: bigint) => {
    if (get(s.balances, k) < amount) return false;
    add(s.balances, k, -amount);
    return true;
  };
  switch (op.t) {
    case "deposit":
      add(s.platform, `${op.cur}|chain_clearing`, -op.amount);
      add(s.balances, bKey(op.agent, op.cur, "agent_available"), op.amount);
      break;
    case "hold":
      if (!debit(bKey(op.agent, op.cur, "agent_available"), op.amount)) return "insufficient";
      add(s.balances, bKey(op.agent, op.cur, "agent_held"), op.amount);
      s.holds.set(op.key, { agent: op.agent, cur: op.cur, amount: op.amount, resolved: false });
      break;
    case "bond":
      if (!debit(bKey(op.agent, op.cur, "agent_available"), op.amount)) return "insufficient";
      add(s.balances, bKey(op.agent, op.cur, "bonds"), op.amount);
      break;
    case "payout":
      if (!debit(bKey(op.agent, op.cur, "seller_payable"), op.amount)) return "insufficient";
      add(s.platform, `${op.cur}|chain_clearing`, op.amount);
      break;
    case "transfer":
      if (!debit(bKey(op.from, op.cur, "agent_available"), op.amount)) return "insufficient";
      add(s.balances, bKey(op.to, op.cur, "agent_available"), op.amount);
      break;
    case "capture":
    case "release": {
      const hold = s.holds.get(op.hold)!;
      if (hold.resolved) return "resolved";
      hold.resolved = true;
      add(s.balances, bKey(hold.agent, hold.cur, "agent_held"), -hold.amount);
      if (op.t === "release") {
        add(s.balances, bKey(hold.agent, hold.cur, "agent_available"), hold.amount);
      } else {
        const fee = (hold.amount * 3n) / 100n;
        add(s.platform, `${hold.cur}|platform_revenue`, fee);
        if (op.seller === null) add(s.platform, `${hold.cur}|platform_revenue`, hold.amount - fee);
        else add(s.balances, bKey(op.seller, hold.cur, "seller_payable"), hold.amount - fee);
      }
      break;
    }
  }
  s.keys.add(op.key);
  return "ok";
}

function* permutations<T>(items: T[]): Generator<T[]> {
  if (items.length <= 1) {
    yield items;
    return;
  }
  for (let i = 0; i < items.length; i++) {
    const rest = [...items.slice(0, i), ...items.slice(i + 1)];
    for (const tail of permutations(rest)) yield [items[i]!, ...tail];
  }
}

/**
 * Runs one operation against the real ledger and reports its outcome. Every other hold, capture and
 * release is posted in one flight (PostTransactionInput.oneFlight) inside a caller's transaction, as a
 * paid call's are, the others alone: the model holds both ways to the same serial orders.
 */
async function execute(model: Model, op: Op): Promise<Outcome> {
  const agent = (i: number) => model.agents[i]!;
  const inFlightOrNot = <T>(
    opKey: string,
    post: (sent: { commitWithWrite?: true; oneFlight?: true }, trx?: Knex.Transaction) => Promise<T>,
  ): Promise<T> =>
    Number(opKey.split(":").at(-1)) % 2 === 0
      ? retryTransient(() => db().transaction((trx) => post({ commitWithWrite: true, oneFlight: true }, trx)))
      : post({});
  const expectedOf = (holdKey: string) => {
    const hold = model.state.holds.get(holdKey)!;
    return {
      agentId: agent(hold.agent),
      currency: hold.cur,
      amountMicros: hold.amount,
      reference: { type: "model", id: model.tag },
    };
  };
  const movement = (o: { agent: number; cur: Currency; amount: bigint; key: string }) => ({
    agentId: agent(o.agent),
    currency: o.cur,
    amountMicros: o.amount,
    reference: { type: "model", id: model.tag },
    idempotencyKey: o.key,
  });
  try {
    let result: { transactionId: string; replayed: boolean };
    switch (op.t) {
      case "deposit":
        result = await creditDeposit(movement(op));
        break;
      case "hold":
        result = await inFlightOrNot(op.key, (sent, trx) => holdFunds({ ...movement(op), ...sent }, trx));
        break;
      case "bond":
        result = await postBond(movement(op));
        break;
      case "payout":
        result = await recordPayout(movement(op));
        break;
      case "transfer": {
        const from = await accountFor(agent(op.from), "agent_available", op.cur);
        const to = await accountFor(agent(op.to), "agent_available", op.cur);
        result = await postTransaction({
          kind: "transfer",
          idempotencyKey: op.key,
          reference: { type: "model", id: model.tag },
          legs: [
            { account: from, amountMicros: -op.amount },
            { account: to, amountMicros: op.amount },
          ],
        });
        break;
      }
      case "capture":
        result = await inFlightOrNot(op.key, (sent, trx) =>
          captureHold(
            {
              holdKey: op.hold,
              sellerAgentId: op.seller === null ? null : agent(op.seller),
              idempotencyKey: op.key,
              expected: expectedOf(op.hold),
              ...sent,
            },
            trx,
          ),
        );
        break;
      case "release":
        result = await inFlightOrNot(op.key, (sent, trx) =>
          releaseHold(
            {
              holdKey: op.hold,
              idempotencyKey: op.key,
              expected: expectedOf(op.hold),
              ...sent,
            },
            trx,
          ),
        );
        break;
    }
    model.transactionIds.add(result.transactionId);
    return result.replayed ? "replayed" : "ok";
  } catch (error) {
    if (error instanceof AppError && error.code === "PAYMENT_REQUIRED") return "insufficient";
    if (error instanceof HoldAlreadyResolvedError) return "resolved";
    throw error;
  }
}

/** The real ledger, checked against the model after every step. */
async function checkInvariants(model: Model): Promise<void> {
  const q = db();
  const accounts = await accountsOwnedBy(q, model.agents);
  const actual = new Map<string, bigint>();
  for (const account of accounts) {
    const agent = model.agents.indexOf(account.owner_agent_id!);
    actual.set(bKey(agent, account.currency, account.kind as AgentKind), account.balance_micros);
    if (!account.allow_negative) expect(account.balance_micros >= 0n).toBe(true);
  }
  for (let agent = 0; agent < AGENTS; agent++) {
    for (const cur of CURRENCIES) {
      for (const kind of AGENT_KINDS) {
        const k = bKey(agent, cur, kind);
        expect(get(actual, k), k).toBe(get(model.state.balances, k));
      }
    }
  }
  const ids = [...model.transactionIds];
  if (ids.length === 0) return;
  const entries = await entriesOfTransactions(q, ids);
  const perTransaction = new Map<string, bigint>();
  const platform = new Map<string, bigint>();
  const chain = new Map<string, bigint>();
  for (const e of entries) {
    add(perTransaction, e.transaction_id, e.amount_micros);
    if (e.owner_agent_id === null) add(platform, `${e.currency}|${e.kind}`, e.amount_micros);
    else {
      // Agent accounts are this run's alone, so their entries all come from this run's transactions.
      const previous = chain.get(e.account_id);
      if (previous !== undefined) expect(e.balance_before_micros).toBe(previous);
      chain.set(e.account_id, e.balance_after_micros);
    }
  }
  expect(perTransaction.size).toBe(ids.length);
  for (const [id, sum] of perTransaction) expect(sum, `transaction ${id}`).toBe(0n);
  for (const k of new Set([...platform.keys(), ...model.state.platform.keys()])) {
    expect(get(platform, k), k).toBe(get(model.state.platform, k));
  }
  for (const account of accounts) {
    expect(chain.get(account.id) ?? 0n).toBe(account.balance_micros);
  }
  for (const [cur, sum] of await sumEntriesByCurrency(q, ids)) expect(sum, cur).toBe(0n);
}

type Template =
  | { t: "deposit" | "hold" | "bond" | "payout"; agent: number; cur: Currency; amount: bigint }
  | { t: "transfer"; from: number; shift: number; cur: Currency; amount: bigint }
  | { t: "capture"; holdIndex: number; seller: number | null }
  | { t: "release"; holdIndex: number };

class BatchCommand implements fc.AsyncCommand<Model, null> {
  constructor(
    readonly label: string,
    readonly templates: Template[],
    readonly replayFirst: boolean,
  ) {}

  check(model: Readonly<Model>): boolean {
    const needsHold = this.templates.some((t) => t.t === "capture" || t.t === "release");
    return !needsHold || openHolds(model.state).length > 0;
  }

  async run(model: Model): Promise<void> {
    const open = openHolds(model.state);
    const ops: Op[] = this.templates.map((t) => {
      const k = `${model.tag}:${model.nextKey++}`;
      switch (t.t) {
        case "capture":
          return { t: "capture", hold: open[t.holdIndex % open.length]!, seller: t.seller, key: k };
        case "release":
          return { t: "release", hold: open[t.holdIndex % open.length]!, key: k };
        case "transfer":
          return {
            t: "transfer",
            from: t.from,
            to: (t.from + t.shift) % AGENTS,
            cur: t.cur,
            amount: t.amount,
            key: k,
          };
        default:
          return { ...t, key: k };
      }
    });
    if (this.replayFirst) ops.push({ ...ops[0]! });

    const observed = await Promise.all(ops.map((op) => execute(model, op)));

    let next: LedgerState | undefined;
    for (const order of permutations(ops.map((_, i) => i))) {
      const candidate = cloneState(model.state);
      if (order.every((i) => simulate(candidate, ops[i]!) === observed[i])) {
        next = candidate;
        break;
      }
    }
    expect(next, `no serial order explains ${JSON.stringify(observed)} for ${this.toString()}`).toBeDefined();
    model.state = next!;
    await checkInvariants(model);
  }

  toString(): string {
    const show = (t: Template) => JSON.stringify(t, (_, v) => (typeof v === "bigint" ? `${v}n` : v));
    return `${this.label}${this.replayFirst ? "+replay" : ""}[${this.templates.map(show).join(",")}]`;
  }
}

function openHolds(s: LedgerState): string[] {
  return [...s.holds].filter(([, h]) => !h.resolved).map(([k]) => k);
}

const agentArb = fc.integer({ min: 0, max: AGENTS - 1 });
const curArb = fc.constantFrom<Currency>(...CURRENCIES);
const amountArb = (max: bigint) => fc.bigInt({ min: 1n, max });
const simple = (t: "deposit" | "hold" | "bond" | "payout", max: bigint) =>
  fc.record({ t: fc.constant(t), agent: agentArb, cur: curArb, amount: amountArb(max) });
const captureT = fc.record({
  t: fc.constant("capture" as const),
  holdIndex: fc.nat({ max: 3 }),
  seller: fc.option(agentArb, { nil: null }),
});
const releaseT = fc.record({ t: fc.constant("release" as const), holdIndex: fc.nat({ max: 3 }) });
const transferT = fc.record({
  t: fc.constant("transfer" as const),
  from: agentArb,
  shift: fc.integer({ min: 1, max: AGENTS - 1 }),
  cur: curArb,
  amount: amountArb(400n),
});

const batch = (label: string, template: fc.Arbitrary<Template>) =>
  fc
    .tuple(fc.array(template, { minLength: 2, maxLength: 4 }), fc.boolean())
    .map(([templates, replay]) => new BatchCommand(label, templates, replay && templates.length < 4));

const commandArbs = [
  batch("deposit", simple("deposit", 1_000n)),
  batch("hold", simple("hold", 400n)),
  batch("hold", simple("hold", 400n)),
  batch("capture", fc.oneof({ arbitrary: captureT, weight: 3 }, { arbitrary: releaseT, weight: 1 })),
  batch("release", fc.oneof({ arbitrary: releaseT, weight: 3 }, { arbitrary: captureT, weight: 1 })),
  batch("bond", simple("bond", 300n)),
  batch("payout", simple("payout", 300n)),
  batch("transfer", transferT),
];

describe("ledger model (fast-check, real concurrency)", () => {
  it("after every step: balances equal the model, Σ = 0, no negative balance", async () => {
    await fc.assert(
      fc.asyncProperty(fc.commands(commandArbs, { maxCommands: 25, size: "max" }), async (commands) => {
        const setup = async () => {
          const model: Model = {
            agents: await agentIds(AGENTS),
            state: { balances: new Map(), platform: new Map(), holds: new Map(), keys: new Set<string>() },
            transactionIds: new Set<string>(),
            nextKey: 0,
            tag: `model-${randomUUID()}`,
          };
          // Every agent starts with some funds in each currency, so most commands have something to move.
          for (let agent = 0; agent < AGENTS; agent++) {
            for (const cur of CURRENCIES) {
              const op: Op = {
                t: "deposit",
                agent,
                cur,
                amount: 1_000n,
                key: `${model.tag}:seed:${agent}:${cur}`,
              };
              expect(await execute(model, op)).toBe(simulate(model.state, op));
            }
          }
          return { model, real: null };
        };
        await fc.asyncModelRun(setup, commands);
      }),
      { numRuns: 20 },
    );
  }, 60_000);
});
