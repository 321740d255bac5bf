// A quote binds a price to one listing for a short time (docs/x402.md "Quotes"): the x402 gateway's challenge
// and the sandbox's execute both pay a quote, never a bare listing, so the amount the buyer signed for is
// the amount the listing had when quoted. A quote is paid at most once (used_at, set in the transaction
// that accepts the payment). rail says which money it is: USDC on chain (x402) or simulated tUSDC.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("quotes", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.text("rail").notNullable();
    t.uuid("listing_id").notNullable().references("listings.id");
    t.text("task").notNullable();
    t.uuid("agent_id").references("agents.id");
    t.bigInteger("amount_micros").notNullable();
    t.text("currency").notNullable();
    t.text("network");
    t.text("asset");
    t.text("pay_to");
    t.timestamp("expires_at", { useTz: true }).notNullable();
    t.timestamp("used_at", { useTz: true });
    t.uuid("invocation_id").references("invocations.id");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check("rail in ('x402','tumbler')", [], "quotes_rail_check");
    t.check("currency in ('USDC','tUSDC')", [], "quotes_currency_check");
    t.check("(rail = 'tumbler') = (currency = 'tUSDC')", [], "quotes_rail_currency_check");
    t.check("amount_micros >= 0", [], "quotes_amount_check");
    t.index(["expires_at"], "quotes_expires_idx");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("quotes");
}
