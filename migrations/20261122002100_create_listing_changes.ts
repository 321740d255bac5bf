// Every change a seller makes to a listing, with the version it produced: price changes are kept
// forever so a receipt can always be matched to the price in force when it was issued.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("listing_changes", (t) => {
    t.bigIncrements("id");
    t.uuid("listing_id").notNullable().references("listings.id");
    t.uuid("changed_by").references("agents.id");
    t.text("from_version").notNullable();
    t.text("to_version").notNullable();
    t.bigInteger("from_price_micros").notNullable();
    t.bigInteger("to_price_micros").notNullable();
    t.specificType("fields", "text[]").notNullable();
    t.timestamp("changed_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(["listing_id", "changed_at"]);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("listing_changes");
}
