import { type TSchema, Type } from "@sinclair/typebox";
import { Nullable, Timestamp } from "../kernel/wire.js";
import { BondBlock, PayoutSummary } from "../money/index.js";

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

/** A value the record explains when it is null: `<name>` and, only when null, `<name>_null_reason`. */
function explained<S extends TSchema>(name: string, schema: S) {
  return { [name]: Nullable(schema), [`${name}_null_reason`]: Type.Optional(Type.String()) };
}

/**
 * The spec types these read-time flags as integer 0/1 (spec "Listing (capability)" table), so the
 * record serves them that way; `flags` carries the same facts as JSON booleans (docs/api.md "Wire types").
 */
const ZeroOne = Type.Union([Type.Literal(0), Type.Literal(1)]);
const FLAG_NAMES = ["hosted", "featured", "safe_to_retry", "platform_hosted", "tumbler_enabled"] as const;

/**
 * The listing record (shared/catalog/listing-record): every top-level field typed, so a type drift fails
 * the response check in tests; the large nested contract blocks are objects whose shape the listing
 * record's own tests pin down.
 */
export const ListingRecordSchema = Type.Object(
  {
    id: Type.String({ format: "uuid" }),
    ...explained("seller_id", Type.String({ format: "uuid" })),
    slug: Type.String(),
    name: Type.String(),
    description: Type.String(),
    long_description: Type.String(),
    category: Type.String(),
    tags: Type.Array(Type.String()),
    listing_type: Type.String(),
    delivery_method: Type.String(),
    version: Type.String(),
    input_schema: Type.Record(Type.String(), Type.Unknown()),
    ...explained("output_schema", Type.Record(Type.String(), Type.Unknown())),
    runtime: Type.String(),
    pricing_model: Type.String(),
    price_per_unit: Type.Number(),
    currency: Type.Literal("USDC"),
    max_latency_ms: Type.Integer(),
    rate_limit: Type.Integer(),
    concurrency_limit: Type.Integer(),
    data_retention: Type.String(),
    allowed_use: Type.String(),
    risk_flags: Type.Array(Type.String()),
    required_scopes: Type.Array(Type.String()),
    total_invocations: Type.Integer(),
    success_count: Type.Integer(),
    failure_count: Type.Integer(),
    ...explained("avg_latency_ms", Type.Number()),
    status: Type.String(),
    ...Object.fromEntries(FLAG_NAMES.map((name) => [name, ZeroOne])),
    flags: Type.Object(Object.fromEntries(FLAG_NAMES.map((name) => [name, Type.Boolean()])), {
      additionalProperties: false,
      description: "hosted, featured, safe_to_retry, platform_hosted, tumbler_enabled as JSON booleans",
    }),
    review_status: Type.String(),
    ...explained("review_score", Type.Number()),
    ...explained("review_notes", Type.String()),
    ...explained("reviewed_at", Timestamp),
    ...explained("reviewed_by", Type.String()),
    proxy_mode: Type.String(),
    ...explained("proxy_upstream_url", Type.String()),
    proxy_headers: Type.Record(Type.String(), Type.String()),
    proxy_strip_path: ZeroOne,
    created_at: Timestamp,
    updated_at: Timestamp,
    ...explained("last_invoked_at", Timestamp),
    ...explained("last_paid_success_at", Timestamp),
    ...explained("verified_at", Timestamp),
    paid_success_count: Type.Integer(),
    refunded_paid_count: Type.Integer(),
    ...explained("seller_name", Type.String()),
    ...explained("seller_tier", Type.String()),
    seller_verified: Type.Boolean(),
    seller_human_verified: Type.Boolean(),
    ...explained("seller_agent_uri", Type.String()),
    ...explained("seller_agent_uri_slug", Type.String()),
    ...explained("seller_trust_score", Type.Number()),
    ...explained("seller_trust_grade", Type.String()),
    ...explained("seller_trust_badge", Type.String()),
    ...explained("seller_trust_confidence", Type.String()),
    verified_review_count: Type.String({ pattern: "^\\d+$" }),
    receipt_linked_review_count: Type.String({ pattern: "^\\d+$" }),
    ...explained("avg_review_rating", Type.String()),
    ...explained(
      "verification_status",
      Type.Union([Type.Literal("verified"), Type.Literal("reachable"), Type.Literal("failed")]),
    ),
    ...explained("endpoint_health", Type.String()),
    ...explained("endpoint_health_rate", Type.Number({ minimum: 0, maximum: 1 })),
    ...explained("success_rate", Type.Number({ minimum: 0, maximum: 1 })),
    activity_status: Type.String(),
    ...explained("days_since_last_invoke", Type.Integer()),
    public_proof_status: Type.String(),
    public_proof_label: Type.String(),
    public_proof_summary: Type.String(),
    public_proof_evidence: Type.Record(Type.String(), Type.Unknown()),
    invokable: Type.Boolean(),
    invokable_blockers: Type.Optional(Type.Array(Type.String())),
    service_tier: Type.Union([
      Type.Literal("free_tool"),
      Type.Literal("paid_tool"),
      Type.Literal("external"),
    ]),
    buying_modes: Type.Array(Type.String()),
    ...explained("buying_mode", Type.String()),
    exposure_mode: Type.String(),
    procurement_eligible: Type.Boolean(),
    direct_invoke_eligible: Type.Boolean(),
    router_checkout_eligible: Type.Boolean(),
    public_supply_origin: Type.String(),
    first_party_supply: Type.Boolean(),
    external_seller_supply: Type.Boolean(),
    catalog_visibility_state: Type.String(),
    world_agentkit_free_trial_enabled: Type.Boolean(),
    commerce_contract: Type.Record(Type.String(), Type.Unknown()),
    invocation_contract: Type.Record(Type.String(), Type.Unknown()),
    telemetry: Type.Record(Type.String(), Type.Unknown()),
    completeness: Type.Record(Type.String(), Type.Unknown()),
    buyer_evidence: Type.Record(Type.String(), Type.Unknown()),
    export_profiles: Type.Record(Type.String(), Type.Unknown()),
  },
  { additionalProperties: false },
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
  /**
   * Not in the interface spec (its total is a bare integer): "eq" when total counts every match, "gte"
   * when search words matched more listings than a search ranks (CATALOG_SEARCH_MATCH_CAP) and total is
   * that cap. Elasticsearch's hits.total.relation, by name and meaning.
   */
  total_relation: Type.Union([Type.Literal("eq"), Type.Literal("gte")], {
    description:
      '"eq": total counts every matching listing. "gte": search words matched more listings than a search ranks (CATALOG_SEARCH_MATCH_CAP, default 1000); total is that number, and the pages hold that many of the matches, ranked. Narrow the words or add a category to reach the rest.',
  }),
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

/** GET /api/categories. */
export const CategoryList = Type.Object({
  lane: Type.Literal("registry"),
  categories: Type.Array(Type.Object({ category: Type.String(), listings: Type.Integer({ minimum: 1 }) })),
  generated_at: Type.String({ format: "date-time" }),
});
