// The single-column rules of the tables every execute writes become domains: the same rules, checked
// where PostgreSQL checks them more cheaply (docs/benchmarks.md "The thirtieth round").
//
// Why: PostgreSQL reads a table's CHECK constraints again from their stored text (`stringToNode`) and
// prepares them in every statement that inserts into or updates the table, and evaluates all of them for
// every row it writes, whichever columns changed: a balance update of a ledger account checked its kind
// and its currency each time. A domain's constraints are read once per connection (its type cache), and
// checked only where a value of the domain is written: an insert, or an update that sets that column.
// Rules over two columns stay CHECKs (a domain sees one value).
//
// How, without rewriting a table: each column moves to a domain that has no constraint yet (over the same
// base type, so PostgreSQL keeps the rows and the indexes as they are), and the domain then takes its
// rule NOT VALID, in the same transaction as the CHECK it replaces is dropped. Every stored value was
// proved by that CHECK, so validating the domain would read every hot table again while this migration
// holds their locks, for nothing; the constraints are enforced for every value written from here on.
// Clients see the base types: PostgreSQL describes a domain's column by its base type.
import type { Knex } from "knex";

interface Domain {
  name: string;
  base: "text" | "bigint";
  /** The rule, over VALUE. */
  rule: string;
}

interface Moved {
  table: string;
  column: string;
  domain: string;
  /** The CHECK constraint it replaces, and that constraint's definition over the column. */
  check: string;
  definition: string;
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

const MOVED: Moved[] = [
  {
    table: "invocations",
    column: "status",
    domain: "invocation_status",
    check: "invocations_status_check",
    definition: `status in (${INVOCATION_STATUSES})`,
  },
  {
    table: "invocations",
    column: "currency",
    domain: "ledger_currency",
    check: "invocations_currency_check",
    definition: `currency in (${CURRENCIES})`,
  },
  {
    table: "invocations",
    column: "hold_micros",
    domain: "micros_not_negative",
    check: "invocations_hold_micros_check",
    definition: "hold_micros >= 0",
  },
  {
    table: "invocation_attempts",
    column: "status",
    domain: "attempt_status",
    check: "invocation_attempts_status_check",
    definition: `status in (${ATTEMPT_STATUSES})`,
  },
  {
    table: "ledger_accounts",
    column: "currency",
    domain: "ledger_currency",
    check: "ledger_accounts_currency_check",
    definition: `currency in (${CURRENCIES})`,
  },
  {
    table: "ledger_accounts",
    column: "kind",
    domain: "ledger_account_kind",
    check: "ledger_accounts_kind_check",
    definition: `kind in (${ACCOUNT_KINDS})`,
  },
  {
    table: "ledger_transactions",
    column: "kind",
    domain: "ledger_transaction_kind",
    check: "ledger_transactions_kind_check",
    definition: `kind in (${TRANSACTION_KINDS})`,
  },
  {
    table: "ledger_entries",
    column: "amount_micros",
    domain: "micros_not_zero",
    check: "ledger_entries_amount_check",
    definition: "amount_micros <> 0",
  },
  {
    table: "payment_evidence",
    column: "state",
    domain: "evidence_state",
    check: "payment_evidence_state_check",
    definition: `state in (${EVIDENCE_STATES})`,
  },
  {
    table: "payment_evidence",
    column: "amount_micros",
    domain: "micros_not_negative",
    check: "payment_evidence_amount_check",
    definition: "amount_micros is null or amount_micros >= 0",
  },
  {
    table: "api_key_spend_days",
    column: "reserved_micros",
    domain: "micros_not_negative",
    check: "api_key_spend_days_reserved_check",
    definition: "reserved_micros >= 0",
  },
  {
    table: "api_key_spend_days",
    column: "spent_micros",
    domain: "micros_not_negative",
    check: "api_key_spend_days_spent_check",
    definition: "spent_micros >= 0",
  },
];

export async function up(knex: Knex): Promise<void> {
  for (const d of DOMAINS) await knex.raw(`create domain ${d.name} as ${d.base}`);
  for (const m of MOVED) {
    await knex.raw(
      `alter table ${m.table} drop constraint ${m.check}, alter column ${m.column} type ${m.domain}`,
    );
  }
  for (const d of DOMAINS) {
    await knex.raw(`alter domain ${d.name} add constraint ${d.name}_check check (${d.rule}) not valid`);
  }
}

export async function down(knex: Knex): Promise<void> {
  for (const m of MOVED) {
    const base = DOMAINS.find((d) => d.name === m.domain)!.base;
    await knex.raw(
      `alter table ${m.table} alter column ${m.column} type ${base}, add constraint ${m.check} check (${m.definition})`,
    );
  }
  for (const d of DOMAINS) await knex.raw(`drop domain ${d.name}`);
}
