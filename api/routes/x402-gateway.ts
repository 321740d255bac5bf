import type { Static } from "@sinclair/typebox";
import type { ErrorCode } from "../../shared/errors.js";
import {
  executeQuote,
  InvocationParams,
  invokeListing,
  ListingParams,
  X402ExecuteBody,
  X402InvokeBody,
  X402MatchQuery,
  X402MatchResult,
  X402PaidResult,
  X402Pending,
  X402StatusResult,
  x402Match,
  x402Status,
} from "../../shared/x402/index.js";
import { defineRoute, Reply } from "../route.js";
import { x402Request } from "../x402-koa.js";

// The paid routes of the x402 gateway (docs/x402.md "x402 gateway: how an agent pays"). No API key: the
// payment is the authorization. A first call answers 402 with PAYMENT-REQUIRED (x402 v2) and
// WWW-Authenticate: Payment (MPP); the retry carries PAYMENT-SIGNATURE / X-PAYMENT-SIGNATURE / X-PAYMENT
// or Authorization: Payment. Paid execution closed → 503 before any challenge or signature check.

const PAID_ERRORS: ErrorCode[] = [
  "TEMPORARILY_UNAVAILABLE",
  "PAYMENT_REQUIRED",
  "SCHEMA_VALIDATION_FAILED",
  "LISTING_NOT_INVOCABLE",
  "PROVIDER_FAILED",
  "PROVIDER_UNAVAILABLE",
  "TIMEOUT",
  "RATE_LIMITED",
];

const PAID_DESCRIPTION =
  "No payment → 402 with headers PAYMENT-REQUIRED (base64 x402 v2 PaymentRequired: accepts[exact, network, " +
  "amount in atomic units, asset, payTo, maxTimeoutSeconds, extra{name, version, quote_id}], resource, " +
  "extensions.bazaar) and WWW-Authenticate: Payment (MPP, method evm, intent charge), Cache-Control: no-store, " +
  "and the error envelope with the same challenge decoded. Retry with PAYMENT-SIGNATURE (x402 v2), " +
  "X-PAYMENT-SIGNATURE, X-PAYMENT (x402 v1) or Authorization: Payment (MPP). 200: the result with " +
  "PAYMENT-RESPONSE (base64 SettleResponse, once the settlement transaction exists; X-PAYMENT-RESPONSE too " +
  "for X-PAYMENT) and Payment-Receipt for MPP; 202 while the call runs. A failed call is never settled.";

const paymentInfo = (description: string) => ({
  protocols: ["x402", "mpp"],
  pricingMode: "quote",
  currency: "USDC",
  description,
  offers: [{ intent: "charge", method: "evm", amount: null, currency: "USDC", description }],
});

const answer = (a: { status: number; body: unknown; headers: Record<string, string> }) =>
  new Reply(a.status, a.body, a.headers);

export const x402GatewayRoutes = [
  defineRoute({
    method: "get",
    path: "/api/x402/execute/match",
    tag: "x402",
    summary: "Match a task to its top listing and quote it: quote_id, amount, payTo, network, asset, expiry",
    description:
      "No key needed. A paid top candidate gets a quote (X402_QUOTE_TTL_SECONDS) for POST /api/x402/execute; a " +
      "free one needs no payment (quote_id null, free_route). Paid only while paid execution is closed → 503.",
    auth: "none",
    limitPerClient: true,
    query: X402MatchQuery,
    responses: { 200: X402MatchResult },
    errors: ["SCHEMA_VALIDATION_FAILED", "LISTING_NOT_FOUND", "TEMPORARILY_UNAVAILABLE", "RATE_LIMITED"],
    async handle(_ctx, { query }: { query: Static<typeof X402MatchQuery> }) {
      return x402Match(query.task);
    },
  }),
  defineRoute({
    method: "post",
    path: "/api/x402/execute",
    tag: "x402",
    summary: "Execute a quote, paid per request over x402 or MPP (402 challenge, then the paid retry)",
    description: `Body {quote_id, input}. Unknown quote → 404; expired → 402 quote_expired; paid → 402 quote_already_paid. ${PAID_DESCRIPTION}`,
    auth: "none",
    body: X402ExecuteBody,
    responses: { 200: X402PaidResult, 202: X402Pending },
    errors: [...PAID_ERRORS, "NOT_FOUND"],
    paymentInfo: paymentInfo("the quoted listing's price (GET /api/x402/execute/match)"),
    async handle(ctx, { body }: { body: Static<typeof X402ExecuteBody> }) {
      return answer(await executeQuote(body.quote_id, body.input, x402Request(ctx)));
    },
  }),
  defineRoute({
    method: "post",
    path: "/api/x402/invoke/{listing_id}",
    tag: "x402",
    summary: "Invoke one paid listing over x402 or MPP; the 402 binds a fresh quote at the listing's price",
    description: `Body {input}. Locked to the listing: no fallback. ${PAID_DESCRIPTION}`,
    auth: "none",
    limitPerClient: true,
    params: ListingParams,
    body: X402InvokeBody,
    responses: { 200: X402PaidResult, 202: X402Pending },
    errors: [...PAID_ERRORS, "LISTING_NOT_FOUND"],
    paymentInfo: paymentInfo("the listing's price, quoted in the 402 challenge"),
    async handle(
      ctx,
      { params, body }: { params: Static<typeof ListingParams>; body: Static<typeof X402InvokeBody> },
    ) {
      return answer(await invokeListing(params.listing_id, body.input ?? {}, x402Request(ctx)));
    },
  }),
  defineRoute({
    method: "get",
    path: "/api/x402/status/{invocation_id}",
    tag: "x402",
    summary: "Status of an x402 call without a key: execution, attempts, and settlement evidence",
    description:
      "The invocation id is an unguessable UUID given only to the payer (in the 200/202/402 answers). Settlement " +
      "reports only states with evidence: pending_submission, submitted (tx hash), confirmed (block), voided " +
      "(the call failed: nothing settled) or settlement_failed.",
    auth: "none",
    params: InvocationParams,
    responses: { 200: X402StatusResult },
    errors: ["NOT_FOUND", "SCHEMA_VALIDATION_FAILED"],
    async handle(_ctx, { params }: { params: Static<typeof InvocationParams> }) {
      return x402Status(params.invocation_id);
    },
  }),
];
