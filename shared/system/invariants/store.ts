import type { Db } from "../../db/knex.js";

// The invariant checker's SQL (docs/reliability.md "Invariants"). Each query reads across the contexts'
// tables and returns one row per violation, never a count: an operator needs to know WHICH account,
// invocation or payment is wrong. The checks do not trust the schema's constraints (a restored or
// hand-edited database may have lost them): every rule a constraint also enforces is checked again here.

export interface Violation {
  check: string;
  subject: string;
  detail: string;
}

/** One invariant: a name, what it promises, and the query that lists what breaks it. */
interface SqlCheck {
  name: string;
  promise: string;
  sql: string;
}

// An invocation paid from a ledger hold (router, direct invoke, sandbox): its hold transaction's key is
// ledger:hold:<invocation id> (shared/routing/paid-invocations.ts).
const HELD = `
  select i.id, i.status, i.hold_micros, h.id as hold_id,
         r.kind as resolution, r.id as resolution_id,
         (select coalesce(sum(e.amount_micros), 0) from ledger_entries e
            join ledger_accounts a on a.id = e.account_id
           where e.transaction_id = r.id and r.kind = 'capture'
             and a.kind in ('seller_payable', 'platform_revenue')) as captured_micros
    from invocations i
    left join ledger_transactions h on h.idempotency_key = 'ledger:hold:' || i.id::text
    left join ledger_transactions r on r.resolves_transaction_id = h.id
   where i.hold_micros > 0`;

export const SQL_CHECKS: SqlCheck[] = [
  {
    name: "ledger_sums_to_zero",
    promise: "the balances of every currency sum to zero (double entry)",
    sql: `select 'currency ' || currency as subject, 'balances sum to ' || sum(balance_micros) || ' micros' as detail
            from ledger_accounts group by currency having sum(balance_micros) <> 0`,
  },
  {
    name: "transaction_balances",
    promise: "every ledger transaction's entries sum to zero, in one currency",
    sql: `select 'ledger transaction ' || e.transaction_id as subject,
                 'entries sum to ' || sum(e.amount_micros) || ' micros over ' || count(distinct a.currency) || ' currencies' as detail
            from ledger_entries e join ledger_accounts a on a.id = e.account_id
           group by e.transaction_id
          having sum(e.amount_micros) <> 0 or count(distinct a.currency) > 1`,
  },
  {
    name: "balance_matches_entries",
    promise: "every account's balance is the sum of its entries",
    sql: `select 'ledger account ' || a.id as subject,
                 'balance ' || a.balance_micros || ' but entries sum to ' || coalesce(sum(e.amount_micros), 0) as detail
            from ledger_accounts a left join ledger_entries e on e.account_id = a.id
           group by a.id, a.balance_micros
          having a.balance_micros <> coalesce(sum(e.amount_micros), 0)`,
  },
  {
    name: "no_negative_balance",
    promise: "no account but chain clearing is ever negative, now or after any entry",
    sql: `select 'ledger account ' || a.id as subject,
                 a.kind || ' balance ' || a.balance_micros || ', lowest after an entry ' || coalesce(min(e.balance_after_micros), 0) as detail
            from ledger_accounts a left join ledger_entries e on e.account_id = a.id
           where a.kind <> 'chain_clearing'
           group by a.id, a.kind, a.balance_micros
          having a.balance_micros < 0 or coalesce(min(e.balance_after_micros), 0) < 0`,
  },
  {
    name: "hold_resolved_at_most_once",
    promise: "a hold is captured or released at most once",
    sql: `select 'ledger hold ' || resolves_transaction_id as subject, count(*) || ' resolutions' as detail
            from ledger_transactions where resolves_transaction_id is not null
           group by resolves_transaction_id having count(*) > 1`,
  },
  {
    name: "paid_invocation_money_state",
    promise:
      "a paid invocation holds while it is open, captures or releases once when it succeeded, releases when it failed",
    sql: `select 'invocation ' || id as subject,
                 case
                   when hold_id is null then 'status ' || status || ' with hold_micros ' || hold_micros || ' but no hold transaction'
                   when status in ('queued', 'running', 'awaiting_approval') then 'status ' || status || ' but its hold is already ' || resolution
                   when resolution is null then 'status ' || status || ' but its hold was never resolved'
                   else 'status failed but its hold was captured'
                 end as detail
            from (${HELD}) held
           where hold_id is null
              or (status in ('queued', 'running', 'awaiting_approval') and resolution is not null)
              or (status in ('succeeded', 'failed') and resolution is null)
              or (status = 'failed' and resolution = 'capture')`,
  },
  {
    name: "evidence_matches_money",
    promise:
      "each paid invocation's evidence rows say what its ledger did: authorization for the hold, capture with the captured amount, refund for a release",
    sql: `select 'invocation ' || held.id as subject,
                 case
                   when auth.id is null then 'no authorization evidence for its hold'
                   when held.resolution = 'capture' and (cap.id is null or cap.amount_micros <> held.captured_micros)
                     then 'captured ' || held.captured_micros || ' micros, capture evidence says ' || coalesce(cap.amount_micros::text, 'nothing')
                   when held.resolution = 'release' and ref.id is null then 'released without refund evidence'
                   when held.resolution = 'release' and cap.id is not null then 'released, yet capture evidence exists'
                   else 'evidence of a capture or refund while its hold is still open'
                 end as detail
            from (${HELD}) held
            left join payment_evidence auth on auth.subject_type = 'invocation' and auth.subject_id = held.id::text and auth.state = 'authorization'
            left join payment_evidence cap on cap.subject_type = 'invocation' and cap.subject_id = held.id::text and cap.state = 'capture'
            left join payment_evidence ref on ref.subject_type = 'invocation' and ref.subject_id = held.id::text and ref.state = 'refund'
           where held.hold_id is not null and (
                 auth.id is null
              or (held.resolution = 'capture' and (cap.id is null or cap.amount_micros <> held.captured_micros))
              or (held.resolution = 'release' and (ref.id is null or cap.id is not null))
              or (held.resolution is null and (cap.id is not null or ref.id is not null)))`,
  },
  {
    name: "verification_order_money_state",
    promise:
      "a verification order holds its price while open, is captured when its probe ran and released when it could not run, with evidence of each",
    sql: `select 'verification order ' || o.id as subject,
                 'status ' || o.status || ', charge ' || o.charge_state || ', ledger ' ||
                 coalesce(r.kind, case when h.id is null then 'no hold' else 'hold open' end) ||
                 case when r.kind = 'capture' and cap.id is null then ', no capture evidence'
                      when r.kind = 'release' and ref.id is null then ', no refund evidence' else '' end as detail
            from verification_orders o
            left join ledger_transactions h on h.idempotency_key = 'verification:hold:' || o.id::text
            left join ledger_transactions r on r.resolves_transaction_id = h.id
            left join payment_evidence cap on cap.subject_type = 'verification_order' and cap.subject_id = o.id::text and cap.state = 'capture'
            left join payment_evidence ref on ref.subject_type = 'verification_order' and ref.subject_id = o.id::text and ref.state = 'refund'
           where h.id is null
              or (o.status in ('queued', 'running') and (r.id is not null or o.charge_state <> 'held'))
              or (o.status = 'completed' and (coalesce(r.kind, '') <> 'capture' or o.charge_state <> 'captured' or cap.id is null))
              or (o.status = 'not_run' and (coalesce(r.kind, '') <> 'release' or o.charge_state <> 'released' or ref.id is null))`,
  },
  {
    name: "capture_only_on_success",
    promise: "no invocation that did not succeed has capture evidence or a receipt",
    sql: `select 'invocation ' || i.id as subject, 'status ' || i.status || ' with ' ||
                 case when r.id is not null then 'receipt ' || r.id else 'capture evidence' end as detail
            from invocations i
            left join receipts r on r.invocation_id = i.id
            left join payment_evidence c on c.subject_type = 'invocation' and c.subject_id = i.id::text and c.state = 'capture'
           where i.status <> 'succeeded' and (r.id is not null or c.id is not null)`,
  },
  {
    name: "receipt_has_invocation",
    promise:
      "every receipt belongs to a succeeded invocation of the same buyer, with the amount the evidence captured",
    sql: `select 'receipt ' || r.id as subject,
                 case
                   when i.id is null then 'no invocation ' || r.invocation_id
                   when r.agent_id is distinct from i.agent_id then 'buyer differs from its invocation''s'
                   else 'amount ' || r.amount_micros || ' but captured ' || coalesce(c.amount_micros, 0)
                 end as detail
            from receipts r
            left join invocations i on i.id = r.invocation_id
            left join payment_evidence c on c.subject_type = 'invocation' and c.subject_id = r.invocation_id::text and c.state = 'capture'
           where i.id is null or r.agent_id is distinct from i.agent_id
              or (i.hold_micros > 0 and i.route <> 'x402' and r.amount_micros <> coalesce(c.amount_micros, 0))`,
  },
  {
    name: "one_receipt_per_invocation",
    promise:
      "an invocation has at most one receipt and at most one succeeded attempt (executed at most once)",
    sql: `select 'invocation ' || invocation_id as subject, count(*) || ' ' || what as detail from (
            select invocation_id, 'receipts' as what from receipts
            union all
            select invocation_id, 'succeeded attempts' from invocation_attempts where status = 'succeeded'
          ) x group by invocation_id, what having count(*) > 1`,
  },
  {
    name: "idempotency_key_once",
    promise: "an idempotency key names one invocation of its own agent, and a ledger key one transaction",
    sql: `select 'idempotency key ' || k.agent_id || '/' || k.key as subject, detail from (
            select k.agent_id, k.key, count(*) || ' claims' as detail
              from idempotency_keys k group by k.agent_id, k.key having count(*) > 1
            union all
            select k.agent_id, k.key, 'names invocation ' || i.id || ' of another agent'
              from idempotency_keys k join invocations i on i.id = k.invocation_id
             where i.agent_id is distinct from k.agent_id
            union all
            select null, t.idempotency_key, count(*) || ' ledger transactions'
              from ledger_transactions t group by t.idempotency_key having count(*) > 1
          ) k`,
  },
  {
    name: "x402_payment_matches_outcome",
    promise: "an x402 payment settles only for a call that succeeded, and is voided for one that failed",
    sql: `select 'x402 payment ' || p.id as subject, 'payment ' || p.status || ' for a ' || i.status || ' invocation' as detail
            from x402_payments p join invocations i on i.id = p.invocation_id
           where (i.status = 'failed' and p.status in ('settling', 'submitted', 'settled'))
              or (i.status = 'succeeded' and p.status = 'voided')`,
  },
  {
    name: "chain_state_has_transaction",
    promise:
      "every on-chain state (credited deposit, confirmed payout, settled x402 payment) names its transaction hash and block, and its ledger posting",
    sql: `select subject, detail from (
            select 'deposit ' || id as subject, 'credited without ' ||
                   concat_ws(', ', case when tx_hash is null then 'tx hash' end, case when block_number is null then 'block' end,
                             case when ledger_transaction_id is null then 'ledger transaction' end) as detail
              from deposits where status = 'credited' and (tx_hash is null or block_number is null or ledger_transaction_id is null)
            union all
            select 'payout ' || id, 'confirmed without ' ||
                   concat_ws(', ', case when tx_hash is null then 'tx hash' end, case when block_number is null then 'block' end,
                             case when ledger_transaction_id is null then 'ledger transaction' end)
              from payouts where status = 'confirmed' and (tx_hash is null or block_number is null or ledger_transaction_id is null)
            union all
            select 'x402 payment ' || id, 'settled without ' ||
                   concat_ws(', ', case when tx_hash is null then 'tx hash' end, case when block_number is null then 'block' end)
              from x402_payments where status = 'settled' and (tx_hash is null or block_number is null)
            union all
            select 'chain transaction ' || id, 'mined without a block'
              from chain_transactions where status = 'mined' and block_number is null
          ) x`,
  },
  {
    name: "chain_posting_has_state",
    promise:
      "every deposit or payout posting in the ledger belongs to a credited deposit or a confirmed payout",
    sql: `select 'ledger transaction ' || t.id as subject, t.kind || ' posting for ' || t.reference_type || ' ' || t.reference_id ||
                 ' whose state is ' || coalesce(d.status, p.status, 'missing') as detail
            from ledger_transactions t
            left join deposits d on t.reference_type = 'deposit' and d.id::text = t.reference_id
            left join payouts p on t.reference_type = 'payout' and p.id::text = t.reference_id
           where (t.kind = 'deposit' and t.reference_type = 'deposit' and coalesce(d.status, '') <> 'credited')
              or (t.kind = 'payout' and t.reference_type = 'payout' and coalesce(p.status, '') <> 'confirmed')`,
  },
  {
    name: "awaiting_approval_has_approval",
    promise: "an invocation awaiting approval has a pending approval (it has no job until one is decided)",
    sql: `select 'invocation ' || i.id as subject, 'awaiting approval with ' || coalesce('a ' || a.status || ' approval', 'no approval') as detail
            from invocations i left join approvals a on a.invocation_id = i.id
           where i.status = 'awaiting_approval' and coalesce(a.status, '') <> 'pending'`,
  },
];

/** Runs every SQL check and returns what each found. */
export async function runSqlChecks(
  q: Db,
): Promise<{ name: string; promise: string; violations: Violation[] }[]> {
  const results = [];
  for (const check of SQL_CHECKS) {
    const { rows } = (await q.raw(check.sql)) as { rows: { subject: string; detail: string }[] };
    results.push({
      name: check.name,
      promise: check.promise,
      violations: rows.map((r) => ({ check: check.name, subject: r.subject, detail: r.detail })),
    });
  }
  return results;
}

/** Invocations not yet terminal (queued or running), with their unsent outbox row if one exists. */
export async function openInvocations(
  q: Db,
  olderThanSeconds: number,
): Promise<{ id: string; status: string; unsent_outbox: boolean }[]> {
  const { rows } = await q.raw(
    `select i.id, i.status,
            exists (select 1 from job_outbox o where o.queue = 'executions' and o.job_id = i.id::text and o.enqueued_at is null) as unsent_outbox
       from invocations i
      where i.status in ('queued', 'running') and i.created_at < now() - make_interval(secs => ?)`,
    [olderThanSeconds],
  );
  return rows;
}
