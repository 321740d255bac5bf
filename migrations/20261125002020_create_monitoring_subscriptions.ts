// Monitoring subscriptions (issue 17): re-probe an order's target every interval_seconds, each run a
// separate 5 USDC charge. A run that cannot be paid pauses the subscription with paused_reason instead of
// ever taking a balance below zero; cancel is final. The BullMQ job scheduler (id = the subscription id)
// exists only while VERIFICATION_MONITORING_SCHEDULER is on; the row is the truth either way.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("monitoring_subscriptions", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("order_id").notNullable().references("verification_orders.id");
    t.uuid("buyer_agent_id").notNullable().references("agents.id");
    t.uuid("api_key_id").references("api_keys.id");
    t.integer("interval_seconds").notNullable();
    t.text("status").notNullable().defaultTo("active");
    t.text("paused_reason");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("cancelled_at", { useTz: true });
    t.timestamp("last_run_at", { useTz: true });
    t.check("status in ('active','paused','cancelled')", [], "monitoring_subscriptions_status_check");
    t.check("interval_seconds > 0", [], "monitoring_subscriptions_interval_check");
    t.index(["buyer_agent_id", "created_at"], "monitoring_subscriptions_buyer_idx");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("monitoring_subscriptions");
}
