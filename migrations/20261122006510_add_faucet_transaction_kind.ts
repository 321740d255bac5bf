// A sandbox faucet credit (sandbox_faucet → an agent's available tUSDC) is its own ledger transaction
// kind, so it can never be read as a deposit of real money (docs/x402.md "Sandbox (tumbler)").
// down: the previous check returns NOT VALID, so faucet transactions already written stay (the ledger is
// append-only) while no new one can be posted.
import type { Knex } from "knex";

const OLD = "kind in ('hold','capture','release','deposit','bond_post','bond_release','payout','transfer')";
const NEW =
  "kind in ('hold','capture','release','deposit','bond_post','bond_release','payout','transfer','faucet')";

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`
    alter table ledger_transactions
      drop constraint ledger_transactions_kind_check,
      add constraint ledger_transactions_kind_check check (${NEW})`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`
    alter table ledger_transactions
      drop constraint ledger_transactions_kind_check,
      add constraint ledger_transactions_kind_check check (${OLD}) not valid`);
}
