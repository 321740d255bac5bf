import { describe, expect, it } from "vitest";
import {
  type ListingFacts,
  type ListingStats,
  NO_HEALTH,
  NO_REVIEWS,
  NO_STATS,
  type SellerFacts,
} from "../../shared/catalog/listing-facts.js";
import {
  type BuildOptions,
  buildListingRecord,
  type ListingRecord,
  PLATFORM_MAX_LATENCY_MS,
  SPEC_FAILURE_CODES,
} from "../../shared/catalog/listing-record/index.js";
import { recordJson } from "../../shared/catalog/record-cache.js";
import type { ListingRow } from "../../shared/catalog/store/listings.js";
import type { Db } from "../../shared/db/knex.js";
import { ERRORS, type ErrorSpec } from "../../shared/errors.js";
import { wholeDaysSince } from "../../shared/kernel/days.js";
import { MAX_PROVIDER_LATENCY_MS } from "../../shared/routing/provider-call.js";

// ---------------------------------------------------------------------------------------------------
// Facts factories: plain objects, no database. Each scenario is one realistic listing state.

const NOW = new Date("2026-03-01T12:00:00.000Z");
const DAY = 86_400_000;
const daysAgo = (days: number) => new Date(NOW.getTime() - days * DAY);
const BASE = "https://market.example.org";
const SELLER_ENDPOINT = "https://seller-private.example.net/hidden/run";
const SELLER_UPSTREAM = "https://upstream-private.example.net/v2";
const SELLER_HEADER_SECRET = "sk_live_do_not_leak";

const ECHO_SCHEMA = {
  type: "object",
  properties: {
    message: { type: "string", maxLength: 4000, default: "agentmarket connectivity probe" },
    metadata: { type: "object" },
  },
  additionalProperties: true,
};

function listingRow(overrides: Partial<ListingRow> = {}): ListingRow {
  return {
    id: "11111111-1111-4111-8111-111111111111",
    seller_id: null,
    slug: "echo",
    name: "Echo",
    description: "Free connectivity check: echoes the submitted input with server metadata.",
    long_description: "",
    category: "devtools",
    endpoint_url: "/api/tools/echo",
    pricing_model: "per_call",
    price_micros: "0",
    currency: "USDC",
    input_schema: ECHO_SCHEMA,
    output_schema: null,
    tags: ["echo", "test", "connectivity"],
    status: "active",
    version: "1.0.0",
    safe_to_retry: true,
    max_latency_ms: 30000,
    rate_limit: 100,
    concurrency_limit: 10,
    public_supply_origin: "first_party_service",
    platform_hosted: true,
    tool_id: null,
    listing_type: "service",
    delivery_method: "api_endpoint",
    runtime: "api",
    data_retention: "none",
    allowed_use: "",
    risk_flags: [],
    required_scopes: [],
    featured: false,
    tumbler_enabled: false,
    review_status: "approved",
    review_score: null,
    review_notes: null,
    reviewed_at: null,
    reviewed_by: null,
    proxy_mode: "direct",
    proxy_upstream_url: null,
    proxy_headers: {},
    proxy_strip_path: false,
    verification_status: null,
    verified_at: null,
    retired_at: null,
    last_success_at: null,
    created_at: new Date("2026-01-01T00:00:00.000Z"),
    updated_at: new Date("2026-01-02T00:00:00.000Z"),
    ...overrides,
  };
}

const SELLER: SellerFacts = {
  id: "22222222-2222-4222-8222-222222222222",
  name: "Acme Tools",
  created_at: new Date("2025-12-01T00:00:00.000Z"),
};

interface FactsOverrides {
  listing?: Partial<ListingRow>;
  seller?: SellerFacts | null;
  stats?: Partial<ListingStats>;
  health?: Partial<ListingFacts["health"]>;
  reviews?: Partial<ListingFacts["reviews"]>;
  paidGate?: ListingFacts["paidGate"];
  now?: Date;
}

function buildFacts(o: FactsOverrides = {}): ListingFacts {
  const stats = { ...NO_STATS, ...o.stats };
  return {
    listing: listingRow(o.listing),
    seller: o.seller ?? null,
    stats,
    health: { ...NO_HEALTH, ...o.health },
    reviews: { ...NO_REVIEWS, ...o.reviews },
    paidGate: o.paidGate ?? { enabled: false, reason: "platform_custody_frozen" },
    platformId: "agentmarket",
    baseUrl: BASE,
    daysSinceLastInvoke: wholeDaysSince(o.now ?? NOW, stats.last_invoked_at),
  };
}

/** The first-party free echo listing, called a few times. */
function echoFacts(o: FactsOverrides = {}): ListingFacts {
  return buildFacts({
    ...o,
    listing: { last_success_at: daysAgo(1), ...o.listing },
    stats: {
      total_invocations: 4,
      success_count: 4,
      attempts_30d: 4,
      successful_attempts_30d: 4,
      avg_latency_ms: 3.27,
      p50_latency_ms: 3,
      p95_latency_ms: 5,
      last_invoked_at: daysAgo(1),
      ...o.stats,
    },
  });
}

/** A paid external listing that has never been called (the paid gate is closed). */
function paidExternalFacts(o: FactsOverrides = {}): ListingFacts {
  return buildFacts({
    seller: SELLER,
    ...o,
    listing: {
      id: "33333333-3333-4333-8333-333333333333",
      seller_id: SELLER.id,
      slug: "acme-summarize",
      name: "Acme Summarize",
      category: "nlp",
      endpoint_url: SELLER_ENDPOINT,
      price_micros: "20000",
      tags: ["summarize", "Summaries"],
      input_schema: {
        type: "object",
        required: ["text", "max_words"],
        properties: {
          text: { type: "string", minLength: 10 },
          max_words: { type: "integer", minimum: 5 },
          style: { type: "string", enum: ["brief", "detailed"] },
        },
      },
      output_schema: { type: "object", required: ["summary"], properties: { summary: { type: "string" } } },
      public_supply_origin: "external_seller",
      platform_hosted: false,
      proxy_mode: "proxy",
      proxy_upstream_url: SELLER_UPSTREAM,
      proxy_headers: { "X-Api-Key": SELLER_HEADER_SECRET },
      long_description: "Summarizes English text.",
      allowed_use: "any lawful use",
      ...o.listing,
    },
  });
}

/** An external free listing with calls, latencies and health probes. */
function busyFacts(o: FactsOverrides = {}): ListingFacts {
  return paidExternalFacts({
    ...o,
    listing: {
      price_micros: "0",
      last_success_at: daysAgo(2),
      verification_status: "verified",
      ...o.listing,
    },
    stats: {
      total_invocations: 10,
      success_count: 7,
      failure_count: 2,
      attempts_30d: 8,
      successful_attempts_30d: 6,
      avg_latency_ms: 150.456,
      p50_latency_ms: 120,
      p95_latency_ms: 480,
      last_invoked_at: daysAgo(2),
      ...o.stats,
    },
    health: {
      probe_count_7d: 4,
      probe_success_7d: 4,
      probe_count_30d: 10,
      probe_success_30d: 9,
      latest_status: "healthy",
      latest_probe_at: daysAgo(0.5),
      ...o.health,
    },
  });
}

const retiredFacts = () => busyFacts({ listing: { status: "retired", retired_at: daysAgo(1) } });
const failedFacts = () => busyFacts({ listing: { verification_status: "failed", verified_at: daysAgo(1) } });

const SCENARIOS: [string, () => ListingFacts][] = [
  ["free first-party echo", () => echoFacts()],
  ["paid external listing with no calls", () => paidExternalFacts()],
  [
    "paid external listing behind an open gate",
    () => paidExternalFacts({ paidGate: { enabled: true, reason: null } }),
  ],
  ["external listing with calls and latencies", () => busyFacts()],
  ["retired listing", retiredFacts],
  ["failed-verification listing", failedFacts],
  ["external listing whose seller row is missing", () => paidExternalFacts({ seller: null })],
];

// ---------------------------------------------------------------------------------------------------
// Field lists copied from the spec ("Listing (capability)"), so a missing field fails by name.

const words = (text: string): string[] => text.split(/\s+/).filter((w) => w.length > 0);

const READ_TIME_FIELDS = words(`
  id seller_id slug name description long_description category listing_type delivery_method version
  input_schema output_schema hosted runtime pricing_model price_per_unit currency max_latency_ms
  rate_limit concurrency_limit data_retention allowed_use risk_flags required_scopes total_invocations
  success_count failure_count avg_latency_ms status featured safe_to_retry platform_hosted
  tumbler_enabled review_status review_score review_notes reviewed_at reviewed_by proxy_mode
  proxy_upstream_url proxy_headers proxy_strip_path created_at updated_at last_invoked_at
  last_paid_success_at verified_at paid_success_count refunded_paid_count seller_name seller_tier
  seller_verified seller_human_verified seller_agent_uri seller_agent_uri_slug seller_trust_score
  seller_trust_grade seller_trust_badge seller_trust_confidence verified_review_count
  receipt_linked_review_count avg_review_rating verification_status endpoint_health
  endpoint_health_rate success_rate activity_status days_since_last_invoke public_proof_status
  public_proof_label public_proof_summary public_proof_evidence invokable service_tier buying_modes
  buying_mode exposure_mode procurement_eligible direct_invoke_eligible router_checkout_eligible
  public_supply_origin first_party_supply external_seller_supply catalog_visibility_state
  world_agentkit_free_trial_enabled commerce_contract invocation_contract telemetry completeness
  buyer_evidence export_profiles
`);

const COMMERCE_FIELDS = words(`
  schema product_type pricing_model unit_price_usdc currency settlement_rail delivery buyer_commitment
  trust_requirements contract_features maturity
`);
const INVOCATION_FIELDS = words(`
  schema lifecycle_state listing_id input_schema input_contract output_schema output_contract
  example_request example_response pricing auth_mode auth_scopes_required payment_mode
  payment_alternatives retry_policy idempotency operation_safety failure_modes fallback_behavior
  data_retention last_verified_at verification telemetry completeness
`);
const TELEMETRY_FIELDS = words(`
  success_rate_pct uptime_30d_pct p50_latency_ms p95_latency_ms health_probe_count_30d null_reason
`);
const COMPLETENESS_FIELDS = words(`
  ready_for_search_discovery ready_for_match_ranking ready_for_autonomous_invocation
  ready_for_paid_autonomous_invocation ready_for_x402_export ready_for_external_marketplace_export
  blockers warnings input_schema_declared output_schema_declared data_retention_declared
`);
const BUYER_EVIDENCE_FIELDS = words(`
  listing_id task_aliases provider_name endpoint_type price_model max_expected_cost_usdc
  commerce_contract invocation_contract auth_requirement payment_requirement safe_to_retry
  retry_guidance total_invocations success_count failure_count avg_latency_ms avg_latency_ms_source
  p50_latency_ms p95_latency_ms uptime_7d_pct uptime_30d_pct health_probe_count_7d
  health_probe_count_30d latest_health_status schema_summary review_count verified_review_count
  receipt_linked_review_count avg_rating refund_rate_pct visibility export_profiles copy_paste
`);
const EXPORT_PROFILE_KEYS = words(`
  x402_bazaar x402_ecosystem agora402 skyfire_directory agent_bazaar google_cloud_marketplace
  salesforce_agentexchange
`);

// Subtrees holding seller-declared JSON (schemas and examples built from them) are data, not computed
// values, so a null inside them needs no reason. Null-reason keys themselves are exempt: the spec's
// `null_reason` is null exactly when nothing in its block is missing.
const DATA_KEYS = new Set(["input_schema", "output_schema", "schema", "body", "input"]);

/** Every null value in the record whose sibling `<key>_null_reason` is missing or empty, as paths. */
function unexplainedNulls(value: unknown, path = "$"): string[] {
  if (Array.isArray(value)) return value.flatMap((item, i) => unexplainedNulls(item, `${path}[${i}]`));
  if (value === null || typeof value !== "object") return [];
  const obj = value as Record<string, unknown>;
  const problems: string[] = [];
  for (const [key, child] of Object.entries(obj)) {
    if (key === "null_reason" || key.endsWith("_null_reason") || DATA_KEYS.has(key)) continue;
    if (child === null) {
      const reason = obj[`${key}_null_reason`];
      if (typeof reason !== "string" || reason.length === 0) problems.push(`${path}.${key}`);
    } else {
      problems.push(...unexplainedNulls(child, `${path}.${key}`));
    }
  }
  return problems;
}

/** Every `<key>_null_reason` whose value is not null: a stale reason beside real data. */
function staleReasons(value: unknown, path = "$"): string[] {
  if (Array.isArray(value)) return value.flatMap((item, i) => staleReasons(item, `${path}[${i}]`));
  if (value === null || typeof value !== "object") return [];
  const obj = value as Record<string, unknown>;
  const problems: string[] = [];
  for (const [key, child] of Object.entries(obj)) {
    if (key.endsWith("_null_reason") && obj[key.slice(0, -"_null_reason".length)] !== null) {
      problems.push(`${path}.${key}`);
    }
    if (!DATA_KEYS.has(key)) problems.push(...staleReasons(child, `${path}.${key}`));
  }
  return problems;
}

const build = (facts: ListingFacts): ListingRecord => buildListingRecord(facts);
const json = (record: ListingRecord): any => JSON.parse(JSON.stringify(record));

describe("listing record shape", () => {
  it.each(SCENARIOS)("serves every spec read-time field and nested block (%s)", (_, facts) => {
    const record = json(build(facts()));
    for (const field of READ_TIME_FIELDS) expect(record, field).toHaveProperty([field]);
    for (const f of COMMERCE_FIELDS) expect(record.commerce_contract, f).toHaveProperty([f]);
    for (const f of INVOCATION_FIELDS) expect(record.invocation_contract, f).toHaveProperty([f]);
    for (const f of TELEMETRY_FIELDS) expect(record.telemetry, f).toHaveProperty([f]);
    for (const f of COMPLETENESS_FIELDS) expect(record.completeness, f).toHaveProperty([f]);
    for (const f of BUYER_EVIDENCE_FIELDS) expect(record.buyer_evidence, f).toHaveProperty([f]);
    expect(Object.keys(record.export_profiles).sort()).toEqual([...EXPORT_PROFILE_KEYS].sort());
    expect(Object.keys(record.public_proof_evidence).sort()).toEqual(
      ["paid_calls", "receipt_linked_reviews", "runtime_status", "successful_calls", "total_calls"].sort(),
    );
  });

  it.each(SCENARIOS)(
    "explains every null with a sibling *_null_reason and no reason is stale (%s)",
    (_, facts) => {
      const record = build(facts());
      expect(unexplainedNulls(record)).toEqual([]);
      expect(staleReasons(record)).toEqual([]);
    },
  );

  it("the walker notices an unexplained null (the rule can fail)", () => {
    expect(unexplainedNulls({ a: { b: null, c: 1 } })).toEqual(["$.a.b"]);
    expect(unexplainedNulls({ b: null, b_null_reason: "" })).toEqual(["$.b"]);
    expect(staleReasons({ b: 1, b_null_reason: "x" })).toEqual(["$.b_null_reason"]);
  });

  it("is a pure function of the facts: same facts, same record; facts are not mutated", () => {
    const facts = busyFacts();
    const snapshot = structuredClone(facts);
    expect(json(build(facts))).toEqual(json(build(facts)));
    expect(facts).toEqual(snapshot);
  });

  it("serves integer flags as 0/1, timestamps as ISO strings and review numerics as strings", () => {
    const record = build(
      busyFacts({ listing: { featured: true }, reviews: { verified_review_count: 3, avg_rating: 4.256 } }),
    );
    expect([record.featured, record.safe_to_retry, record.platform_hosted, record.tumbler_enabled]).toEqual([
      1, 1, 0, 0,
    ]);
    expect(record.hosted).toBe(0);
    expect(record.created_at).toBe("2026-01-01T00:00:00.000Z");
    expect(record.last_invoked_at).toBe(daysAgo(2).toISOString());
    expect(record.verified_review_count).toBe("3");
    expect(record.receipt_linked_review_count).toBe("0");
    expect(record.avg_review_rating).toBe("4.26");
    const none = build(echoFacts());
    expect(none.avg_review_rating).toBeNull();
    expect(none.avg_review_rating_null_reason).toBe("no_reviews_recorded");
  });

  it("uses the platform id in both schema names", () => {
    const record = build(echoFacts());
    expect(record.commerce_contract.schema).toBe("agentmarket.commerce-contract.v1");
    expect(record.invocation_contract.schema).toBe("agentmarket.public-capability-invocation-contract.v1");
    const other = build({ ...echoFacts(), platformId: "othermarket" });
    expect(other.commerce_contract.schema).toBe("othermarket.commerce-contract.v1");
  });

  it("keeps its copy of the platform latency cap equal to the provider call's", () => {
    expect(PLATFORM_MAX_LATENCY_MS).toBe(MAX_PROVIDER_LATENCY_MS);
    expect(build(echoFacts({ listing: { max_latency_ms: 90_000 } })).max_latency_ms).toBe(30_000);
    expect(build(echoFacts({ listing: { max_latency_ms: 5_000 } })).max_latency_ms).toBe(5_000);
  });
});

describe("seller endpoints and secrets", () => {
  it.each(SCENARIOS)("never serialize a seller's endpoint, upstream or header value (%s)", (_, facts) => {
    const text = JSON.stringify(build(facts()));
    expect(text).not.toContain("seller-private.example.net");
    expect(text).not.toContain("upstream-private.example.net");
    expect(text).not.toContain(SELLER_HEADER_SECRET);
  });

  it("withholds the proxy upstream with a reason and keeps only header names", () => {
    const record = build(paidExternalFacts());
    expect(record).not.toHaveProperty("endpoint_url");
    expect(record.proxy_upstream_url).toBeNull();
    expect(record.proxy_upstream_url_null_reason).toBe("upstream_url_withheld_not_public");
    expect(record.proxy_headers).toEqual({ "X-Api-Key": "[redacted]" });
    expect(build(echoFacts()).proxy_upstream_url_null_reason).toBe("no_proxy_upstream_configured");
  });

  it("tells platform-hosted from relay-hosted endpoints", () => {
    expect(build(echoFacts()).buyer_evidence.endpoint_type).toBe("platform_hosted");
    expect(build(echoFacts()).hosted).toBe(1);
    expect(build(paidExternalFacts()).buyer_evidence.endpoint_type).toBe("relay_hosted");
  });
});

describe("money", () => {
  it.each([
    ["0", 0, "0.000000"],
    ["20000", 0.02, "0.020000"],
    ["500000", 0.5, "0.500000"],
    ["1234567", 1.234567, "1.234567"],
    ["1", 0.000001, "0.000001"],
  ])("price_micros %s → price_per_unit %s and amount strings %s", (priceMicros, number, text) => {
    const record = build(paidExternalFacts({ listing: { price_micros: priceMicros } }));
    expect(record.price_per_unit).toBe(number);
    expect(record.commerce_contract.unit_price_usdc).toBe(text);
    expect(record.invocation_contract.pricing.amount_usdc).toBe(text);
    expect(record.buyer_evidence.max_expected_cost_usdc).toBe(text);
  });
});

describe("commerce_contract", () => {
  it("free listing: settlement_rail free, no payment, live", () => {
    const c = build(echoFacts()).commerce_contract;
    expect(c.settlement_rail).toBe("free");
    expect(c.buyer_commitment).toEqual({
      requires_payment: false,
      requires_agent_identity: true,
      requires_subscription: false,
      requires_escrow: false,
    });
    expect(c.delivery).toEqual({
      mode: "hosted_router",
      synchronous: true,
      async_supported: true,
      recurring_supported: false,
    });
    expect(c.contract_features.supports_retries).toBe(true);
    expect(c.maturity.status).toBe("live");
  });

  it("paid listing behind a closed gate: x402 rail, but only a proposed contract", () => {
    const c = build(paidExternalFacts()).commerce_contract;
    expect(c.settlement_rail).toBe("x402_usdc_base");
    expect(c.settlement_available).toBe(false);
    expect(c.buyer_commitment.requires_payment).toBe(true);
    expect(c.trust_requirements.receipt_required).toBe(true);
    expect(c.trust_requirements.seller_verification_recommended).toBe(true);
    expect(c.maturity.status).toBe("proposed_contract");
    expect(c.maturity.note).toContain("platform_custody_frozen");
  });

  it("paid listing behind an open gate is live; retired and withheld listings say so", () => {
    expect(
      build(paidExternalFacts({ paidGate: { enabled: true, reason: null } })).commerce_contract.maturity
        .status,
    ).toBe("live");
    expect(build(retiredFacts()).commerce_contract.maturity.status).toBe("retired");
    expect(build(failedFacts()).commerce_contract.maturity.status).toBe("withheld");
  });
});

describe("invocation_contract", () => {
  it("declares the spec's twelve failure modes exactly as the ERRORS table", () => {
    const modes = build(echoFacts()).invocation_contract.failure_modes;
    expect(modes.map((m) => m.code)).toEqual([...SPEC_FAILURE_CODES]);
    expect(modes).toHaveLength(12);
    for (const mode of modes) {
      const spec: ErrorSpec = ERRORS[mode.code];
      expect(mode).toEqual({
        code: mode.code,
        http_status: spec.status,
        // The spec's declared value; the envelope's beside it where it answers otherwise (UNAUTHORIZED).
        retryable: spec.specRetryable ?? spec.retryable,
        ...(spec.specRetryable === undefined ? {} : { envelope_retryable: spec.retryable }),
        buyer_action: spec.buyerAction,
        fallback: spec.fallback,
      });
    }
    expect(modes.find((m) => m.code === "TIMEOUT")).toMatchObject({ http_status: 504, retryable: true });
  });

  it("free echo: public_live, bearer auth, free payment, 3 attempts, idempotency optional with 24 h retention", () => {
    const c = build(echoFacts()).invocation_contract;
    expect(c.lifecycle_state).toBe("public_live");
    expect(c.auth_mode).toBe("bearer");
    expect(c.auth_scopes_required).toEqual([]);
    expect(c.payment_mode).toBe("free");
    expect(c.payment_alternatives).toEqual([]);
    expect(c.pricing).toMatchObject({
      currency: "USDC",
      unit: "call",
      model: "per_call",
      requires_payment: false,
    });
    expect(c.pricing.network).toBeNull();
    expect(c.retry_policy).toMatchObject({
      safe_to_retry: true,
      provider_safe_to_retry: true,
      idempotency_recommended: true,
      max_attempts: 3,
    });
    expect(c.idempotency).toMatchObject({
      header: "X-Idempotency-Key",
      body_field: "idempotency_key",
      required: false,
      retention_hours: 24,
    });
    expect(c.input_contract).toMatchObject({
      schema: ECHO_SCHEMA,
      schema_status: "declared",
      null_reason: null,
    });
    expect(c.output_contract).toMatchObject({ schema: null, schema_status: "not_declared" });
    expect(c.output_contract.null_reason).toBe("seller_did_not_declare_output_schema");
    expect(c.example_response).toBeNull();
  });

  it("passes the configured idempotency retention through", () => {
    const record = buildListingRecord(echoFacts(), { idempotencyRetentionHours: 48 });
    expect(record.invocation_contract.idempotency.retention_hours).toBe(48);
  });

  it("gives real example requests: match, execute with the schema's default, direct invoke", () => {
    const r = build(echoFacts()).invocation_contract.example_request;
    expect(r.match).toMatchObject({ method: "GET", path: "/api/execute/match?task=echo" });
    expect(r.execute).toMatchObject({
      method: "POST",
      path: "/api/execute",
      url: `${BASE}/api/execute`,
      body: { task: "echo", input: { message: "agentmarket connectivity probe" } },
    });
    expect(r.direct_invoke.path).toBe("/api/invoke/11111111-1111-4111-8111-111111111111");
    expect(r.input_source).toBe("declared_in_input_schema");
    const c = build(echoFacts()).invocation_contract;
    expect(c.fallback_behavior).toMatchObject({
      recommended_entrypoint: "/api/execute",
      match_endpoint: "/api/execute/match?task=echo",
      direct_invoke_endpoint: "/api/invoke/11111111-1111-4111-8111-111111111111",
      status_endpoint: "/api/execute/status/{invocation_id}",
    });
  });

  it("fills required inputs the schema gives no value for with labelled, schema-valid placeholders", () => {
    const r = build(paidExternalFacts()).invocation_contract.example_request;
    const input = r.execute.body.input as { text: string; max_words: number };
    expect(input.text.length).toBeGreaterThanOrEqual(10);
    expect(input.max_words).toBe(5);
    expect(input).toHaveProperty("style", "brief");
    expect(r.input_source).toBe("placeholders_from_input_schema_types");
    expect(r.execute.body).toMatchObject({ constraints: { max_cost: 0.02 } });
    const response = build(paidExternalFacts()).invocation_contract.example_response;
    expect(response).toMatchObject({
      http_status: 200,
      body: { success: true, output: { summary: "example" } },
    });
  });

  it("paid listing with the gate closed: payment unavailable with the gate's reason; retries limited", () => {
    const c = build(paidExternalFacts({ listing: { safe_to_retry: false } })).invocation_contract;
    expect(c.lifecycle_state).toBe("paid_execution_unavailable");
    expect(c.payment_mode).toBe("paid_execution_unavailable");
    expect(c.payment_unavailable_reason).toBe("platform_custody_frozen");
    expect(c.pricing).toMatchObject({ network: "eip155:8453", requires_payment: true, quote_required: true });
    expect(c.idempotency.required).toBe(true);
    expect(c.retry_policy.max_attempts).toBe(1);
    expect(c.retry_policy.guidance).toContain("do not call, sign or retry paid routes");
    expect(c.retry_policy.guidance).toContain("at most once per invocation");
    expect(c.payment_alternatives).toEqual([
      expect.objectContaining({
        mode: "x402_gateway",
        available: false,
        note: "paid_execution_unavailable:platform_custody_frozen",
      }),
    ]);
  });

  it("paid listing with the gate open: x402 payment mode and an available gateway", () => {
    const c = build(paidExternalFacts({ paidGate: { enabled: true, reason: null } })).invocation_contract;
    expect(c.payment_mode).toBe("x402_usdc");
    expect(c).not.toHaveProperty("payment_unavailable_reason");
    expect(c.payment_alternatives[0]).toMatchObject({
      mode: "x402_gateway",
      endpoint: "/api/x402/invoke/33333333-3333-4333-8333-333333333333",
      available: true,
    });
  });

  it("verification block reads verification_status and verified_at, or null with never_verified", () => {
    const never = build(echoFacts()).invocation_contract;
    expect(never.verification).toEqual({
      status: null,
      status_null_reason: "never_verified",
      source: null,
      source_null_reason: "never_verified",
      last_verified_at: null,
      last_verified_at_null_reason: "never_verified",
    });
    expect(never.last_verified_at_null_reason).toBe("never_verified");
    const verifiedAt = daysAgo(3);
    const done = build(busyFacts({ listing: { verified_at: verifiedAt } })).invocation_contract;
    expect(done.verification).toEqual({
      status: "verified",
      source: "platform_probe",
      last_verified_at: verifiedAt.toISOString(),
    });
    expect(done.last_verified_at).toBe(verifiedAt.toISOString());
  });

  it("marks every declared risk flag for review and lists autonomous blockers", () => {
    const c = build(busyFacts({ listing: { risk_flags: ["sends_email"] } })).invocation_contract;
    expect(c.operation_safety).toMatchObject({
      risk_flags: ["sends_email"],
      review_required_risk_flags: ["sends_email"],
      requires_policy_or_human_review: true,
      autonomous_blockers: ["risk_flags_require_review:sends_email"],
    });
  });
});

describe("telemetry", () => {
  it("computes success rate, uptime and latency from the 30-day facts", () => {
    const t = build(busyFacts()).telemetry;
    expect(t).toMatchObject({
      success_rate_pct: 75,
      attempts_30d: 8,
      successful_attempts_30d: 6,
      uptime_30d_pct: 90,
      p50_latency_ms: 120,
      p95_latency_ms: 480,
      health_probe_count_30d: 10,
      null_reason: null,
    });
    expect(Object.keys(t).filter((k) => k.endsWith("_null_reason"))).toEqual([]);
  });

  it.each([
    [1, 3, 33.3, 0.3333],
    [2, 3, 66.7, 0.6667],
    [0, 5, 0, 0],
    [7, 7, 100, 1],
  ])("success rate of %s/%s attempts is %s %% (ratio %s)", (ok, all, pct, rate) => {
    const record = build(busyFacts({ stats: { successful_attempts_30d: ok, attempts_30d: all } }));
    expect(record.telemetry.success_rate_pct).toBe(pct);
    expect(record.success_rate).toBe(rate);
  });

  it("is null with a reason for every metric without data, and says so overall", () => {
    const record = build(paidExternalFacts());
    expect(record.telemetry).toMatchObject({
      success_rate_pct: null,
      success_rate_pct_null_reason: "no_attempts_in_30d",
      uptime_30d_pct: null,
      uptime_30d_pct_null_reason: "no_health_probes_recorded",
      p50_latency_ms: null,
      p50_latency_ms_null_reason: "no_successful_calls_in_30d",
      p95_latency_ms: null,
      p95_latency_ms_null_reason: "no_successful_calls_in_30d",
      health_probe_count_30d: 0,
      null_reason: "no_calls_or_health_probes_in_30d",
    });
    expect(record.success_rate).toBeNull();
    expect(record.success_rate_null_reason).toBe("no_attempts_in_30d");
    expect(record.avg_latency_ms).toBeNull();
    expect(record.avg_latency_ms_null_reason).toBe("no_successful_calls_in_30d");
    expect(record.endpoint_health_null_reason).toBe("no_health_probes_recorded");
  });

  it("reports partial data when only some metrics have evidence", () => {
    const t = build(echoFacts()).telemetry;
    expect(t.success_rate_pct).toBe(100);
    expect(t.uptime_30d_pct).toBeNull();
    expect(t.null_reason).toBe("partial_data_see_metric_null_reasons");
  });

  it("rounds the average latency to one decimal and keeps the invocation counters", () => {
    const record = build(busyFacts());
    expect(record.avg_latency_ms).toBe(150.5);
    expect([record.total_invocations, record.success_count, record.failure_count]).toEqual([10, 7, 2]);
    expect(record.endpoint_health).toBe("healthy");
    expect(record.endpoint_health_rate).toBe(0.9);
  });
});

describe("completeness", () => {
  it("a verified free external listing with schemas is ready for discovery, ranking and autonomous calls", () => {
    const c = build(busyFacts()).completeness;
    expect(c).toMatchObject({
      ready_for_search_discovery: true,
      ready_for_match_ranking: true,
      ready_for_autonomous_invocation: true,
      ready_for_paid_autonomous_invocation: false,
      ready_for_x402_export: false,
      ready_for_external_marketplace_export: true,
      blockers: [],
      input_schema_declared: true,
      output_schema_declared: true,
      data_retention_declared: true,
      allowed_use_declared: true,
    });
    expect(c.blockers_by_check.ready_for_x402_export).toEqual(["no_x402_price"]);
    expect(c.warnings).toContain("free_listing_not_exportable_to_x402");
  });

  it("echo without an output schema is rankable but not autonomous", () => {
    const c = build(echoFacts()).completeness;
    expect(c.ready_for_match_ranking).toBe(true);
    expect(c.ready_for_autonomous_invocation).toBe(false);
    expect(c.blockers).toEqual(["no_output_schema"]);
    expect(c.output_schema_declared).toBe(false);
    expect(c.allowed_use_declared).toBe(false);
    expect(c.blockers_by_check.ready_for_external_marketplace_export).toEqual([
      "no_output_schema",
      "no_long_description",
      "no_allowed_use_declared",
    ]);
  });

  it("a paid listing behind a closed gate names the gate, and the missing runtime proof", () => {
    const c = build(paidExternalFacts()).completeness;
    expect(c.ready_for_search_discovery).toBe(false);
    expect(c.ready_for_match_ranking).toBe(false);
    expect(c.ready_for_paid_autonomous_invocation).toBe(false);
    expect(c.blockers).toEqual([
      "no_runtime_proof_or_verification",
      "paid_execution_unavailable:platform_custody_frozen",
    ]);
    expect(c.warnings).toEqual(expect.arrayContaining(["never_verified", "no_attempts_in_30d"]));
  });

  it("a paid, verified listing behind an open gate is ready for paid autonomous calls and x402 export", () => {
    const c = build(
      paidExternalFacts({
        paidGate: { enabled: true, reason: null },
        listing: { verification_status: "verified" },
      }),
    ).completeness;
    expect(c.ready_for_paid_autonomous_invocation).toBe(true);
    expect(c.ready_for_x402_export).toBe(true);
    expect(c.blockers).toEqual([]);
  });

  it("retired and failed listings are blocked by name", () => {
    expect(build(retiredFacts()).completeness.blockers).toEqual(["listing_retired"]);
    expect(build(failedFacts()).completeness.blockers).toEqual(["verification_failed"]);
    expect(build(busyFacts({ listing: { review_status: "pending" } })).completeness.blockers).toEqual([
      "review_status_not_approved:pending",
    ]);
  });
});

describe("export_profiles", () => {
  it("free listing: x402 profiles not ready with no_x402_price, agent directory a candidate", () => {
    const p = build(busyFacts()).export_profiles;
    for (const key of ["x402_bazaar", "x402_ecosystem", "agora402"] as const) {
      expect(p[key]).toEqual({ status: "not_ready", blockers: ["no_x402_price"] });
    }
    expect(p.skyfire_directory).toEqual({ status: "not_ready", blockers: ["no_paid_price"] });
    expect(p.agent_bazaar).toEqual({
      status: "candidate",
      endpoint: `${BASE}/api/invoke/33333333-3333-4333-8333-333333333333`,
      blockers: [],
    });
  });

  it("paid but gate closed: every profile names paid_execution_unavailable with the reason", () => {
    const p = build(paidExternalFacts({ listing: { verification_status: "reachable" } })).export_profiles;
    for (const profile of Object.values(p)) {
      expect(profile.status).toBe("not_ready");
      expect(profile.blockers).toContain("paid_execution_unavailable:platform_custody_frozen");
      expect(profile).not.toHaveProperty("endpoint");
    }
  });

  it("names a missing output schema and a missing search-lane proof", () => {
    const p = build(
      paidExternalFacts({ paidGate: { enabled: true, reason: null }, listing: { output_schema: null } }),
    ).export_profiles;
    expect(p.x402_bazaar.blockers).toEqual(["no_runtime_proof_or_verification", "no_output_schema"]);
    expect(p.google_cloud_marketplace.blockers).toContain("no_output_schema");
  });

  it("a ready paid listing is a candidate everywhere, with the endpoint each directory would use", () => {
    const p = build(
      paidExternalFacts({
        paidGate: { enabled: true, reason: null },
        listing: { last_success_at: daysAgo(1) },
      }),
    ).export_profiles;
    for (const profile of Object.values(p))
      expect(profile).toMatchObject({ status: "candidate", blockers: [] });
    expect(p.x402_bazaar.endpoint).toBe(`${BASE}/api/x402/invoke/33333333-3333-4333-8333-333333333333`);
    expect(p.x402_ecosystem.endpoint).toBe(
      `${BASE}/api/x402/invoke/33333333-3333-4333-8333-333333333333/discover`,
    );
  });
});

describe("buyer_evidence", () => {
  it("lists the task aliases the router can match: tags, slug, category, lowercase name, deduplicated", () => {
    expect(build(echoFacts()).buyer_evidence.task_aliases).toEqual([
      "echo",
      "test",
      "connectivity",
      "devtools",
    ]);
    // "Summaries" has upper case: the router lowercases the task, so it could never match it.
    expect(build(paidExternalFacts()).buyer_evidence.task_aliases).toEqual([
      "summarize",
      "acme-summarize",
      "nlp",
      "acme summarize",
    ]);
  });

  it("repeats the contract blocks and export profiles as the same objects", () => {
    const record = build(busyFacts());
    expect(record.buyer_evidence.commerce_contract).toBe(record.commerce_contract);
    expect(record.buyer_evidence.invocation_contract).toBe(record.invocation_contract);
    expect(record.buyer_evidence.export_profiles).toBe(record.export_profiles);
    expect(record.invocation_contract.telemetry).toBe(record.telemetry);
    expect(record.invocation_contract.completeness).toBe(record.completeness);
  });

  it("carries counters, latency with its source, uptime, health and schema summaries", () => {
    const e = build(busyFacts()).buyer_evidence;
    expect(e).toMatchObject({
      provider_name: "Acme Tools",
      price_model: "per_call",
      auth_requirement: "api_key",
      payment_requirement: "free",
      safe_to_retry: true,
      total_invocations: 10,
      success_count: 7,
      failure_count: 2,
      avg_latency_ms: 150.5,
      avg_latency_ms_source: "provider_attempts_30d",
      p50_latency_ms: 120,
      p50_latency_ms_source: "provider_attempts_30d",
      p95_latency_ms: 480,
      uptime_7d_pct: 100,
      uptime_30d_pct: 90,
      health_probe_count_7d: 4,
      health_probe_count_30d: 10,
      latest_health_status: "healthy",
      review_count: 0,
      avg_rating: null,
      avg_rating_null_reason: "no_reviews_recorded",
      refund_rate_pct: null,
      refund_rate_pct_null_reason: "no_paid_calls_recorded",
    });
    expect(e.schema_summary.input).toEqual({
      type: "object",
      required: ["text", "max_words"],
      properties: ["text", "max_words", "style"],
      property_count: 3,
    });
    expect(e.schema_summary.output).toEqual({
      type: "object",
      required: ["summary"],
      properties: ["summary"],
      property_count: 1,
    });
    expect(e.retry_guidance).toBe(build(busyFacts()).invocation_contract.retry_policy.guidance);
  });

  it("latency sources are null with a reason when there were no successful calls", () => {
    const e = build(paidExternalFacts()).buyer_evidence;
    expect(e.avg_latency_ms_source).toBeNull();
    expect(e.avg_latency_ms_source_null_reason).toBe("no_successful_calls_in_30d");
    expect(e.schema_summary.output).not.toBeNull();
    expect(build(echoFacts()).buyer_evidence.schema_summary.output_null_reason).toBe(
      "seller_did_not_declare_output_schema",
    );
  });

  it("computes the refund rate only from paid calls", () => {
    const e = build(busyFacts({ stats: { paid_success_count: 8, refunded_paid_count: 1 } })).buyer_evidence;
    expect(e.refund_rate_pct).toBe(12.5);
  });

  it("gives curl commands against the base URL that survive shell quoting", () => {
    const { copy_paste } = build(echoFacts()).buyer_evidence;
    expect(copy_paste.match).toBe(
      `curl -s '${BASE}/api/execute/match?task=echo' -H "Authorization: Bearer $API_KEY"`,
    );
    expect(copy_paste.execute).toBe(
      `curl -s -X POST '${BASE}/api/execute' -H "Authorization: Bearer $API_KEY" ` +
        `-H 'Content-Type: application/json' -d '{"task":"echo","input":{"message":"agentmarket connectivity probe"}}'`,
    );
    expect(copy_paste.direct_invoke).toContain(`'${BASE}/api/invoke/11111111-1111-4111-8111-111111111111'`);
    const quoted = build(
      echoFacts({ listing: { input_schema: { type: "object", properties: { m: { default: "it's" } } } } }),
    ).buyer_evidence.copy_paste.execute;
    expect(quoted).toContain(`"m":"it'\\''s"`);
  });

  it("offers no call commands while paid execution is unavailable or the listing is retired", () => {
    const paid = build(paidExternalFacts()).buyer_evidence;
    expect(paid.payment_requirement).toBe("paid_execution_unavailable");
    expect(paid.copy_paste.execute).toBeNull();
    expect(paid.copy_paste.execute_null_reason).toBe(
      "listing_not_invokable:paid_execution_unavailable:platform_custody_frozen",
    );
    expect(paid.copy_paste.match).toContain("/api/execute/match?task=acme-summarize");
    expect(build(retiredFacts()).buyer_evidence.copy_paste.direct_invoke_null_reason).toBe(
      "listing_not_invokable:listing_retired",
    );
  });
});

describe("lanes and visibility (the catalog lanes' rules)", () => {
  it.each<[string, FactsOverrides, [boolean, boolean, boolean, string, string]]>([
    [
      "runtime proof",
      { listing: { last_success_at: daysAgo(1) } },
      [true, true, false, "search", "proven_in_use"],
    ],
    ["verified", { listing: { verification_status: "verified" } }, [true, true, false, "search", "verified"]],
    [
      "reachable",
      { listing: { verification_status: "reachable" } },
      [true, true, false, "search", "reachable"],
    ],
    ["no evidence", {}, [true, false, false, "registry", "registry_only"]],
    [
      "featured with proof",
      { listing: { featured: true, verification_status: "verified" } },
      [true, true, true, "featured", "verified"],
    ],
    [
      "featured without proof",
      { listing: { featured: true } },
      [true, false, false, "registry", "registry_only"],
    ],
    [
      "failed verification",
      { listing: { verification_status: "failed", last_success_at: daysAgo(1) } },
      [false, false, false, "hidden", "hidden"],
    ],
    [
      "review pending",
      { listing: { review_status: "pending", last_success_at: daysAgo(1) } },
      [false, false, false, "hidden", "hidden"],
    ],
    [
      "retired",
      { listing: { status: "retired", last_success_at: daysAgo(1) } },
      [false, false, false, "hidden", "hidden"],
    ],
  ])("%s", (_, overrides, [registry, search, featured, tier, state]) => {
    const record = build(buildFacts(overrides));
    expect(record.buyer_evidence.visibility).toMatchObject({
      registry_visible: registry,
      search_visible: search,
      featured_candidate: featured,
      public_tier: tier,
    });
    expect(record.buyer_evidence.visibility.note.length).toBeGreaterThan(0);
    expect(record.catalog_visibility_state).toBe(state);
    expect(record.completeness.ready_for_search_discovery).toBe(search);
  });
});

describe("activity_status", () => {
  it.each([
    [0, "active", 0],
    [7, "active", 7],
    [7.99, "active", 7],
    [8, "idle", 8],
    [30, "idle", 30],
    [30.99, "idle", 30],
    [31, "dormant", 31],
    [400, "dormant", 400],
    [-0.01, "active", 0],
  ])("last invoked %s days ago → %s (%s whole days)", (days, status, whole) => {
    const record = build(busyFacts({ stats: { last_invoked_at: daysAgo(days) } }));
    expect(record.activity_status).toBe(status);
    expect(record.days_since_last_invoke).toBe(whole);
  });

  it("a listing never invoked is dormant, with a reason for the missing day count", () => {
    const record = build(paidExternalFacts());
    expect(record.activity_status).toBe("dormant");
    expect(record.days_since_last_invoke).toBeNull();
    expect(record.days_since_last_invoke_null_reason).toBe("never_invoked");
    expect(record.last_invoked_at_null_reason).toBe("never_invoked");
  });
});

describe("seller, proof and supply fields", () => {
  it("first-party free echo: platform seller, free_tool, invokable through both modes", () => {
    const r = build(echoFacts());
    expect(r).toMatchObject({
      seller_id: null,
      seller_id_null_reason: "first_party_listing_platform_is_seller",
      seller_name: "agentmarket",
      seller_tier: "platform",
      seller_trust_score: null,
      seller_trust_score_null_reason: "no_trust_model_yet",
      service_tier: "free_tool",
      invokable: true,
      buying_modes: ["invoke_service", "procurement_step"],
      buying_mode: "procurement_step",
      exposure_mode: "marketplace",
      procurement_eligible: true,
      direct_invoke_eligible: true,
      router_checkout_eligible: false,
      public_supply_origin: "first_party_service",
      first_party_supply: true,
      external_seller_supply: false,
      world_agentkit_free_trial_enabled: false,
      public_proof_status: "proven_in_use",
    });
    expect(build(echoFacts({ listing: { price_micros: "20000" } })).service_tier).toBe("paid_tool");
  });

  it("external seller: name, agent URI and slug from the seller row, not verified, external tier", () => {
    const r = build(busyFacts());
    expect(r).toMatchObject({
      seller_id: SELLER.id,
      seller_name: "Acme Tools",
      seller_tier: null,
      seller_tier_null_reason: "no_seller_tier_model_yet",
      seller_verified: false,
      seller_human_verified: false,
      seller_agent_uri: `urn:agentmarket:agent:${SELLER.id}`,
      seller_agent_uri_slug: "acme-tools-22222222",
      service_tier: "external",
      external_seller_supply: true,
    });
  });

  it("paid listing behind a closed gate is not invokable and says why", () => {
    const r = build(paidExternalFacts());
    expect(r.invokable).toBe(false);
    expect(r.invokable_blockers).toEqual(["paid_execution_unavailable:platform_custody_frozen"]);
    expect(r.buying_modes).toEqual([]);
    expect(r.buying_mode_null_reason).toBe(
      "listing_not_invokable:paid_execution_unavailable:platform_custody_frozen",
    );
    expect(r.router_checkout_eligible).toBe(false);
    expect(
      build(paidExternalFacts({ paidGate: { enabled: true, reason: null } })).router_checkout_eligible,
    ).toBe(true);
  });

  it.each<[string, () => ListingFacts, string, string]>([
    ["used", () => busyFacts(), "proven_in_use", "live_with_successful_calls"],
    ["unused", () => paidExternalFacts(), "unproven", "live_no_successful_calls"],
    [
      "verified but unused",
      () => paidExternalFacts({ listing: { verification_status: "verified" } }),
      "endpoint_verified",
      "live_no_successful_calls",
    ],
    ["failed verification", failedFacts, "verification_failed", "live_with_successful_calls"],
    ["retired", retiredFacts, "proven_in_use", "retired"],
  ])("public proof of a %s listing", (_, facts, status, runtime) => {
    const r = build(facts());
    expect(r.public_proof_status).toBe(status);
    expect(r.public_proof_label.length).toBeGreaterThan(0);
    expect(r.public_proof_evidence.runtime_status).toBe(runtime);
    expect(r.public_proof_evidence.successful_calls).toBe(facts().stats.success_count);
    expect(r.public_proof_summary).toContain(`${facts().stats.success_count} successful of`);
  });
});

// recordJson (shared/catalog/record-cache.ts) keeps a record's text while the facts it was built from
// are unchanged; the database test (record-cache.test.ts) moves the facts a database holds, this one
// each fact alone, and the build options, which that test cannot move.
describe("kept records", () => {
  const options = { idempotencyRetentionHours: 24, settlementNetwork: "eip155:31337" };
  /** recordJson over records kept for one test alone (they are kept per database handle). */
  const keeper = () => {
    const handle = {} as Db;
    return (facts: ListingFacts, o: BuildOptions = options, generation = "7") =>
      recordJson(handle, generation, facts, o).toString("utf8");
  };
  const fresh = (facts: ListingFacts, o: BuildOptions = options) =>
    JSON.stringify(buildListingRecord(facts, o));

  it("answer each fact and option moved alone with the record those facts build", () => {
    const kept = keeper();
    const base = echoFacts({
      listing: { price_micros: "10000", seller_id: SELLER.id, public_supply_origin: "external_seller" },
      seller: SELLER,
    });
    expect(kept(base)).toBe(fresh(base));
    const moved: [string, ListingFacts, BuildOptions?][] = [
      ["paid gate", { ...base, paidGate: { enabled: true, reason: null } }],
      ["reviews", { ...base, reviews: { ...base.reviews, review_count: 2, avg_rating: 4.5 } }],
      ["health", { ...base, health: { ...base.health, probe_count_7d: 9, probe_success_7d: 8 } }],
      ["counters", { ...base, stats: { ...base.stats, failure_count: base.stats.failure_count + 1 } }],
      ["seller", { ...base, seller: { ...SELLER, name: "Acme Renamed" } }],
      ["platform id", { ...base, platformId: "othermarket" }],
      ["base of links", { ...base, baseUrl: "https://market.example" }],
      ["days since the last call", { ...base, daysSinceLastInvoke: 12 }],
      ["last success", { ...base, listing: { ...base.listing, last_success_at: null } }],
      ["retention", base, { ...options, idempotencyRetentionHours: 72 }],
      ["settlement network", base, { ...options, settlementNetwork: "eip155:8453" }],
    ];
    for (const [what, facts, o] of moved) {
      const text = kept(facts, o);
      expect(text, what).toBe(fresh(facts, o));
      expect(text, what).not.toBe(fresh(base));
      expect(kept(base), `${what}, then back`).toBe(fresh(base));
    }
  });

  it("name the listing row by its generation: another generation builds it again", () => {
    const kept = keeper();
    const base = echoFacts();
    kept(base);
    const renamed = { ...base, listing: { ...base.listing, name: "Renamed" } };
    // Within one generation the database holds one version of the row (store/generation.ts), so the row
    // is not compared: the kept text stands.
    expect(kept(renamed)).toBe(fresh(base));
    expect(kept(renamed, options, "8")).toBe(fresh(renamed));
  });
});
