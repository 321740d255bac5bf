import { type TProperties, Type } from "@sinclair/typebox";
import { Nullable, NullableTimestamp, Timestamp, UsdcAmount, Uuid } from "../../kernel/wire.js";
import { ApprovalSummary } from "./approvals.js";

export const IdempotencyKey = Type.String({ minLength: 1, maxLength: 255, pattern: "^[\\x21-\\x7e]+$" });

/** A quote's id (POST /api/quotes): an unknown or malformed one is a 404, not a schema error. */
const QuoteId = Type.String({
  minLength: 1,
  maxLength: 100,
  description: "a ledger quote from POST /api/quotes: the quoted listing and price are used",
});

export const ExecuteBody = Type.Object(
  {
    task: Type.String({
      minLength: 1,
      maxLength: 200,
      description: "task alias: tag, slug, category or name",
    }),
    input: Type.Record(Type.String(), Type.Unknown(), {
      description: "validated against the listing's input_schema",
    }),
    constraints: Type.Optional(
      Type.Object(
        { max_cost: Type.Number({ minimum: 0, description: "USDC" }) },
        { additionalProperties: false },
      ),
    ),
    idempotency_key: Type.Optional(IdempotencyKey),
    quote_id: Type.Optional(QuoteId),
  },
  { additionalProperties: false },
);

/** An amount of tUSDC, the sandbox's simulated unit (docs/x402.md "Sandbox (tumbler)"): never money. */
export const TusdcAmount = Type.String({
  pattern: "^\\d+\\.\\d{6}$",
  description: "tUSDC (simulated sandbox units, not money), 6 decimals",
});

type Unit = "USDC" | "tUSDC";
const UNITS: readonly Unit[] = ["USDC", "tUSDC"];
/** Amount fields name their unit (amount_usdc, amount_tusdc), so sandbox units never read as USDC. */
const suffix = (unit: Unit) => (unit === "USDC" ? "usdc" : "tusdc");
const amountOf = (unit: Unit) => (unit === "USDC" ? UsdcAmount : TusdcAmount);
const simulatedFlag = (unit: Unit): TProperties =>
  unit === "tUSDC" ? { simulated: Type.Literal(true) } : {};

/** What an invocation costs, in its unit: USDC, or simulated tUSDC for sandbox (tumbler) invocations. */
const Cost = Type.Union(
  UNITS.map((unit) =>
    Type.Object({
      [`amount_${suffix(unit)}`]: amountOf(unit),
      [`listed_price_${suffix(unit)}`]: amountOf(unit),
      currency: Type.Literal(unit),
      charged: Type.Boolean(),
      ...simulatedFlag(unit),
    }),
  ),
);

const SelectionReason = Type.Union(
  [
    "top_ranked_candidate",
    "fallback_after_higher_ranked_candidate_failed",
    "direct_invoke_locked_to_listing",
    "sandbox_quote_locked_to_listing",
    "x402_quote_locked_to_listing",
  ].map((reason) => Type.Literal(reason)),
);

/**
 * Who served an invocation and why (docs/routing.md "Routing"): the serving listing, the reason it was the one,
 * and for routed execute calls its recorded rank, score and score components, plus the higher-ranked
 * listings passed over (their attempts are in `attempts`).
 */
const ServedBy = {
  served_listing_id: Nullable(Uuid),
  served_listing_id_null_reason: Nullable(
    Type.Union([Type.Literal("no_candidate_succeeded"), Type.Literal("invocation_not_finished")]),
  ),
  selection_reason: Nullable(SelectionReason),
  selection_basis: Nullable(
    Type.Object({
      rank: Type.Integer({ minimum: 1 }),
      score: Type.Number(),
      score_components: Type.Object({
        reliability: Type.Number(),
        verification: Type.Number(),
        latency: Type.Number(),
        price: Type.Number(),
      }),
      weights: Type.Record(Type.String(), Type.Number()),
      passed_over: Type.Array(Uuid),
    }),
  ),
  selection_basis_null_reason: Nullable(
    Type.Union([
      Type.Literal("locked_to_listing"),
      Type.Literal("no_listing_served"),
      Type.Literal("ranking_not_recorded"),
    ]),
  ),
};

/** One provider call of an invocation: which listing, its outcome, error code and latency. */
const Attempt = Type.Object({
  attempt_no: Type.Integer(),
  listing_id: Uuid,
  status: Type.Union(
    ["running", "succeeded", "failed", "abandoned", "skipped"].map((status) => Type.Literal(status)),
    { description: "the attempt's outcome" },
  ),
  error_code: Nullable(Type.String()),
  error_message: Nullable(Type.String()),
  http_status: Nullable(Type.Integer()),
  latency_ms: Nullable(Type.Integer()),
  started_at: Timestamp,
  finished_at: NullableTimestamp,
});

export const ExecuteResult = Type.Object({
  success: Type.Literal(true),
  output: Type.Unknown(),
  invocation_id: Uuid,
  status: Type.Literal("succeeded"),
  receipt_id: Nullable(Uuid),
  provider: Type.Object({
    listing_id: Uuid,
    name: Nullable(Type.String()),
    slug: Nullable(Type.String()),
    selection_reason: SelectionReason,
  }),
  ...ServedBy,
  selection: Type.Unknown(),
  cost: Cost,
  simulated: Type.Optional(Type.Literal(true, { description: "a sandbox (tumbler) call paid in tUSDC" })),
  metering: Type.Object({
    attempts: Type.Integer(),
    provider_latency_ms: Nullable(Type.Integer()),
    total_ms: Nullable(Type.Integer()),
  }),
  status_url: Type.String(),
  receipt_url: Nullable(Type.String()),
});

/** GET /api/execute/match and the x402 edge's match. */
export const MatchQuery = Type.Object(
  {
    task: Type.String({ minLength: 1, maxLength: 200 }),
    max_cost: Type.Optional(Type.Number({ minimum: 0, description: "USDC" })),
  },
  { additionalProperties: false },
);

export const MatchResult = Type.Object({
  task: Type.String(),
  max_cost_usdc: Nullable(UsdcAmount),
  candidates: Type.Array(Type.Record(Type.String(), Type.Unknown())),
  excluded: Type.Array(Type.Object({ listing_id: Uuid, name: Type.String(), reason: Type.String() })),
  ranking: Type.Object({ formula: Type.String(), weights: Type.Record(Type.String(), Type.Number()) }),
});

export const InvokeBody = Type.Object(
  {
    input: Type.Record(Type.String(), Type.Unknown()),
    max_cost: Type.Optional(Type.Number({ minimum: 0, description: "USDC" })),
    idempotency_key: Type.Optional(IdempotencyKey),
    quote_id: Type.Optional(QuoteId),
  },
  { additionalProperties: false },
);

export const ExecutePending = Type.Object({
  success: Type.Literal(false),
  status: Type.Union([Type.Literal("queued"), Type.Literal("running")]),
  invocation_id: Uuid,
  message: Type.String(),
  status_url: Type.String(),
});

/** Ledger settlement of a paid call (capture or release of its hold), or null with the reason. */
const Settlement = Type.Union([
  Type.Object({ state: Type.Null(), null_reason: Type.String() }),
  Type.Object({
    state: Type.Union([Type.Literal("captured"), Type.Literal("released")]),
    rail: Type.Union([Type.Literal("ledger"), Type.Literal("tumbler_ledger")]),
    ledger_transaction_id: Nullable(Type.String()),
    at: Timestamp,
    null_reason: Type.Null(),
    simulated: Type.Optional(Type.Literal(true)),
  }),
]);

/** One evidence state as recorded (payment_evidence), or null with its *_null_reason beside it. */
const evidenceState = (unit: Unit) =>
  Nullable(
    Type.Object({
      at: Timestamp,
      source: Type.String(),
      source_ref: Nullable(Type.String()),
      [`amount_${suffix(unit)}`]: Nullable(amountOf(unit)),
      details: Type.Record(Type.String(), Type.Unknown()),
    }),
  );

const EVIDENCE_NAMES = ["authorization", "execution", "capture", "refund", "outcome"] as const;

/** A payment block in one unit: free, or what was held, charged and returned. */
function paymentIn(unit: Unit) {
  const u = suffix(unit);
  const amount = amountOf(unit);
  return [
    Type.Object({
      requires_payment: Type.Literal(false),
      currency: Type.Literal(unit),
      ...simulatedFlag(unit),
      [`listed_price_${u}`]: amount,
      null_reason: Type.String(),
    }),
    Type.Object({
      requires_payment: Type.Literal(true),
      currency: Type.Literal(unit),
      ...simulatedFlag(unit),
      [`listed_price_${u}`]: amount,
      [`held_${u}`]: amount,
      [`charged_${u}`]: amount,
      [`seller_share_${u}`]: Nullable(amount),
      [`platform_fee_${u}`]: Nullable(amount),
      [`refunded_${u}`]: Nullable(amount),
      state: Nullable(Type.Union([Type.Literal("held"), Type.Literal("captured"), Type.Literal("released")])),
      evidence: Type.Object(
        Object.fromEntries(
          EVIDENCE_NAMES.flatMap((name) => [
            [name, evidenceState(unit)],
            [`${name}_null_reason`, Nullable(Type.String())],
          ]),
        ),
      ),
      onchain_settlement: Type.Null(),
      onchain_settlement_null_reason: Type.String(),
    }),
  ];
}

/**
 * What a paid call held, charged and returned — every amount from an evidence row — in USDC, or in
 * simulated tUSDC (amounts named *_tusdc, simulated: true) for sandbox invocations.
 */
export const Payment = Type.Union(UNITS.flatMap(paymentIn));

export const InvocationStatus = Type.Object({
  invocation_id: Uuid,
  status: Type.Union([
    Type.Literal("awaiting_approval"),
    Type.Literal("queued"),
    Type.Literal("running"),
    Type.Literal("succeeded"),
    Type.Literal("failed"),
  ]),
  approval: Nullable(ApprovalSummary),
  task: Type.String(),
  route: Type.String(),
  listing_id: Uuid,
  first_choice_listing_id: Uuid,
  ...ServedBy,
  created_at: Timestamp,
  started_at: NullableTimestamp,
  completed_at: NullableTimestamp,
  output: Type.Unknown(),
  error: Nullable(Type.Object({ code: Type.String(), message: Type.String() })),
  attempts: Type.Array(Attempt),
  receipt_id: Nullable(Uuid),
  receipt_null_reason: Nullable(Type.String()),
  cost: Cost,
  simulated: Type.Optional(Type.Literal(true)),
  payment: Payment,
  settlement: Settlement,
  status_url: Type.String(),
  receipt_url: Nullable(Type.String()),
});

/** A receipt in one unit: USDC, or simulated tUSDC (amounts named *_tusdc, simulated: true). */
const receiptIn = (unit: Unit) =>
  Type.Object({
    receipt_id: Uuid,
    schema: Type.String(),
    invocation_id: Uuid,
    agent_id: Uuid,
    listing_id: Uuid,
    provider_name: Nullable(Type.String()),
    ...ServedBy,
    attempts: Type.Array(Attempt),
    outcome: Type.Literal("succeeded"),
    [`amount_${suffix(unit)}`]: amountOf(unit),
    currency: Type.Literal(unit),
    ...simulatedFlag(unit),
    split: Nullable(
      Type.Object({
        [`seller_share_${suffix(unit)}`]: amountOf(unit),
        [`platform_fee_${suffix(unit)}`]: Nullable(amountOf(unit)),
        platform_fee_rate: Type.Number(),
        rule: Type.String(),
      }),
    ),
    split_null_reason: Nullable(Type.String()),
    provider_evidence: Type.Record(Type.String(), Type.Unknown()),
    payment: Payment,
    settlement: Settlement,
    created_at: Timestamp,
    status_url: Type.String(),
  });

export const Receipt = Type.Union(UNITS.map(receiptIn));

/** POST /api/quotes (docs/api.md "Quotes"). */
export const QuoteBody = Type.Object(
  {
    listing_id: Type.String({ minLength: 1, maxLength: 100 }),
    input: Type.Optional(
      Type.Record(Type.String(), Type.Unknown(), {
        description: "checked against the listing's input_schema",
      }),
    ),
    max_cost: Type.Optional(Type.Number({ minimum: 0, description: "USDC" })),
  },
  { additionalProperties: false },
);

export const QuoteParams = Type.Object({ quote_id: Type.String({ maxLength: 100 }) });

/** One quote, on any rail (ledger, x402, tumbler): one model. */
export const QuoteView = Type.Object({
  quote_id: Uuid,
  rail: Type.Union([Type.Literal("ledger"), Type.Literal("x402"), Type.Literal("tumbler")]),
  listing_id: Uuid,
  task: Type.String(),
  price_usdc: Type.String(),
  platform_fee_usdc: Type.String(),
  seller_share_usdc: Type.String(),
  currency: Type.Union([Type.Literal("USDC"), Type.Literal("tUSDC")]),
  network: Nullable(Type.String()),
  asset: Nullable(Type.String()),
  pay_to: Nullable(Type.String()),
  expires_at: Timestamp,
  status: Type.Union([Type.Literal("open"), Type.Literal("used"), Type.Literal("expired")]),
  invocation_id: Nullable(Uuid),
});

export const QuoteCreated = Type.Intersect([
  QuoteView,
  Type.Object({
    payment_options: Type.Array(
      Type.Object({
        method: Type.Union([Type.Literal("ledger"), Type.Literal("x402"), Type.Literal("mpp")]),
        how: Type.String(),
        url: Type.String(),
      }),
    ),
    constraints: Type.Object({
      listing_invocable: Type.Boolean(),
      input_valid: Nullable(Type.Boolean()),
      max_cost_usdc: Nullable(Type.String()),
      within_max_cost: Nullable(Type.Boolean()),
      within_key_limits: Type.Boolean(),
      paid_execution_enabled: Nullable(Type.Boolean()),
    }),
  }),
]);
