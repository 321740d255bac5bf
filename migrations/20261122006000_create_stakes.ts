// The seller bond (docs/payments.md "Seller bond"): $1 USDC, posted from the seller's available balance into its
// bonds ledger account, lets a seller keep live listings beyond the one free slot. One row per bond;
// posted → downgraded (part returned after 30 days of good standing) → released (the rest returned once
// no paid listing is live), or posted → released. The partial unique index allows one open bond per
// seller, so two concurrent POST /api/stake calls can never post two. Each money move is a ledger
// transaction whose id is kept here; the row is the rule's state, the ledger is the money.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("stakes", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("agent_id").notNullable().references("agents.id");
    t.text("currency").notNullable().defaultTo("USDC");
    t.text("status").notNullable().defaultTo("posted");
    t.bigInteger("posted_micros").notNullable();
    t.bigInteger("bonded_micros").notNullable();
    t.uuid("post_transaction_id").notNullable().references("ledger_transactions.id");
    t.uuid("downgrade_transaction_id").references("ledger_transactions.id");
    t.uuid("release_transaction_id").references("ledger_transactions.id");
    t.timestamp("posted_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("downgraded_at", { useTz: true });
    t.timestamp("released_at", { useTz: true });
    t.check("status in ('posted','downgraded','released')", [], "stakes_status_check");
    t.check("currency in ('USDC')", [], "stakes_currency_check");
    t.check(
      "posted_micros > 0 and bonded_micros >= 0 and bonded_micros <= posted_micros",
      [],
      "stakes_amount_check",
    );
    t.check("(status = 'released') = (released_at is not null)", [], "stakes_released_check");
    t.check("(status = 'released') = (bonded_micros = 0)", [], "stakes_released_amount_check");
    t.index(["agent_id", "posted_at"], "stakes_agent_idx");
  });
  await knex.raw(
    "create unique index stakes_one_open_per_agent on stakes (agent_id) where status <> 'released'",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("stakes");
}
