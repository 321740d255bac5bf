import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "../../shared/db/knex.js";
import { appendEvidence, THIS_TRANSACTION } from "../../shared/money/evidence/store.js";
import { assertCustodyOpenForShare, readCustody } from "../../shared/money/gate/store.js";
import { captureHold, creditDeposit, holdFunds, releaseHold } from "../../shared/money/ledger/flows.js";
import {
  type InFlightPost,
  writeTransactionInFlight,
  writeTransactionsInFlight,
} from "../../shared/money/ledger/store.js";
import { buildAgent } from "../helpers/factories.js";
import { holdOf } from "../helpers/money.js";

// Every paid call holds, then captures or releases, appends evidence at each step and reads the custody
// switch twice. Those statements run as named prepared statements so that PostgreSQL plans them once
// per connection and then runs a kept generic plan (docs/benchmarks.md "The nineteenth round"). Planned
// afresh on every call they cost about as much server time as running them. PostgreSQL plans a prepared
// statement's first five executions for their values (custom plans), then keeps the generic plan unless
// it looks dearer; the hold's lock once asked for "the transaction that resolved hold NULL", which a
// custom plan folds away and a generic one cannot, so every hold was planned again. This reads, on the
// transaction's own connection, how often each statement was planned either way.

afterAll(async () => {
  await closeDb();
});

const ROUNDS = 8;
const key = (label: string) => `test:${label}:${randomUUID()}`;

interface PreparedRow {
  statement: string;
  generic_plans: string;
  custom_plans: string;
}

describe("the paid call's money statements", () => {
  it("are prepared once per connection and run on a kept generic plan, not planned on every call", async () => {
    const [buyer, seller] = await Promise.all([buildAgent("buyer"), buildAgent("seller")]);
    const reference = () => ({ type: "test", id: randomUUID() });
    await creditDeposit({
      agentId: buyer.agentId,
      currency: "USDC",
      amountMicros: 1_000_000n,
      reference: reference(),
      idempotencyKey: key("deposit"),
    });

    const prepared = await db().transaction(async (trx) => {
      for (let round = 0; round < ROUNDS; round++) {
        await readCustody(trx);
        await assertCustodyOpenForShare(trx);
        const movement = { agentId: buyer.agentId, currency: "USDC" as const, amountMicros: 1_000n };
        const subject = () => ({ agent_id: buyer.agentId, subject_type: "test", subject_id: randomUUID() });
        // As a paid call: the evidence goes in with the hold's and the capture's writes.
        const paid = subject();
        const holdKey = key("hold");
        const held = { ...movement, reference: reference() };
        await holdFunds(
          {
            ...held,
            idempotencyKey: holdKey,
            evidence: [{ ...paid, state: "authorization", source: "test", source_ref: THIS_TRANSACTION }],
          },
          trx,
        );
        // As a paid call's capture: the hold is not read first, its lock reads it by key.
        await captureHold(
          {
            holdKey,
            expected: held,
            idempotencyKey: key("capture"),
            sellerAgentId: seller.agentId,
            evidence: () => [
              { ...paid, state: "execution", source: "test", source_ref: null },
              { ...paid, state: "capture", source: "test", source_ref: THIS_TRANSACTION },
              { ...paid, state: "outcome", source: "test", source_ref: null },
            ],
          },
          trx,
        );
        // As a paid call in one flight: writes that read their locked balances themselves (the hold, then
        // its capture naming it by key), called directly: their flows' COMMIT would end this transaction.
        const flown = subject();
        const flownHold = key("hold");
        const account = (
          owner: string | null,
          kind: "agent_available" | "agent_held" | "seller_payable" | "platform_revenue",
        ) => ({ owner, kind, currency: "USDC" as const });
        // A hold of 1,000 from the buyer as a post in flight, with its authorization evidence.
        const holdInFlight = (paid: ReturnType<typeof subject>, idempotencyKey: string): InFlightPost => ({
          row: {
            kind: "hold",
            idempotency_key: idempotencyKey,
            reference_type: "test",
            reference_id: paid.subject_id,
            metadata: {},
          },
          legs: [
            { account: account(buyer.agentId, "agent_available"), amountMicros: -1_000n },
            { account: account(buyer.agentId, "agent_held"), amountMicros: 1_000n },
          ],
          resolves: null,
          evidence: [{ ...paid, state: "authorization", source: "test", source_ref: THIS_TRANSACTION }],
        });
        await writeTransactionInFlight(trx, holdInFlight(flown, flownHold));
        await writeTransactionInFlight(trx, {
          row: {
            kind: "capture",
            idempotency_key: key("capture"),
            reference_type: "test",
            reference_id: flown.subject_id,
            metadata: {},
          },
          legs: [
            { account: account(buyer.agentId, "agent_held"), amountMicros: -1_000n },
            { account: account(seller.agentId, "seller_payable"), amountMicros: 970n },
            { account: account(null, "platform_revenue"), amountMicros: 30n },
          ],
          resolves: {
            key: flownHold,
            expected: {
              owner: buyer.agentId,
              currency: "USDC",
              amountMicros: 1_000n,
              referenceType: "test",
              referenceId: flown.subject_id,
            },
          },
          evidence: [
            { ...flown, state: "capture", source: "test", source_ref: THIS_TRANSACTION },
            { ...flown, state: "outcome", source: "test", source_ref: null },
          ],
        });
        // As a paid group's holds: two posts in one write (writeTransactionsInFlight).
        const pair = [subject(), subject()];
        await writeTransactionsInFlight(
          trx,
          pair.map((p) => holdInFlight(p, key("hold"))),
        );
        // As the other money paths: a movement, then its evidence appended (one row, then two).
        const other = subject();
        const released = { ...movement, reference: reference(), idempotencyKey: key("hold") };
        const hold = await holdFunds(released, trx);
        await appendEvidence(trx, {
          ...other,
          state: "authorization",
          source: "test",
          source_ref: hold.transactionId,
        });
        await releaseHold({ ...holdOf(released), idempotencyKey: key("release") }, trx);
        await appendEvidence(trx, [
          { ...other, state: "refund", source: "test", source_ref: null },
          { ...other, state: "outcome", source: "test", source_ref: null },
        ]);
      }
      const { rows } = await trx.raw(
        `select statement, generic_plans::text, custom_plans::text from pg_prepared_statements
          where statement ~ '(ledger_|payment_evidence|platform_settings)'`,
      );
      return rows as PreparedRow[];
    });

    const runs = (row: PreparedRow) => Number(row.custom_plans) + Number(row.generic_plans);
    const named = (pattern: RegExp) =>
      prepared.filter((row) => pattern.test(row.statement) && runs(row) >= ROUNDS);
    // Each ran at least ROUNDS times on this connection as a named statement: the locks (a hold's, and
    // a capture's and a release's, each reading its hold by key), the writes (with and without evidence),
    // the evidence inserts (one row, two rows), both custody reads, and the writes in one flight (a
    // hold's, a capture's, and two holds in one).
    const locks = named(/^select ledger_accounts\.\*[\s\S]* for update of ledger_accounts$/);
    expect(locks.length).toBeGreaterThanOrEqual(3);
    expect(locks.filter((row) => row.statement.includes("hold.hold_id"))).toHaveLength(2);
    expect(named(/^with tx as \(\s*insert into ledger_transactions/).length).toBeGreaterThanOrEqual(3);
    expect(named(/^with tx as \([\s\S]*evidence as \(\s*insert into payment_evidence/).length).toBe(2);
    // A lone post's write in one flight has a text per shape (the hold's, the capture's); several posts'
    // share one text, whatever their posts, legs and evidence.
    expect(named(/^with leg \(post, ord, account_id, amount\)/)).toHaveLength(2);
    expect(named(/^with leg as \(/)).toHaveLength(1);
    expect(named(/^insert into payment_evidence/).length).toBeGreaterThanOrEqual(2);
    expect(named(/platform_settings/)).toHaveLength(2);
    // None is planned for its values past the first five runs (a first use's account creation runs fewer).
    for (const row of prepared) {
      const summary = `${row.statement.replace(/\s+/g, " ").slice(0, 140)}…: ${row.custom_plans} custom, ${row.generic_plans} generic`;
      expect(Number(row.custom_plans), summary).toBeLessThanOrEqual(5);
    }
  });
});
