import { Type } from "@sinclair/typebox";
import { Nullable, NullableTimestamp, Timestamp, UsdcAmount, Uuid } from "../kernel/wire.js";

// The wire shapes of the verification service and connector records (docs/verification.md). The spec
// shows only the surface descriptor and the connector record; the rest is ours, documented there.

const ProtocolSchema = Type.Union([Type.Literal("http-json"), Type.Literal("x402"), Type.Literal("mcp")]);
const VerdictSchema = Type.Union([
  Type.Literal("verified"),
  Type.Literal("reachable"),
  Type.Literal("failed"),
]);
const closed = { additionalProperties: false } as const;

export const VerificationIdempotencyKey = Type.String({
  minLength: 1,
  maxLength: 255,
  pattern: "^[\\x21-\\x7e]+$",
});

export const OrderBody = Type.Object(
  {
    target: Type.String({
      minLength: 1,
      maxLength: 2048,
      description: "the endpoint to probe: an absolute http(s) URL on a public host",
    }),
    protocol: ProtocolSchema,
    listing_id: Type.Optional(Uuid),
    idempotency_key: Type.Optional(VerificationIdempotencyKey),
  },
  closed,
);

export const RerunBody = Type.Object({ idempotency_key: Type.Optional(VerificationIdempotencyKey) }, closed);

export const OrderParams = Type.Object({ order_id: Type.String({ maxLength: 100 }) });
export const AttestationParams = Type.Object({ attestation_id: Type.String({ maxLength: 100 }) });
export const SubscriptionParams = Type.Object({ subscription_id: Type.String({ maxLength: 100 }) });
export const ConnectorParams = Type.Object({ connector_id: Type.String({ maxLength: 100 }) });

export const Check = Type.Object({
  name: Type.String(),
  passed: Type.Boolean(),
  observation: Type.Record(Type.String(), Type.Unknown()),
});

export const RedactedTargetSchema = Type.Object({
  scheme: Type.String(),
  host: Type.String(),
  path_sha256: Type.String(),
  display: Type.String(),
});

export const AttestationSchema = Type.Object({
  schema: Type.String(),
  attestation_id: Uuid,
  order_id: Uuid,
  issuer: Type.String(),
  target: RedactedTargetSchema,
  protocol: ProtocolSchema,
  verdict: VerdictSchema,
  checks: Type.Array(Check),
  prober_version: Type.String(),
  observed_at: Timestamp,
  expires_at: Timestamp,
  paid_order_cannot_change_verdict: Type.Literal(true),
});

export const AttestationView = Type.Object({
  attestation_id: Uuid,
  kid: Type.String(),
  jws: Type.String({ description: "compact JWS (EdDSA) over the JCS bytes of `attestation`" }),
  jwks_url: Type.String(),
  expired: Type.Boolean(),
  attestation: AttestationSchema,
});

const OrderPayment = Type.Object({
  currency: Type.Literal("USDC"),
  price_usdc: UsdcAmount,
  state: Type.Union([Type.Literal("held"), Type.Literal("captured"), Type.Literal("released")]),
  charged_usdc: UsdcAmount,
  refunded_usdc: UsdcAmount,
  paid_to: Type.Literal("platform_revenue"),
  target_paid: Type.Literal(false),
});

export const OrderView = Type.Object({
  order_id: Uuid,
  status: Type.Union([
    Type.Literal("queued"),
    Type.Literal("running"),
    Type.Literal("completed"),
    Type.Literal("not_run"),
  ]),
  target: Type.String({ description: "the full target: shown to its buyer and admins only" }),
  protocol: ProtocolSchema,
  listing_id: Nullable(Uuid),
  rerun_of: Nullable(Uuid),
  subscription_id: Nullable(Uuid),
  verdict: Nullable(VerdictSchema),
  checks: Nullable(Type.Array(Check)),
  failure_reason: Nullable(Type.String()),
  attestation_id: Nullable(Uuid),
  attestation_url: Nullable(Type.String()),
  status_url: Type.String(),
  payment: OrderPayment,
  created_at: Timestamp,
  completed_at: NullableTimestamp,
});

export const VerifyBody = Type.Object(
  {
    jws: Type.Optional(Type.String({ minLength: 1, maxLength: 200_000 })),
    attestation: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
  },
  { ...closed, minProperties: 1, maxProperties: 1 },
);

export const VerifyResult = Type.Object({
  valid: Type.Boolean(),
  reason: Nullable(
    Type.Union(
      [
        "malformed",
        "unsupported_algorithm",
        "unknown_key",
        "bad_signature",
        "tampered",
        "expired",
        "not_found",
      ].map((r) => Type.Literal(r)),
    ),
  ),
  kid: Nullable(Type.String()),
  verdict: Nullable(VerdictSchema),
  attestation_id: Nullable(Type.String()),
  expires_at: Nullable(Type.String()),
  jwks_url: Type.String(),
});

export const MonitoringBody = Type.Object(
  {
    interval: Type.Integer({
      minimum: 1,
      maximum: 30 * 24 * 3600,
      description: "seconds between runs; at least VERIFICATION_MIN_INTERVAL_SECONDS",
    }),
  },
  closed,
);

const RunView = Type.Object({
  run_id: Uuid,
  status: Type.Union([Type.Literal("charged"), Type.Literal("unpaid"), Type.Literal("skipped")]),
  reason: Nullable(Type.String()),
  order_id: Nullable(Uuid),
  created_at: Timestamp,
});

export const SubscriptionView = Type.Object({
  subscription_id: Uuid,
  order_id: Uuid,
  interval_seconds: Type.Integer(),
  status: Type.Union([Type.Literal("active"), Type.Literal("paused"), Type.Literal("cancelled")]),
  paused_reason: Nullable(Type.String()),
  price_per_run_usdc: UsdcAmount,
  scheduler_enabled: Type.Boolean(),
  created_at: Timestamp,
  cancelled_at: NullableTimestamp,
  last_run_at: NullableTimestamp,
  runs: Type.Array(RunView),
});

export const Surface = Type.Object({
  schema: Type.String(),
  description: Type.String(),
  routes: Type.Record(Type.String(), Type.String()),
  pricing: Type.Object({
    price_usdc: Type.Number(),
    platform_fee_rate: Type.Number(),
    money_note: Type.String(),
  }),
  supported_protocols: Type.Array(ProtocolSchema),
  max_achievable_verdict: Type.Record(Type.String(), VerdictSchema),
  verdict_vocabulary: Type.Array(VerdictSchema),
  prober_version: Type.String(),
  counts: Type.Object({
    orders: Type.Integer(),
    attestations: Type.Integer(),
    monitoring_subscriptions: Type.Integer(),
  }),
  signing_enabled: Type.Boolean(),
  signing_key_source: Type.String(),
  signed_attestations_required: Type.Boolean(),
  signing: Type.Object({
    algorithm: Type.Literal("EdDSA"),
    curve: Type.Literal("Ed25519"),
    jwks_url: Type.String(),
    active_kid: Nullable(Type.String()),
    attestation_ttl_seconds: Type.Integer(),
    retired_key_publish_days: Type.Integer(),
    payload: Type.String(),
  }),
  monitoring_scheduler_enabled: Type.Boolean(),
  monitoring_min_interval_seconds: Type.Integer(),
  paid_execution: Type.Object({ enabled: Type.Boolean(), reason: Nullable(Type.String()) }),
  safety: Type.Object({
    sells_testing_not_trust: Type.Literal(true),
    paid_order_cannot_change_verdict: Type.Literal(true),
    spend_on_target_endpoint: Type.Literal(false),
    marketplace_trust_state_mutated: Type.Literal(false),
    router_ranking_mutated: Type.Literal(false),
    listings_mutated: Type.Literal(false),
    outbound_fetch_boundary: Type.String(),
    outbound_fetches_use_safe_fetch: Type.Literal(true),
    credentials_sent_to_target: Type.Literal(false),
    x402_challenges_paid: Type.Literal(false),
    mcp_tools_called: Type.Literal(false),
  }),
});

// Connector records (the spec's agent connector record v1). Extra properties are allowed and kept.
const ConnectorType = Type.Union([Type.Literal("trading_connector"), Type.Literal("banking_connector")]);
const ConnectorStatus = Type.Union(
  ["disconnected", "connection_required", "connected", "disabled", "error"].map((s) => Type.Literal(s)),
);
const McpServerName = Type.Union([Type.Literal("trading-connector"), Type.Literal("banking-connector")]);

export const ConnectorBody = Type.Object(
  {
    deployment_id: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    connector_type: ConnectorType,
    status: Type.Optional(ConnectorStatus),
    mcp_server_name: McpServerName,
    endpoint: Type.Optional(Type.String({ minLength: 1, maxLength: 2048 })),
    risk_level: Type.Optional(Type.Literal("high")),
  },
  { additionalProperties: true, maxProperties: 64 },
);

export const SafeStatus = Type.Object(
  {
    schema_probe_available: Type.Boolean(),
    tools_visible: Type.Boolean(),
    requires_connection: Type.Boolean(),
  },
  { additionalProperties: true },
);

export const ConnectorRecord = Type.Object(
  {
    schema: Type.String(),
    connector_id: Uuid,
    deployment_id: Type.Optional(Type.String()),
    connector_type: ConnectorType,
    status: ConnectorStatus,
    mcp_server_name: McpServerName,
    endpoint: Type.Optional(Type.String()),
    risk_level: Type.Literal("high"),
    last_probe_at: NullableTimestamp,
    last_safe_status: SafeStatus,
    created_at: Timestamp,
    updated_at: Timestamp,
  },
  { additionalProperties: true },
);

export const ConnectorList = Type.Object({ connectors: Type.Array(ConnectorRecord) });
