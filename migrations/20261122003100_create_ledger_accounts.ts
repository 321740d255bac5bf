// The ledger's accounts (docs/payments.md "Ledger"): money is integer micro-units in double entry. Each agent has
// available, held, seller payable and bonds accounts per currency; the platform has one revenue and one
// chain clearing account per currency (owner null, unique per kind + currency through the second partial
// index). Only chain clearing may go negative: it mirrors money outside the ledger (on chain), so
// deposits debit it. tUSDC is the sandbox's simulated unit; a transaction never mixes currencies.
import type { Knex } from "knex";

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable("ledger_accounts", (t) => {
    t.uuid("id").primary().defaultTo(knex.raw("gen_random_uuid()"));
    t.uuid("owner_agent_id").references("agents.id");
    t.text("kind").notNullable();
    t.text("currency").notNullable();
    t.bigInteger("balance_micros").notNullable().defaultTo(0);
    t.boolean("allow_negative").notNullable();
    t.timestamp("created_at", { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.check(
      "kind in ('agent_available','agent_held','seller_payable','platform_revenue','chain_clearing','bonds')",
      [],
      "ledger_accounts_kind_check",
    );
    t.check("currency in ('USDC','tUSDC')", [], "ledger_accounts_currency_check");
    t.check(
      "(owner_agent_id is null) = (kind in ('platform_revenue','chain_clearing'))",
      [],
      "ledger_accounts_owner_check",
    );
    t.check("allow_negative = (kind = 'chain_clearing')", [], "ledger_accounts_allow_negative_check");
    t.check("allow_negative or balance_micros >= 0", [], "ledger_accounts_balance_check");
  });
  await knex.raw(
    "create unique index ledger_accounts_agent_kind_currency on ledger_accounts (owner_agent_id, kind, currency) where owner_agent_id is not null",
  );
  await knex.raw(
    "create unique index ledger_accounts_platform_kind_currency on ledger_accounts (kind, currency) where owner_agent_id is null",
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable("ledger_accounts");
}
