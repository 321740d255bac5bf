import type { Knex } from "knex";
import {
  CATALOG_GENERATION_SQL,
  CATALOG_MOVED,
  catalogUnmoved,
  type ListingRow,
} from "../../catalog/index.js";
import type { Db } from "../../db/knex.js";
import {
  type InsertGuard,
  insertReturningAll,
  NOW,
  preparedRaw,
  UTC_TODAY,
  UTC_TODAY_SQL,
} from "../../db/prepared.js";
import { answerOrRefuse } from "../../db/refusals.js";

/** awaiting_approval: held for a supervisor's decision (docs/payments.md "Approvals"); no job exists yet. */
export type InvocationStatus = "awaiting_approval" | "queued" | "running" | "succeeded" | "failed";

export interface InvocationError {
  code: string;
  message: string;
  /** For RATE_LIMITED: when the limit that refused the call frees up. */
  retry_after_seconds?: number;
}

export interface InvocationRow {
  id: string;
  /** null only for x402 invocations (route 'x402'): their buyer is the wallet in payer_address. */
  agent_id: string | null;
  api_key_id: string | null;
  /** The x402 payer's address (lowercase); null on keyed routes (check constraint). */
  payer_address: string | null;
  listing_id: string;
  task: string;
  route: string;
  input: Record<string, unknown>;
  max_cost_micros: string | null;
  price_micros: string;
  hold_micros: string;
  /** USDC, or tUSDC for sandbox (tumbler) invocations: the unit of price, hold, charge and receipt. */
  currency: "USDC" | "tUSDC";
  status: InvocationStatus;
  candidate_ids: string[];
  selection: Record<string, unknown> | null;
  /** The ledger quote a keyed invocation pays, if any (its price is the charge). */
  quote_id: string | null;
  served_listing_id: string | null;
  output: unknown;
  error: InvocationError | null;
  created_at: Date;
  started_at: Date | null;
  completed_at: Date | null;
}

export interface AttemptRow {
  id: string;
  invocation_id: string;
  attempt_no: number;
  listing_id: string;
  status: "running" | "succeeded" | "failed" | "abandoned" | "skipped";
  error_code: string | null;
  error_message: string | null;
  http_status: number | null;
  latency_ms: number | null;
  started_at: Date;
  finished_at: Date | null;
  deadline_at: Date | null;
}

export const TERMINAL: readonly InvocationStatus[] = ["succeeded", "failed"];

export type NewInvocation = Pick<InvocationRow, "id" | "listing_id" | "task" | "route" | "input"> & {
  agent_id: string;
  api_key_id: string;
  max_cost_micros: bigint | null;
  price_micros: bigint;
  /** Held from the buyer for paid work; 0 (the default) for free work. */
  hold_micros?: bigint;
  /** USDC (the default); tUSDC only for route 'tumbler' (check constraint). */
  currency?: InvocationRow["currency"];
  /** Ranked fallback order (the chosen listing first); defaults to the listing alone. */
  candidate_ids?: string[];
  selection?: Record<string, unknown>;
  /** The ledger quote this invocation pays (its price is the charge). */
  quote_id?: string | null;
  /**
   * The day its key's daily spend reserves the hold on, stamped by the insert (identity's
   * SPEND_DAY_STAMP), only when the same transaction reserves it. A keyed paid row's only; never in a
   * row written apart from its transaction (provedClaims).
   */
  spend_day?: typeof UTC_TODAY;
};

/** An x402 invocation: no agent and no key (docs/x402.md "x402 gateway"), the payer's wallet instead. */
export type NewX402Invocation = Omit<NewInvocation, "agent_id" | "api_key_id" | "route"> & {
  route: "x402";
  agent_id: null;
  api_key_id: null;
  payer_address: string;
};

/** A new invocation as the columns of its row (money as decimal strings, JSON as text). */
export function invocationColumns(row: NewInvocation | NewX402Invocation) {
  return {
    ...invocationValues(row),
    input: JSON.stringify(row.input),
    selection: row.selection ? JSON.stringify(row.selection) : null,
  };
}

/** A new invocation's column values, its JSON columns as values (what a JSON document of rows carries). */
function invocationValues(row: NewInvocation | NewX402Invocation) {
  return {
    ...row,
    max_cost_micros: row.max_cost_micros?.toString() ?? null,
    price_micros: row.price_micros.toString(),
    hold_micros: (row.hold_micros ?? 0n).toString(),
    candidate_ids: row.candidate_ids ?? [row.listing_id],
    selection: row.selection ?? null,
  };
}

/** Attempt 1's deadline as FIRST_ATTEMPT_INSERT computes it, from a proved first candidate. */
function firstDeadlineMs(proved: ProvedCandidates, timing: { maxCallMs: number; marginMs: number }): number {
  return Math.min(proved.candidates[0]!.max_latency_ms, timing.maxCallMs) + timing.marginMs;
}

/** The invocation's outbox row (job id = invocation id, queue = the binding): a CTE over `inv`. */
const JOB_CTE = `job as (
       insert into job_outbox (queue, job_id, payload)
       select ?, inv.id::text, jsonb_build_object('invocation_id', inv.id) from inv
     )`;

/**
 * Inserts an invocation and its outbox row (job id = invocation id) in one statement: atomic without
 * an explicit transaction, and one round trip on the hot path. Undefined only when a guard failed.
 */
export async function insertInvocationWithJob(
  q: Db,
  row: NewInvocation | NewX402Invocation,
  queue: string,
): Promise<InvocationRow>;
export async function insertInvocationWithJob(
  q: Db,
  row: NewInvocation | NewX402Invocation,
  queue: string,
  guard: InsertGuard | undefined,
): Promise<InvocationRow | undefined>;
export async function insertInvocationWithJob(
  q: Db,
  row: NewInvocation | NewX402Invocation,
  queue: string,
  guard?: InsertGuard,
): Promise<InvocationRow | undefined> {
  const insert = insertReturningAll("invocations", invocationColumns(row), guard);
  const result = await preparedRaw(
    q,
    `with inv as (${insert.sql}),
     ${JOB_CTE}
     select * from inv`,
    [...insert.bindings, queue],
  );
  return result.rows[0] as InvocationRow | undefined;
}

/** The invocation's candidates as CallTargets, in rank order: a CTE over `inv` (claims). */
const CANDIDATES_CTE = `cands as (
       select coalesce(json_agg(json_build_object(
                'id', l.id, 'name', l.name, 'status', l.status, 'endpoint_url', l.endpoint_url,
                'max_latency_ms', l.max_latency_ms, 'safe_to_retry', l.safe_to_retry, 'rate_limit', l.rate_limit,
                'concurrency_limit', l.concurrency_limit, 'price_micros', l.price_micros::text,
                'output_schema', l.output_schema, 'seller_id', l.seller_id)
              order by c.ord), '[]'::json) as list
         from inv cross join lateral unnest(inv.candidate_ids) with ordinality as c(id, ord)
         join listings l on l.id = c.id
     )`;

/**
 * Attempt 1, for the first candidate, before any call: its deadline is the call's timeout (capped at
 * the first binding, maxCallMs) plus the second (marginMs). A FROM list the caller may extend.
 */
const FIRST_ATTEMPT_INSERT = `insert into invocation_attempts (invocation_id, attempt_no, listing_id, deadline_at)
       select inv.id, 1, l.id, now() + make_interval(secs => (least(l.max_latency_ms, ?) + ?) / 1000.0)
         from inv join listings l on l.id = inv.candidate_ids[1]`;

/**
 * The candidates of an execute ranked on a kept copy of its listings, with the guard that proves the copy
 * current (catalogUnmoved): the claim takes them as they are instead of reading them again.
 */
export interface ProvedCandidates {
  /** The catalog generation the copy was read at (catalogUnmoved). */
  generation: string;
  candidates: CallTarget[];
}

/** What a provider call needs of a listing, as CANDIDATES_CTE reads it. */
export function callTargetOf(l: ListingRow): CallTarget {
  return {
    id: l.id,
    name: l.name,
    status: l.status,
    endpoint_url: l.endpoint_url,
    max_latency_ms: l.max_latency_ms,
    safe_to_retry: l.safe_to_retry,
    rate_limit: l.rate_limit,
    concurrency_limit: l.concurrency_limit,
    price_micros: l.price_micros,
    output_schema: l.output_schema,
    seller_id: l.seller_id,
  };
}

/**
 * The invocation inserted and its run claimed in one statement, for a run that starts in the submitting
 * process (runs-here.ts): the invocation is inserted running, with attempt 1 recorded before any call,
 * and no outbox row: no job is sent, and if this process dies mid-run the executions recovery sweep
 * (recovery.ts) finds the open invocation without a job and sends one. With candidates proved current
 * (ProvedCandidates) the statement neither reads nor returns them: it writes nothing unless the guard
 * holds, and then answers undefined; or, strict, fails (catalogUnmoved's strict guard, CATALOG_MOVED).
 */
export async function insertClaimedInvocation(
  q: Db,
  row: NewInvocation | NewX402Invocation,
  timing: { maxCallMs: number; marginMs: number },
): Promise<RunClaim>;
export async function insertClaimedInvocation(
  q: Db,
  row: NewInvocation | NewX402Invocation,
  timing: { maxCallMs: number; marginMs: number },
  proved: ProvedCandidates | undefined,
  options?: { strict?: boolean },
): Promise<RunClaim | undefined>;
export async function insertClaimedInvocation(
  q: Db,
  row: NewInvocation | NewX402Invocation,
  timing: { maxCallMs: number; marginMs: number },
  proved?: ProvedCandidates,
  options: { strict?: boolean } = {},
): Promise<RunClaim | undefined> {
  const insert = insertReturningAll(
    "invocations",
    { ...invocationColumns(row), status: "running", started_at: NOW },
    proved && catalogUnmoved(proved.generation, options),
  );
  if (proved) {
    const deadlineMs = firstDeadlineMs(proved, timing);
    const result = await preparedRaw(
      q,
      `with inv as (${insert.sql}),
       first as (
         insert into invocation_attempts (invocation_id, attempt_no, listing_id, deadline_at)
         select inv.id, 1, inv.candidate_ids[1], now() + make_interval(secs => ?::int / 1000.0) from inv
         returning id
       )
       select inv.*, (select id from first) as first_attempt_id from inv`,
      [...insert.bindings, deadlineMs],
    );
    if (result.rows.length === 0) return undefined;
    const { first_attempt_id, ...invocation } = result.rows[0];
    return {
      invocation: invocation as InvocationRow,
      candidates: proved.candidates,
      attempts: [],
      firstAttempt: { id: first_attempt_id },
    };
  }
  const result = await preparedRaw(
    q,
    `with inv as (${insert.sql}),
     ${CANDIDATES_CTE}, first as (
       ${FIRST_ATTEMPT_INSERT}
       returning id
     )
     select inv.*, cands.list as candidate_list, (select id from first) as first_attempt_id
       from inv cross join cands`,
    [...insert.bindings, timing.maxCallMs, timing.marginMs],
  );
  const { candidate_list, first_attempt_id, ...invocation } = result.rows[0];
  return {
    invocation: invocation as InvocationRow,
    candidates: candidate_list as CallTarget[],
    attempts: [],
    firstAttempt: { id: first_attempt_id },
  };
}

/** One claim of insertClaimedInvocations: a row and the proof of its candidates. */
export interface ProvedClaim {
  row: NewInvocation;
  proved: ProvedCandidates;
}

/** A row's written columns for the grouped claim: invocationValues without the DEFAULT (undefined) ones. */
function claimColumns(row: NewInvocation): Record<string, unknown> {
  const columns: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(invocationValues(row)))
    if (value !== undefined) columns[name] = value;
  return columns;
}

/**
 * Whether rows can be claimed in one statement (insertClaimedInvocations): they write the same columns.
 * claimColumns adds the same computed columns to every row, so the rows' own defined keys decide it.
 */
export function claimsShareColumns(rows: readonly NewInvocation[]): boolean {
  const shape = (row: NewInvocation) =>
    Object.entries(row)
      .flatMap(([name, value]) => (value === undefined ? [] : [name]))
      .sort()
      .join(",");
  const first = rows[0] && shape(rows[0]);
  return rows.every((row) => shape(row) === first);
}

/** A grouped statement's last select: strict, it refuses with `reason` unless every row was written. */
function strictly(select: string, allWritten: string, reason: string | undefined): string {
  return reason ? answerOrRefuse(select, allWritten, reason) : select;
}

/** insertClaimedInvocations' text per column set (as insertReturningAll orders them) and strictness. */
const claimsTexts = new Map<string, string>();

function claimsText(columns: readonly string[], today: ReadonlySet<string>, strict: boolean): string {
  const key = `${columns.join(",")}/${[...today].join(",")}/${strict}`;
  let text = claimsTexts.get(key);
  if (!text) {
    const quoted = columns.map((c) => `"${c}"`);
    // A column stamped with the day (UTC_TODAY: a paid row's spend_day) is written as the single insert
    // writes it, by the statement's clock; JSON has no such value to carry.
    const value = (c: string) => (today.has(c) ? UTC_TODAY_SQL : `v."${c}"`);
    // The rows arrive as one JSON array, typed by the table's own row type (no list of types to keep in
    // step with migrations); each also carries its generation and attempt 1's deadline, which the row
    // type does not have and the second reading of the array takes.
    text = `with doc as (select ?::jsonb as rows), v as (
       select r.*, x.kept_generation, x.first_deadline_ms
         from doc,
              jsonb_populate_recordset(null::invocations, doc.rows) as r
         join jsonb_to_recordset(doc.rows) as x(id uuid, kept_generation bigint, first_deadline_ms int)
           on x.id = r.id
     ), inv as (
       insert into invocations (${quoted.join(", ")}, "started_at", "status")
       select ${columns.map(value).join(", ")}, now(), 'running' from v
        where v.kept_generation = (${CATALOG_GENERATION_SQL})
       returning *
     ), first as (
       insert into invocation_attempts (invocation_id, attempt_no, listing_id, deadline_at)
       select inv.id, 1, inv.candidate_ids[1], now() + make_interval(secs => v.first_deadline_ms / 1000.0)
         from inv join v on v.id = inv.id
       returning id, invocation_id
     )
     ${strictly(
       "select inv.*, first.id as first_attempt_id from inv join first on first.invocation_id = inv.id",
       "(select count(*) from inv) = (select jsonb_array_length(rows) from doc)",
       strict ? CATALOG_MOVED : undefined,
     )}`;
    claimsTexts.set(key, text);
  }
  return text;
}

/**
 * insertClaimedInvocation on proved copies, for several runs in one statement (group commit: see
 * shared/db/group-commit.ts): each row is written, with attempt 1, only if the catalog is still at its
 * own generation. Answers per claim, in order; undefined where the guard failed. Strict, a guard that
 * fails fails the statement instead (CATALOG_MOVED), writing nothing: for claims sent in one flight with
 * the holds that follow them (submission.ts PAID_CLAIMS).
 * The rows must share a column set (claimsShareColumns), else this throws and nothing is written.
 */
export async function insertClaimedInvocations(
  q: Db,
  claims: readonly ProvedClaim[],
  timing: { maxCallMs: number; marginMs: number },
  options: { strict?: boolean } = {},
): Promise<(RunClaim | undefined)[]> {
  if (!claimsShareColumns(claims.map((c) => c.row)))
    throw new Error("insertClaimedInvocations: the rows' column sets differ");
  const values = claims.map((c) => claimColumns(c.row));
  const columns = Object.keys(values[0]!).sort();
  const today = new Set(columns.filter((c) => values[0]![c] === UTC_TODAY));
  const rows = values.map((v, i) => ({
    ...v,
    kept_generation: claims[i]!.proved.generation,
    first_deadline_ms: firstDeadlineMs(claims[i]!.proved, timing),
  }));
  const body = JSON.stringify(rows);
  const result = await preparedRaw(q, claimsText(columns, today, options.strict === true), [body]);
  const byId = new Map<string, Record<string, unknown>>();
  for (const r of result.rows) byId.set(r.id, r);
  return claims.map((c) => {
    const found = byId.get(c.row.id);
    if (!found) return undefined;
    const { first_attempt_id, ...invocation } = found;
    return {
      invocation: invocation as unknown as InvocationRow,
      candidates: c.proved.candidates,
      attempts: [],
      firstAttempt: { id: first_attempt_id as string },
    };
  });
}

/** An invocation with what its execute answer shows: receipt, the serving listing's names, attempt facts. */
export interface InvocationSummary extends InvocationRow {
  receipt_id: string | null;
  receipt_amount_micros: string | null;
  listing_name: string | null;
  listing_slug: string | null;
  attempt_count: number;
  served_latency_ms: number | null;
}

/** Reads an invocation summary in one round trip (the execute answer's hot path). */
export async function findInvocationSummary(q: Db, id: string): Promise<InvocationSummary | undefined> {
  const result = await preparedRaw(
    q,
    `select i.*, r.id as receipt_id, r.amount_micros as receipt_amount_micros,
            l.name as listing_name, l.slug as listing_slug,
            (select count(*)::int from invocation_attempts a where a.invocation_id = i.id) as attempt_count,
            (select a.latency_ms from invocation_attempts a
              where a.invocation_id = i.id and a.status = 'succeeded'
              order by a.attempt_no desc limit 1) as served_latency_ms
       from invocations i
       left join listings l on l.id = coalesce(i.served_listing_id, i.listing_id)
       left join receipts r on r.invocation_id = i.id
      where i.id = ?`,
    [id],
  );
  return result.rows[0] as InvocationSummary | undefined;
}

export async function findInvocation(q: Db, id: string): Promise<InvocationRow | undefined> {
  return q<InvocationRow>("invocations").where({ id }).first();
}

/** Reads an invocation only if it belongs to the agent: another agent's id reads as absent. */
export async function findOwnedInvocation(
  q: Db,
  id: string,
  agentId: string,
): Promise<InvocationRow | undefined> {
  return q<InvocationRow>("invocations").where({ id, agent_id: agentId }).first();
}

/** What finishing an invocation hands back: who it was for and whether money was held for it. */
export interface FinishedInvocation {
  id: string;
  agent_id: string | null;
  hold_micros: string;
  currency: InvocationRow["currency"];
}

/** queued|running → succeeded|failed, exactly once: undefined when another worker already finished it. */
export async function finishInvocation(
  q: Db,
  id: string,
  outcome: { status: "succeeded"; output: unknown } | { status: "failed"; error: InvocationError },
): Promise<FinishedInvocation | undefined> {
  const [row] = await q("invocations")
    .where({ id })
    .whereIn("status", ["queued", "running"])
    .update({
      status: outcome.status,
      output: outcome.status === "succeeded" ? JSON.stringify(outcome.output) : null,
      error: outcome.status === "failed" ? JSON.stringify(outcome.error) : null,
      completed_at: q.fn.now(),
    })
    .returning(["id", "agent_id", "hold_micros", "currency"]);
  return row as FinishedInvocation | undefined;
}

/**
 * Open invocations older than `olderThanSeconds` that no outbox row will send: their row was sent, or
 * they have none (a run in the submitting process, or a test's bare row). Each should be owned by a live
 * job, or be a run still going in its process; recovery checks for the job and sends one if it is gone.
 * At most `limit`, in id order, after the id `after` (the next page). With `idFloor` (kernel/ids.ts
 * timeOrderedIdFloor), only those whose time-ordered id is at or above it. Ids are time-ordered, so id
 * order is about oldest first; the ids made before them are random and come in no such order, but paging
 * still reads each one once. Read through the partial index of open invocations (invocations_open_idx),
 * a call costs what is open and what ended since the call before (until vacuum), not the history.
 */
export function listSentOpenInvocations(
  q: Db,
  olderThanSeconds: number,
  limit: number,
  idFloor?: string,
  after?: string,
): Knex.QueryBuilder<{ id: string }, string[]> {
  // A query builder, not a promise: awaited, it runs and answers the ids; the plan test explains it.
  return (
    q("invocations as i")
      .modify((b) => {
        if (idFloor !== undefined) b.where("i.id", ">=", idFloor);
        if (after !== undefined) b.where("i.id", ">", after);
      })
      // Literal, not bound: PostgreSQL uses the partial index of open invocations (invocations_open_idx)
      // only where it can prove the index's predicate from the statement's text.
      .whereRaw("i.status in ('queued', 'running')")
      .andWhere("i.created_at", "<", q.raw("now() - make_interval(secs => ?)", [olderThanSeconds]))
      .whereNotExists(
        q("job_outbox as o")
          .where("o.queue", "executions")
          .andWhere("o.job_id", q.raw("i.id::text"))
          .whereNull("o.enqueued_at"),
      )
      .orderBy("i.id")
      .limit(limit)
      .pluck("i.id")
  );
}

export async function listAttempts(q: Db, invocationId: string): Promise<AttemptRow[]> {
  return q<AttemptRow>("invocation_attempts").where({ invocation_id: invocationId }).orderBy("attempt_no");
}

/** 'running' attempts past their deadline belong to a worker that died mid-call: closed as abandoned. */
export async function abandonExpiredAttempts(q: Db, invocationId: string): Promise<number> {
  return q("invocation_attempts")
    .where({ invocation_id: invocationId, status: "running" })
    .andWhere((w) => w.whereNull("deadline_at").orWhere("deadline_at", "<=", q.fn.now()))
    .update({
      status: "abandoned",
      finished_at: q.fn.now(),
      error_message: "worker stopped before the call returned",
    });
}

/** Records an attempt before its call; UNIQUE(invocation_id, attempt_no) stops two runs taking one number. */
export async function insertAttempt(
  q: Db,
  row: Pick<AttemptRow, "invocation_id" | "attempt_no" | "listing_id">,
  deadlineMs: number,
): Promise<AttemptRow> {
  const [inserted] = await q<AttemptRow>("invocation_attempts")
    .insert({ ...row, deadline_at: q.raw("now() + make_interval(secs => ?)", [deadlineMs / 1000]) as never })
    .returning("*");
  return inserted!;
}

/** running → its result; false when the attempt was no longer running (closed by another run). */
export async function finishAttempt(
  q: Db,
  id: string,
  result: Pick<AttemptRow, "status" | "error_code" | "error_message" | "http_status" | "latency_ms">,
): Promise<boolean> {
  const count = await q("invocation_attempts")
    .where({ id, status: "running" })
    .update({ ...result, finished_at: q.fn.now() });
  return count === 1;
}

/** What a provider call needs of a candidate listing. */
export interface CallTarget {
  id: string;
  name: string;
  status: ListingRow["status"];
  endpoint_url: string;
  max_latency_ms: number;
  safe_to_retry: boolean;
  rate_limit: number;
  concurrency_limit: number;
  price_micros: string;
  output_schema: Record<string, unknown> | null;
  /** null for first-party listings: the platform is the seller. */
  seller_id: string | null;
}

export interface AttemptSnapshot {
  attempt_no: number;
  listing_id: string;
  status: AttemptRow["status"];
  /** 'running' and inside its deadline: its call may still be in flight. */
  live: boolean;
  deadline_at: Date | null;
}

export interface RunClaim {
  invocation: InvocationRow;
  /** The ranked candidates, in the order the router may call them (one for direct invoke). */
  candidates: CallTarget[];
  /** Every attempt as it stood before this claim. */
  attempts: AttemptSnapshot[];
  /** Attempt 1 (for the first candidate), when this claim found no attempts and recorded it. */
  firstAttempt: { id: string } | null;
}

/**
 * Starts (or resumes) a run in one round trip: queued|running → running, the candidates to call (in
 * rank order), a snapshot of every attempt taken at the same instant, and, when there were none,
 * attempt 1 for the first candidate recorded before any call (deadline = its call timeout, capped at
 * maxCallMs, plus marginMs). Undefined when the invocation already ended. ON CONFLICT leaves attempt 1
 * to a concurrent run that took it first.
 */
export async function claimRun(
  q: Db,
  invocationId: string,
  timing: { maxCallMs: number; marginMs: number },
): Promise<RunClaim | undefined> {
  const result = await preparedRaw(
    q,
    `with inv as (
       update invocations set status = 'running', started_at = coalesce(started_at, now())
        where id = ? and status in ('queued', 'running')
       returning *
     ), snap as (
       select coalesce(json_agg(json_build_object(
                'attempt_no', a.attempt_no, 'listing_id', a.listing_id, 'status', a.status,
                'deadline_at', a.deadline_at,
                'live', a.status = 'running' and coalesce(a.deadline_at > now(), false))
              order by a.attempt_no), '[]'::json) as attempts, count(*) as n
         from invocation_attempts a where a.invocation_id = ?
     ), ${CANDIDATES_CTE}, first as (
       ${FIRST_ATTEMPT_INSERT}, snap
        where snap.n = 0
       on conflict (invocation_id, attempt_no) do nothing
       returning id
     )
     select inv.*, snap.attempts as attempt_snapshot, cands.list as candidate_list,
            (select id from first) as first_attempt_id
       from inv cross join snap cross join cands`,
    [invocationId, invocationId, timing.maxCallMs, timing.marginMs],
  );
  const row = result.rows[0];
  if (!row) return undefined;
  const { attempt_snapshot, candidate_list, first_attempt_id, ...invocation } = row;
  return {
    invocation: invocation as InvocationRow,
    candidates: candidate_list as CallTarget[],
    attempts: (
      attempt_snapshot as (Omit<AttemptSnapshot, "deadline_at"> & { deadline_at: string | null })[]
    ).map((a) => ({ ...a, deadline_at: a.deadline_at ? new Date(a.deadline_at) : null })),
    firstAttempt: first_attempt_id ? { id: first_attempt_id } : null,
  };
}

export interface SuccessRecord {
  attemptId: string;
  invocationId: string;
  /** The candidate that served, and its price: what the receipt charges. */
  listingId: string;
  amountMicros: bigint;
  output: unknown;
  httpStatus: number;
  latencyMs: number;
  evidence: Record<string, unknown>;
  /** Refresh the listing's runtime proof too (runtime-proof.ts decides when it may be due). */
  proveListing: boolean;
  /**
   * The receipt's id, when the caller must name it before the statement answers (a paid call's capture
   * is sent with its record, run-invocation.ts); else the database makes one.
   */
  receiptId?: string;
}

/** Why a strict recordSuccess failed (its refuse_unless reason): another run had already ended the invocation. */
export const ENDED_ELSEWHERE = "routing: another run already ended the invocation";

/**
 * recordSuccess's texts, without and with the runtime proof's update; strict, the statement fails
 * (ENDED_ELSEWHERE) instead of answering no row.
 */
function successSql(proveListing: boolean, strict: boolean): string {
  const proof = proveListing
    ? `, proof as (
       update listings set last_success_at = now()
        where id = ? and exists (select 1 from inv)
          and (last_success_at is null or last_success_at < now() - interval '1 minute')
     )`
    : "";
  const ctes = `with att as (
       update invocation_attempts
          set status = 'succeeded', http_status = ?, latency_ms = ?, finished_at = now()
        where id = ? and status = 'running'
       returning id
     ), inv as (
       update invocations
          set status = 'succeeded', output = ?::jsonb, completed_at = now(), served_listing_id = ?
        where id = ? and status in ('queued', 'running') and exists (select 1 from att)
       returning *
     ), rec as (
       insert into receipts (id, invocation_id, agent_id, listing_id, amount_micros, currency, provider_evidence)
       select coalesce(?::uuid, time_ordered_uuid()), id, agent_id, ?, ?, currency, ?::jsonb from inv
       returning id, amount_micros
     )${proof}`;
  const summary = `select inv.*, rec.id as receipt_id, rec.amount_micros as receipt_amount_micros,
            l.name as listing_name, l.slug as listing_slug,
            (select count(*)::int from invocation_attempts a where a.invocation_id = inv.id) as attempt_count,
            ?::int as served_latency_ms
       from inv cross join rec
       left join listings l on l.id = inv.served_listing_id`;
  // Strict, the summary is joined to a row that is always there, so that its absence can fail the statement.
  return strict
    ? `${ctes}
     ${answerOrRefuse(summary, "s.id is not null", ENDED_ELSEWHERE)}`
    : `${ctes}
     ${summary}`;
}
const SUCCESS_SQL = {
  plain: successSql(false, false),
  proving: successSql(true, false),
  strictPlain: successSql(false, true),
  strictProving: successSql(true, true),
};

/**
 * Records a successful call in one atomic statement: the attempt (only if still running), the
 * invocation outcome (only if not ended, and only if the attempt was recorded), the receipt for the
 * invocation's price, and, when asked, the listing's runtime proof (last_success_at, refreshed at most
 * once a minute). Answers the invocation's summary as the statement left it — the row
 * findInvocationSummary reads, without a second round trip — or undefined when another run had already
 * ended it. Strict, that last case fails the statement instead (refuse_unless, ENDED_ELSEWHERE), writing
 * nothing: for a record sent in one flight with the capture that follows it (run-invocation.ts).
 */
export async function recordSuccess(
  q: Db,
  s: SuccessRecord,
  options: { strict?: boolean } = {},
): Promise<InvocationSummary | undefined> {
  const text = options.strict
    ? s.proveListing
      ? SUCCESS_SQL.strictProving
      : SUCCESS_SQL.strictPlain
    : s.proveListing
      ? SUCCESS_SQL.proving
      : SUCCESS_SQL.plain;
  const result = await preparedRaw(q, text, [
    s.httpStatus,
    s.latencyMs,
    s.attemptId,
    JSON.stringify(s.output ?? null),
    s.listingId,
    s.invocationId,
    s.receiptId ?? null,
    s.listingId,
    s.amountMicros.toString(),
    JSON.stringify(s.evidence),
    ...(s.proveListing ? [s.listingId] : []),
    s.latencyMs,
  ]);
  return result.rows[0] as InvocationSummary | undefined;
}

/**
 * recordSuccesses' text: recordSuccess for several records, each proving its listing when asked
 * (SUCCESSES_SQL exported for the plan test); strict, the statement fails (ENDED_ELSEWHERE) unless every
 * record was written. The records' attempt and invocation ids come twice, in the document and
 * as arrays: a pooled connection plans this named statement once and keeps that plan, and PostgreSQL
 * costs the document at 100 rows whatever it holds. Joined on the document alone, a plan made while
 * the tables were small read `invocation_attempts` whole for every group, ever after (docs/benchmarks.md
 * "Soak"). `id = any(ids)` is planned as a lookup of those ids in the primary key on any table past
 * about 2,000 rows (test/routing/grouped-success-plan.test.ts); below that a scan is cheap, and
 * autovacuum analyses the table again as it grows.
 */
function successesSql(strict: boolean): string {
  return `with v as (
       select * from jsonb_to_recordset(?::jsonb) as v(
         attempt_id uuid, invocation_id uuid, listing_id uuid, amount_micros bigint, output jsonb,
         http_status int, latency_ms int, evidence jsonb, prove boolean, receipt_id uuid)
     ), att as (
       update invocation_attempts a
          set status = 'succeeded', http_status = v.http_status, latency_ms = v.latency_ms, finished_at = now()
         from v
        where a.id = any(?::uuid[]) and a.id = v.attempt_id and a.status = 'running'
       returning a.id
     ), inv as (
       update invocations i
          set status = 'succeeded', output = coalesce(v.output, 'null'::jsonb), completed_at = now(),
              served_listing_id = v.listing_id
         from v
        where i.id = any(?::uuid[]) and i.id = v.invocation_id and i.status in ('queued', 'running')
          and v.attempt_id in (select id from att)
       returning i.*
     ), rec as (
       insert into receipts (id, invocation_id, agent_id, listing_id, amount_micros, currency, provider_evidence)
       select coalesce(v.receipt_id, time_ordered_uuid()), inv.id, inv.agent_id, v.listing_id, v.amount_micros, inv.currency, v.evidence
         from inv join v on v.invocation_id = inv.id
       returning id, invocation_id, amount_micros
     ), proof as (
       update listings set last_success_at = now()
        where id in (select v.listing_id from v join inv on inv.id = v.invocation_id where v.prove)
          and (last_success_at is null or last_success_at < now() - interval '1 minute')
     )
     ${strictly(
       `select inv.*, rec.id as receipt_id, rec.amount_micros as receipt_amount_micros,
            l.name as listing_name, l.slug as listing_slug,
            (select count(*)::int from invocation_attempts a where a.invocation_id = inv.id) as attempt_count,
            v.latency_ms as served_latency_ms
       from inv join rec on rec.invocation_id = inv.id join v on v.invocation_id = inv.id
       left join listings l on l.id = inv.served_listing_id`,
       "(select count(*) from rec) = (select count(*) from v)",
       strict ? ENDED_ELSEWHERE : undefined,
     )}`;
}
export const SUCCESSES_SQL = successesSql(false);
const STRICT_SUCCESSES_SQL = successesSql(true);

/**
 * recordSuccess for several records in one statement (group commit: see shared/db/group-commit.ts), each
 * with recordSuccess's conditions. Answers per record, in order; undefined where another run had already
 * ended the invocation; strict, that fails the statement instead, writing nothing (for records sent in one
 * flight with the captures that follow them: run-invocation.ts PAID_SUCCESSES). The records must be
 * of distinct invocations.
 */
export async function recordSuccesses(
  q: Db,
  records: readonly SuccessRecord[],
  options: { strict?: boolean } = {},
): Promise<(InvocationSummary | undefined)[]> {
  if (new Set(records.map((s) => s.invocationId)).size !== records.length)
    throw new Error("recordSuccesses: an invocation appears twice");
  const body = JSON.stringify(
    records.map((s) => ({
      attempt_id: s.attemptId,
      invocation_id: s.invocationId,
      listing_id: s.listingId,
      amount_micros: s.amountMicros.toString(),
      // The recordset reads JSON null as SQL NULL; the statement writes it back as recordSuccess does.
      output: s.output ?? null,
      http_status: s.httpStatus,
      latency_ms: s.latencyMs,
      evidence: s.evidence,
      prove: s.proveListing,
      receipt_id: s.receiptId ?? null,
    })),
  );
  const result = await preparedRaw(q, options.strict ? STRICT_SUCCESSES_SQL : SUCCESSES_SQL, [
    body,
    records.map((s) => s.attemptId),
    records.map((s) => s.invocationId),
  ]);
  const byId = new Map<string, InvocationSummary>();
  for (const r of result.rows) byId.set(r.id, r);
  return records.map((s) => byId.get(s.invocationId));
}
