import type { Db } from "../../db/knex.js";
import { preparedRaw, UTC_TODAY_SQL } from "../../db/prepared.js";
import { answerOrRefuse, refuseUnless } from "../../db/refusals.js";

// Per-key, per-UTC-day spend (docs/payments.md "Keys, scopes and spend limits"). Every day is the database's UTC
// date, so API processes with skewed clocks agree on when a day ends.

export interface SpendDayRow {
  api_key_id: string;
  /** YYYY-MM-DD (UTC), read as text: node-pg would turn a date into a local-midnight Date. */
  day: string;
  reserved_micros: string;
  spent_micros: string;
}

/**
 * Reserves amountMicros on the key's row for today, in one statement. With a cap, the upsert only
 * applies while reserved + spent + amount <= cap: concurrent reservations queue on the row lock and each
 * re-checks the cap against the row as the previous one committed it. Returns the day. When the cap has
 * no room the statement fails (refuse_unless, DAILY_CAP_FULL) and writes nothing: statements sent behind
 * it without waiting for its answer (a paid hold and its COMMIT) roll back with it. The caller has
 * checked amount <= cap, so a first row for the day never exceeds it.
 *
 * The invocation that reserves is stamped with the same day by its own insert, in the same transaction
 * (its spend_day is UTC_TODAY, the same `now()`): resolveReservation finds the day there. This statement
 * used to stamp it with an UPDATE, which rewrote the row its transaction had just inserted, and
 * PostgreSQL runs every foreign-key check of a row again when the transaction that inserted it updates
 * it (docs/benchmarks.md "The twenty-fifth round").
 */
export async function reserveSpend(
  q: Db,
  r: { apiKeyId: string; amountMicros: bigint; capMicros: bigint | null },
): Promise<string> {
  const cap = r.capMicros?.toString() ?? null;
  const result = await preparedRaw(
    q,
    `with d as (
       insert into api_key_spend_days as s (api_key_id, day, reserved_micros)
       values (?, ${UTC_TODAY_SQL}, ?)
       on conflict (api_key_id, day) do update
          set reserved_micros = s.reserved_micros + excluded.reserved_micros, updated_at = now()
        where ?::bigint is null or s.reserved_micros + s.spent_micros + excluded.reserved_micros <= ?::bigint
       returning s.day
     )
     ${answerOrRefuse("select day::text as day from d", "s.day is not null", DAILY_CAP_FULL)}`,
    [r.apiKeyId, r.amountMicros.toString(), cap, cap],
  );
  return result.rows[0].day as string;
}

/**
 * reserveSpend for several reservations in one statement (a paid group's holds: submission.ts
 * claimPaidTogether; docs/benchmarks.md "The thirty-second round"): each key's row for today takes the
 * sum of its reservations at once, under the strictest cap they carry, so a key's row is written once a
 * group, not once a reservation. All or nothing: when any key's cap has no room for its sum, the
 * statement fails (DAILY_CAP_FULL) and writes nothing; the caller then reserves each alone.
 */
export async function reserveSpendTogether(
  q: Db,
  rs: readonly { apiKeyId: string; amountMicros: bigint; capMicros: bigint | null }[],
): Promise<void> {
  const body = JSON.stringify(
    rs.map((r) => ({
      api_key_id: r.apiKeyId,
      amount: r.amountMicros.toString(),
      cap: r.capMicros?.toString() ?? null,
    })),
  );
  // A key's first row for the day is inserted only within its cap too: reserveSpend's caller checks one
  // amount against the cap, but a sum was never checked.
  await preparedRaw(
    q,
    `with k as (
       select api_key_id, sum(amount)::bigint as amount, min(cap) as cap
         from jsonb_to_recordset(?::jsonb) as r(api_key_id uuid, amount bigint, cap bigint)
        group by api_key_id
     ), d as (
       insert into api_key_spend_days as s (api_key_id, day, reserved_micros)
       select api_key_id, ${UTC_TODAY_SQL}, amount from k where cap is null or amount <= cap
       on conflict (api_key_id, day) do update
          set reserved_micros = s.reserved_micros + excluded.reserved_micros, updated_at = now()
        where not exists (
          select 1 from k
           where k.api_key_id = excluded.api_key_id
             and s.reserved_micros + s.spent_micros + excluded.reserved_micros > k.cap
        )
       returning s.api_key_id
     )
     select 1 as ok where ${refuseUnless("(select count(*) from d) = (select count(*) from k)", DAILY_CAP_FULL)}`,
    [body],
  );
}

/** Why reserveSpend failed (its refuse_unless reason): the key's daily cap has no room for the amount. */
export const DAILY_CAP_FULL = "identity: the daily cap of the key has no room for this amount";

/** The key's row for today (zeros when it has none yet). */
export async function readSpendToday(q: Db, apiKeyId: string): Promise<SpendDayRow> {
  const result = await q.raw(
    `select ?::uuid as api_key_id, t.day::text as day,
            coalesce(s.reserved_micros, 0)::text as reserved_micros,
            coalesce(s.spent_micros, 0)::text as spent_micros
       from (select ${UTC_TODAY_SQL} as day) t
       left join api_key_spend_days s on s.api_key_id = ? and s.day = t.day`,
    [apiKeyId, apiKeyId],
  );
  return result.rows[0] as SpendDayRow;
}

/**
 * resolveReservations' text (exported for the plan test). The ids come twice, in the document and as an
 * array, so that the kept plan looks the invocations up by id whatever the table's size when it was
 * planned (invocations.ts SUCCESSES_SQL says why). The array is read through a subquery, which hides
 * its length from the planner: given the array itself, a plan for a group of two or three priced the
 * lookup below the generic plan's ten ids, and PostgreSQL then planned every group afresh instead of
 * keeping the generic plan (test/money/money-statement-plans.test.ts).
 */
export const RESOLVE_RESERVATIONS_SQL = `update api_key_spend_days s
        set reserved_micros = s.reserved_micros - d.held,
            spent_micros = s.spent_micros + d.captured,
            updated_at = now()
       from (
         select i.api_key_id, i.spend_day, sum(i.hold_micros)::bigint as held, sum(r.captured)::bigint as captured
           from jsonb_to_recordset(?::jsonb) as r(invocation_id uuid, captured bigint)
           join invocations i on i.id = r.invocation_id
          where i.id = any(array(select unnest(?::uuid[]))) and i.spend_day is not null
          group by i.api_key_id, i.spend_day
       ) d
      where s.api_key_id = d.api_key_id and s.day = d.spend_day`;

/**
 * resolveReservation for several invocations in one statement (a paid group's captures: run-invocation.ts
 * PAID_SUCCESSES): each key's day row is written once, by the sums of its invocations.
 */
export async function resolveReservations(
  q: Db,
  rs: readonly { invocationId: string; capturedMicros: bigint }[],
): Promise<void> {
  const body = JSON.stringify(
    rs.map((r) => ({ invocation_id: r.invocationId, captured: r.capturedMicros.toString() })),
  );
  await preparedRaw(q, RESOLVE_RESERVATIONS_SQL, [body, rs.map((r) => r.invocationId)]);
}

/**
 * Ends an invocation's reservation on the day it was made: its whole hold leaves reserved, and
 * capturedMicros (0 for a release) joins spent. No-op for an invocation that reserved nothing. The
 * caller ends the invocation exactly once in the same transaction, so this runs once per invocation.
 */
export async function resolveReservation(q: Db, invocationId: string, capturedMicros: bigint): Promise<void> {
  await preparedRaw(
    q,
    `update api_key_spend_days s
        set reserved_micros = s.reserved_micros - i.hold_micros,
            spent_micros = s.spent_micros + ?::bigint,
            updated_at = now()
       from invocations i
      where i.id = ? and i.spend_day is not null and s.api_key_id = i.api_key_id and s.day = i.spend_day`,
    [capturedMicros.toString(), invocationId],
  );
}
