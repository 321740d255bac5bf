import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { db } from "../../shared/db/knex.js";
import { refusalOf } from "../../shared/db/refusals.js";
import {
  DAILY_CAP_FULL,
  reserveSpendTogether,
  resolveReservation,
  resolveReservations,
} from "../../shared/identity/store/spend-days.js";
import { buildAgent, buildListing, freeInvocationRow, insertInvocation } from "../helpers/factories.js";

// A paid group's days of spend in one statement each (shared/identity/store/spend-days.ts): the group's
// reservations, summed per key under its cap, all or nothing; and its captures' resolutions, summed per
// key and day, as the one-at-a-time statements leave the rows.

let keys: string[];

beforeAll(async () => {
  keys = [];
  for (let i = 0; i < 3; i++) {
    const agent = await buildAgent();
    keys.push((await db()("api_keys").where({ agent_id: agent.agentId }).first()).id);
  }
});
afterAll(async () => {
  await db()("api_key_spend_days").whereIn("api_key_id", keys).delete();
});

/** Each key's row for today, as [reserved, spent] (undefined when it has none). */
async function todays(ids: string[]): Promise<([string, string] | undefined)[]> {
  const rows = await db()("api_key_spend_days")
    .whereIn("api_key_id", ids)
    .andWhereRaw("day = (now() at time zone 'UTC')::date");
  return ids.map((id) => {
    const row = rows.find((r) => r.api_key_id === id);
    return row && [row.reserved_micros.toString(), row.spent_micros.toString()];
  });
}

const reserve = (apiKeyId: string, amount: bigint, cap: bigint | null) => ({
  apiKeyId,
  amountMicros: amount,
  capMicros: cap,
});

/** The refusal's reason of a group of reservations that is expected to be refused (undefined if it went). */
const refusalOfGroup = (reservations: ReturnType<typeof reserve>[]) =>
  reserveSpendTogether(db(), reservations).then(
    () => undefined,
    (e: unknown) => refusalOf(e),
  );

describe("reserving a group's spend", () => {
  it("sums each key's reservations into its row for today, within the cap", async () => {
    const [a, b] = keys as [string, string];
    await reserveSpendTogether(db(), [reserve(a, 3n, 10n), reserve(b, 5n, null), reserve(a, 4n, 10n)]);
    expect(await todays([a, b])).toEqual([
      ["7", "0"],
      ["5", "0"],
    ]);
  });

  it("writes nothing when one key's sum would pass its cap, a first row of the day included", async () => {
    const [a, b, c] = keys as [string, string, string];
    const before = await todays([a, b, c]);
    expect(await refusalOfGroup([reserve(b, 1n, null), reserve(a, 2n, 10n), reserve(a, 2n, 10n)])).toBe(
      DAILY_CAP_FULL,
    );
    // c has no row today: two reservations each within its cap, but not their sum.
    expect(await refusalOfGroup([reserve(c, 3n, 5n), reserve(c, 3n, 5n)])).toBe(DAILY_CAP_FULL);
    expect(await todays([a, b, c])).toEqual(before);
    expect(before[2]).toBeUndefined();
  });

  it("takes the strictest cap a key's reservations carry", async () => {
    const [, , c] = keys as [string, string, string];
    expect(await refusalOfGroup([reserve(c, 3n, null), reserve(c, 1n, 10n), reserve(c, 2n, 5n)])).toBe(
      DAILY_CAP_FULL,
    );
    await reserveSpendTogether(db(), [reserve(c, 3n, null), reserve(c, 2n, 5n)]);
    expect(await todays([c])).toEqual([["5", "0"]]);
  });
});

describe("resolving a group's reservations", () => {
  it("leaves each key's day as resolving them one at a time does", async () => {
    const agent = await buildAgent();
    const apiKeyId = (await db()("api_keys").where({ agent_id: agent.agentId }).first()).id as string;
    keys.push(apiKeyId);
    const listing = await buildListing({ endpointUrl: "http://127.0.0.1:9/unused" });
    const invocation = async (hold: bigint, reserved: boolean) => {
      const row = await insertInvocation(db(), {
        ...freeInvocationRow({ agentId: agent.agentId, apiKeyId }, listing, {}),
        price_micros: hold,
        hold_micros: hold,
      });
      if (reserved)
        await db().raw("update invocations set spend_day = (now() at time zone 'UTC')::date where id = ?", [
          row.id,
        ]);
      return row.id;
    };
    const [one, two, three, unreserved] = [
      await invocation(10n, true),
      await invocation(20n, true),
      await invocation(30n, true),
      await invocation(40n, false),
    ];
    await reserveSpendTogether(db(), [reserve(apiKeyId, 60n, null)]);

    await resolveReservations(db(), [
      { invocationId: one, capturedMicros: 10n },
      { invocationId: two, capturedMicros: 5n },
      { invocationId: unreserved, capturedMicros: 40n },
    ]);
    // Holds 10 + 20 leave reserved; 10 + 5 join spent; the unreserved invocation changes nothing.
    expect(await todays([apiKeyId])).toEqual([["30", "15"]]);
    await resolveReservation(db(), three, 0n);
    expect(await todays([apiKeyId])).toEqual([["0", "15"]]);

    // Both grouped statements are planned for their values five times at most on a connection, then
    // run on the kept generic plan: a group of two or three is not planned afresh every time.
    const plans = await db().transaction(async (trx) => {
      for (let round = 0; round < 8; round++) {
        await reserveSpendTogether(trx, [reserve(apiKeyId, 30n, null), reserve(apiKeyId, 30n, null)]);
        await resolveReservations(trx, [
          { invocationId: one, capturedMicros: 0n },
          { invocationId: two, capturedMicros: 0n },
          { invocationId: three, capturedMicros: 0n },
        ]);
      }
      const { rows } = await trx.raw(
        `select generic_plans, custom_plans from pg_prepared_statements
          where statement ~ 'api_key_spend_days' and generic_plans + custom_plans >= 8`,
      );
      return rows as { generic_plans: string; custom_plans: string }[];
    });
    expect(plans).toHaveLength(2);
    for (const p of plans) expect(Number(p.custom_plans)).toBeLessThanOrEqual(5);
  });
});
