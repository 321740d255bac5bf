import { browseListings, type Lane } from "../catalog/index.js";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { formatUsdc, micros } from "../kernel/money.js";
import { type DiscoverySources, urlOf } from "./sources.js";

// GET /api/catalog: a compact machine catalog of public listings (one lane, paged): what a crawler or
// an agent needs to call each one (price, input schema, how to invoke), without the full listing record
// (that is /api/capabilities/{id}).

export async function machineCatalog(
  sources: DiscoverySources,
  page: { lane?: Lane; limit?: number; offset?: number },
) {
  const lane = page.lane ?? "registry";
  const limit = page.limit ?? 100;
  const offset = page.offset ?? 0;
  const { rows, total } = await browseListings(db(), {
    lane,
    limit,
    offset,
    featuredPerSeller: getConfig().featuredPerSeller,
  });
  return {
    schema: "agentmarket.machine-catalog.v1",
    lane,
    total,
    limit,
    offset,
    has_more: offset + rows.length < total,
    listings: rows.map((l) => {
      const paid = micros(l.price_micros) > 0n;
      return {
        id: l.id,
        slug: l.slug,
        name: l.name,
        description: l.description,
        category: l.category,
        tags: l.tags,
        pricing: {
          model: l.pricing_model,
          price_usdc: formatUsdc(micros(l.price_micros)),
          currency: l.currency,
        },
        input_schema: l.input_schema,
        output_schema: l.output_schema,
        safe_to_retry: l.safe_to_retry,
        max_latency_ms: l.max_latency_ms,
        verification_status: l.verification_status,
        invoke: {
          keyed: { method: "POST", url: urlOf(sources, `/api/invoke/${l.id}`), auth: "bearer" },
          x402: paid
            ? { method: "POST", url: urlOf(sources, `/api/x402/invoke/${l.id}`), auth: "x402" }
            : null,
          x402_null_reason: paid ? null : "free_listing_use_keyed_routes",
        },
        record: urlOf(sources, `/api/capabilities/${l.id}`),
      };
    }),
  };
}
