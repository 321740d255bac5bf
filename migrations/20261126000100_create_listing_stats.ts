// Listing counters used to be aggregated over a listing's whole invocation history on every catalog
// read (68 ms at 56k invocations). This row holds the part of that history already folded: counters of
// the finished invocations created before `folded_before`, plus the ids of the ones that were still
// open at the fold (they stay in the live tail until a later fold finds them finished). A read adds the
// tail past the watermark, so counters stay exact; docs/catalog.md "Listing counters" explains the fold.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("listing_stats", (t) => {
    t.uuid("listing_id").primary().references("listings.id");
    t.timestamp("folded_before", { useTz: true }).notNullable();
    t.specificType("pending_invocation_ids", "uuid[]").notNullable().defaultTo("{}");
    t.specificType("pending_attempt_ids", "uuid[]").notNullable().defaultTo("{}");
    t.bigInteger("total_invocations").notNullable().defaultTo(0);
    t.bigInteger("success_count").notNullable().defaultTo(0);
    t.bigInteger("failure_count").notNullable().defaultTo(0);
    t.bigInteger("paid_success_count").notNullable().defaultTo(0);
    t.timestamp("last_invoked_at", { useTz: true });
    t.timestamp("last_paid_success_at", { useTz: true });
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("listing_stats");
}
