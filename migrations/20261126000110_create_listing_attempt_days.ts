// The 30-day attempt figures of a listing (attempts, successes, latency) from folded attempts, per UTC
// day of started_at and per latency bucket: bucket -1 holds attempts that did not succeed, -2 successes
// without a latency, 0..161 successes by a fixed log2 histogram (8 buckets per doubling) from which p50
// and p95 are estimated within 4.5 % (shared/catalog/latency-histogram.ts). Counts and latency sums are
// exact, so attempts_30d, successful_attempts_30d and the average stay exact.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("listing_attempt_days", (t) => {
    t.uuid("listing_id").notNullable().references("listings.id");
    t.date("day").notNullable();
    t.smallint("bucket").notNullable();
    t.bigInteger("attempts").notNullable();
    t.bigInteger("latency_sum_ms").notNullable().defaultTo(0);
    t.primary(["listing_id", "day", "bucket"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("listing_attempt_days");
}
