import { randomBytes } from "node:crypto";
import knexFactory, { type Knex } from "knex";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
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
});
