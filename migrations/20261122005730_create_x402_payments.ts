// One row per accepted x402 / MPP payment (docs/x402.md "x402 gateway"): the signed EIP-3009 authorization a
// buyer gave for one quote, kept until the settlement worker has submitted and confirmed it on chain.
// It is inserted in the same transaction as the invocation and the quote's use, so
//   - UNIQUE (payer, nonce): one authorization pays once, whatever retries or replays arrive;
//   - UNIQUE (quote_id) and UNIQUE (invocation_id): a quote is paid by one payment, which runs one call.
// status: authorized → settling (the call succeeded; settlement enqueued) → submitted (transaction
// broadcast) → settled (confirmed, ledger posted); or voided (the call failed: nothing is submitted and
// the authorization expires unused) or settlement_failed (reverted, expired, rejected on chain).
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("x402_payments", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("quote_id").notNullable().references("quotes.id").unique("x402_payments_quote");
    t.uuid("invocation_id").notNullable().references("invocations.id").unique("x402_payments_invocation");
    t.uuid("listing_id").notNullable().references("listings.id");
    // The listing's seller when the payment was accepted (null = a first-party listing: all revenue).
    t.uuid("seller_agent_id").references("agents.id");
    t.text("protocol").notNullable();
    t.text("network").notNullable();
    t.text("asset").notNullable();
    t.text("pay_to").notNullable();
    t.bigInteger("amount_micros").notNullable();
    t.text("payer").notNullable();
    t.text("authorization_nonce").notNullable();
    t.bigInteger("valid_after").notNullable();
    t.bigInteger("valid_before").notNullable();
    t.text("signature").notNullable();
    // What was verified: the payment requirements and the authorization, to verify again at settlement.
    t.jsonb("requirements").notNullable();
    t.jsonb("authorization").notNullable();
    // MPP only: the challenge id the credential answered (its nonce is bound to it).
    t.text("challenge_id");
    t.text("status").notNullable().defaultTo("authorized");
    t.text("tx_hash");
    t.bigInteger("block_number");
    t.text("failure_reason");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.unique(["payer", "authorization_nonce"], { indexName: "x402_payments_payer_nonce" });
    t.check(
      "status in ('authorized','settling','submitted','settled','voided','settlement_failed')",
      [],
      "x402_payments_status_check",
    );
    t.check("protocol in ('x402v2','x402v1','mpp')", [], "x402_payments_protocol_check");
    t.check("amount_micros > 0", [], "x402_payments_amount_check");
    t.check(
      "payer = lower(payer) and authorization_nonce = lower(authorization_nonce)",
      [],
      "x402_payments_lowercase_check",
    );
    t.index(["status", "updated_at"], "x402_payments_status_idx");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("x402_payments");
}
