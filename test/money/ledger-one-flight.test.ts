import { randomUUID } from "node:crypto";
import type { Knex } from "knex";
import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "../../shared/db/knex.js";
import { AppError } from "../../shared/errors.js";
import {
  type AgentMovement,
  captureHold,
  creditDeposit,
  holdFunds,
  releaseHold,
} from "../../shared/money/ledger/flows.js";
import {
  balances,
  FlightDeclined,
  type HeldFunds,
  HoldAlreadyResolvedError,
  retryTransient,
} from "../../shared/money/ledger/ledger.js";
import { findTransactionByKey, transactionEntries } from "../../shared/money/ledger/store.js";
import { buildAgent } from "../helpers/factories.js";
import { heldBy, holdOf } from "../helpers/money.js";
import { watchThePoolsConnection } from "../helpers/pg-socket.js";

// A post in one flight (PostTransactionInput.oneFlight): its lock, its write (which reads the locked
// balances and checks the post's rules itself), the caller's statements and the COMMIT go out together,
// and the post waits for no answer. What only the two-step post answers (a refusal, a replay, an account
// on first use, a hold not as expected) declines the flight: the caller's transaction rolls back whole,
// and run again, the post takes two steps and answers it.

afterAll(async () => {
  await closeDb();
});

const IN_ONE_FLIGHT = { commitWithWrite: true, oneFlight: true } as const;

function movement(agentId: string, amountMicros: bigint, label: string): AgentMovement {
  return {
    agentId,
    currency: "USDC",
    amountMicros,
    reference: { type: "test", id: randomUUID() },
    idempotencyKey: `test:${label}:${randomUUID()}`,
  };
}

async function fundedBuyer(micros: bigint): Promise<string> {
  const { agentId } = await buildAgent();
  await creditDeposit(movement(agentId, micros, "deposit"));
  return agentId;
}

async function balancesOf(agentId: string): Promise<bigint[]> {
  const b = await balances(agentId, "USDC");
  return [b.available, b.held, b.payable];
}

/**
 * Runs `post` in a caller's transaction that first inserts a row of its own, retried as the paid paths
 * retry: what each attempt met, whether the caller's row committed, and the end (a result or an error).
 */
async function asACaller(post: (trx: Knex.Transaction) => Promise<unknown>) {
  const met: string[] = [];
  const row = `test:ledger:${randomUUID()}`;
  const end = await retryTransient(() =>
    db().transaction(async (trx) => {
      await trx("platform_settings").insert({ key: row, value: "{}" }).onConflict("key").merge();
      try {
        const result = await post(trx);
        met.push("posted");
        return result;
      } catch (error) {
        met.push(
          error instanceof AppError
            ? error.code
            : error instanceof FlightDeclined
              ? "FlightDeclined"
              : (error as Error).constructor.name,
        );
        throw error;
      }
    }),
  ).then(
    (value) => value,
    (error: unknown) => error,
  );
  const committed = (await db()("platform_settings").where({ key: row }).first()) !== undefined;
  return { met, committed, end };
}

describe("a ledger post in one flight", () => {
  it("sends BEGIN, the caller's statement, the lock, the write and COMMIT in one socket write", async () => {
    const buyer = await fundedBuyer(100n);
    await holdFunds(movement(buyer, 1n, "first-hold")); // the held account exists: nothing declines
    await db().raw("select 1"); // the pool's connection, idle: the watched one
    const watch = await watchThePoolsConnection();
    const hold = movement(buyer, 30n, "hold");
    try {
      await db().transaction(async (trx) => {
        // Asked for now (a knex query runs once something awaits it), as a caller's `before` is.
        const before = Promise.resolve(trx.raw("select 1"));
        await holdFunds({ ...hold, ...IN_ONE_FLIGHT, before }, trx);
      });
      // One hand-over to the socket, then five answers (BEGIN, the statement, the lock, the write,
      // COMMIT): nothing is written after the first answer.
      expect(watch.log.filter((entry) => entry !== "write")).toEqual([
        "socket",
        "answer",
        "answer",
        "answer",
        "answer",
        "answer",
      ]);
    } finally {
      watch.stop();
    }
    expect(await findTransactionByKey(db(), hold.idempotencyKey)).toBeDefined();
    expect(await balancesOf(buyer)).toEqual([69n, 31n, 0n]);
  });

  it("writes the entries and balances the two-step post writes: a hold, a part capture, a first-party capture", async () => {
    const { agentId: seller } = await buildAgent("seller");
    const balancesAfter = async (inOneFlight: boolean) => {
      const buyer = await fundedBuyer(1_000n);
      const sent = inOneFlight ? IN_ONE_FLIGHT : {};
      const own = <T>(post: (trx: Knex.Transaction) => Promise<T>) =>
        retryTransient(() => db().transaction(post));
      // The first hold makes the held account (declined in one flight, then two steps): the rest do not.
      const holds = [
        movement(buyer, 100n, "hold"),
        movement(buyer, 200n, "hold"),
        movement(buyer, 300n, "hold"),
      ];
      for (const hold of holds) await own((trx) => holdFunds({ ...hold, ...sent }, trx));
      const resolve = (hold: AgentMovement) => ({
        holdKey: hold.idempotencyKey,
        expected: heldBy(hold),
        idempotencyKey: `test:capture:${randomUUID()}`,
        ...sent,
      });
      const part = await own((trx) =>
        captureHold({ ...resolve(holds[1]!), sellerAgentId: seller, captureMicros: 150n }, trx),
      );
      const firstParty = await own((trx) => captureHold({ ...resolve(holds[2]!), sellerAgentId: null }, trx));
      const released = await own((trx) => releaseHold(resolve(holds[0]!), trx));
      const entries = async (id: string) =>
        (await transactionEntries(db(), id)).map((e) => [
          e.kind,
          e.amount_micros,
          e.balance_after_micros - e.balance_before_micros,
        ]);
      return {
        balances: await balancesOf(buyer),
        part: await entries(part.transactionId),
        firstParty: await entries(firstParty.transactionId),
        released: await entries(released.transactionId),
        chains: await entryChains(buyer),
      };
    };
    const twoSteps = await balancesAfter(false);
    const oneFlight = await balancesAfter(true);
    expect(oneFlight).toEqual(twoSteps);
    expect(oneFlight.balances).toEqual([1_000n - 150n - 300n, 0n, 0n]);
    // The first-party capture credits platform revenue twice (the seller's part and the fee), as two
    // entries whose running balances follow each other.
    expect(oneFlight.firstParty).toEqual([
      ["agent_held", -300n, -300n],
      ["platform_revenue", 291n, 291n],
      ["platform_revenue", 9n, 9n],
    ]);
    expect(oneFlight.chains).toBe(true);
  });

  it("declines what only two steps answer, rolling the caller back whole; run again, the post answers it", async () => {
    const buyer = await fundedBuyer(100n);

    // An account on first use (the buyer's held account): declined, then created and posted.
    const first = movement(buyer, 10n, "hold");
    const created = await asACaller((trx) => holdFunds({ ...first, ...IN_ONE_FLIGHT }, trx));
    expect(created.met).toEqual(["FlightDeclined", "posted"]);
    expect(created.committed).toBe(true);
    expect(await balancesOf(buyer)).toEqual([90n, 10n, 0n]);

    // Short funds: declined, then refused with the amounts; the caller's row is not written.
    const tooMuch = movement(buyer, 500n, "hold");
    const short = await asACaller((trx) => holdFunds({ ...tooMuch, ...IN_ONE_FLIGHT }, trx));
    expect(short.met).toEqual(["FlightDeclined", "PAYMENT_REQUIRED"]);
    expect(short.committed).toBe(false);
    expect((short.end as AppError).details).toMatchObject({
      available_usdc: "0.000090",
      required_usdc: "0.000500",
    });

    // A key already posted: declined (its unique index), then replayed; the caller commits as usual.
    const replay = await asACaller((trx) => holdFunds({ ...first, ...IN_ONE_FLIGHT }, trx));
    expect(replay.met).toEqual(["FlightDeclined", "posted"]);
    expect(replay.end).toMatchObject({ replayed: true });
    expect(replay.committed).toBe(true);

    // A hold that holds something else than its caller says: declined, then the programming error.
    // One key for every attempt of a post, as a caller's key is (the next attempt's hint is by key).
    const resolve =
      (expected: HeldFunds, idempotencyKey = `test:release:${randomUUID()}`) =>
      (trx: Knex.Transaction) =>
        releaseHold({ holdKey: first.idempotencyKey, expected, idempotencyKey, ...IN_ONE_FLIGHT }, trx);
    const other = await asACaller(resolve({ ...heldBy(first), amountMicros: 11n }));
    expect(other.met).toEqual(["FlightDeclined", "Error"]);
    expect((other.end as Error).message).toMatch(/not what its caller expected/);
    expect(other.committed).toBe(false);

    // A hold resolved under another key: declined (its unique index), then told so.
    await releaseHold({ ...holdOf(first), idempotencyKey: `test:release:${randomUUID()}` });
    const resolved = await asACaller(resolve(heldBy(first)));
    expect(resolved.met).toEqual(["FlightDeclined", "HoldAlreadyResolvedError"]);
    expect(resolved.end).toBeInstanceOf(HoldAlreadyResolvedError);
    expect(resolved.committed).toBe(false);
    expect(await balancesOf(buyer)).toEqual([100n, 0n, 0n]);
  });

  it("fails with the caller's statement's error when one sent before it fails, and writes nothing", async () => {
    const buyer = await fundedBuyer(100n);
    await holdFunds(movement(buyer, 1n, "first-hold"));
    const hold = movement(buyer, 30n, "hold");
    const failed = await asACaller((trx) =>
      holdFunds({ ...hold, ...IN_ONE_FLIGHT, before: trx.raw("select 1 / 0") }, trx),
    );
    expect(failed.met).toEqual(["DatabaseError"]);
    expect((failed.end as Error).message).toMatch(/division by zero/);
    expect(failed.committed).toBe(false);
    expect(await findTransactionByKey(db(), hold.idempotencyKey)).toBeUndefined();
    expect(await balancesOf(buyer)).toEqual([99n, 1n, 0n]);
  });

  it("takes two steps in a savepoint, whose COMMIT is its transaction's", async () => {
    const buyer = await fundedBuyer(100n);
    await holdFunds(movement(buyer, 1n, "first-hold"));
    const hold = movement(buyer, 5n, "hold");
    await db().transaction(async (trx) => {
      await trx.transaction((savepoint) => holdFunds({ ...hold, ...IN_ONE_FLIGHT }, savepoint));
      await trx.raw("select 1");
    });
    expect(await balancesOf(buyer)).toEqual([94n, 6n, 0n]);
  });
});

/** True when every account of the agent has its entries chained: each before is the previous after. */
async function entryChains(agentId: string): Promise<boolean> {
  const rows = await db()("ledger_entries as e")
    .join("ledger_accounts as a", "a.id", "e.account_id")
    .where("a.owner_agent_id", agentId)
    .orderBy("e.id")
    .select("e.account_id", "e.balance_before_micros", "e.balance_after_micros", "a.balance_micros");
  const last = new Map<string, string>();
  for (const r of rows) {
    if ((last.get(r.account_id) ?? "0") !== r.balance_before_micros) return false;
    last.set(r.account_id, r.balance_after_micros);
  }
  return rows.every((r) => last.get(r.account_id) === r.balance_micros);
}
