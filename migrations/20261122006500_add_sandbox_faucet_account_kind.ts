// The sandbox (docs/x402.md "Sandbox (tumbler)") credits simulated tUSDC from a faucet, and double entry needs
// a source for those units. sandbox_faucet is a platform account (owner null) that may go negative: it
// mirrors units created from nothing, as chain_clearing mirrors money outside the ledger. It exists in
// tUSDC only, so simulated units can never be minted into a USDC account.
// down: the previous checks return NOT VALID, so faucet rows already written stay (the ledger is
// append-only; a rollback must not rewrite it) while no new sandbox_faucet account can be created.
import type { Knex } from "knex";

const OLD = {
  kind: "kind in ('agent_available','agent_held','seller_payable','platform_revenue','chain_clearing','bonds')",
  owner: "(owner_agent_id is null) = (kind in ('platform_revenue','chain_clearing'))",
  allowNegative: "allow_negative = (kind = 'chain_clearing')",
};

const NEW = {
  kind: "kind in ('agent_available','agent_held','seller_payable','platform_revenue','chain_clearing','bonds','sandbox_faucet')",
  owner: "(owner_agent_id is null) = (kind in ('platform_revenue','chain_clearing','sandbox_faucet'))",
  allowNegative: "allow_negative = (kind in ('chain_clearing','sandbox_faucet'))",
};

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    alter table ledger_accounts
      drop constraint ledger_accounts_kind_check,
      drop constraint ledger_accounts_owner_check,
      drop constraint ledger_accounts_allow_negative_check,
      add constraint ledger_accounts_kind_check check (${NEW.kind}),
      add constraint ledger_accounts_owner_check check (${NEW.owner}),
      add constraint ledger_accounts_allow_negative_check check (${NEW.allowNegative}),
      add constraint ledger_accounts_sandbox_faucet_currency_check
        check (kind <> 'sandbox_faucet' or currency = 'tUSDC')`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    alter table ledger_accounts
      drop constraint ledger_accounts_sandbox_faucet_currency_check,
      drop constraint ledger_accounts_kind_check,
      drop constraint ledger_accounts_owner_check,
      drop constraint ledger_accounts_allow_negative_check,
      add constraint ledger_accounts_kind_check check (${OLD.kind}) not valid,
      add constraint ledger_accounts_owner_check check (${OLD.owner}) not valid,
      add constraint ledger_accounts_allow_negative_check check (${OLD.allowNegative}) not valid`);
}
