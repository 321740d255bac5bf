// The ledger's entries (docs/payments.md "Ledger"): one signed amount per account per transaction, with the
// account's balance before and after it (pgledger), so any balance can be audited by walking its
// entries. (account_id, id) serves an account's history in order; transaction_id serves a transaction's
// entries. Append-only: code never updates or deletes these rows.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("ledger_entries", (t) => {
    t.bigIncrements("id").primary();
    t.uuid("transaction_id").notNullable().references("ledger_transactions.id");
    t.uuid("account_id").notNullable().references("ledger_accounts.id");
    t.bigInteger("amount_micros").notNullable();
    t.bigInteger("balance_before_micros").notNullable();
    t.bigInteger("balance_after_micros").notNullable();
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check("amount_micros <> 0", [], "ledger_entries_amount_check");
    t.check(
      "balance_after_micros = balance_before_micros + amount_micros",
      [],
      "ledger_entries_balance_check",
    );
    t.index(["account_id", "id"], "ledger_entries_account_idx");
    t.index(["transaction_id"], "ledger_entries_transaction_idx");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("ledger_entries");
}
