import { randomUUID } from "node:crypto";
import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "../../shared/db/knex.js";
import { refusalOf } from "../../shared/db/refusals.js";
import { byKnownId, forgetAccountIds, learnAccountIds } from "../../shared/money/ledger/account-ids.js";
import {
  type AgentMovement,
  creditDeposit,
  holdAndResolveTogether,
  holdFunds,
} from "../../shared/money/ledger/flows.js";
import { accountFor, balances, FlightDeclined, retryTransient } from "../../shared/money/ledger/ledger.js";
import { findTransactionByKey, IN_FLIGHT_REFUSALS } from "../../shared/money/ledger/store.js";
import { buildAgent } from "../helpers/factories.js";

// The account ids a process keeps (account-ids.ts) for the posts sent in one flight: such a post names
// its accounts by a kept id, and an id that names no account (a table emptied, another database) declines
// the flight, is forgotten, and the post is answered by key, with the same result.

afterAll(async () => {
  await closeDb();
});

function movement(agentId: string, amountMicros: bigint): AgentMovement {
  return {
    agentId,
    currency: "USDC",
    amountMicros,
    reference: { type: "test", id: randomUUID() },
    idempotencyKey: `test:account-ids:${randomUUID()}`,
  };
}

/** A buyer with `micros` available and both its accounts made (nothing declines on first use). */
async function fundedBuyer(micros: bigint): Promise<string> {
  const { agentId } = await buildAgent();
  await creditDeposit(movement(agentId, micros));
  await accountFor(agentId, "agent_held", "USDC");
  return agentId;
}

async function balancesOf(agentId: string): Promise<bigint[]> {
  const b = await balances(agentId, "USDC");
  return [b.available, b.held];
}

const availableKey = (agentId: string) =>
  ({ owner: agentId, kind: "agent_available", currency: "USDC" }) as const;

/** Keeps, for the buyer's available account, an id that names no account. */
function keepStaleId(agentId: string): void {
  learnAccountIds([{ id: randomUUID(), owner_agent_id: agentId, kind: "agent_available", currency: "USDC" }]);
}

const holdTogether = (holds: AgentMovement[]) =>
  db().transaction((trx) => holdAndResolveTogether(holds, [], trx));

describe("account ids kept for posts in one flight", () => {
  it("a group learns its accounts' ids from its lock, and the next group, named by them, writes the same", async () => {
    forgetAccountIds();
    const buyer = await fundedBuyer(1_000n);
    const held = (await accountFor(buyer, "agent_held", "USDC")).id;
    expect(byKnownId(availableKey(buyer))).toEqual(availableKey(buyer));

    await holdTogether([movement(buyer, 100n), movement(buyer, 50n)]);
    const available = (await accountFor(buyer, "agent_available", "USDC")).id;
    expect(byKnownId(availableKey(buyer))).toEqual({ id: available });
    expect(byKnownId({ ...availableKey(buyer), kind: "agent_held" })).toEqual({ id: held });

    const second = [movement(buyer, 200n), movement(buyer, 25n)];
    await holdTogether(second);
    expect(await balancesOf(buyer)).toEqual([625n, 375n]);
    for (const hold of second) expect(await findTransactionByKey(db(), hold.idempotencyKey)).toBeDefined();
  });

  it("a group that names an account by a stale id writes nothing, forgets the ids, and goes through by key", async () => {
    const buyer = await fundedBuyer(1_000n);
    keepStaleId(buyer);
    const holds = [movement(buyer, 100n), movement(buyer, 50n)];

    const refused = await holdTogether(holds).catch((error: unknown) => error);
    expect(refusalOf(refused)).toBe(IN_FLIGHT_REFUSALS.accountMissing);
    expect(await balancesOf(buyer)).toEqual([1_000n, 0n]);
    expect(byKnownId(availableKey(buyer))).toEqual(availableKey(buyer));

    await holdTogether(holds);
    expect(await balancesOf(buyer)).toEqual([850n, 150n]);
    expect(byKnownId(availableKey(buyer))).toEqual({
      id: (await accountFor(buyer, "agent_available", "USDC")).id,
    });
  });

  it("a group that meets an account on first use, every account named as its caller named it, forgets nothing", async () => {
    const known = await fundedBuyer(1_000n);
    await holdTogether([movement(known, 10n), movement(known, 20n)]);
    expect(byKnownId(availableKey(known))).toHaveProperty("id");
    // A buyer whose held account does not exist yet, and whose accounts this process has not seen.
    const { agentId: fresh } = await buildAgent();
    await creditDeposit(movement(fresh, 1_000n));
    forgetAccountIds();
    learnAccountIds([await accountFor(known, "agent_available", "USDC")]);

    const refused = await holdTogether([movement(fresh, 10n), movement(fresh, 20n)]).catch((e: unknown) => e);
    expect(refusalOf(refused)).toBe(IN_FLIGHT_REFUSALS.accountMissing);
    expect(byKnownId(availableKey(known))).toHaveProperty("id");
  });

  it("a lone post in one flight declines on a stale id, forgets it, and posts in two steps", async () => {
    const buyer = await fundedBuyer(1_000n);
    keepStaleId(buyer);
    const hold = movement(buyer, 300n);
    const met: string[] = [];
    await retryTransient(() =>
      db().transaction(async (trx) => {
        try {
          await holdFunds({ ...hold, commitWithWrite: true, oneFlight: true }, trx);
          met.push("posted");
        } catch (error) {
          met.push(error instanceof FlightDeclined ? "FlightDeclined" : String(error));
          throw error;
        }
      }),
    );
    expect(met).toEqual(["FlightDeclined", "posted"]);
    expect(await balancesOf(buyer)).toEqual([700n, 300n]);
    // The two-step post's lock learned the right id again.
    expect(byKnownId(availableKey(buyer))).toEqual({
      id: (await accountFor(buyer, "agent_available", "USDC")).id,
    });
  });
});
