// One row per health probe of a listing's endpoint (docs/routing.md "Health probes and the circuit breaker"): the
// evidence behind endpoint_health, latest_health_status and the reachable/failed verdict. The index
// serves the two per-listing reads: the latest probe, and the last N probes for consecutive failures.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("health_probes", (t) => {
    t.bigIncrements("id").primary();
    t.uuid("listing_id").notNullable().references("listings.id");
    t.timestamp("probed_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.boolean("ok").notNullable();
    t.integer("http_status");
    t.integer("latency_ms");
    t.text("error");
    t.index(["listing_id", "probed_at"], "health_probes_listing_probed_idx");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("health_probes");
}
