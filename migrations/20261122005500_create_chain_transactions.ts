// Every transaction the platform signs (x402 settlements, payouts), recorded BEFORE it is broadcast
// (docs/payments.md "On-chain transactions"). One transaction per (purpose, subject): a retry after a crash finds
// the row and re-broadcasts the same signed bytes or reads its receipt, so nothing is ever sent twice.
// The nonce is unique per sender, so two transactions can never share one.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("chain_transactions", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.text("purpose").notNullable();
    t.text("subject_id").notNullable();
    t.integer("chain_id").notNullable();
    t.text("from_address").notNullable();
    t.text("to_address").notNullable();
    t.bigInteger("nonce").notNullable();
    t.text("tx_hash").notNullable().unique("chain_transactions_tx_hash");
    t.text("raw_tx").notNullable();
    t.text("status").notNullable().defaultTo("signed");
    t.bigInteger("block_number");
    t.text("error");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("broadcast_at", { useTz: true });
    t.timestamp("mined_at", { useTz: true });
    t.unique(["purpose", "subject_id"], { indexName: "chain_transactions_one_per_subject" });
    t.unique(["chain_id", "from_address", "nonce"], { indexName: "chain_transactions_sender_nonce" });
    t.check("status in ('signed','broadcast','mined','reverted')", [], "chain_transactions_status_check");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("chain_transactions");
}
