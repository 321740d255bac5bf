import { randomBytes } from "node:crypto";
import knexFactory, { type Knex } from "knex";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as partialResolvesOnce from "../../migrations/20261203000100_resolves_once_partial.js";
import { listPending, migrateLatest, rollbackAll } from "../../shared/db/migrate.js";
import { databaseUrl } from "../helpers/test-env.js";

// latest → rollback → latest on a database of its own, so the shared test database is never rolled back.
const name = `agentmarket_migrations_${randomBytes(4).toString("hex")}`;
const TABLES = [
  "agents",
  "api_keys",
  "listings",
  "invocations",
  "invocation_attempts",
  "receipts",
  "idempotency_keys",
  "audit_events",
  "job_outbox",
];

let admin: Knex;
let knex: Knex;

async function tables(): Promise<string[]> {
  const result = await knex.raw(
    "select tablename from pg_tables where schemaname = 'public' order by tablename",
  );
  return result.rows.map((r: { tablename: string }) => r.tablename);
}

beforeAll(async () => {
  admin = knexFactory({ client: "pg", connection: databaseUrl("postgres") });
  await admin.raw(`create database "${name}"`);
  knex = knexFactory({ client: "pg", connection: databaseUrl(name) });
});

afterAll(async () => {
  await knex.destroy();
  await admin.raw(`drop database if exists "${name}"`);
  await admin.destroy();
});

describe("migrations", () => {
  it("apply, roll back completely and apply again", async () => {
    await migrateLatest(knex);
    expect(await tables()).toEqual(expect.arrayContaining(TABLES));
    expect(await knex("listings").where({ slug: "echo" }).first()).toMatchObject({
      price_micros: "0",
      status: "active",
    });
    expect(await listPending(knex)).toEqual([]);

    await rollbackAll(knex);
    const left = await tables();
    for (const table of TABLES) expect(left).not.toContain(table);

    await migrateLatest(knex);
    expect(await tables()).toEqual(expect.arrayContaining(TABLES));
    expect(await listPending(knex)).toEqual([]);
  });

  it("a hold is resolved once, by a rule that indexes only what resolves one, and the migration that made it partial runs again", async () => {
    await migrateLatest(knex);
    const indexes = async () =>
      (
        await knex.raw(
          "select indexname, indexdef from pg_indexes where tablename = 'ledger_transactions' and indexname like 'ledger_transactions_resolves_once%'",
        )
      ).rows;
    const expected = [
      {
        indexname: "ledger_transactions_resolves_once",
        indexdef: expect.stringMatching(
          /^CREATE UNIQUE INDEX .*\(resolves_transaction_id\) WHERE \(resolves_transaction_id IS NOT NULL\)$/,
        ),
      },
    ];
    expect(await indexes()).toEqual(expected);
    // As after a run that failed once the index was renamed: running it again leaves the same one index.
    await partialResolvesOnce.up(knex);
    expect(await indexes()).toEqual(expected);
  });
});
