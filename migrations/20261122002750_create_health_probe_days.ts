// Daily probe counts per listing, written by the same statement that records a probe. Uptime over 7 and
// 30 days is read for every listing of a catalog page; summing at most 30 day rows per listing keeps that
// read small, where counting raw probes would visit 8,640 rows per listing at the default 5-minute
// interval. Days are UTC dates.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("health_probe_days", (t) => {
    t.uuid("listing_id").notNullable().references("listings.id");
    t.date("day").notNullable();
    t.integer("probes").notNullable();
    t.integer("ok_probes").notNullable();
    t.primary(["listing_id", "day"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("health_probe_days");
}
