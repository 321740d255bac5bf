// Seller payouts (docs/payments.md "Payouts"): the payouts worker batches a seller's payable USDC into one on-chain
// transfer to the wallet the seller had linked when the payout was created (to_address is frozen here).
// pending → submitted (signed, recorded in chain_transactions and broadcast) → confirmed (the ledger moves
// payable → chain clearing in the same transaction) | failed (reverted; nothing left the ledger, so the
// amount is simply payable again). The ledger is not touched before confirmation: the open row IS the
// reservation, and the partial unique index allows one open payout per seller, so two concurrent batches
// can never pay the same funds.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("payouts", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("seller_id").notNullable().references("agents.id");
    t.text("currency").notNullable().defaultTo("USDC");
    t.bigInteger("amount_micros").notNullable();
    t.integer("chain_id").notNullable();
    t.text("to_address").notNullable();
    t.text("status").notNullable().defaultTo("pending");
    t.text("batch_id").notNullable();
    t.uuid("chain_transaction_id").references("chain_transactions.id");
    t.text("tx_hash");
    t.bigInteger("block_number");
    t.text("block_hash");
    t.uuid("ledger_transaction_id").references("ledger_transactions.id");
    t.text("waiting_reason");
    t.text("failure_reason");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("submitted_at", { useTz: true });
    t.timestamp("resolved_at", { useTz: true });
    t.check("status in ('pending','submitted','confirmed','failed')", [], "payouts_status_check");
    t.check("currency in ('USDC')", [], "payouts_currency_check");
    t.check("amount_micros > 0", [], "payouts_amount_check");
    t.check("to_address ~ '^0x[0-9a-fA-F]{40}$'", [], "payouts_to_address_check");
    t.check("status not in ('submitted','confirmed') or tx_hash is not null", [], "payouts_tx_check");
    t.check(
      "status <> 'confirmed' or (ledger_transaction_id is not null and block_number is not null)",
      [],
      "payouts_confirmed_check",
    );
    t.check("(status = 'failed') = (failure_reason is not null)", [], "payouts_failed_check");
    t.index(["seller_id", "created_at"], "payouts_seller_idx");
    t.index(["status", "created_at"], "payouts_status_idx");
  });
  await knex.raw(
    "create unique index payouts_one_open_per_seller on payouts (seller_id) where status in ('pending','submitted')",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("payouts");
}
