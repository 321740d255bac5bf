import pg from "pg";
import { afterAll, describe, expect, it } from "vitest";
import { closeDb, db } from "../../shared/db/knex.js";
import { postgresDateReader, readTimestamptz } from "../../shared/db/timestamps.js";

// The timestamptz reader's fast path (shared/db/timestamps.ts) must give exactly what postgres-date
// gives, for every value: over generated texts of the shape it takes, over shapes it leaves to
// postgres-date, and over what the server itself writes in several time zones.

afterAll(closeDb);

/** The instant a reader gave, comparable with toBe (NaN for an invalid Date, the value otherwise). */
const instant = (value: unknown) => (value instanceof Date ? value.getTime() : value);

function expectSame(text: string) {
  const fast = readTimestamptz(text);
  const slow = postgresDateReader(text);
  expect(fast instanceof Date, text).toBe(slow instanceof Date);
  expect(instant(fast), text).toBe(instant(slow));
}

/** A seeded generator, so a failure names a text that can be run again. */
function lcg(seed: number) {
  let s = seed;
  return (n: number) => {
    s = (s * 1103515245 + 12345) % 2147483648;
    return s % n;
  };
}

const pad = (n: number, width: number) => String(n).padStart(width, "0");

describe("the timestamptz reader", () => {
  it("is the one pg uses", () => {
    expect(pg.types.getTypeParser(1184, "text")).toBe(readTimestamptz);
  });

  it("agrees with postgres-date on generated values of PostgreSQL's shape", () => {
    const next = lcg(7);
    const zones = ["+00", "-05", "+05:30", "-03:30", "+14", "-12", "+05:53:28", "-00:25:21", "+01:00:00"];
    for (let i = 0; i < 20_000; i++) {
      const fraction = next(3) === 0 ? "" : `.${pad(next(1_000_000), 6).slice(0, 1 + next(6))}`;
      const text =
        `${1000 + next(9000)}-${pad(1 + next(12), 2)}-${pad(1 + next(31), 2)} ` +
        `${pad(next(24), 2)}:${pad(next(60), 2)}:${pad(next(60), 2)}${fraction}${zones[next(zones.length)]}`;
      expectSame(text);
    }
  });

  it("agrees on fractions whose millisecond floating point could round either way", () => {
    for (let ms = 0; ms < 1000; ms++)
      for (const rest of ["", "0", "000", "999", "5", "4999"])
        expectSame(`2026-11-29 12:34:56.${pad(ms, 3)}${rest}+00`);
  });

  it("leaves every other shape to postgres-date", () => {
    for (const text of [
      "infinity",
      "-infinity",
      "0099-01-01 00:00:00+00",
      "0001-01-01 00:00:00+00 BC",
      "2026-11-29 12:34:56+00 BC",
      "12026-11-29 12:34:56+00",
      "2026-11-29 12:34:56",
      "2026-11-29 12:34:56.+00",
      "2026-11-29 12:34:56Z",
      "2026-11-29 12:34:56+0530",
      "2026-11-29 12:34:56+05:30:00:00",
      "2026-11-29 12:34:56 +00",
      "2026-11-29T12:34:56+00",
      "2026-1x-29 12:34:56+00",
      "2026-11-29",
      "not a date",
    ])
      expectSame(text);
  });

  it("agrees with postgres-date on what the server writes, in several time zones", async () => {
    for (const zone of ["UTC", "Asia/Kolkata", "America/St_Johns", "Pacific/Kiritimati", "Africa/Monrovia"]) {
      await db().transaction(async (trx) => {
        await trx.raw(`set local time zone '${zone}'`);
        const { rows } = await trx.raw(
          `select t::text as text, t from (
             select timestamptz '1000-01-01 00:00:00+00' + random() * interval '9000 years' as t
               from generate_series(1, 500)
             union all select timestamptz '1900-01-01 00:00:00+00' + (n || ' seconds')::interval
               from generate_series(0, 200, 7) n
             union all select date_trunc('second', now()) + (n || ' microseconds')::interval
               from generate_series(0, 1000, 13) n
           ) s`,
        );
        for (const row of rows as { text: string; t: Date }[]) {
          expectSame(row.text);
          expect(row.t.getTime(), row.text).toBe(instant(postgresDateReader(row.text)));
        }
      });
    }
  });
});
