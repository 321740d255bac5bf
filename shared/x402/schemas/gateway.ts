import { Type } from "@sinclair/typebox";
import { Nullable, Timestamp, Uuid } from "../../kernel/wire.js";

// Request and response shapes of the x402 gateway routes (docs/x402.md "x402 gateway: how an agent pays").
// Responses are open objects: the documents grow, and clients must ignore what they do not know.

const Input = Type.Record(Type.String(), Type.Unknown(), {
  description: "validated against the listing's input_schema",
});
const Open = { additionalProperties: true } as const;
const Gate = Type.Object({
  enabled: Type.Boolean(),
  reason: Nullable(Type.String()),
  read_first: Type.String(),
});

export const X402ExecuteBody = Type.Object(
  { quote_id: Type.String({ minLength: 1, maxLength: 100 }), input: Input },
  { additionalProperties: false },
);

export const X402InvokeBody = Type.Object(
  { input: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { default: {} })) },
  { additionalProperties: false },
);

export const ListingParams = Type.Object({ listing_id: Type.String({ maxLength: 100 }) });
export const InvocationParams = Type.Object({ invocation_id: Type.String({ maxLength: 100 }) });
export const X402MatchQuery = Type.Object(
  { task: Type.String({ minLength: 1, maxLength: 200 }) },
  { additionalProperties: false },
);
export const PageQuery = Type.Object(
  {
    limit: Type.Integer({ minimum: 1, maximum: 100, default: 100 }),
    offset: Type.Integer({ minimum: 0, maximum: 100000, default: 0 }),
  },
  { additionalProperties: false },
);

const Settlement = Type.Object(
  {
    state: Type.String(),
    transaction: Nullable(Type.String()),
    transaction_null_reason: Nullable(Type.String()),
    block_number: Nullable(Type.String()),
    amount_atomic: Type.String(),
    evidence: Type.Record(Type.String(), Type.Unknown()),
  },
  Open,
);
const Payment = Type.Object(
  { payment_id: Uuid, protocol: Type.String(), quote_id: Uuid, payer: Type.String(), status: Type.String() },
  Open,
);

export const X402PaidResult = Type.Object(
  {
    success: Type.Literal(true),
    output: Type.Unknown(),
    invocation_id: Uuid,
    status: Type.Literal("succeeded"),
    receipt_id: Nullable(Uuid),
    provider: Type.Object({ listing_id: Uuid, name: Nullable(Type.String()), slug: Nullable(Type.String()) }),
    cost: Type.Object({
      amount_usdc: Type.String(),
      amount_atomic: Type.String(),
      currency: Type.Literal("USDC"),
    }),
    payment: Payment,
    settlement: Settlement,
    status_url: Type.String(),
  },
  { title: "X402PaidResult" },
);

export const X402Pending = Type.Object({
  success: Type.Literal(false),
  status: Type.String(),
  invocation_id: Uuid,
  message: Type.String(),
  status_url: Type.String(),
});

export const X402StatusResult = Type.Object(
  {
    invocation_id: Uuid,
    status: Type.String(),
    output: Type.Unknown(),
    error: Type.Unknown(),
    attempts: Type.Array(Type.Record(Type.String(), Type.Unknown())),
    receipt_id: Nullable(Uuid),
    payment: Payment,
    settlement: Settlement,
    status_url: Type.String(),
  },
  { title: "X402Status" },
);

export const X402MatchResult = Type.Object(
  {
    task: Type.String(),
    requires_payment: Type.Boolean(),
    quote_id: Nullable(Uuid),
    quote_null_reason: Nullable(Type.String()),
    candidate: Type.Record(Type.String(), Type.Unknown()),
  },
  Open,
);

export const X402Marketplace = Type.Object(
  {
    name: Type.String(),
    paid_execution: Gate,
    how_to_pay: Type.Array(Type.String()),
    links: Type.Record(Type.String(), Type.String()),
  },
  Open,
);

export const X402Listings = Type.Object(
  {
    paid_execution: Gate,
    total: Type.Integer(),
    limit: Type.Integer(),
    offset: Type.Integer(),
    listings: Type.Array(
      Type.Object({ listing_id: Uuid, price_atomic: Type.String(), requires_payment: Type.Boolean() }, Open),
    ),
  },
  Open,
);

const DiscoveryItem = Type.Object(
  {
    resource: Type.String(),
    type: Type.Literal("http"),
    x402Version: Type.Literal(2),
    accepts: Type.Array(Type.Record(Type.String(), Type.Unknown())),
    lastUpdated: Timestamp,
  },
  Open,
);

export const X402Discovery = Type.Object(
  {
    x402Version: Type.Literal(2),
    items: Type.Array(DiscoveryItem),
    pagination: Type.Object({ limit: Type.Integer(), offset: Type.Integer(), total: Type.Integer() }),
  },
  Open,
);

export const X402ListingDetail = Type.Object(
  {
    listing_id: Uuid,
    price_atomic: Type.String(),
    paid_execution: Gate,
    accepts: Type.Array(Type.Unknown()),
  },
  Open,
);

export const X402ListingDiscovery = DiscoveryItem;

export const WellKnownX402 = Type.Object({
  version: Type.Literal(1),
  resources: Type.Array(Type.String()),
  instructions: Type.String(),
});

export const X402ServiceCard = Type.Object(
  {
    schema: Type.String(),
    name: Type.String(),
    networks: Type.Array(Type.Record(Type.String(), Type.Unknown())),
    endpoints: Type.Record(Type.String(), Type.String()),
    protocols: Type.Array(Type.Record(Type.String(), Type.Unknown())),
    paid_execution: Gate,
  },
  Open,
);

export const X402EchoQuery = Type.Object(
  { message: Type.Optional(Type.String({ maxLength: 4000 })) },
  { additionalProperties: false },
);
