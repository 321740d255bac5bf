import { randomBytes } from "node:crypto";
import knexFactory, { type Knex } from "knex";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { closeDb, db } from "../../shared/db/knex.js";
import { insertReturningAll, NOW, preparedRaw, UTC_TODAY, UTC_TODAY_SQL } from "../../shared/db/prepared.js";
import { ShapedQuery } from "../../shared/db/row-shape.js";

// Named prepared statements (shared/db/prepared.ts) on the test database, on a table of this file's own.
const table = `prepared_${randomBytes(4).toString("hex")}`;
// One connection, so the statement a test prepares is the one its next call meets.
let single: Knex;

beforeAll(() => {
  single = knexFactory({ client: "pg", connection: process.env.DATABASE_URL, pool: { min: 1, max: 1 } });
});

afterAll(async () => {
  await single.destroy();
  await db().schema.dropTableIfExists(table);
  await closeDb();
});

describe("named prepared statements", () => {
  it("run as named statements and answer like plain ones", async () => {
    await db().schema.createTable(table, (t) => {
      t.integer("a");
    });
    await db()(table).insert([{ a: 1 }, { a: 2 }]);
    const sql = `select * from ${table} where a >= ? order by a`;
    for (let i = 0; i < 7; i++) {
      const result = await preparedRaw(single, sql, [1]);
      expect(result.rows).toEqual([{ a: 1 }, { a: 2 }]);
    }
    const named = await single.raw(
      "select name, generic_plans + custom_plans as runs from pg_prepared_statements where statement like ?",
      [`%from ${table}%`],
    );
    expect(named.rows).toHaveLength(1);
    expect(named.rows[0].name).toMatch(/^am_[0-9a-f]{24}$/);
    expect(Number(named.rows[0].runs)).toBe(7);
  });

  it("survive a migration that changes the row type under a running process", async () => {
    const sql = `select * from ${table} where a = ?`;
    for (let i = 0; i < 6; i++) await preparedRaw(single, sql, [1]);
    await db().schema.alterTable(table, (t) => {
      t.text("b").defaultTo("x");
    });
    // PostgreSQL refuses the cached plan ("cached plan must not change result type"); the helper
    // takes a fresh name and runs it again.
    const after = await preparedRaw(single, sql, [1]);
    expect(after.rows).toEqual([{ a: 1, b: "x" }]);
    const again = await preparedRaw(single, sql, [1]);
    expect(again.rows).toEqual([{ a: 1, b: "x" }]);
  });

  it("inside a transaction, a changed row type fails the statement and the retry meets a fresh name", async () => {
    const sql = `select * from ${table} where a = ?`;
    await preparedRaw(single, sql, [2]);
    await db().schema.alterTable(table, (t) => {
      t.integer("c").defaultTo(3);
    });
    const inTransaction = () => single.transaction(async (trx) => (await preparedRaw(trx, sql, [2])).rows);
    await expect(inTransaction()).rejects.toThrow(/cached plan must not change result type/);
    expect(await inTransaction()).toEqual([{ a: 2, b: "x", c: 3 }]);
  });

  it("number `?` placeholders outside literals only, and refuse a binding count that does not match", async () => {
    const sql = "select ? as a, 'what? it''s ?' as lit, ?::int + 1 as b";
    const result = await preparedRaw(single, sql, ["x", 41]);
    expect(result.rows).toEqual([{ a: "x", lit: "what? it's ?", b: 42 }]);
    await expect(preparedRaw(single, sql, ["x"])).rejects.toThrow(/2 placeholders, 1 bindings/);
    await expect(preparedRaw(single, sql, ["x", undefined as never])).rejects.toThrow(/undefined/);
  });

  it("run on a transaction's own connection: what it writes is seen inside and rolled back with it", async () => {
    await preparedRaw(db(), `insert into ${table} (a) values (?)`, [100]);
    const count = async (q: Knex | Knex.Transaction) =>
      (await preparedRaw(q, `select count(*)::int as n from ${table} where a >= ?`, [100])).rows[0].n;
    await expect(
      db().transaction(async (trx) => {
        await preparedRaw(trx, `insert into ${table} (a) values (?)`, [101]);
        expect(await count(trx)).toBe(2);
        expect(await count(db())).toBe(1);
        throw new Error("roll back");
      }),
    ).rejects.toThrow("roll back");
    expect(await count(db())).toBe(1);
  });

  it("write an insert as knex would: sorted columns, undefined as DEFAULT, NOW as CURRENT_TIMESTAMP", () => {
    const rows: Record<string, unknown>[] = [
      { b: 1, a: ["x", "y"], c: null },
      { z: "last", a: 1, m: undefined, t: NOW },
      { "odd name": 2, quo: 'say "hi"' },
    ];
    for (const row of rows) {
      const knexRow = Object.fromEntries(
        Object.entries(row).map(([k, v]) => [k, v === NOW ? single.fn.now() : v]),
      );
      const expected = single(table).insert(knexRow).returning("*").toSQL();
      expect(insertReturningAll(table, row)).toEqual({ sql: expected.sql, bindings: expected.bindings });
      // The kept text answers the same shape again, with this row's values.
      expect(insertReturningAll(table, { ...row }).sql).toBe(expected.sql);
    }
    // A different shape of the same columns is a different text.
    expect(insertReturningAll(table, { a: undefined, b: 1 }).sql).toContain("values (DEFAULT, ?)");
    expect(insertReturningAll(table, { a: 1, b: 1 }).sql).toContain("values (?, ?)");
    // UTC_TODAY is the database's UTC day of the transaction, written in the text, not bound.
    const today = insertReturningAll(table, { a: 1, day: UTC_TODAY });
    expect(today).toEqual({
      sql: `insert into "${table}" ("a", "day") values (?, ${UTC_TODAY_SQL}) returning *`,
      bindings: [1],
    });
  });
});

describe("a named statement's rows, built from the shape PostgreSQL confirms", () => {
  // Every kind of column the execute path reads, a name given twice, nulls, and a value pg parses.
  const sql = `select ?::int as n, ?::bigint as big, ?::numeric as dec, ?::text as t, ?::text as "odd ""name""",
      ?::timestamptz as at, ?::jsonb as doc, ?::text[] as tags, ?::boolean as yes, null::text as none,
      ?::int as n, gen as i
    from generate_series(1, 3) as gen`;
  const bindings = (i: number) => [
    i,
    "9007199254740993",
    "1.50",
    `row ${i}`,
    'say "hi"',
    new Date(Date.UTC(2026, 10, 26, 12, 0, i)),
    JSON.stringify({ i, nested: [1, "two"] }),
    ["a", `b${i}`],
    i % 2 === 0,
    i + 100,
  ];

  it("answers the rows and fields pg's own statement answers, on every execution", async () => {
    for (let i = 0; i < 4; i++) {
      const ours = await preparedRaw(single, sql, bindings(i));
      const theirs = await single.raw(sql, bindings(i));
      expect(ours.rows).toEqual(theirs.rows);
      expect(ours.rows).toHaveLength(3);
      expect(Object.keys(ours.rows[0])).toEqual(Object.keys(theirs.rows[0]));
      expect(ours.fields.map((f: { name: string }) => f.name)).toEqual(
        theirs.fields.map((f: { name: string }) => f.name),
      );
      expect(ours.rows[0].at).toBeInstanceOf(Date);
      expect(ours.rows[0].n).toBe(i + 100);
    }
  });

  it("builds pg's field parsers once per shape, and again when the shape changes", async () => {
    const shape = `select *, 'shaped' as probe from ${table} where a = ?`;
    await db()(table).insert({ a: 7 });
    const pgQuery = pg.Query.prototype as unknown as { handleRowDescription(message: unknown): void };
    const built = vi.spyOn(pgQuery, "handleRowDescription");
    try {
      for (let i = 0; i < 3; i++) await preparedRaw(single, shape, [7]);
      // Once for the first execution; the next two reused it.
      expect(built).toHaveBeenCalledTimes(1);
      // A column added under the running process: PostgreSQL refuses the old plan, prepared.ts takes a
      // fresh name, and the new shape is built and used.
      await db().schema.alterTable(table, (t) => {
        t.text("shaped").defaultTo("yes");
      });
      const after = await preparedRaw(single, shape, [7]);
      expect(after.rows[0]).toMatchObject({ a: 7, shaped: "yes" });
      expect(built).toHaveBeenCalledTimes(2);
    } finally {
      built.mockRestore();
    }
  });

  it("uses a kept shape only when the description matches it", async () => {
    const query = new ShapedQuery({ name: "am_shape_test", text: "select 1", values: [] });
    const fields = [{ name: "a", dataTypeID: 23, format: "text" }];
    query.handleRowDescription({ fields });
    const again = new ShapedQuery({ name: "am_shape_test", text: "select 1", values: [] });
    again.handleRowDescription({ fields: [{ name: "a", dataTypeID: 25, format: "text" }] });
    // int4's parser for the first shape, text's (none: the string itself) for the second.
    expect(query._result.parseRow(["42"])).toEqual({ a: 42 });
    expect(again._result.parseRow(["42"])).toEqual({ a: "42" });
  });
});
