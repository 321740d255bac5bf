// Runtime proof for the catalog's search lane: when a listing last served a successful call. Written
// by the same statement that records a success, at most once a minute per listing, so a busy listing's
// row is not a hot spot.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("listings", (t) => {
    t.timestamp("last_success_at", { useTz: true });
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable("listings", (t) => {
    t.dropColumn("last_success_at");
  });
}
