import { createHash, timingSafeEqual } from "node:crypto";
import { type Static, Type } from "@sinclair/typebox";
import { getConfig } from "../../shared/config.js";
import { AppError } from "../../shared/errors.js";
import { Timestamp, Uuid } from "../../shared/kernel/wire.js";
import { recheckDeposit, retryPayout } from "../../shared/money/index.js";
import { METRICS_CONTENT_TYPE } from "../../shared/observability/metrics.js";
import { moneyConsole, serviceMetrics } from "../../shared/operations/index.js";
import { recheckSettlement } from "../../shared/x402/index.js";
import { type AppContext, defineRoute, Reply } from "../route.js";

// Operators (docs/operations.md): Prometheus metrics, and the money console's API under
// /api/admin/money (admin key). The console page (/admin) renders the same calls.

/** METRICS_TOKEN, when set, is required as a bearer token (compared in constant time). */
function checkMetricsToken(ctx: AppContext): void {
  const token = getConfig().metricsToken;
  if (!token) return;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(ctx.get("authorization") || "");
  const digest = (v: string) => createHash("sha256").update(v).digest();
  if (!match || !timingSafeEqual(digest(match[1]!), digest(token)))
    throw new AppError("UNAUTHORIZED", "send Authorization: Bearer <METRICS_TOKEN>");
}

const metricsRoute = defineRoute({
  method: "get",
  path: "/metrics",
  tag: "operations",
  summary: "Prometheus metrics (text exposition); bearer METRICS_TOKEN when one is set",
  auth: "none",
  contentType: "text/plain",
  responses: { 200: Type.String() },
  errors: ["UNAUTHORIZED"],
  async handle(ctx) {
    checkMetricsToken(ctx);
    return new Reply(200, await serviceMetrics(), { "Cache-Control": "no-store" }, METRICS_CONTENT_TYPE);
  },
});

const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);
const Str = Type.String();
const Evidence = Type.Object({
  state: Str,
  source: Str,
  source_ref: Nullable(Str),
  amount_micros: Nullable(Str),
  currency: Nullable(Str),
  details: Type.Record(Type.String(), Type.Unknown()),
  created_at: Timestamp,
});

const PayoutItem = Type.Object({
  payout_id: Uuid,
  seller_id: Uuid,
  status: Str,
  currency: Str,
  amount_usdc: Str,
  to_address: Str,
  chain_id: Type.Integer(),
  tx_hash: Nullable(Str),
  tx_url: Nullable(Str),
  block_number: Type.Union([Type.Integer(), Type.Null()]),
  waiting_reason: Nullable(Str),
  failure_reason: Nullable(Str),
  created_at: Timestamp,
  submitted_at: Nullable(Timestamp),
  resolved_at: Nullable(Timestamp),
  updated_at: Timestamp,
  evidence: Type.Array(Evidence),
});

const SettlementFields = {
  settlement_id: Uuid,
  invocation_id: Uuid,
  listing_id: Uuid,
  seller_agent_id: Nullable(Uuid),
  protocol: Str,
  network: Str,
  amount_usdc: Str,
  payer: Str,
  status: Str,
  tx_hash: Nullable(Str),
  block_number: Type.Union([Type.Integer(), Type.Null()]),
  failure_reason: Nullable(Str),
  created_at: Timestamp,
  updated_at: Timestamp,
};

const DepositFields = {
  deposit_id: Uuid,
  agent_id: Uuid,
  status: Str,
  chain_id: Type.Integer(),
  tx_hash: Str,
  amount_usdc: Nullable(Str),
  confirmations: Type.Integer(),
  confirmations_required: Type.Integer(),
  waiting_reason: Nullable(Str),
  rejected_reason: Nullable(Str),
  created_at: Timestamp,
  updated_at: Timestamp,
};

const JobAction = Type.Union(
  ["retried", "re-added", "added", "already_queued"].map((a) => Type.Literal(a)),
  { description: "what happened to the row's job" },
);

export const MoneyConsole = Type.Object({
  stuck_after_seconds: Type.Integer(),
  payouts: Type.Array(PayoutItem),
  settlements: Type.Array(Type.Object({ ...SettlementFields, evidence: Type.Array(Evidence) })),
  deposits: Type.Array(Type.Object({ ...DepositFields, evidence: Type.Array(Evidence) })),
  generated_at: Timestamp,
});

export const ConsoleQuery = Type.Object(
  {
    stuck_after_seconds: Type.Optional(
      Type.Integer({
        minimum: 0,
        maximum: 30 * 86400,
        default: 600,
        description: "open rows untouched this long count as stuck",
      }),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 500, default: 100 })),
  },
  { additionalProperties: false },
);

const IdParams = Type.Object({ id: Uuid }, { additionalProperties: false });

const consoleRoute = defineRoute({
  method: "get",
  path: "/api/admin/money",
  tag: "admin",
  summary: "Money console: failed or stuck payouts, x402 settlements and deposits, with their evidence",
  auth: "admin",
  query: ConsoleQuery,
  responses: { 200: MoneyConsole },
  errors: ["UNAUTHORIZED", "NOT_FOUND", "SCHEMA_VALIDATION_FAILED"],
  handle: (_ctx, { query }: { query: Static<typeof ConsoleQuery> }) =>
    moneyConsole({ stuckSeconds: query.stuck_after_seconds ?? 600, limit: query.limit ?? 100 }),
});

const PayoutView = Type.Omit(PayoutItem, ["seller_id", "updated_at", "evidence"]);

const retryRoute = defineRoute({
  method: "post",
  path: "/api/admin/money/payouts/{id}/retry",
  tag: "admin",
  summary: "Retry a failed payout (one new payout, however often called) or re-drive an open one; audited",
  auth: "admin",
  params: IdParams,
  responses: {
    200: Type.Object({
      action: Type.Union(["retried", "already_retried", "in_flight", "redriven"].map((a) => Type.Literal(a))),
      payout: PayoutView,
    }),
  },
  errors: ["UNAUTHORIZED", "NOT_FOUND", "CONFLICT"],
  handle: (ctx, { params }: { params: Static<typeof IdParams> }) =>
    retryPayout(params.id, ctx.state.requestId),
});

const recheckSettlementRoute = defineRoute({
  method: "post",
  path: "/api/admin/money/settlements/{id}/recheck",
  tag: "admin",
  summary: "Re-check an open x402 settlement: its job is sent again (it cannot settle twice); audited",
  auth: "admin",
  params: IdParams,
  responses: { 200: Type.Object({ ...SettlementFields, job: JobAction }) },
  errors: ["UNAUTHORIZED", "NOT_FOUND", "CONFLICT"],
  handle: (ctx, { params }: { params: Static<typeof IdParams> }) =>
    recheckSettlement(params.id, ctx.state.requestId),
});

const recheckDepositRoute = defineRoute({
  method: "post",
  path: "/api/admin/money/deposits/{id}/recheck",
  tag: "admin",
  summary: "Re-check an open deposit: its confirmation job is sent again (it cannot credit twice); audited",
  auth: "admin",
  params: IdParams,
  responses: { 200: Type.Object({ ...DepositFields, job: JobAction }) },
  errors: ["UNAUTHORIZED", "NOT_FOUND", "CONFLICT"],
  handle: (ctx, { params }: { params: Static<typeof IdParams> }) =>
    recheckDeposit(params.id, ctx.state.requestId),
});

export const operationsRoutes = [
  metricsRoute,
  consoleRoute,
  retryRoute,
  recheckSettlementRoute,
  recheckDepositRoute,
];
