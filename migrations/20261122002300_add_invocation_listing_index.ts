// Per-listing counters and telemetry are computed from invocations and attempts at read time; these
// indexes keep that a range scan per listing instead of a table scan.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.raw("create index invocations_listing_created_idx on invocations (listing_id, created_at)");
  await knex.raw(
    "create index invocation_attempts_listing_started_idx on invocation_attempts (listing_id, started_at)",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("drop index if exists invocation_attempts_listing_started_idx");
  await knex.raw("drop index if exists invocations_listing_created_idx");
}
