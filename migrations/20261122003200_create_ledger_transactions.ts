// One row per ledger transaction (docs/payments.md "Ledger"): its entries live in ledger_entries and sum to zero.
// idempotency_key is unique, so a transaction posted twice with the same key is recorded once (the
// second post returns the first). resolves_transaction_id links a capture or release to the hold it
// settles (TigerBeetle's pending_id); its unique index lets a hold be resolved once, whichever way.
// Append-only: code never updates or deletes these rows.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("ledger_transactions", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.text("kind").notNullable();
    t.text("idempotency_key").notNullable().unique("ledger_transactions_idempotency_key");
    t.text("reference_type");
    t.text("reference_id");
    t.uuid("resolves_transaction_id")
      .references("ledger_transactions.id")
      .unique("ledger_transactions_resolves_once");
    t.jsonb("metadata").notNullable().defaultTo("{}");
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check(
      "kind in ('hold','capture','release','deposit','bond_post','bond_release','payout','transfer')",
      [],
      "ledger_transactions_kind_check",
    );
    t.check(
      "(resolves_transaction_id is not null) = (kind in ('capture','release'))",
      [],
      "ledger_transactions_resolves_check",
    );
    t.index(["reference_type", "reference_id"], "ledger_transactions_reference_idx");
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("ledger_transactions");
}
