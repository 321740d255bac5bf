import knexFactory from "knex";
import { migrateLatest } from "../../shared/db/migrate.js";
import { databaseUrl, TEST_DATABASE_URL } from "./test-env.js";

/** Creates the test database when missing and migrates it once for the whole run. */
export default async function setup(): Promise<void> {
  const name = new URL(TEST_DATABASE_URL).pathname.slice(1);
  const admin = knexFactory({ client: "pg", connection: databaseUrl("postgres") });
  try {
    const exists = await admin.raw("select 1 from pg_database where datname = ?", [name]);
    if (exists.rows.length === 0) await admin.raw(`create database "${name}"`);
  } finally {
    await admin.destroy();
  }
  const knex = knexFactory({ client: "pg", connection: TEST_DATABASE_URL });
  try {
    await migrateLatest(knex);
  } finally {
    await knex.destroy();
  }
}
