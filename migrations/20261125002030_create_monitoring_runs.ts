// Monitoring runs (issue 17): one row per scheduled run of a subscription, keyed by (subscription_id,
// run_key) where run_key is the scheduler job's id, so a redelivered job finds its run and never charges
// twice. A paid run points at the verification order it created (order_id); an unpaid one records why.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("monitoring_runs", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("subscription_id").notNullable().references("monitoring_subscriptions.id");
    t.text("run_key").notNullable();
    t.uuid("order_id").references("verification_orders.id");
    t.text("status").notNullable();
    t.text("reason");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(["subscription_id", "run_key"], { indexName: "monitoring_runs_once_per_key" });
    t.check("status in ('charged','unpaid','skipped')", [], "monitoring_runs_status_check");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("monitoring_runs");
}
