import { randomBytes } from "node:crypto";
import knexFactory, { type Knex } from "knex";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import * as partialResolvesOnce from "../../migrations/20261203000100_resolves_once_partial.js";
import * as hotPathDomains from "../../migrations/20261204000100_hot_path_domains.js";
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

describe("the hot tables' single-column rules, held by domains", () => {
  // Each: the column, its domain, a value its rule refuses, one it allows.
  const RULES = [
    ["invocations", "status", "invocation_status", "done", "succeeded"],
    ["invocations", "currency", "ledger_currency", "EUR", "tUSDC"],
    ["invocations", "hold_micros", "micros_not_negative", "-1", "0"],
    ["invocation_attempts", "status", "attempt_status", "queued", "abandoned"],
    ["ledger_accounts", "currency", "ledger_currency", "usdc", "USDC"],
    ["ledger_accounts", "kind", "ledger_account_kind", "escrow", "sandbox_faucet"],
    ["ledger_transactions", "kind", "ledger_transaction_kind", "refund", "faucet"],
    ["ledger_entries", "amount_micros", "micros_not_zero", "0", "-5"],
    ["payment_evidence", "state", "evidence_state", "paid", "outcome"],
    ["payment_evidence", "amount_micros", "micros_not_negative", "-1", "0"],
    ["api_key_spend_days", "reserved_micros", "micros_not_negative", "-1", "7"],
    ["api_key_spend_days", "spent_micros", "micros_not_negative", "-1", "7"],
  ] as const;

  const typeOf = async (table: string, column: string): Promise<string> =>
    (
      await knex.raw(
        "select format_type(atttypid, null) as type from pg_attribute where attrelid = ?::regclass and attname = ?",
        [table, column],
      )
    ).rows[0].type;
  const checksOf = async (table: string): Promise<string[]> =>
    (
      await knex.raw(
        "select conname from pg_constraint where contype = 'c' and conrelid = ?::regclass order by conname",
        [table],
      )
    ).rows.map((c: { conname: string }) => c.conname);

  // The open invocations' partial index, dropped and built again concurrently around the type change.
  const openIndex = async (): Promise<unknown[]> =>
    (
      await knex.raw(
        "select indisvalid, pg_get_expr(indpred, indrelid) as predicate from pg_index where indexrelid = 'invocations_open_idx'::regclass",
      )
    ).rows;
  const OPEN_INDEX = [{ indisvalid: true, predicate: expect.stringMatching(/status.*queued.*running/) }];

  it("each column is of its domain, which refuses what the CHECK it replaced refused; undone, the CHECKs are back", async () => {
    await migrateLatest(knex);
    expect(await openIndex()).toEqual(OPEN_INDEX);
    for (const [table, column, domain, refused, allowed] of RULES) {
      expect(await typeOf(table, column), `${table}.${column}`).toBe(domain);
      await expect(
        knex.raw(`select ?::${domain}`, [refused]),
        `${domain} refuses ${refused}`,
      ).rejects.toMatchObject({
        code: "23514",
        constraint: `${domain}_check`,
      });
      await expect(knex.raw(`select ?::${domain} as v`, [allowed])).resolves.toMatchObject({
        rows: [{ v: allowed }],
      });
    }
    // The rules that span two columns stay CHECKs.
    const twoColumnRules = [
      "ledger_accounts_allow_negative_check",
      "ledger_accounts_balance_check",
      "ledger_accounts_owner_check",
      "ledger_accounts_sandbox_faucet_currency_check",
    ];
    expect(await checksOf("ledger_accounts")).toEqual(twoColumnRules);

    await hotPathDomains.down(knex);
    expect(await typeOf("invocations", "status")).toBe("text");
    expect(await typeOf("ledger_entries", "amount_micros")).toBe("bigint");
    expect(await checksOf("ledger_accounts")).toEqual(
      [...twoColumnRules, "ledger_accounts_currency_check", "ledger_accounts_kind_check"].sort(),
    );
    expect(await checksOf("api_key_spend_days")).toEqual([
      "api_key_spend_days_reserved_check",
      "api_key_spend_days_spent_check",
    ]);
    expect(await openIndex()).toEqual(OPEN_INDEX);
    await hotPathDomains.up(knex);
    expect(await typeOf("invocations", "status")).toBe("invocation_status");
    expect(await openIndex()).toEqual(OPEN_INDEX);
    // Run again, as after a build of the index that failed: the domains stay, the index is built again.
    await hotPathDomains.up(knex);
    expect(await openIndex()).toEqual(OPEN_INDEX);
  });
});
