// A hold is resolved at most once: `ledger_transactions_resolves_once`, unique on resolves_transaction_id,
// stays, but now indexes only the transactions that resolve a hold (captures and releases). As a plain
// unique constraint it also held a NULL entry for every transaction that resolves nothing (every hold,
// deposit, payout, bond and faucet movement): about half of its entries, none of which it could ever
// compare, each written by the post that made it (docs/benchmarks.md "The twenty-fifth round").
//
// Its name stays, so a write that meets it still says which rule it met (ledger.ts TAKEN_CONSTRAINTS;
// PostgreSQL names the index in a unique violation). A post's ON CONFLICT DO NOTHING names no target, so
// every unique index, a partial one too, decides its conflicts; and `resolves_transaction_id = $1`, a
// strict comparison, proves the index's predicate, so the lock's lookup of a hold's resolution still
// reads it.
//
// Built CONCURRENTLY under a new name, outside a transaction (a deployment's ledger is large, and a plain
// CREATE INDEX would block every post while it reads the table); then, in one short transaction, the old
// constraint goes and the new index takes its name, so no moment is without the rule. A run that failed
// part-way is undone by running it again.
import type { Knex } from "knex";

export const config = { transaction: false };

const NAME = "ledger_transactions_resolves_once";
const BUILDING = `${NAME}_partial`;

export async function up(knex: Knex): Promise<void> {
  await knex.raw(`drop index concurrently if exists ${BUILDING}`);
  await knex.raw(
    `create unique index concurrently ${BUILDING} on ledger_transactions (resolves_transaction_id)
      where resolves_transaction_id is not null`,
  );
  await knex.transaction(async (trx) => {
    await trx.raw(`alter table ledger_transactions drop constraint if exists ${NAME}`);
    // An earlier run that got this far left the partial index under the name already.
    await trx.raw(`drop index if exists ${NAME}`);
    await trx.raw(`alter index ${BUILDING} rename to ${NAME}`);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.transaction(async (trx) => {
    await trx.raw(`drop index if exists ${NAME}`);
    await trx.raw(`alter table ledger_transactions add constraint ${NAME} unique (resolves_transaction_id)`);
  });
}
