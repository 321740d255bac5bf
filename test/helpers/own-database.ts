import { randomBytes } from "node:crypto";
import knexFactory from "knex";
import { overrideConfig } from "../../shared/config.js";
import { migrateLatest } from "../../shared/db/migrate.js";
import { databaseUrl } from "./test-env.js";

/**
 * Gives this test file a freshly migrated database of its own and points the config at it. For tests
 * that change platform-wide state (the custody switch) or count every row of a table: the shared test
 * database is used by other files at the same time. Call before anything opens db(); drop() after stop.
 */
export async function useOwnDatabase(tag: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = `agentmarket_${tag}_${randomBytes(4).toString("hex")}`;
  const admin = knexFactory({ client: "pg", connection: databaseUrl("postgres") });
  await admin.raw(`create database "${name}"`);
  const url = databaseUrl(name);
  const knex = knexFactory({ client: "pg", connection: url });
  try {
    await migrateLatest(knex);
  } finally {
    await knex.destroy();
  }
  overrideConfig({ databaseUrl: url });
  return {
    url,
    async drop() {
      await admin.raw(`drop database if exists "${name}" with (force)`);
      await admin.destroy();
    },
  };
}
