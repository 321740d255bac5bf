import type { Static } from "@sinclair/typebox";
import { caip2 } from "../chain/client.js";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { wholeDaysSince } from "../kernel/days.js";
import { type EncodedJson, encodeWithArray } from "../kernel/encoded-json.js";
import { availability, funding, type GateReading, readGate } from "../money/index.js";
import { type ListingFacts, NO_HEALTH, NO_REVIEWS } from "./listing-facts.js";
import { requireListing } from "./listing-lookup.js";
import { type BuildOptions, buildListingRecord } from "./listing-record/index.js";
import { recordJson } from "./record-cache.js";
import type { CatalogQuery } from "./schemas.js";
import { readHealthFacts } from "./store/health-probes.js";
import { categoryCounts, searchListings } from "./store/listing-search.js";
import { readListingStats } from "./store/listing-stats.js";
import type { Lane, ListingRow } from "./store/listings.js";
import { readSellers } from "./store/sellers.js";

const LANES: Record<Lane, string> = {
  featured: "curated listings with verification or runtime proof, at most FEATURED_PER_SELLER per seller",
  search: "active approved listings with a verified or reachable verdict or a successful call",
  registry: "every active approved listing that is not marked failed",
};

/** The facts of a page of listings, gathered in a few batched queries, and the record's build options. */
async function pageFacts(
  rows: ListingRow[],
  reading?: GateReading,
): Promise<{ facts: ListingFacts[]; options: BuildOptions }> {
  const ids = rows.map((r) => r.id);
  const sellerIds = [...new Set(rows.map((r) => r.seller_id).filter((id): id is string => id !== null))];
  const [stats, sellers, health] = await Promise.all([
    readListingStats(db(), ids),
    readSellers(db(), sellerIds),
    readHealthFacts(db(), ids),
  ]);
  const { platformId, publicBaseUrl, idempotencyRetentionHours, chainId } = getConfig();
  const gate = reading ?? (await readGate());
  const now = new Date();
  const facts = rows.map((listing): ListingFacts => {
    const listingStats = stats.get(listing.id)!;
    return {
      listing,
      seller: listing.seller_id ? (sellers.get(listing.seller_id) ?? null) : null,
      stats: listingStats,
      health: health.get(listing.id) ?? NO_HEALTH,
      reviews: NO_REVIEWS,
      paidGate: { enabled: gate.enabled, reason: gate.reason },
      platformId,
      baseUrl: publicBaseUrl,
      daysSinceLastInvoke: wholeDaysSince(now, listingStats.last_invoked_at),
    };
  });
  return { facts, options: { idempotencyRetentionHours, settlementNetwork: caip2(chainId) } };
}

/** Gathers the facts for a page of listings in a few batched queries and builds their records. */
export async function listingRecords(rows: ListingRow[], reading?: GateReading) {
  const { facts, options } = await pageFacts(rows, reading);
  return facts.map((f) => buildListingRecord(f, options));
}

/** GET /api/categories: the categories of public (registry-lane) listings, with counts. */
export async function listingCategories() {
  const categories = await categoryCounts(db());
  return { lane: "registry" as const, categories, generated_at: new Date().toISOString() };
}

/** A page's listings, read, with what the page says besides its records. */
async function readCatalogPage(query: Static<typeof CatalogQuery>) {
  const lane: Lane = query.visibility ?? "registry";
  const limit = query.limit ?? 100;
  const offset = query.offset ?? 0;
  const { rows, total, totalRelation, generation } = await searchListings(db(), {
    search: query.search,
    category: query.category,
    lane,
    limit,
    offset,
    featuredPerSeller: getConfig().featuredPerSeller,
    matchCap: getConfig().catalogSearchMatchCap,
  });
  const gate = await readGate();
  // Everything a page holds after its records, in the order the page shows it.
  const rest = {
    total,
    total_relation: totalRelation,
    limit,
    offset,
    has_more: offset + rows.length < total,
    marketplace_info: {
      currency: "USDC" as const,
      requirement: "an API key (POST /api/quickstart) for execution; none for reading the catalog",
      how_to_fund: null,
      pricing_info: "/api/wallet/pricing",
      discovery_visibility: {
        mode: lane,
        requested: query.visibility ?? null,
        supported_modes: Object.keys(LANES),
        curated: lane === "featured",
        lanes: LANES,
      },
      funding: funding(gate),
    },
    availability: await availability(gate),
  };
  return { rows, generation, gate, rest };
}

/** One page of the catalog: records, paging, marketplace info, availability. */
export async function catalogPage(query: Static<typeof CatalogQuery>) {
  const { rows, gate, rest } = await readCatalogPage(query);
  return { capabilities: await listingRecords(rows, gate), ...rest };
}

/**
 * GET /api/capabilities: a catalog page as its JSON, byte for byte what JSON.stringify gives for
 * `{ ...head, ...catalogPage(query) }`, its records' JSON kept between reads where their facts prove them
 * current (record-cache.ts; docs/catalog.md "Kept records"), the rest built and encoded.
 */
export async function catalogPageJson(
  query: Static<typeof CatalogQuery>,
  head: object = {},
): Promise<EncodedJson> {
  const { rows, generation, gate, rest } = await readCatalogPage(query);
  const { facts, options } = await pageFacts(rows, gate);
  const records = facts.map((f) => recordJson(db(), generation, f, options));
  return encodeWithArray("capabilities", records, rest, head);
}

/** GET /api/capabilities/{id}: any listing's record, retired ones included (receipts point at them). */
export async function listingRecordById(id: string) {
  const [record] = await listingRecords([await requireListing(id)]);
  return record!;
}

/**
 * GET /market.json: the canonical catalog (registry lane, first page) plus availability, read now, as
 * its JSON (catalogPageJson with the document's head).
 */
export function marketDocument(): Promise<EncodedJson> {
  return catalogPageJson(
    { visibility: "registry", limit: 100, offset: 0 },
    {
      schema: `${getConfig().platformId}.market.v1`,
      platform: getConfig().platformId,
      generated_at: new Date().toISOString(),
    },
  );
}
