import { checkListingInput, findListing, type ListingRow, requireListing } from "../catalog/index.js";
import { authorizationUsed } from "../chain/eip3009.js";
import { db } from "../db/knex.js";
import { AppError, ERRORS, type ErrorCode, paidExecutionUnavailable } from "../errors.js";
import { isUuid, newTimeOrderedId } from "../kernel/ids.js";
import { micros } from "../kernel/money.js";
import { logger } from "../log.js";
import {
  appendEvidence,
  assertCustodyOpen,
  assertPaidExecutionEnabled,
  retryTransient,
} from "../money/index.js";
import {
  awaitInvocation,
  dispatchExecution,
  findQuote,
  insertInvocationWithJob,
  type QuoteRow,
  TERMINAL,
  useQuote,
} from "../routing/index.js";
import { type X402Answer, x402Answer } from "./answer.js";
import { challengeError, type PaidRoute, payable, unpayable } from "./challenge.js";
import { type DecodedPayment, mismatch, readPayment } from "./payment-check.js";
import {
  type HTTPRequestContext,
  type PaymentRequirements,
  quoteRequirements,
  SETTLEMENT_WINDOW_SECONDS,
  verifyPresented,
} from "./protocol.js";
import { assertPayable, createQuote } from "./quotes.js";
import {
  findX402PaymentByNonce,
  insertX402Payment,
  paymentConflict,
  type X402PaymentRow,
} from "./store/payments.js";
import { x402StatusUrl } from "./views.js";

// The paid routes of the x402 gateway (docs/x402.md "x402 gateway: how an agent pays"). Order of effects:
// gate (503 before anything) → quote and listing → input against the listing's schema (400) → no
// payment: 402 challenge → payment: decode (400), match to the quote, replay checks, facilitator verify
// (402 with the reason) → ONE transaction: invocation (+ its outbox row), payment row, quote used,
// challenge and authorization evidence → execution queue → bounded wait → settlement (worker) → answer.

const loadListing = (id: string) =>
  requireListing(id, "GET /api/x402/listings or GET /api/x402/execute/match?task=…");

const REMATCH =
  "quote again: GET /api/x402/execute/match?task=… (execute) or call POST /api/x402/invoke/{id} afresh";

function nonceUsed(prior: X402PaymentRow | undefined): AppError {
  return unpayable("nonce_already_used", "this payment authorization was already used", {
    ...(prior ? { invocation_id: prior.invocation_id, status_url: x402StatusUrl(prior.invocation_id) } : {}),
    hint: "a payment is accepted once; read the status URL of the call it paid, or sign a new authorization",
  });
}

interface Purchase {
  route: PaidRoute;
  quote: QuoteRow;
  listing: ListingRow;
  input: Record<string, unknown>;
  request: HTTPRequestContext;
  decoded: DecodedPayment | undefined;
}

/** 402 for a payment that does not pay this quote; with a fresh challenge when the quote is still payable. */
async function reject(p: Purchase, reason: string, message: string, details: Record<string, unknown> = {}) {
  if (payable(p.quote)) return challengeError({ ...p, reason, message, details });
  return unpayable(reason, message, details);
}

/** POST /api/x402/execute {quote_id, input}. */
export async function executeQuote(
  quoteId: string,
  input: Record<string, unknown>,
  request: HTTPRequestContext,
): Promise<X402Answer> {
  await assertPaidExecutionEnabled();
  const quote = isUuid(quoteId) ? await findQuote(db(), quoteId) : undefined;
  if (quote?.rail !== "x402") {
    throw new AppError("NOT_FOUND", "no x402 quote with this id", { quote_id: quoteId, hint: REMATCH });
  }
  const listing = (await findListing(db(), quote.listing_id))!;
  return purchase({ route: "execute", quote, listing, input, request, decoded: readPayment(request) });
}

/** POST /api/x402/invoke/{listing_id} {input}: the quote is made at challenge time and named by the payment. */
export async function invokeListing(
  listingId: string,
  input: Record<string, unknown>,
  request: HTTPRequestContext,
): Promise<X402Answer> {
  await assertPaidExecutionEnabled();
  const listing = await loadListing(listingId);
  assertPayable(listing);
  // Before a quote is made: a call with invalid input gets its 400 and leaves nothing behind.
  checkListingInput(listing, input);
  const decoded = readPayment(request);
  let quote: QuoteRow | undefined;
  if (decoded?.presented.quoteId && isUuid(decoded.presented.quoteId)) {
    quote = await findQuote(db(), decoded.presented.quoteId);
  }
  if (quote && (quote.rail !== "x402" || quote.listing_id !== listing.id)) {
    const fresh = await createQuote(listing, listing.slug);
    throw await challengeError({
      route: "invoke",
      quote: fresh,
      listing,
      request,
      reason: "payment_for_another_quote",
      message: "the payment names a quote for another listing",
    });
  }
  // No quote named (a first call, x402 v1, or an unknown id): quote the listing's price now.
  quote ??= await createQuote(listing, listing.slug);
  return purchase({ route: "invoke", quote, listing, input, request, decoded });
}

async function purchase(p: Purchase): Promise<X402Answer> {
  const { quote, listing } = p;
  if (quote.used_at) {
    const a = p.decoded?.presented.authorization;
    const prior = a ? await findX402PaymentByNonce(db(), a.from, a.nonce) : undefined;
    if (prior) throw nonceUsed(prior);
    throw unpayable("quote_already_paid", "this quote has already been paid", {
      quote_id: quote.id,
      hint: REMATCH,
    });
  }
  if (quote.expires_at.getTime() <= Date.now()) {
    if (p.route === "invoke") {
      const fresh = await createQuote(listing, listing.slug);
      throw await challengeError({
        ...p,
        quote: fresh,
        reason: "quote_expired",
        message: "the quote expired",
      });
    }
    throw unpayable("quote_expired", "this quote has expired", { quote_id: quote.id, hint: REMATCH });
  }
  assertPayable(listing);
  checkListingInput(listing, p.input);
  if (!p.decoded) {
    throw await challengeError({
      ...p,
      reason: "payment_required",
      message: "payment required: sign the challenge",
    });
  }
  const requirements = await checkPayment(p, p.decoded);
  const payment = await commit(p, requirements as unknown as Record<string, unknown>);
  return run(p, payment);
}

/**
 * Everything a presented payment must pass before anything is written: the MPP challenge binding, the
 * quote's terms (what was accepted and what was signed), a settlement window, replay (our table, then
 * the token's authorizationState) and the facilitator's verification. Returns the quote's requirements.
 */
async function checkPayment(p: Purchase, decoded: DecodedPayment): Promise<PaymentRequirements> {
  const { quote } = p;
  const { presented, rejection } = decoded;
  if (rejection) throw await reject(p, rejection, `the MPP credential was refused: ${rejection}`);
  const requirements = await quoteRequirements(quote);
  const wrong = mismatch(presented, requirements, quote);
  if (wrong) throw await reject(p, wrong.reason, wrong.message, wrong.details);
  const validBefore = BigInt(presented.authorization.validBefore);
  if (validBefore < BigInt(Math.floor(Date.now() / 1000) + SETTLEMENT_WINDOW_SECONDS)) {
    throw await reject(
      p,
      "authorization_expires_too_soon",
      "the authorization must stay valid long enough to settle",
      {
        min_valid_seconds: SETTLEMENT_WINDOW_SECONDS,
      },
    );
  }
  const a = presented.authorization;
  const prior = await findX402PaymentByNonce(db(), a.from, a.nonce);
  if (prior) throw nonceUsed(prior);
  const verdict = await onChain(async () => {
    if (await authorizationUsed(quote.asset!, a.from, a.nonce)) throw nonceUsed(undefined);
    return verifyPresented(quote, presented, requirements);
  });
  if (!verdict.isValid) {
    const reason = verdict.invalidReason ?? "invalid_payment";
    throw await reject(p, reason, `the payment did not verify: ${reason}`, {
      facilitator: {
        invalid_reason: verdict.invalidReason ?? null,
        invalid_message: verdict.invalidMessage ?? null,
      },
    });
  }
  return requirements;
}

/** Chain reads of the verification; an unreachable RPC is the gate's business (503), not the buyer's. */
async function onChain<T>(read: () => Promise<T>): Promise<T> {
  try {
    return await read();
  } catch (error) {
    if (error instanceof AppError) throw error;
    logger().warn({ err: error }, "x402 payment verification could not reach the chain");
    throw paidExecutionUnavailable("settlement_rpc_unreachable");
  }
}

class QuoteNotUsable extends Error {}

/** The one transaction: invocation + outbox, payment, quote used, challenge and authorization evidence. */
async function commit(p: Purchase, requirements: Record<string, unknown>): Promise<X402PaymentRow> {
  const { quote, listing, decoded } = p;
  const presented = decoded!.presented;
  const a = presented.authorization;
  const invocationId = newTimeOrderedId();
  try {
    return await retryTransient(() =>
      db().transaction(async (trx) => {
        await assertCustodyOpen(trx);
        await insertInvocationWithJob(
          trx,
          {
            id: invocationId,
            agent_id: null,
            api_key_id: null,
            payer_address: a.from.toLowerCase(),
            listing_id: listing.id,
            task: quote.task,
            route: "x402",
            input: p.input,
            max_cost_micros: null,
            price_micros: micros(quote.amount_micros),
            candidate_ids: [listing.id],
            selection: {
              strategy: "x402_quote",
              quote_id: quote.id,
              reason: "locked to the quoted listing and price; x402 never falls back to another listing",
            },
          },
          "executions",
        );
        const payment = await insertX402Payment(trx, {
          quote_id: quote.id,
          invocation_id: invocationId,
          listing_id: listing.id,
          seller_agent_id: listing.seller_id,
          protocol: presented.protocol,
          network: quote.network!,
          asset: quote.asset!,
          pay_to: quote.pay_to!,
          amount_micros: micros(quote.amount_micros),
          payer: a.from,
          authorization_nonce: a.nonce,
          valid_after: BigInt(a.validAfter),
          valid_before: BigInt(a.validBefore),
          signature: presented.signature,
          requirements,
          authorization: a,
          challenge_id: presented.challengeId ?? null,
        });
        if (!(await useQuote(trx, quote.id, invocationId))) throw new QuoteNotUsable();
        const subject = {
          agent_id: null,
          invocation_id: invocationId,
          subject_type: "x402_payment",
          subject_id: payment.id,
        };
        await appendEvidence(trx, [
          {
            ...subject,
            state: "challenge",
            source: presented.protocol === "mpp" ? "mpp_challenge" : "x402_payment_requirements",
            source_ref: presented.challengeId ?? quote.id,
            amount_micros: micros(quote.amount_micros),
            currency: "USDC",
            details: { quote_id: quote.id, requirements, route: p.route },
          },
          {
            ...subject,
            state: "authorization",
            source: "eip3009_signature",
            source_ref: a.nonce.toLowerCase(),
            amount_micros: BigInt(a.value),
            currency: "USDC",
            details: {
              protocol: presented.protocol,
              header: presented.header,
              ...a,
              signature: presented.signature,
            },
          },
        ]);
        return payment;
      }),
    );
  } catch (error) {
    const conflict = paymentConflict(error);
    if (!conflict && !(error instanceof QuoteNotUsable)) throw error;
    const prior = await findX402PaymentByNonce(db(), a.from, a.nonce);
    if (prior) throw nonceUsed(prior);
    const now = await findQuote(db(), quote.id);
    if (now?.used_at)
      throw unpayable("quote_already_paid", "this quote has just been paid", { quote_id: quote.id });
    throw unpayable("quote_expired", "this quote expired before the payment was accepted", { hint: REMATCH });
  }
}

/** Enqueues the call, waits for it (bounded) and answers: 200, 202 or the call's error (nothing charged). */
async function run(p: Purchase, payment: X402PaymentRow): Promise<X402Answer> {
  const invocationId = payment.invocation_id;
  const completion = await dispatchExecution(invocationId);
  const invocation = await awaitInvocation(invocationId, completion);
  if (!TERMINAL.includes(invocation.status)) {
    return {
      status: 202,
      headers: { Location: x402StatusUrl(invocationId), "Cache-Control": "no-store" },
      body: {
        success: false,
        status: invocation.status,
        invocation_id: invocationId,
        message:
          "payment accepted; the call is still running. Poll status_url: nothing is settled before it succeeds",
        status_url: x402StatusUrl(invocationId),
      },
    };
  }
  if (invocation.status === "failed") {
    const code = (invocation.error?.code ?? "PROVIDER_FAILED") as ErrorCode;
    throw new AppError(
      code in ERRORS ? code : "PROVIDER_FAILED",
      invocation.error?.message ?? "the call failed",
      {
        invocation_id: invocationId,
        status_url: x402StatusUrl(invocationId),
        charged: false,
        settlement: "none",
        note: `nothing was charged: the signed authorization is never submitted and expires (validBefore ${payment.valid_before})`,
      },
    );
  }
  return x402Answer(p.decoded!.presented, invocation, payment);
}
