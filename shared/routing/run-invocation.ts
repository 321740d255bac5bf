import type { Knex } from "knex";
import { ROUTER_MAX_ATTEMPTS } from "../catalog/index.js";
import { GroupCommit, HOT_PATH_GROUPS } from "../db/group-commit.js";
import { db } from "../db/knex.js";
import { sentAhead } from "../db/pipeline.js";
import { refusedAs } from "../db/refusals.js";
import { returnDailySpend, settleDailySpend, settleDailySpendTogether } from "../identity/index.js";
import { newTimeOrderedId } from "../kernel/ids.js";
import { micros } from "../kernel/money.js";
import { retryTransient } from "../money/index.js";
import { providerAttempts } from "../observability/metrics.js";
import type { QueuePayload } from "../queues.js";
import { type CallGate, openCall, releaseEarlyGate } from "./call-gate.js";
import { offerCompletion } from "./completions.js";
import type { LimitedListing } from "./listing-limits.js";
import { type PaidWriteKind, writePaid } from "./paid-group.js";
import { chargeMicros, type PaidSuccess, releaseForFailure, settleSuccess } from "./paid-invocations.js";
import {
  callProvider,
  MAX_PROVIDER_LATENCY_MS,
  type ProviderResult,
  type SignedRequest,
  signRequest,
} from "./provider-call.js";
import type { EarlyStart } from "./runs-here.js";
import { runtimeProofDue, runtimeProofRecorded } from "./runtime-proof.js";
import {
  type AttemptSnapshot,
  abandonExpiredAttempts,
  type CallTarget,
  claimRun,
  ENDED_ELSEWHERE,
  finishAttempt,
  finishInvocation,
  type InvocationError,
  type InvocationSummary,
  insertAttempt,
  type RunClaim,
  recordSuccess,
  recordSuccesses,
  type SuccessRecord,
} from "./store/invocations.js";

// Running one invocation to its end, as the executions worker does for each job (docs/routing.md): the
// order of candidates, fallback and retry, per-listing limits and the circuit breaker, and the
// transactions that record the outcome with its money. The worker shell (workers/executions.ts) only
// validates the job, delays a run that would overlap a live one, and composes this with the x402 edge.

/**
 * How an invocation paid at the x402 edge (no ledger hold) settles. The x402 context implements it; it
 * sits above routing, so the executions worker passes it in rather than routing importing it.
 */
export interface EdgeSettlement {
  /** True when the payment would lapse before a call of callMs and its settlement: do not call. */
  tooLateToCall(invocationId: string, callMs: number): Promise<boolean>;
  /** In the success transaction: records the served call; answers the payment id to settle, if any. */
  recordServed(
    trx: Knex.Transaction,
    invocationId: string,
    call: {
      attemptId: string;
      receiptId: string;
      listingId: string;
      providerEvidence: Record<string, unknown>;
    },
  ): Promise<string | undefined>;
  /** After that commit: hands the payment to settlement. */
  settleAfterCommit(paymentId: string): Promise<void>;
  /** In the failure transaction: voids the payment of a failed invocation. */
  recordFailed(trx: Knex.Transaction, invocationId: string, error: InvocationError): Promise<void>;
}

/** retry_policy.max_attempts (spec "Limits"): the number the listing record advertises, one source. */
export const MAX_ATTEMPTS = ROUTER_MAX_ATTEMPTS;

/** Time after a call's own timeout for its worker to record the result before the attempt expires. */
export const ATTEMPT_MARGIN_MS = 2000;

/** How attempt deadlines are set when a run is claimed (by the worker, or by the submitting insert). */
export const RUN_TIMING = { maxCallMs: MAX_PROVIDER_LATENCY_MS, marginMs: ATTEMPT_MARGIN_MS };

export type ExecutionOutcome = "succeeded" | "failed" | "already_finished";

/**
 * Another run of the same invocation has a call in flight (BullMQ delivers at least once). This run must
 * not call the provider; it retries once the live attempt's deadline has passed.
 */
export class RunInProgress extends Error {
  constructor(readonly retryAt: Date) {
    super("another run of this invocation has a call in flight");
  }
}

/** A paid success's strict record found the invocation already ended by another run: its flight rolls back. */
class EndedElsewhere extends Error {
  constructor() {
    super("another run already ended this invocation");
  }
}

/**
 * Ends an invocation as failed, once. When money was held for it, the hold is released with its refund
 * evidence, and its key's daily reservation returned, in the same transaction: a failed call never
 * charges or counts against a cap.
 */
export async function failInvocation(
  invocationId: string,
  error: LastFailure,
  edge: EdgeSettlement,
): Promise<ExecutionOutcome> {
  const recorded = {
    code: error.code,
    message: error.message,
    ...(error.retryAfterSeconds ? { retry_after_seconds: error.retryAfterSeconds } : {}),
  };
  const finished = await retryTransient(() =>
    db().transaction(async (trx) => {
      const row = await finishInvocation(trx, invocationId, { status: "failed", error: recorded });
      const held = row ? micros(row.hold_micros) : 0n;
      if (row && held > 0n) {
        // Nothing follows the release of a buyer's hold here (an edge payment has no hold): its COMMIT
        // goes with its write.
        await releaseForFailure(trx, row, held, recorded, {
          withWrite: () => returnDailySpend(trx, row.id),
          last: row.agent_id !== null,
        });
      }
      // An x402 call that failed is never settled: its payment is voided with that evidence.
      if (row && row.agent_id === null) await edge.recordFailed(trx, row.id, recorded);
      return row;
    }),
  );
  return finished ? "failed" : "already_finished";
}

/** Free successes, grouped when they arrive together (group-commit.ts): each is final on its own. */
const freeSuccesses = new GroupCommit<SuccessRecord, InvocationSummary | undefined>(
  { one: (s) => recordSuccess(db(), s), many: (records) => recordSuccesses(db(), records) },
  { ...HOT_PATH_GROUPS, name: "free_successes" },
);

/**
 * Records a successful call: the attempt, outcome and receipt in one statement; for paid work, in the
 * same transaction, the capture of the serving listing's price and the evidence rows.
 */
async function succeed(
  invocation: RunClaim["invocation"],
  target: CallTarget,
  attemptId: string,
  result: Extract<ProviderResult, { ok: true }>,
  edge: EdgeSettlement,
): Promise<ExecutionOutcome> {
  const price = chargeMicros(invocation, micros(target.price_micros));
  const record = {
    attemptId,
    invocationId: invocation.id,
    listingId: target.id,
    amountMicros: price,
    output: result.output,
    httpStatus: result.evidence.http_status,
    latencyMs: result.evidence.latency_ms,
    evidence: { ...result.evidence, listing_id: target.id, provider_name: target.name },
    proveListing: runtimeProofDue(target.id),
  };
  const recorded = (receiptId: string | null | undefined) => {
    if (receiptId && record.proveListing) runtimeProofRecorded(target.id);
  };
  const held = micros(invocation.hold_micros);
  if (invocation.route !== "x402" && held === 0n) {
    // Free work: one autocommitted statement, whose summary is final and may answer a local waiter.
    const summary = await freeSuccesses.write(record);
    recorded(summary?.receipt_id);
    if (!summary) return "already_finished";
    offerCompletion(summary);
    return "succeeded";
  }
  let edgePaymentId: string | undefined;
  /** The summary of the ledger-paid transaction that committed, for a local waiter (completions.ts). */
  let paidSummary: InvocationSummary | undefined;
  const receiptId =
    invocation.route === "x402"
      ? // Paid on chain, not from a hold: the settlement is queued in the same transaction as the result.
        await retryTransient(() =>
          db().transaction(async (trx) => {
            const id = (await recordSuccess(trx, record))?.receipt_id;
            if (id) {
              edgePaymentId = await edge.recordServed(trx, invocation.id, {
                attemptId,
                receiptId: id,
                listingId: target.id,
                providerEvidence: { ...result.evidence },
              });
            }
            return id;
          }),
        )
      : await writePaid(PAID_SUCCESSES, {
          record,
          paid: {
            invocation,
            attemptId,
            listingId: target.id,
            sellerAgentId: target.seller_id,
            priceMicros: price,
            holdMicros: held,
            providerEvidence: { ...result.evidence },
          },
        }).then((committed) => {
          paidSummary = committed?.summary;
          return committed?.receiptId;
        });
  recorded(receiptId);
  // Offered once the transaction has committed (a failed commit throws before this line).
  if (paidSummary) offerCompletion(paidSummary);
  if (edgePaymentId) await edge.settleAfterCommit(edgePaymentId);
  return receiptId ? "succeeded" : "already_finished";
}

/** A ledger-paid success to record: the attempt's record, and what its capture or release needs. */
interface PaidSuccessWrite {
  record: SuccessRecord;
  paid: Omit<PaidSuccess, "receiptId" | "before" | "withWrite" | "last" | "oneFlight">;
}

/** A committed paid success: its receipt, and the summary its record committed. */
interface PaidCommit {
  receiptId: string;
  summary: InvocationSummary;
}

/**
 * A ledger-paid success: its record and its capture (or release) in one transaction, in one flight: the
 * record, the capture's lock and write, the key's day of spend and the COMMIT go out together, and the
 * transaction waits for no answer in between (PostTransactionInput.oneFlight; docs/benchmarks.md "The
 * twenty-third round"). The receipt is named here so that the capture can be asked for before the record
 * answers. The record is strict: when another run had already ended the invocation it fails, and the
 * whole flight rolls back with it; then this attempt's success is recorded alone (its outcome and money
 * are the other run's), as the record does outside a transaction. Answers the receipt and the summary
 * the record committed, or undefined then.
 */
async function recordPaidSuccess({ record, paid }: PaidSuccessWrite): Promise<PaidCommit | undefined> {
  try {
    return await retryTransient(() =>
      db().transaction(async (trx) => {
        const receiptId = newTimeOrderedId();
        const recording = recordSuccess(trx, { ...record, receiptId }, { strict: true });
        const ended = sentAhead(recording.catch(refusedAs(ENDED_ELSEWHERE, () => new EndedElsewhere())));
        await settleSuccess(trx, {
          ...paid,
          receiptId,
          before: ended,
          withWrite: () => settleDailySpend(trx, paid.invocation.id, paid.priceMicros),
          // Nothing follows the capture here: its COMMIT goes with its write, in the record's flight.
          last: true,
          oneFlight: true,
        });
        // A strict record that did not fail answered its summary.
        return { receiptId, summary: (await recording)! };
      }),
    );
  } catch (error) {
    if (!(error instanceof EndedElsewhere)) throw error;
    await recordSuccess(db(), record);
    return undefined;
  }
}

/**
 * Ledger-paid successes, grouped when they arrive together, with paid claims too (paid-group.ts;
 * docs/benchmarks.md "The twenty-ninth round" and "The fortieth round"): a lone success, and each success
 * of a group that failed, is recorded alone (recordPaidSuccess). In a group, their share of its one
 * transaction and flight: their records in one strict statement ahead (docs/benchmarks.md "The
 * thirty-second round"), their captures or releases in the group's ledger write, and the keys' days of
 * spend in one statement after it. On any failure of the group (a run that another ended, a capture the
 * one-flight write declines, a deadlock) nothing is written, and each success alone answers it.
 */
const PAID_SUCCESSES: PaidWriteKind<PaidSuccessWrite, PaidCommit | undefined> = {
  alone: recordPaidSuccess,
  share(trx, writes) {
    if (new Set(writes.map((w) => w.record.invocationId)).size !== writes.length)
      throw new Error("paid successes: an invocation appears twice");
    const receiptIds = writes.map(() => newTimeOrderedId());
    const recorded = sentAhead(
      recordSuccesses(
        trx,
        writes.map((w, i) => ({ ...w.record, receiptId: receiptIds[i] })),
        { strict: true },
      ),
    );
    return {
      ahead: recorded,
      successes: writes.map(({ paid }, i) => ({ ...paid, receiptId: receiptIds[i]! })),
      withWrites: () =>
        settleDailySpendTogether(
          trx,
          writes.map(({ paid }) => ({ invocationId: paid.invocation.id, capturedMicros: paid.priceMicros })),
        ),
      // Strict records that did not fail answered their summaries.
      answers: async () =>
        (await recorded).map((summary, i) => ({ receiptId: receiptIds[i]!, summary: summary! })),
    };
  },
};

function callTimeoutMs(listing: Pick<CallTarget, "max_latency_ms">): number {
  return Math.min(listing.max_latency_ms, MAX_PROVIDER_LATENCY_MS);
}

/** What the call gate needs of a listing: its limits, and its latency cap for how long a slot is held. */
type GateTarget = LimitedListing & Pick<CallTarget, "max_latency_ms">;

/** Asks the call gate for a listing, for as long as one call to it and its record may take. */
function openCallTo(listing: GateTarget): Promise<CallGate> {
  return openCall(listing, callTimeoutMs(listing) + ATTEMPT_MARGIN_MS);
}

/**
 * Resolves once the PostgreSQL statement started in this turn of the event loop has gone out (the claim's
 * insert, the outcome's record), for the work that overlaps it (a call-gate script, signing attempt 1's
 * request): the statement's round trip is the longer one, so it starts first, and that work no longer
 * delays it. The statement is written within this turn (the pool hands out an idle connection through
 * promises only), and setImmediate runs after it; a trace of the service's writes shows the order
 * (docs/benchmarks.md "The eleventh round").
 */
function statementSent(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Opens the early gate (call-gate.ts) for a run's first candidate, for as long as its call and record may
 * take, and, given the run's invocation id and input, signs attempt 1's request to that candidate
 * meanwhile (the input is the request's, in its own key order, not read back from PostgreSQL's jsonb).
 * `gate: false` only signs (a signature costs nothing unused): for a transaction, whose gate is asked
 * after its commit. A failure of either is the run's to meet when it uses them, never an unhandled
 * rejection.
 */
export function openEarlyGate(
  listing: GateTarget,
  run?: { invocationId: string; input: unknown },
  ask: { gate: boolean } = { gate: true },
): EarlyStart {
  const sent = statementSent();
  const gate = ask.gate ? sent.then(() => openCallTo(listing)) : undefined;
  gate?.catch(() => {});
  if (!run) return { listingId: listing.id, gate };
  const request = sent.then(() => signRequest(run.invocationId, listing.id, 1, run.input));
  request.catch(() => {});
  return { listingId: listing.id, gate, request };
}

/** Inserts the next attempt, or throws RunInProgress when a concurrent run took that number first. */
async function startAttempt(invocationId: string, attemptNo: number, listing: CallTarget) {
  try {
    return await insertAttempt(
      db(),
      { invocation_id: invocationId, attempt_no: attemptNo, listing_id: listing.id },
      callTimeoutMs(listing) + ATTEMPT_MARGIN_MS,
    );
  } catch (error) {
    if ((error as { code?: string }).code === "23505") {
      throw new RunInProgress(new Date(Date.now() + callTimeoutMs(listing) + ATTEMPT_MARGIN_MS));
    }
    throw error;
  }
}

/** Provider calls made so far, per listing: abandoned and running attempts may have reached it. */
function callsByListing(attempts: AttemptSnapshot[]): Map<string, number> {
  const calls = new Map<string, number>();
  for (const a of attempts) {
    if (a.status !== "skipped") calls.set(a.listing_id, (calls.get(a.listing_id) ?? 0) + 1);
  }
  return calls;
}

/**
 * The next candidate to call: the best-ranked one not called yet (fallback), else the best-ranked
 * safe_to_retry one (retry). A listing that is not safe_to_retry is never called twice; one refused by a
 * limit in this run, or retired since submission, is passed over.
 */
export function nextTarget(
  candidates: CallTarget[],
  calls: Map<string, number>,
  passedOver: Set<string>,
): CallTarget | undefined {
  const usable = candidates.filter((c) => c.status === "active" && !passedOver.has(c.id));
  return usable.find((c) => !calls.has(c.id)) ?? usable.find((c) => c.safe_to_retry);
}

export interface LastFailure {
  code: string;
  message: string;
  retryAfterSeconds?: number;
}

/**
 * Runs one invocation to its end: marks it running, waits out any attempt another run still has in
 * flight, closes attempts of dead workers as abandoned, then calls candidates in rank order (fallback
 * for execute; one listing for direct invoke) — at most MAX_ATTEMPTS calls, never a second call to a
 * listing that is not safe_to_retry, and only within each listing's rate and concurrency limits. Success
 * records the attempt, the outcome and the receipt (for the listing that served) in one statement. Safe
 * to run again, or twice at once, for the same id. `claimed` is a claim the submitting insert already made
 * (insertClaimedInvocation, for a run in the submitting process): the run starts from it, and `early` is
 * the call gate asked for its first candidate meanwhile, with attempt 1's request signed (EarlyStart); the
 * gate is given back if the run does not use it.
 */
export async function runInvocation(
  payload: QueuePayload<"executions">,
  edge: EdgeSettlement,
  claimed?: RunClaim,
  early?: EarlyStart,
): Promise<ExecutionOutcome> {
  const first = early ? { early, taken: false } : undefined;
  try {
    return await runClaimed(payload, edge, claimed, first);
  } finally {
    if (first && !first.taken) await releaseEarlyGate(first.early);
  }
}

async function runClaimed(
  payload: QueuePayload<"executions">,
  edge: EdgeSettlement,
  claimed: RunClaim | undefined,
  first: { early: EarlyStart; taken: boolean } | undefined,
): Promise<ExecutionOutcome> {
  const claim = claimed ?? (await claimRun(db(), payload.invocation_id, RUN_TIMING));
  if (!claim) return "already_finished";
  const { invocation, candidates, attempts, firstAttempt } = claim;
  if (candidates.length === 0)
    return failInvocation(
      invocation.id,
      { code: "LISTING_NOT_FOUND", message: "no candidate listing remains" },
      edge,
    );
  // No attempt existed, yet another run recorded attempt 1 in the same instant: its call is in flight.
  if (attempts.length === 0 && !firstAttempt) {
    throw new RunInProgress(new Date(Date.now() + callTimeoutMs(candidates[0]!) + ATTEMPT_MARGIN_MS));
  }
  const live = attempts.find((a) => a.live);
  if (live) throw new RunInProgress(live.deadline_at ?? new Date(Date.now() + ATTEMPT_MARGIN_MS));
  if (attempts.some((a) => a.status === "running")) await abandonExpiredAttempts(db(), invocation.id);

  const calls = callsByListing(attempts);
  const passedOver = new Set<string>();
  let callsMade = [...calls.values()].reduce((n, c) => n + c, 0);
  let attemptNo = attempts.length;
  let reserved = firstAttempt;
  let last: LastFailure | undefined;
  while (callsMade < MAX_ATTEMPTS) {
    const target = reserved ? candidates[0]! : nextTarget(candidates, calls, passedOver);
    if (!target) break;
    const attempt = reserved ?? (await startAttempt(invocation.id, attemptNo + 1, target));
    attemptNo = reserved ? 1 : attemptNo + 1;
    reserved = null;
    if (target.status !== "active") {
      passedOver.add(target.id);
      await skipAttempt(attempt.id, "LISTING_NOT_INVOCABLE", "not called: the listing was retired");
      continue;
    }
    if (invocation.route === "x402" && (await edge.tooLateToCall(invocation.id, callTimeoutMs(target)))) {
      last = {
        code: "TIMEOUT",
        message:
          "not called: the x402 payment authorization lapses before a settlement could be submitted; nothing is charged",
      };
      await skipAttempt(attempt.id, "TIMEOUT", last.message);
      break;
    }
    let gate: CallGate;
    let signed: Promise<SignedRequest> | undefined;
    if (first && !first.taken && first.early.listingId === target.id) {
      first.taken = true;
      gate = await (first.early.gate ?? openCallTo(target));
      signed = first.early.request;
    } else {
      gate = await openCallTo(target);
    }
    if (!gate.ok) {
      passedOver.add(target.id);
      last =
        gate.reason === "circuit_open"
          ? {
              code: "PROVIDER_UNAVAILABLE",
              message: "not called: the listing's circuit is open after repeated failures",
            }
          : {
              code: "RATE_LIMITED",
              message: `not called: the listing's ${gate.reason.replace("_", " ")} was reached`,
              retryAfterSeconds: gate.retryAfterSeconds,
            };
      await skipAttempt(attempt.id, last.code, last.message);
      continue;
    }
    calls.set(target.id, (calls.get(target.id) ?? 0) + 1);
    callsMade += 1;
    let result: ProviderResult;
    try {
      result = await callProvider(target, invocation, attemptNo, signed);
    } catch (error) {
      await gate.finish(null);
      throw error;
    }
    // The outcome label is "succeeded" or an error code of the table: a bounded set.
    providerAttempts.inc({ outcome: result.ok ? "succeeded" : result.code });
    // One round trip frees the slot and tells the breaker how the call went; the outcome's record does
    // not wait for it, and a success's record goes out first.
    if (result.ok) {
      const recorded = succeed(invocation, target, attempt.id, result, edge);
      const finished = statementSent().then(() => gate.finish(true));
      const [outcome] = await Promise.all([recorded, finished]);
      return outcome;
    }
    await gate.finish(false);
    last = { code: result.code, message: result.message };
    const recorded = await finishAttempt(db(), attempt.id, {
      status: "failed",
      error_code: result.code,
      error_message: result.message,
      http_status: result.httpStatus,
      latency_ms: result.latencyMs,
    });
    if (!recorded) break;
    // A short pause only before calling the same listing again; a fallback to another one goes at once.
    const next = nextTarget(candidates, calls, passedOver);
    if (next?.id === target.id) await new Promise((resolve) => setTimeout(resolve, 50 * callsMade));
  }
  return failInvocation(
    invocation.id,
    last ?? {
      code: "PROVIDER_FAILED",
      message:
        "no candidate may be called again: calls were already made and the providers are not safe to retry",
    },
    edge,
  );
}

async function skipAttempt(attemptId: string, code: string, message: string): Promise<void> {
  await finishAttempt(db(), attemptId, {
    status: "skipped",
    error_code: code,
    error_message: message,
    http_status: null,
    latency_ms: null,
  });
}
