// On-chain USDC deposits claimed with POST /api/wallet/purchase/verify (docs/payments.md "Deposits"). One row per
// (chain, tx hash): the unique index is what makes a transaction credit at most once, whoever submits it
// and however often. The row freezes the rule it is checked against at verify time — the agent's linked
// address (sender), the platform address, the token and the confirmations required — and records what
// the chain showed (amount, block, confirmations seen) and the ledger transaction that credited it.
// pending → confirming → credited, or → rejected with a reason; credited and rejected are final.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("deposits", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("agent_id").notNullable().references("agents.id");
    t.integer("chain_id").notNullable();
    t.text("tx_hash").notNullable();
    t.text("sender_address").notNullable();
    t.text("platform_address").notNullable();
    t.text("token_address").notNullable();
    t.text("currency").notNullable().defaultTo("USDC");
    t.text("status").notNullable().defaultTo("pending");
    t.bigInteger("amount_micros");
    t.bigInteger("block_number");
    t.text("block_hash");
    t.integer("confirmations").notNullable().defaultTo(0);
    t.integer("confirmations_required").notNullable();
    t.text("waiting_reason");
    t.text("rejected_reason");
    t.uuid("ledger_transaction_id").references("ledger_transactions.id");
    t.text("request_id");
    t.timestamp("not_found_deadline_at", { useTz: true }).notNullable();
    t.timestamp("last_checked_at", { useTz: true });
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("updated_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp("resolved_at", { useTz: true });
    t.unique(["chain_id", "tx_hash"], { indexName: "deposits_chain_tx_once" });
    t.index(["agent_id", "created_at"], "deposits_agent_idx");
    t.check("tx_hash ~ '^0x[0-9a-f]{64}$'", [], "deposits_tx_hash_check");
    t.check("status in ('pending','confirming','credited','rejected')", [], "deposits_status_check");
    t.check("currency in ('USDC')", [], "deposits_currency_check");
    t.check("amount_micros is null or amount_micros > 0", [], "deposits_amount_check");
    t.check("confirmations_required >= 1 and confirmations >= 0", [], "deposits_confirmations_check");
    t.check(
      "status <> 'credited' or (amount_micros is not null and ledger_transaction_id is not null and block_number is not null)",
      [],
      "deposits_credited_check",
    );
    t.check("(status = 'rejected') = (rejected_reason is not null)", [], "deposits_rejected_check");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("deposits");
}
