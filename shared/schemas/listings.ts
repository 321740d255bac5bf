import { Type } from "@sinclair/typebox";
import { BondBlock, PayoutSummary } from "./seller-money.js";

const Category = Type.String({
  pattern: "^[a-z0-9][a-z0-9-]{1,39}$",
  description: "e.g. nlp, devtools, ai-optimization",
});
const Tag = Type.String({ pattern: "^[a-z0-9][a-z0-9._-]{0,39}$" });

/** The spec's create-time fields plus the optional declarations a seller may make. */
const editable = {
  name: Type.String({ minLength: 3, maxLength: 100, pattern: "\\S" }),
  description: Type.String({ minLength: 10, maxLength: 2000 }),
  long_description: Type.Optional(Type.String({ maxLength: 20000 })),
  category: Category,
  endpoint_url: Type.String({
    minLength: 8,
    maxLength: 2048,
    description: "public http(s) URL of your endpoint",
  }),
  pricing_model: Type.Literal("per_call"),
  price_per_unit: Type.Number({
    minimum: 0,
    maximum: 1000,
    description: "USDC per call, at most 6 decimals; 0 = free",
  }),
  input_schema: Type.Record(Type.String(), Type.Unknown(), {
    description: "JSON Schema of the input; must compile",
  }),
  output_schema: Type.Optional(Type.Union([Type.Record(Type.String(), Type.Unknown()), Type.Null()])),
  tags: Type.Array(Tag, { maxItems: 12, uniqueItems: true }),
  safe_to_retry: Type.Optional(
    Type.Boolean({ description: "may the router call you twice for one invocation" }),
  ),
  data_retention: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  allowed_use: Type.Optional(Type.String({ maxLength: 2000 })),
  tumbler_enabled: Type.Optional(
    Type.Boolean({
      description:
        "opt in to the sandbox: buyers may call your endpoint for real, paying simulated tUSDC that is never paid out (default false)",
    }),
  ),
};

/**
 * Create-time body. Unknown fields are refused, so server-owned fields (id, seller_id, status,
 * verification_status, counters, featured, review_*, trust fields…) can never be mass-assigned.
 */
export const PublishListingBody = Type.Object(editable, { additionalProperties: false });

export const ChangeListingBody = Type.Partial(Type.Object(editable, { additionalProperties: false }), {
  additionalProperties: false,
  minProperties: 1,
});

export const CatalogQuery = Type.Object(
  {
    search: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    category: Type.Optional(Category),
    visibility: Type.Optional(
      Type.Union([Type.Literal("featured"), Type.Literal("search"), Type.Literal("registry")]),
    ),
    limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 100, default: 100 })),
    offset: Type.Optional(Type.Integer({ minimum: 0, maximum: 1_000_000, default: 0 })),
  },
  { additionalProperties: false },
);

export const ListingIdParams = Type.Object({ id: Type.String({ maxLength: 100 }) });

/** The listing record is large and computed (shared/domain/listing-record); its schema names the core. */
export const ListingRecordSchema = Type.Object(
  {
    id: Type.String({ format: "uuid" }),
    slug: Type.String(),
    name: Type.String(),
    status: Type.String(),
    version: Type.String(),
    price_per_unit: Type.Number(),
    currency: Type.Literal("USDC"),
    verification_status: Type.Union([
      Type.Literal("verified"),
      Type.Literal("reachable"),
      Type.Literal("failed"),
      Type.Null(),
    ]),
    commerce_contract: Type.Record(Type.String(), Type.Unknown()),
    invocation_contract: Type.Record(Type.String(), Type.Unknown()),
    telemetry: Type.Record(Type.String(), Type.Unknown()),
    completeness: Type.Record(Type.String(), Type.Unknown()),
    buyer_evidence: Type.Record(Type.String(), Type.Unknown()),
    export_profiles: Type.Record(Type.String(), Type.Unknown()),
  },
  { additionalProperties: true },
);

const Availability = Type.Object(
  {
    status: Type.String(),
    paid_execution: Type.String(),
    reason: Type.Union([Type.String(), Type.Null()]),
    intent: Type.String(),
    scope: Type.String(),
    completion_target: Type.Union([Type.String(), Type.Null()]),
    architecture_state: Type.String(),
    message: Type.String(),
    safe_discovery_endpoints: Type.Array(Type.String()),
    human_entry_paths: Type.Array(Type.String()),
    custody: Type.Object({
      status: Type.String(),
      authoritative: Type.Boolean(),
      authority_read_ok: Type.Boolean(),
    }),
  },
  { additionalProperties: true },
);

export const ListingPage = Type.Object({
  capabilities: Type.Array(ListingRecordSchema),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
  has_more: Type.Boolean(),
  marketplace_info: Type.Object({
    currency: Type.Literal("USDC"),
    requirement: Type.String(),
    how_to_fund: Type.Union([Type.String(), Type.Null()]),
    pricing_info: Type.String(),
    discovery_visibility: Type.Object({
      mode: Type.String(),
      requested: Type.Union([Type.String(), Type.Null()]),
      supported_modes: Type.Array(Type.String()),
      curated: Type.Boolean(),
      lanes: Type.Record(Type.String(), Type.String()),
    }),
    funding: Type.Object({ status: Type.String(), reason: Type.Union([Type.String(), Type.Null()]) }),
  }),
  availability: Availability,
});

export const MarketDocument = Type.Intersect([
  ListingPage,
  Type.Object({
    schema: Type.String(),
    platform: Type.String(),
    generated_at: Type.String({ format: "date-time" }),
  }),
]);

export const SellerStatus = Type.Object({
  agent_id: Type.String({ format: "uuid" }),
  live_listings: Type.Integer(),
  free_concurrent_listing_slots: Type.Integer(),
  free_concurrent_listing_slots_remaining: Type.Integer(),
  stake_required_for_next_listing: Type.Boolean(),
  bond: BondBlock,
  payouts: PayoutSummary,
  publish_listing_template: Type.Record(Type.String(), Type.Unknown()),
  next_best_action: Type.String(),
  listings: Type.Array(
    Type.Object({
      id: Type.String(),
      slug: Type.String(),
      name: Type.String(),
      status: Type.String(),
      version: Type.String(),
    }),
  ),
});
