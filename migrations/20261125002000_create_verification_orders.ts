// Verification orders (issue 17): one row per paid probe of a buyer's endpoint — a first order, a rerun
// (rerun_of) or a monitoring run (subscription_id). The order is the ledger hold's reference and the
// subject of its payment evidence; charge_state mirrors the ledger (held → captured | released) so a
// redelivered job can tell a settled order from one still to settle. The full target URL stays here,
// readable by its buyer and admins only; public attestations carry a redacted form.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("verification_orders", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("buyer_agent_id").notNullable().references("agents.id");
    t.uuid("api_key_id").references("api_keys.id");
    t.text("target_url").notNullable();
    t.text("protocol").notNullable();
    t.uuid("listing_id").references("listings.id");
    t.uuid("rerun_of").references("verification_orders.id");
    t.uuid("subscription_id");
    t.text("idempotency_key");
    t.text("fingerprint");
    t.bigInteger("price_micros").notNullable();
    t.text("status").notNullable().defaultTo("queued");
    t.text("charge_state").notNullable().defaultTo("held");
    t.text("verdict");
    t.jsonb("checks");
    t.text("failure_reason");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("completed_at", { useTz: true });
    t.check("protocol in ('http-json','x402','mcp')", [], "verification_orders_protocol_check");
    t.check("status in ('queued','running','completed','not_run')", [], "verification_orders_status_check");
    t.check("charge_state in ('held','captured','released')", [], "verification_orders_charge_state_check");
    t.check(
      "verdict is null or verdict in ('verified','reachable','failed')",
      [],
      "verification_orders_verdict_check",
    );
    t.check("price_micros > 0", [], "verification_orders_price_check");
    t.index(["buyer_agent_id", "created_at"], "verification_orders_buyer_idx");
    t.index(["subscription_id"], "verification_orders_subscription_idx");
  });
  await knex.raw(
    `create unique index verification_orders_idempotency_idx on verification_orders
       (buyer_agent_id, idempotency_key) where idempotency_key is not null`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("verification_orders");
}
