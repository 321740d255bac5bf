import {
  CATALOG_MOVED,
  catalogUnmoved,
  checkListingInput,
  type ListingRow,
  requireListing,
} from "../catalog/index.js";
import { getConfig } from "../config.js";
import { GroupCommit, HOT_PATH_GROUPS } from "../db/group-commit.js";
import { type Db, db } from "../db/knex.js";
import { inOneFlight, sentAhead } from "../db/pipeline.js";
import { refusedAs } from "../db/refusals.js";
import { AppError, paidExecutionUnavailable } from "../errors.js";
import {
  assertWithinSpendLimits,
  DailyCapFull,
  dailyCapRefusal,
  isScopeExclusion,
  type Principal,
  reserveDailySpend,
  reserveDailySpendTogether,
  SPEND_DAY_STAMP,
  scopeBlocked,
  scopeExclusion,
  scopesExcludeTask,
  withinPerCallLimit,
} from "../identity/index.js";
import { newTimeOrderedId } from "../kernel/ids.js";
import { inputMatches } from "../kernel/json-schema.js";
import { formatUsdc, micros, parseUsdc } from "../kernel/money.js";
import { logger } from "../log.js";
import {
  assertCustodyOpen,
  isCustodyFrozenRefusal,
  paidGate,
  paidGateProvedByHold,
  retryTransient,
} from "../money/index.js";
import { markJobSent } from "../outbox/index.js";
import { enqueue, type JobWatch, timedWatch, watchJob } from "../queues.js";
import { needsApproval, requestApproval } from "./approvals/approvals.js";
import { releaseEarlyGate } from "./call-gate.js";
import { openCircuits } from "./circuits.js";
import { takeCompletion } from "./completions.js";
import { fingerprint, resolveReplay } from "./idempotency.js";
import { type PaidWriteKind, writePaid } from "./paid-group.js";
import { type HoldTerms, holdForInvocation, type InvocationHold } from "./paid-invocations.js";
import { notInvocable, quoteNotUsable, quoteToPay } from "./quotes.js";
import {
  type Candidate,
  candidateView,
  type Ranking,
  rankCandidates,
  readTaskListings,
  type TaskRead,
} from "./router.js";
import { openEarlyGate, RUN_TIMING } from "./run-invocation.js";
import { type EarlyStart, type RunSlot, reserveRunHere } from "./runs-here.js";
import { assertNotOnlyOwnListings, assertNotOwnListing } from "./self-dealing.js";
import { insertAwaitingInvocation } from "./store/approvals.js";
import { claimIdempotencyKey, findIdempotencyClaim, KEY_CLAIMED } from "./store/idempotency.js";
import {
  callTargetOf,
  claimsShareColumns,
  findInvocation,
  findInvocationSummary,
  type InvocationRow,
  type InvocationSummary,
  insertClaimedInvocation,
  insertClaimedInvocations,
  insertInvocationWithJob,
  type NewInvocation,
  type ProvedCandidates,
  type ProvedClaim,
  type RunClaim,
} from "./store/invocations.js";
import { findQuote, QUOTE_NOT_USABLE, type QuoteRow, useQuoteStrictly } from "./store/quotes.js";

/** The router keeps at most this many candidates per invocation (the chosen one and its fallbacks). */
export const MAX_CANDIDATES = 3;

export interface ExecuteRequest {
  task: string;
  input: Record<string, unknown>;
  maxCostUsdc?: number;
  idempotencyKey?: string;
  /** A ledger quote (POST /api/quotes): locks the quoted listing and charges the quoted price. */
  quoteId?: string;
  /** The task's listings, already being read (readTaskListings, from the route's prefetch). */
  taskListings?: TaskRead;
  /**
   * Read the paid gate afresh instead of taking this process's kept reading (paidGateProvedByHold): set
   * when a hold ranked on a kept reading found custody frozen since.
   */
  freshGate?: boolean;
}

export interface InvokeRequest {
  input: Record<string, unknown>;
  maxCostUsdc?: number;
  idempotencyKey?: string;
  /** A ledger quote for this listing: its price is held and charged. */
  quoteId?: string;
}

export type Submission =
  | { replayed: false; invocation: InvocationRow; completion: JobWatch | undefined }
  | { replayed: true; invocation: InvocationRow };

/**
 * The key's claim failed: a live claim holds it (claimIdempotencyKey). The transaction rolled
 * back; the claim is read after, and the request replays it.
 */
class KeyAlreadyClaimed extends Error {
  constructor() {
    super("idempotency key already claimed");
  }
}

/** The quote's use failed: it was used, or has expired (useQuoteStrictly). Read after the rollback, to say which. */
class QuoteRefused extends Error {
  constructor(readonly quoteId: string) {
    super("the quote cannot be used");
  }
}

function maxCost(usdc: number | undefined, path: string): bigint | null {
  return usdc === undefined ? null : parseUsdc(usdc, path);
}

/**
 * No eligible candidate: 503 when the gate is what stands in the way, 403 when the key's scopes are, else
 * 404 with the reasons.
 */
function noCandidate(task: string, ranking: Ranking): AppError {
  const gate = ranking.gate;
  if (gate && !gate.enabled && ranking.excluded.some((e) => e.reason === "paid_execution_unavailable")) {
    return paidExecutionUnavailable(gate.reason ?? "paid_execution_disabled");
  }
  if (ranking.excluded.some((e) => isScopeExclusion(e.reason)))
    return scopesExcludeTask(task, ranking.excluded);
  return new AppError("LISTING_NOT_FOUND", `no eligible listing answers to task "${task}"`, {
    task,
    excluded: ranking.excluded.map((e) => ({ listing_id: e.listing.id, reason: e.reason })),
    hint: "call GET /api/execute/match to see candidates, or use task 'echo' for the free check",
  });
}

/**
 * Accepts an execute request: ranks the listings answering to the task, validates the input against
 * the top one's schema, keeps up to MAX_CANDIDATES-1 fallbacks whose schemas also accept it, and
 * creates the invocation (see createInvocation).
 *
 * Listings this process kept from an earlier read (TaskRead.generation) are acted on only if the insert
 * that creates the invocation proves them current; a moved catalog (CatalogMoved) and anything the copy
 * refused are decided again on a fresh read, so an answer never rests on an unproved copy.
 */
export async function submitExecution(
  principal: Principal,
  req: ExecuteRequest,
  requestId: string,
): Promise<Submission> {
  if (req.quoteId) return submitQuotedExecution(principal, req, requestId);
  try {
    return await submitRankedExecution(principal, req, requestId);
  } catch (error) {
    // Ranked on a kept gate reading, the hold found custody frozen and wrote nothing: the execute is
    // decided again on a fresh reading, which leaves paid listings out (a free one may still serve).
    // A frozen 503 that came from a fresh reading is decided again too, once, and answers the same:
    // the cost of not telling the two apart falls only while custody is frozen.
    if (req.freshGate || !isCustodyFrozenRefusal(error)) throw error;
    return submitExecution(principal, { ...req, freshGate: true }, requestId);
  }
}

async function submitRankedExecution(
  principal: Principal,
  req: ExecuteRequest,
  requestId: string,
): Promise<Submission> {
  const generation = req.taskListings?.generation;
  if (generation === undefined)
    return createInvocation(principal, await rankedWork(principal, req), requestId);
  const again = () =>
    submitRankedExecution(
      principal,
      { ...req, taskListings: readTaskListings(req.task, { fresh: true }) },
      requestId,
    );
  let work: NewWork;
  try {
    work = await rankedWork(principal, req);
  } catch (error) {
    if (error instanceof AppError) return again();
    throw error;
  }
  try {
    return await createInvocation(principal, { ...work, kept: generation }, requestId);
  } catch (error) {
    if (error instanceof CatalogMoved) return again();
    throw error;
  }
}

/** What an execute request would create: its ranked candidates and the checks made on them. */
async function rankedWork(principal: Principal, req: ExecuteRequest): Promise<NewWork> {
  const maxCostMicros = maxCost(req.maxCostUsdc, "/constraints/max_cost");
  const policy = principal.policy;
  // A kept gate reading is proved by the hold's own custody check (paidGateProvedByHold).
  const gate = req.freshGate ? paidGate : paidGateProvedByHold;
  const ranking = await rankCandidates(req.task, maxCostMicros, gate, openCircuits, {
    policy,
    buyerAgentId: principal.agentId,
    read: req.taskListings,
  });
  const chosen = ranking.eligible[0];
  assertNotOnlyOwnListings(req.task, ranking);
  if (!chosen) throw noCandidate(req.task, ranking);
  checkListingInput(chosen.listing, req.input);
  // A fallback dearer than the key's per-call limit could never be charged: it is not kept.
  const fallbacks = ranking.eligible
    .slice(1)
    .filter((c) => inputMatches(c.listing, req.input))
    .filter((c) => withinPerCallLimit(policy, micros(c.listing.price_micros)))
    .slice(0, MAX_CANDIDATES - 1);
  const candidates: Candidate[] = [chosen, ...fallbacks];
  await assertWithinSpendLimits(principal, highestPrice(candidates.map((c) => c.listing)));
  return {
    route: "execute",
    task: req.task,
    input: req.input,
    listing: chosen.listing,
    candidateListings: candidates.map((c) => c.listing),
    holdMicros: highestPrice(candidates.map((c) => c.listing)),
    selection: {
      strategy: "ranked_with_fallback",
      reason: "highest score among eligible listings for the task (docs/routing.md)",
      candidates: candidates.map((c, i) => candidateView(c, i + 1)),
      excluded: ranking.excluded.map((e) => ({ listing_id: e.listing.id, reason: e.reason })),
    },
    maxCostMicros,
    idempotencyKey: req.idempotencyKey,
    operation: "POST /api/execute",
    fingerprintPayload: { task: req.task, input: req.input, max_cost: req.maxCostUsdc ?? null },
  };
}

/**
 * An execute that pays a ledger quote: the quote locks its listing and price, so the call goes to that
 * listing alone (no ranking, no fallback to listings at other prices). Its task must be the quote's.
 */
async function submitQuotedExecution(principal: Principal, req: ExecuteRequest, requestId: string) {
  const quote = await quoteToPay(principal, req.quoteId!, undefined, req.idempotencyKey !== undefined);
  if (quote.task !== req.task) {
    throw new AppError("QUOTE_NOT_USABLE", "this quote is for another task", {
      reason: "quote_task_mismatch",
      quote_id: quote.id,
      quoted_task: quote.task,
    });
  }
  const listing = await requireListing(quote.listing_id);
  return submitLocked(principal, listing, req, requestId, {
    route: "execute",
    quote,
    maxCostPath: "/constraints/max_cost",
    operation: "POST /api/execute",
    fingerprintPayload: {
      task: req.task,
      input: req.input,
      max_cost: req.maxCostUsdc ?? null,
      quote_id: quote.id,
    },
    selection: {
      strategy: "quoted",
      reason: "the quote locks its listing and price; no fallback",
      candidates: [],
    },
  });
}

/**
 * Accepts a direct invoke: locked to one listing, never falling back (retries of the same listing only
 * when it is safe_to_retry). Unknown → 404, not invocable → 422, paid while the gate is closed → 503. With
 * a ledger quote, the quoted price is held and charged (docs/api.md "Quotes").
 */
export async function submitInvoke(
  principal: Principal,
  listingId: string,
  req: InvokeRequest,
  requestId: string,
): Promise<Submission> {
  const listing = await requireListing(listingId);
  const quote = req.quoteId
    ? await quoteToPay(principal, req.quoteId, listing.id, req.idempotencyKey !== undefined)
    : undefined;
  return submitLocked(principal, listing, req, requestId, {
    route: "invoke",
    quote,
    maxCostPath: "/max_cost",
    operation: `POST /api/invoke/${listing.id}`,
    fingerprintPayload: {
      input: req.input,
      max_cost: req.maxCostUsdc ?? null,
      ...(quote ? { quote_id: quote.id } : {}),
    },
    selection: {
      strategy: "direct_invoke",
      reason: "locked to the requested listing; no fallback",
      candidates: [],
    },
  });
}

/** One listing, no fallback: the checks of a direct call, then the invocation. */
async function submitLocked(
  principal: Principal,
  listing: ListingRow,
  req: InvokeRequest,
  requestId: string,
  how: {
    route: "execute" | "invoke";
    quote: QuoteRow | undefined;
    maxCostPath: string;
    operation: string;
    fingerprintPayload: unknown;
    selection: Record<string, unknown>;
  },
): Promise<Submission> {
  assertNotOwnListing(principal, listing);
  const blocked = notInvocable(listing);
  if (blocked)
    throw new AppError("LISTING_NOT_INVOCABLE", `this listing cannot be invoked: ${blocked}`, {
      reason: blocked,
    });
  const scope = scopeExclusion(principal.policy, listing);
  if (scope) throw scopeBlocked(listing, scope);
  const maxCostMicros = maxCost(req.maxCostUsdc, how.maxCostPath);
  // A quote's price binds until it expires, whatever the listing costs now.
  const price = how.quote ? micros(how.quote.amount_micros) : micros(listing.price_micros);
  if (maxCostMicros !== null && price > maxCostMicros) {
    throw new AppError("LISTING_NOT_INVOCABLE", "the listing's price is above max_cost", {
      reason: "over_max_cost",
      price_usdc: formatUsdc(price),
      max_cost_usdc: formatUsdc(maxCostMicros),
    });
  }
  if (price > 0n) {
    // A kept reading: the hold re-checks custody, and a freeze since fails it with this same 503.
    const gate = await paidGateProvedByHold();
    if (!gate.enabled) throw paidExecutionUnavailable(gate.reason ?? "paid_execution_disabled");
    await assertWithinSpendLimits(principal, price);
  }
  checkListingInput(listing, req.input);
  return createInvocation(
    principal,
    {
      route: how.route,
      task: how.quote?.task ?? listing.slug,
      input: req.input,
      listing,
      candidateListings: [listing],
      holdMicros: price,
      priceMicros: price,
      quote: how.quote,
      selection: how.selection,
      maxCostMicros,
      idempotencyKey: req.idempotencyKey,
      operation: how.operation,
      fingerprintPayload: how.fingerprintPayload,
    },
    requestId,
  );
}

interface NewWork {
  route: "execute" | "invoke";
  task: string;
  input: Record<string, unknown>;
  listing: ListingRow;
  /** The candidates' rows, in rank order (what the claim calls when they are a proved copy). */
  candidateListings: ListingRow[];
  /** What to hold from the buyer: the highest candidate price (0 for free work). */
  holdMicros: bigint;
  /** The price recorded on the invocation: the quote's when one is paid, else the chosen listing's. */
  priceMicros?: bigint;
  /** The ledger quote paid, used up in the invocation's transaction. */
  quote?: QuoteRow;
  selection: Record<string, unknown>;
  maxCostMicros: bigint | null;
  idempotencyKey: string | undefined;
  operation: string;
  fingerprintPayload: unknown;
  /**
   * The catalog generation the listings were read at, when they are a kept copy: the insert writes
   * nothing unless the catalog is still at it, and CatalogMoved is thrown instead.
   */
  kept?: string;
}

/** The catalog moved since the kept listings an execute acted on were read: nothing was written. */
class CatalogMoved extends Error {
  constructor() {
    super("the catalog moved since the task's listings were read");
  }
}

/** The hold for a set of candidates: the dearest, so a fallback never needs a second hold. */
function highestPrice(listings: ListingRow[]): bigint {
  let highest = 0n;
  for (const l of listings) {
    const price = micros(l.price_micros);
    if (price > highest) highest = price;
  }
  return highest;
}

/**
 * Claims of free, unkeyed runs on proved copies, grouped when they arrive together (group-commit.ts):
 * the commonest write of a busy execute path.
 */
const provedClaims = new GroupCommit<ProvedClaim, RunClaim | undefined>(
  {
    one: (c) => insertClaimedInvocation(db(), c.row, RUN_TIMING, c.proved),
    many: (claims) => insertClaimedInvocations(db(), claims, RUN_TIMING),
  },
  { ...HOT_PATH_GROUPS, name: "proved_claims" },
);

/** A paid run to claim here, as the paid claims' group commit takes it. */
interface PaidClaim {
  /** Its own transaction, as createInvocation runs any (custody, insert, hold, daily reservation). */
  alone: () => Promise<RunClaim>;
  row: NewInvocation;
  proved: ProvedCandidates | undefined;
  /** Its hold (holdForInvocation); withWrite is the group's to give. */
  hold: Omit<InvocationHold, "withWrite">;
  /** The key whose daily spend reserves the hold, when spend limits govern it. */
  reserve: Principal | undefined;
}

/**
 * Paid runs claimed here with no key, quote or approval, grouped when they arrive together, with paid
 * successes too (paid-group.ts; docs/benchmarks.md "The twenty-ninth round" and "The fortieth round"): a
 * lone one, and each of a group that failed, runs its own transaction (`alone`). In a group, their share
 * of its one transaction and flight: the custody check (once) and the runs' strict inserts ahead, their
 * holds in the group's ledger write (one lock of every account it moves), and the keys' daily
 * reservations in one statement after it. On any failure of the group (a moved catalog, short funds, a
 * full daily cap, custody frozen, a hold the one-flight write declines) nothing is written, and each
 * claim's own transaction answers it.
 */
const PAID_CLAIMS: PaidWriteKind<PaidClaim, RunClaim> = {
  alone: (claim) => claim.alone(),
  share(trx, claims) {
    if (new Set(claims.map((c) => c.row.id)).size !== claims.length)
      throw new Error("paid claims: an invocation appears twice");
    const custody = assertCustodyOpen(trx);
    const ahead = sentAhead(inOneFlight(custody, insertPaidClaims(trx, claims)));
    // The keys' days of spend: one statement for the group (docs/benchmarks.md "The thirty-second round").
    const reservations = claims.flatMap((c) =>
      c.reserve ? [{ key: c.reserve, holdMicros: c.hold.holdMicros }] : [],
    );
    return {
      ahead,
      holds: claims.map((c) => c.hold),
      withWrites: reservations.length > 0 ? () => reserveDailySpendTogether(trx, reservations) : undefined,
      // A strict insert that did not fail claimed its run.
      answers: async () => (await ahead)[1].map((claim) => claim!),
    };
  },
};

/**
 * A paid group's strict inserts: one statement for them all when every claim is on a proved copy and
 * they write the same columns (insertClaimedInvocations; docs/benchmarks.md "The thirty-second round"),
 * else one each. Either way a moved catalog fails the transaction.
 */
function insertPaidClaims(trx: Db, claims: readonly PaidClaim[]): Promise<(RunClaim | undefined)[]> {
  const proved = claims.flatMap((c) => (c.proved ? [{ row: c.row, proved: c.proved }] : []));
  if (proved.length === claims.length && claimsShareColumns(claims.map((c) => c.row)))
    return insertClaimedInvocations(trx, proved, RUN_TIMING, { strict: true });
  return inOneFlight(
    ...claims.map((c) => insertClaimedInvocation(trx, c.row, RUN_TIMING, c.proved, { strict: true })),
  );
}

/**
 * Commits the invocation — with the idempotency claim and, for paid work, the custody check, the ledger
 * hold with its authorization evidence and the key's daily reservation, all in one transaction — then
 * hands it over to be run: here, claimed by that insert (runs-here.ts; no outbox row), or through the
 * queue (its outbox row inserted with it). A key seen before replays (or 409/422) instead; short funds
 * → 402, over the daily cap → 429, and nothing is written. A purchase above the key's approval_above is committed as
 * awaiting_approval with its approval instead of an outbox row, and nothing is run
 * (docs/payments.md "Approvals").
 */
async function createInvocation(principal: Principal, work: NewWork, requestId: string): Promise<Submission> {
  const invocationId = newTimeOrderedId();
  const key = work.idempotencyKey;
  // Only a keyed request is ever compared with another (claim and replay): no key, no fingerprint.
  const print = key ? fingerprint(work.operation, work.fingerprintPayload) : "";
  const row: NewInvocation = {
    id: invocationId,
    agent_id: principal.agentId,
    api_key_id: principal.apiKeyId,
    listing_id: work.listing.id,
    task: work.task,
    route: work.route,
    input: work.input,
    max_cost_micros: work.maxCostMicros,
    price_micros: work.priceMicros ?? micros(work.listing.price_micros),
    hold_micros: work.holdMicros,
    quote_id: work.quote?.id ?? null,
    candidate_ids: work.candidateListings.map((l) => l.id),
    selection: work.selection,
  };
  const paid = work.holdMicros > 0n;
  // Spend limits and approvals govern real money; sandbox units (tUSDC) are simulated.
  const limited = paid && (row.currency ?? "USDC") === "USDC";
  // The key's day of spend is reserved below, with the hold; the insert stamps the row with that day.
  if (limited) row.spend_day = SPEND_DAY_STAMP;
  const awaiting = limited && needsApproval(principal.policy, work.holdMicros);
  // A run in this process is claimed by the insert itself (runs-here.ts): its slot is taken first.
  // An approval is written without the catalog's proof: it is never made on a kept copy.
  if (awaiting && work.kept) throw new CatalogMoved();
  const slot = awaiting ? undefined : reserveRunHere();
  const transaction = Boolean(key || paid || work.quote);
  // Work claimed here signs attempt 1's request to the first candidate while the insert is written: the
  // work overlaps the round trip. Free unkeyed work asks that candidate's call gate then too; a
  // transaction asks it once it has committed. Asked during the transaction's flight (its slot given
  // back whole if it then refused), the gate measured no faster at c=1 and slower at c=32: the slot is
  // then held through the hold's lock waits (docs/benchmarks.md "The twenty-sixth round").
  const early = slot
    ? openEarlyGate(work.listing, { invocationId, input: row.input }, { gate: !transaction })
    : undefined;
  let claim: RunClaim | undefined;
  // In a transaction, a moved catalog fails the insert (a strict guard) instead of writing nothing: a paid
  // hold may go out behind it without waiting for its answer (PostTransactionInput.oneFlight).
  const guard = (strict: boolean) => (work.kept ? catalogUnmoved(work.kept, { strict }) : undefined);
  // A proved copy's candidates are what the claim would read: it is spared reading them again.
  const proved = work.kept
    ? { generation: work.kept, candidates: work.candidateListings.map(callTargetOf) }
    : undefined;
  // Outside a transaction a claim on a proved copy may share its statement with others (provedClaims).
  const insertOnce = async (q: Db, inTransaction: boolean): Promise<InvocationRow> => {
    if (slot)
      claim =
        proved && !inTransaction
          ? await provedClaims.write({ row, proved })
          : await insertClaimedInvocation(q, row, RUN_TIMING, proved, { strict: inTransaction });
    const inserted = slot
      ? claim?.invocation
      : await insertInvocationWithJob(q, row, "executions", guard(inTransaction));
    if (!inserted) throw new CatalogMoved();
    return inserted;
  };
  // A moved catalog writes nothing (outside a transaction) or fails the insert (strict, inside one).
  const insert = (q: Db, inTransaction: boolean): Promise<InvocationRow> =>
    insertOnce(q, inTransaction).catch(refusedAs(CATALOG_MOVED, () => new CatalogMoved()));
  let invocation: InvocationRow;
  try {
    // Paid work claimed here with no key, quote or approval: its transaction may be grouped with others
    // that arrive while one is in flight (PAID_CLAIMS, paid-group.ts); alone, it runs as any transaction below.
    const groupable = paid && slot !== undefined && !key && !work.quote && !awaiting;
    const terms: HoldTerms = {
      listedPriceMicros: micros(work.listing.price_micros),
      maxCostMicros: work.maxCostMicros,
      route: work.operation,
      ...(work.quote ? { quoteId: work.quote.id } : {}),
    };
    const alone = (): Promise<InvocationRow> =>
      retryTransient(() =>
        db().transaction(async (trx) => {
          // One flight with the transaction's BEGIN (shared/db/pipeline.ts), in the order the statements
          // would go one by one: the custody check (a share lock on its row), the insert, the key's
          // claim (it references the row; an already-claimed key rolls it back), the quote's use
          // (after the claim, so a retried request replays instead of meeting its own used quote), and
          // behind them the hold's lock (PostTransactionInput.before). Asked for in that order, so that
          // they go out in it: each is a named statement (preparedRaw), taking as many steps to reach
          // the driver. Each refuses by failing, never by its answer (refuse_unless), which aborts the
          // ones behind it: the first to fail is the error (inOneFlight).
          const custody = paid ? assertCustodyOpen(trx) : undefined;
          const inserting = awaiting ? insertAwaitingInvocation(trx, row) : insert(trx, true);
          const steps: Promise<unknown>[] = custody ? [custody, inserting] : [inserting];
          if (key) {
            const claim = {
              agent_id: principal.agentId,
              key,
              fingerprint: print,
              invocation_id: invocationId,
            };
            steps.push(
              claimIdempotencyKey(trx, claim, getConfig().idempotencyRetentionHours).catch(
                refusedAs(KEY_CLAIMED, () => new KeyAlreadyClaimed()),
              ),
            );
          }
          const { quote } = work;
          if (quote) {
            steps.push(
              useQuoteStrictly(trx, quote.id, invocationId).catch(
                refusedAs(QUOTE_NOT_USABLE, () => new QuoteRefused(quote.id)),
              ),
            );
          }
          const before = sentAhead(inOneFlight(...steps));
          // The key's day of spend is reserved with the hold's write: after the ledger's locks, as in
          // every paid transaction, and never when the hold is refused (limited implies paid).
          if (paid) {
            await holdForInvocation(trx, row, work.holdMicros, terms, {
              before,
              withWrite: limited ? () => reserveDailySpend(trx, principal, work.holdMicros) : undefined,
              // The hold's write is the transaction's last statement, and its COMMIT goes with it
              // (PostTransactionInput.commitWithWrite), unless an approval is asked for after it.
              last: !awaiting,
              // Every statement before and with the hold refuses by failing (the custody check, the
              // insert's strict guard, the key's claim, the quote's use, the key's daily cap): the
              // hold waits for none of their answers (PostTransactionInput.oneFlight), and the
              // transaction is one flight.
              oneFlight: !awaiting,
            });
          } else await before;
          const inserted = await inserting;
          if (awaiting) await requestApproval(trx, principal, invocationId, work.holdMicros, requestId);
          return inserted;
        }),
      );
    if (groupable) {
      claim = await writePaid(PAID_CLAIMS, {
        alone: async () => {
          await alone();
          return claim!;
        },
        row,
        proved,
        hold: {
          invocation: row,
          holdMicros: work.holdMicros,
          terms,
        },
        reserve: limited ? principal : undefined,
      });
      invocation = claim.invocation;
    } else invocation = transaction ? await alone() : await insert(db(), false);
  } catch (error) {
    slot?.release();
    if (early) await releaseEarlyGate(early);
    if (error instanceof QuoteRefused) throw quoteNotUsable((await findQuote(db(), error.quoteId))!);
    if (error instanceof DailyCapFull) throw await dailyCapRefusal(error);
    if (!(error instanceof KeyAlreadyClaimed)) throw error;
    const existing = await findIdempotencyClaim(db(), principal.agentId, key!);
    // Gone since the claim failed (it expired and was purged): the request claims the key afresh.
    if (!existing) return createInvocation(principal, work, requestId);
    const original = await findInvocation(db(), existing.invocation_id);
    return { replayed: true, invocation: resolveReplay(existing, print, original!) };
  }

  if (awaiting) return { replayed: false, invocation, completion: undefined };
  const completion = slot
    ? runHere(slot, invocationId, { claim, outboxRow: false }, requestId, early)
    : await enqueueExecution(invocationId, requestId);
  return { replayed: false, invocation, completion };
}

/**
 * Hands a committed invocation over to be run and answers the wait for its end, EXECUTE_SYNC_WAIT_MS at
 * most: run in this process when it hosts the executions worker and has a free slot (runs-here.ts), else
 * sent through the queue (enqueueExecution).
 */
export async function dispatchExecution(
  invocationId: string,
  requestId?: string,
): Promise<JobWatch | undefined> {
  const slot = reserveRunHere();
  if (!slot) return enqueueExecution(invocationId, requestId);
  return runHere(slot, invocationId, { claim: undefined, outboxRow: true }, requestId);
}

/**
 * Starts a run on a slot of this process. A run that throws is sent through the queue at once. `claim` is
 * the run the submitting insert claimed (it wrote no outbox row); `outboxRow` says whether the
 * invocation has an unsent one (an invocation committed before it was dispatched: x402, sandbox).
 */
function runHere(
  slot: RunSlot,
  invocationId: string,
  handed: { claim: RunClaim | undefined; outboxRow: boolean },
  requestId: string | undefined,
  early?: EarlyStart,
): JobWatch | undefined {
  const ended = slot.start(
    invocationId,
    handed.claim,
    async (ran, error) => {
      if (ran) {
        // Nothing is left to send: the sweeper must not send this invocation's job.
        if (handed.outboxRow) markJobSent("executions", invocationId);
        return true;
      }
      logger().warn(
        { err: error, request_id: requestId, invocation_id: invocationId },
        "the run in this process failed; the queue takes it over",
      );
      const watch = await enqueueExecution(invocationId, requestId);
      return watch ? watch.ended : false;
    },
    early,
  );
  const waitMs = getConfig().executeSyncWaitMs;
  return waitMs > 0 ? boundedWait(ended, waitMs) : undefined;
}

/** A JobWatch on a run here: its end, or false at the deadline. */
function boundedWait(ended: Promise<boolean>, ms: number): JobWatch {
  const { watch, settle } = timedWatch(ms);
  ended.then(settle);
  return watch;
}

/**
 * Enqueues a committed invocation (its outbox row is already in PostgreSQL) and answers the wait for its
 * end, EXECUTE_SYNC_WAIT_MS at most, taken before the job is sent so its end cannot be missed. If Redis
 * fails, the outbox sweeper sends it later: undefined then, and the caller answers 202.
 */
async function enqueueExecution(invocationId: string, requestId?: string): Promise<JobWatch | undefined> {
  let watch: JobWatch | undefined;
  try {
    const waitMs = getConfig().executeSyncWaitMs;
    if (waitMs > 0) watch = await watchJob("executions", invocationId, waitMs);
    await enqueue("executions", invocationId, { invocation_id: invocationId }, requestId);
    markJobSent("executions", invocationId);
    return watch;
  } catch (err) {
    watch?.cancel();
    logger().warn(
      { err, request_id: requestId, invocation_id: invocationId },
      "enqueue failed; the sweeper will send it",
    );
    return undefined;
  }
}

/** Waits (bounded) for an invocation's job to end, if one was sent, then reads the invocation as it stands. */
export async function awaitInvocation(
  invocationId: string,
  completion: JobWatch | undefined,
): Promise<InvocationSummary> {
  if (completion) await completion.ended;
  return takeCompletion(invocationId) ?? (await findInvocationSummary(db(), invocationId))!;
}
