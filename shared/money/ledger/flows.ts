import type { Knex } from "knex";
import { db } from "../../db/knex.js";
import type { PostEvidence } from "../evidence/store.js";
import {
  type AccountRef,
  accountFor,
  type Currency,
  type HeldFunds,
  type LedgerLeg,
  type LedgerReference,
  type PostResult,
  type PostTransactionInput,
  platformSplit,
  postTogether,
  postTransaction,
  retryTransient,
  type TransactionKind,
} from "./ledger.js";
import { type AccountKind, findTransactionByKey, lockAccounts } from "./store.js";

// The named money movements of the money paths (docs/payments.md "Ledger"), each one call and one ledger
// transaction. Every helper takes an optional knex transaction: given one, it joins the caller's
// transaction (which then owns retries); without one, it runs and retries its own.

/** One amount moved for one agent in one currency. */
export interface AgentMovement {
  agentId: string;
  currency: Currency;
  /** Positive, in micro-units of the currency. */
  amountMicros: bigint;
  reference: LedgerReference;
  idempotencyKey: string;
  metadata?: Record<string, unknown>;
  /** Evidence written with the movement (PostTransactionInput.evidence). */
  evidence?: PostEvidence[];
  /** The caller's statements sent with the movement's write (PostTransactionInput.withWrite). */
  withWrite?: () => Promise<unknown>;
  /** The caller's statements sent just before, whose flight the lock joins (PostTransactionInput.before). */
  before?: Promise<unknown>;
  /** The movement's write is the caller's transaction's last statement (PostTransactionInput.commitWithWrite). */
  commitWithWrite?: boolean;
  /** The movement waits for no answer (PostTransactionInput.oneFlight). */
  oneFlight?: boolean;
}

/** Names a hold by its idempotency key and what it holds: who pays, how much, in which currency, for what. */
export interface HoldResolution {
  holdKey: string;
  idempotencyKey: string;
  metadata?: Record<string, unknown>;
  /** Evidence written with the release (PostTransactionInput.evidence). */
  evidence?: PostEvidence[];
  /** The caller's statements sent with the resolution's write (PostTransactionInput.withWrite). */
  withWrite?: () => Promise<unknown>;
  /**
   * What the hold holds, as the caller's own records say (an invocation's buyer, unit and hold_micros;
   * an order's): the hold is not read first; the resolution's lock reads it in its own statement and goes
   * on only when it holds exactly that (PostTransactionInput.resolvesHold).
   */
  expected: HeldFunds;
  /** The caller's statements sent just before, whose flight the lock joins (PostTransactionInput.before). */
  before?: Promise<unknown>;
  /** The resolution's write is the caller's transaction's last statement (PostTransactionInput.commitWithWrite). */
  commitWithWrite?: boolean;
  /** The resolution waits for no answer (PostTransactionInput.oneFlight). */
  oneFlight?: boolean;
}

/** How a capture splits: the platform's fee and the seller's part of what it captured, and what went back. */
export interface CaptureSplit {
  feeMicros: bigint;
  sellerMicros: bigint;
  capturedMicros: bigint;
  returnedMicros: bigint;
}

export interface CaptureResult extends PostResult {
  feeMicros: bigint;
  sellerMicros: bigint;
}

function requirePositive(amountMicros: bigint): void {
  if (typeof amountMicros !== "bigint" || amountMicros <= 0n) {
    throw new Error(`a ledger movement needs a positive bigint amount (got ${String(amountMicros)})`);
  }
}

/** An account by what it is; the post that uses it locks it (and creates it on first use) in one statement. */
function named(owner: string | null, kind: AccountKind, currency: Currency): AccountRef {
  return { owner, kind, currency };
}

function move(
  kind: TransactionKind,
  from: AccountRef,
  to: AccountRef,
  m: AgentMovement,
  trx: Knex.Transaction | undefined,
): Promise<PostResult> {
  return postTransaction(movePost(kind, from, to, m), trx);
}

/** An amount moved from one account to another, as a post. */
function movePost(
  kind: TransactionKind,
  from: AccountRef,
  to: AccountRef,
  m: AgentMovement,
): PostTransactionInput {
  return {
    kind,
    idempotencyKey: m.idempotencyKey,
    reference: m.reference,
    legs: [
      { account: from, amountMicros: -m.amountMicros },
      { account: to, amountMicros: m.amountMicros },
    ],
    metadata: m.metadata ?? {},
    evidence: m.evidence,
    withWrite: m.withWrite,
    before: m.before,
    commitWithWrite: m.commitWithWrite,
    oneFlight: m.oneFlight,
  };
}

/** Reserves an agent's funds for a paid call (available → held); PAYMENT_REQUIRED when short. */
export async function holdFunds(m: AgentMovement, trx?: Knex.Transaction): Promise<PostResult> {
  return postTransaction(holdPost(m), trx);
}

/** A hold as a post. */
function holdPost(m: AgentMovement): PostTransactionInput {
  requirePositive(m.amountMicros);
  const available = named(m.agentId, "agent_available", m.currency);
  return movePost("hold", available, named(m.agentId, "agent_held", m.currency), m);
}

/** A capture's request: the hold it resolves, the seller, and how much of the hold it captures. */
export type CaptureRequest = Omit<HoldResolution, "evidence"> & {
  sellerAgentId: string | null;
  /** Default: the whole hold, never more. */
  captureMicros?: bigint;
  /** Evidence written with the capture, given how it splits (PostTransactionInput.evidence). */
  evidence?: (split: CaptureSplit) => PostEvidence[];
};

/**
 * Captures a hold on success: held → seller payable (amount − fee) and platform revenue (fee =
 * floor(amount × 3 / 100)). A null seller is a platform-owned first-party listing: both parts go to
 * platform revenue, still as two entries so the split stays visible. captureMicros (default: the whole
 * hold, never more) captures part of it — a fallback cheaper than the hold — and returns the rest to the
 * buyer's available funds in the same transaction. Throws HoldAlreadyResolvedError when the hold was
 * already captured or released under another key.
 */
export async function captureHold(
  r: CaptureRequest,
  trx?: Knex.Transaction,
): Promise<CaptureResult & CaptureSplit> {
  const { input, split } = capturePost(r);
  const result = await postTransaction(input, trx);
  return { ...result, ...split };
}

/** A capture as a post, and how it splits. */
function capturePost(r: CaptureRequest): { input: PostTransactionInput; split: CaptureSplit } {
  const hold = r.expected;
  const captured = r.captureMicros ?? hold.amountMicros;
  requirePositive(captured);
  if (captured > hold.amountMicros) {
    throw new Error(`cannot capture ${captured} from a hold of ${hold.amountMicros} (${r.holdKey})`);
  }
  const returned = hold.amountMicros - captured;
  const { feeMicros, sellerMicros } = platformSplit(captured);
  const split: CaptureSplit = { feeMicros, sellerMicros, capturedMicros: captured, returnedMicros: returned };
  const held = named(hold.agentId, "agent_held", hold.currency);
  const revenue = named(null, "platform_revenue", hold.currency);
  const seller = r.sellerAgentId ? named(r.sellerAgentId, "seller_payable", hold.currency) : revenue;
  const available = returned > 0n ? named(hold.agentId, "agent_available", hold.currency) : undefined;
  const legs: LedgerLeg[] = [
    { account: held, amountMicros: -hold.amountMicros },
    { account: seller, amountMicros: sellerMicros },
    { account: revenue, amountMicros: feeMicros },
    ...(available ? [{ account: available, amountMicros: returned }] : []),
  ].filter((leg) => leg.amountMicros !== 0n);
  const input: PostTransactionInput = {
    kind: "capture",
    idempotencyKey: r.idempotencyKey,
    reference: hold.reference,
    resolvesHold: { key: r.holdKey, expected: hold },
    before: r.before,
    legs,
    metadata: {
      ...r.metadata,
      hold_key: r.holdKey,
      seller_agent_id: r.sellerAgentId,
      fee_micros: feeMicros.toString(),
      seller_micros: sellerMicros.toString(),
      returned_micros: returned.toString(),
    },
    evidence: r.evidence?.(split),
    withWrite: r.withWrite,
    commitWithWrite: r.commitWithWrite,
    oneFlight: r.oneFlight,
  };
  return { input, split };
}

/** Voids a whole hold on failure (held → available). Throws HoldAlreadyResolvedError like a capture. */
export async function releaseHold(r: HoldResolution, trx?: Knex.Transaction): Promise<PostResult> {
  return postTransaction(releasePost(r), trx);
}

/** A release as a post. */
function releasePost(r: HoldResolution): PostTransactionInput {
  const hold = r.expected;
  const held = named(hold.agentId, "agent_held", hold.currency);
  const available = named(hold.agentId, "agent_available", hold.currency);
  return {
    kind: "release",
    idempotencyKey: r.idempotencyKey,
    reference: hold.reference,
    resolvesHold: { key: r.holdKey, expected: hold },
    before: r.before,
    legs: [
      { account: held, amountMicros: -hold.amountMicros },
      { account: available, amountMicros: hold.amountMicros },
    ],
    metadata: { ...r.metadata, hold_key: r.holdKey },
    evidence: r.evidence,
    withWrite: r.withWrite,
    commitWithWrite: r.commitWithWrite,
    oneFlight: r.oneFlight,
  };
}

/** One resolution of holdAndResolveTogether: a capture, or a release. */
export type HoldOutcome = { capture: CaptureRequest } | { release: HoldResolution };

/**
 * Holds for several paid calls, and captures or releases of earlier holds, in the caller's transaction,
 * in one flight that ends it, all or nothing (postTogether): behind `before`, one lock of every account
 * they move, their writes, their withWrite statements, the group's withWrites, and the COMMIT. What a
 * paid group writes (shared/routing/paid-group.ts). A movement's or request's own `before`,
 * commitWithWrite and oneFlight are the group's here, so it gives none. The outcomes' posts go first, so
 * that a partial capture's return is available to the holds after it; any order is a serial order of the
 * same posts, since a hold and an outcome in one flight never touch the same hold. Answers the outcomes'
 * posts, then the holds'. On any failure (short funds included) nothing is written and the error is
 * thrown as it is: the caller then runs each post alone (holdFunds, captureHold, releaseHold), which
 * answers it.
 */
export async function holdAndResolveTogether(
  holds: readonly AgentMovement[],
  outcomes: readonly HoldOutcome[],
  trx: Knex.Transaction,
  before?: Promise<unknown>,
  withWrites?: () => Promise<unknown>,
): Promise<PostResult[]> {
  const inputs = [
    ...outcomes.map((o) => ("capture" in o ? capturePost(o.capture).input : releasePost(o.release))),
    ...holds.map(holdPost),
  ];
  return postTogether(inputs, trx, before, withWrites);
}

/** Credits a confirmed deposit to an agent (chain clearing → available). */
export async function creditDeposit(m: AgentMovement, trx?: Knex.Transaction): Promise<PostResult> {
  requirePositive(m.amountMicros);
  const clearing = named(null, "chain_clearing", m.currency);
  return move("deposit", clearing, named(m.agentId, "agent_available", m.currency), m, trx);
}

/** Posts a seller's listing bond from its available funds (available → bonds); PAYMENT_REQUIRED when short. */
export async function postBond(m: AgentMovement, trx?: Knex.Transaction): Promise<PostResult> {
  requirePositive(m.amountMicros);
  const available = named(m.agentId, "agent_available", m.currency);
  return move("bond_post", available, named(m.agentId, "bonds", m.currency), m, trx);
}

/** Returns a bond to the seller's available funds (bonds → available); whether it may is the caller's rule. */
export async function releaseBond(m: AgentMovement, trx?: Knex.Transaction): Promise<PostResult> {
  requirePositive(m.amountMicros);
  const bonds = named(m.agentId, "bonds", m.currency);
  return move("bond_release", bonds, named(m.agentId, "agent_available", m.currency), m, trx);
}

/** Records a payout sent to a seller (seller payable → chain clearing); PAYMENT_REQUIRED when short. */
export async function recordPayout(m: AgentMovement, trx?: Knex.Transaction): Promise<PostResult> {
  requirePositive(m.amountMicros);
  const payable = named(m.agentId, "seller_payable", m.currency);
  return move("payout", payable, named(null, "chain_clearing", m.currency), m, trx);
}

/** A faucet top-up: what it credited (0 when nothing was due) and the agent's available tUSDC after it. */
export interface FaucetTopUp {
  creditedMicros: bigint;
  availableMicros: bigint;
  /** The grant under this key: posted now, or earlier (replayed: then nothing more was credited). */
  grant: { transactionId: string; replayed: boolean } | null;
}

/**
 * Tops an agent's available tUSDC up to targetMicros from the sandbox faucet (sandbox_faucet →
 * available), at most once per idempotency key (the caller puts the period in the key). The agent's
 * available account is locked before the key is looked up, so concurrent top-ups under one key credit
 * once and the others see that grant. Nothing is posted when the balance already reaches the target.
 * tUSDC only: the faucet account cannot exist in USDC (check constraint).
 */
export async function topUpFromFaucet(
  t: {
    agentId: string;
    targetMicros: bigint;
    idempotencyKey: string;
    reference: LedgerReference;
    metadata?: Record<string, unknown>;
  },
  trx?: Knex.Transaction,
): Promise<FaucetTopUp> {
  const run = async (q: Knex.Transaction): Promise<FaucetTopUp> => {
    const available = await accountFor(t.agentId, "agent_available", "tUSDC", q);
    const [locked] = await lockAccounts(q, [available.id]);
    const balance = locked!.balance_micros;
    const earlier = await findTransactionByKey(q, t.idempotencyKey);
    if (earlier) {
      return {
        creditedMicros: 0n,
        availableMicros: balance,
        grant: { transactionId: earlier.id, replayed: true },
      };
    }
    const due = t.targetMicros - balance;
    if (due <= 0n) return { creditedMicros: 0n, availableMicros: balance, grant: null };
    const posted = await move(
      "faucet",
      named(null, "sandbox_faucet", "tUSDC"),
      available,
      {
        agentId: t.agentId,
        currency: "tUSDC",
        amountMicros: due,
        reference: t.reference,
        idempotencyKey: t.idempotencyKey,
        metadata: { ...t.metadata, target_micros: t.targetMicros.toString() },
      },
      q,
    );
    // Under the lock a replay cannot happen; if it ever did, the grant was someone else's: nothing credited.
    if (posted.replayed) {
      return {
        creditedMicros: 0n,
        availableMicros: balance,
        grant: { transactionId: posted.transactionId, replayed: true },
      };
    }
    return {
      creditedMicros: due,
      availableMicros: t.targetMicros,
      grant: { transactionId: posted.transactionId, replayed: false },
    };
  };
  return trx ? run(trx) : retryTransient(() => db().transaction(run));
}

/** The ledger key of an x402 payment's settlement: one posting per payment, whatever redelivers. */
export const x402SettlementKey = (paymentId: string) => `ledger:x402:${paymentId}`;

/**
 * Books a confirmed x402 settlement: the USDC arrived at the platform address on chain, so chain
 * clearing → seller payable (amount − fee) and platform revenue (fee = floor(amount × 3 / 100)),
 * paid out later by the payouts worker. A null seller is a first-party listing: both parts go to
 * platform revenue, as two entries (as captureHold does). Idempotent on ledger:x402:<payment id>.
 */
export async function recordX402Settlement(
  s: {
    paymentId: string;
    amountMicros: bigint;
    sellerAgentId: string | null;
    metadata?: Record<string, unknown>;
  },
  trx?: Knex.Transaction,
): Promise<CaptureResult> {
  requirePositive(s.amountMicros);
  const { feeMicros, sellerMicros } = platformSplit(s.amountMicros);
  const clearing = named(null, "chain_clearing", "USDC");
  const revenue = named(null, "platform_revenue", "USDC");
  const seller = s.sellerAgentId ? named(s.sellerAgentId, "seller_payable", "USDC") : revenue;
  const legs: LedgerLeg[] = [
    { account: clearing, amountMicros: -s.amountMicros },
    { account: seller, amountMicros: sellerMicros },
    { account: revenue, amountMicros: feeMicros },
  ].filter((leg) => leg.amountMicros !== 0n);
  const result = await postTransaction(
    {
      // "transfer": no dedicated kind, so this needs no change to the kind check (the metadata names it).
      kind: "transfer",
      idempotencyKey: x402SettlementKey(s.paymentId),
      reference: { type: "x402_payment", id: s.paymentId },
      legs,
      metadata: {
        ...s.metadata,
        flow: "x402_settlement",
        seller_agent_id: s.sellerAgentId,
        fee_micros: feeMicros.toString(),
        seller_micros: sellerMicros.toString(),
      },
    },
    trx,
  );
  return { ...result, feeMicros, sellerMicros };
}
