// The router's choice, kept with the invocation: the ranked candidate listings the worker may call in
// order (fallback), why they were chosen (scores and their components), and which one finally served.
// Attempts that were skipped without a call (limit reached, circuit open) get their own status, so
// "called at most once" rules can count real calls only.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable("invocations", (t) => {
    t.specificType("candidate_ids", "uuid[]").notNullable().defaultTo("{}");
    t.jsonb("selection");
    t.uuid("served_listing_id").references("listings.id");
  });
  await knex.schema.alterTable("invocation_attempts", (t) => {
    t.dropChecks(["invocation_attempts_status_check"]);
    t.check(
      "status in ('running','succeeded','failed','abandoned','skipped')",
      [],
      "invocation_attempts_status_check",
    );
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex("invocation_attempts").where({ status: "skipped" }).update({ status: "failed" });
  await knex.schema.alterTable("invocation_attempts", (t) => {
    t.dropChecks(["invocation_attempts_status_check"]);
    t.check("status in ('running','succeeded','failed','abandoned')", [], "invocation_attempts_status_check");
  });
  await knex.schema.alterTable("invocations", (t) => {
    t.dropColumn("served_listing_id");
    t.dropColumn("selection");
    t.dropColumn("candidate_ids");
  });
}
