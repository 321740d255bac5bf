// The single-column rules of the tables every execute writes become domains: the same rules, checked
// where PostgreSQL checks them more cheaply (docs/benchmarks.md "The thirtieth round").
//
// Why: PostgreSQL reads a table's CHECK constraints again from their stored text (`stringToNode`) and
// prepares them in every statement that inserts into or updates the table, and evaluates all of them for
// every row it writes, whichever columns changed: a balance update of a ledger account checked its kind
// and its currency each time. A domain's constraints are read once per connection (its type cache), and
// checked only where a value of the domain is written: an insert, or an update that sets that column.
// Rules over two columns stay CHECKs (a domain sees one value). Clients see the base types: PostgreSQL
// describes a domain's column by its base type.
//
// How, without rewriting a table or reading a large one under lock:
// - Each column moves to a domain that has no constraint yet, over its own base type, so PostgreSQL keeps
//   the rows and the plain indexes as they are. The domain then takes its rule NOT VALID, in the same
//   transaction that drops the CHECK it replaces: that CHECK had proved every stored value, so validating
//   would read every hot table again under this migration's locks, for nothing. The rules bind every
//   value written from the commit on.
// - PostgreSQL rebuilds a partial index when a column it names changes type. The open invocations' index
//   (`invocations_open_idx`, over `status`) would be built from a read of the whole invocations table
//   under that lock, so it is dropped in the transaction and built again CONCURRENTLY after it, as its own
//   migration built it; meanwhile the recovery sweep reads the table without it (slower, not wrong). The
//   two partial unique indexes of `ledger_accounts` (a few rows per agent) are rebuilt in the transaction:
//   account creation's ON CONFLICT needs them at every moment.
// - Not in one transaction, so each part can run again: the transaction is skipped once the domains
//   exist, and the index build drops a build that failed before it starts.
import type { Knex } from "knex";
import * as openInvocationsIndex from "./20261201000100_open_invocations_index.js";

interface Domain {
  name: string;
  base: "text" | "bigint";
  /** The rule, over VALUE. */
  rule: string;
}

/** A column moved to a domain, and the CHECK it replaces (its rule: the domain's, over the column). */
interface Moved {
  table: string;
  column: string;
  domain: string;
  check: string;
}

const INVOCATION_STATUSES = "'awaiting_approval','queued','running','succeeded','failed'";
const ATTEMPT_STATUSES = "'running','succeeded','failed','abandoned','skipped'";
const CURRENCIES = "'USDC','tUSDC'";
const ACCOUNT_KINDS =
  "'agent_available','agent_held','seller_payable','platform_revenue','chain_clearing','bonds','sandbox_faucet'";
const TRANSACTION_KINDS =
  "'hold','capture','release','deposit','bond_post','bond_release','payout','transfer','faucet'";
const EVIDENCE_STATES =
  "'challenge','authorization','execution','confirmation','settlement','capture','refund','payout','outcome','deposit'";

const DOMAINS: Domain[] = [
  { name: "invocation_status", base: "text", rule: `value in (${INVOCATION_STATUSES})` },
  { name: "attempt_status", base: "text", rule: `value in (${ATTEMPT_STATUSES})` },
  { name: "ledger_currency", base: "text", rule: `value in (${CURRENCIES})` },
  { name: "ledger_account_kind", base: "text", rule: `value in (${ACCOUNT_KINDS})` },
  { name: "ledger_transaction_kind", base: "text", rule: `value in (${TRANSACTION_KINDS})` },
  { name: "evidence_state", base: "text", rule: `value in (${EVIDENCE_STATES})` },
  { name: "micros_not_negative", base: "bigint", rule: "value >= 0" },
  { name: "micros_not_zero", base: "bigint", rule: "value <> 0" },
];

// table, column, domain, the CHECK it replaces
const MOVED: Moved[] = (
  [
    ["invocations", "status", "invocation_status", "invocations_status_check"],
    ["invocations", "currency", "ledger_currency", "invocations_currency_check"],
    ["invocations", "hold_micros", "micros_not_negative", "invocations_hold_micros_check"],
    ["invocation_attempts", "status", "attempt_status", "invocation_attempts_status_check"],
    ["ledger_accounts", "currency", "ledger_currency", "ledger_accounts_currency_check"],
    ["ledger_accounts", "kind", "ledger_account_kind", "ledger_accounts_kind_check"],
    ["ledger_transactions", "kind", "ledger_transaction_kind", "ledger_transactions_kind_check"],
    ["ledger_entries", "amount_micros", "micros_not_zero", "ledger_entries_amount_check"],
    ["payment_evidence", "state", "evidence_state", "payment_evidence_state_check"],
    ["payment_evidence", "amount_micros", "micros_not_negative", "payment_evidence_amount_check"],
    ["api_key_spend_days", "reserved_micros", "micros_not_negative", "api_key_spend_days_reserved_check"],
    ["api_key_spend_days", "spent_micros", "micros_not_negative", "api_key_spend_days_spent_check"],
  ] as const
).map(([table, column, domain, check]) => ({ table, column, domain, check }));

export const config = { transaction: false };

const OPEN_INDEX = "invocations_open_idx";

export async function up(knex: Knex): Promise<void> {
  if (!(await domainsExist(knex))) {
    await knex.transaction(async (trx) => {
      await trx.raw(`drop index if exists ${OPEN_INDEX}`);
      for (const d of DOMAINS) await trx.raw(`create domain ${d.name} as ${d.base}`);
      for (const m of MOVED) {
        await trx.raw(
          `alter table ${m.table} drop constraint ${m.check}, alter column ${m.column} type ${m.domain}`,
        );
      }
      for (const d of DOMAINS) {
        await trx.raw(`alter domain ${d.name} add constraint ${d.name}_check check (${d.rule}) not valid`);
      }
    });
  }
  await openInvocationsIndex.up(knex);
}

/**
 * The undo, the same way round: the columns back to their base types and their CHECKs back NOT VALID (the
 * domains had proved every value), each the domain's rule over its column (a CHECK, as a domain, lets a
 * null through), the open invocations' index built again after.
 */
export async function down(knex: Knex): Promise<void> {
  if (await domainsExist(knex)) {
    await knex.transaction(async (trx) => {
      await trx.raw(`drop index if exists ${OPEN_INDEX}`);
      for (const m of MOVED) {
        const { base, rule } = DOMAINS.find((d) => d.name === m.domain)!;
        const definition = rule.replace(/\bvalue\b/, m.column);
        await trx.raw(
          `alter table ${m.table} alter column ${m.column} type ${base}, add constraint ${m.check} check (${definition}) not valid`,
        );
      }
      for (const d of DOMAINS) await trx.raw(`drop domain ${d.name}`);
    });
  }
  await openInvocationsIndex.up(knex);
}

/** Whether the up's transaction has committed (its domains exist). */
async function domainsExist(knex: Knex): Promise<boolean> {
  const found = await knex.raw("select 1 from pg_type where typname = 'invocation_status'");
  return found.rows.length > 0;
}
