import type { Static } from "@sinclair/typebox";
import { caip2 } from "../chain/client.js";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { availability, funding, type GateReading, readGate } from "../money/index.js";
import { NO_HEALTH, NO_REVIEWS } from "./listing-facts.js";
import { requireListing } from "./listing-lookup.js";
import { buildListingRecord } from "./listing-record/index.js";
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

/** Gathers the facts for a page of listings in a few batched queries and builds their records. */
export async function listingRecords(rows: ListingRow[], reading?: GateReading) {
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
  return rows.map((listing) =>
    buildListingRecord(
      {
        listing,
        seller: listing.seller_id ? (sellers.get(listing.seller_id) ?? null) : null,
        stats: stats.get(listing.id)!,
        health: health.get(listing.id) ?? NO_HEALTH,
        reviews: NO_REVIEWS,
        paidGate: { enabled: gate.enabled, reason: gate.reason },
        platformId,
        baseUrl: publicBaseUrl,
        now,
      },
      { idempotencyRetentionHours, settlementNetwork: caip2(chainId) },
    ),
  );
}

/** GET /api/categories: the categories of public (registry-lane) listings, with counts. */
export async function listingCategories() {
  const categories = await categoryCounts(db());
  return { lane: "registry" as const, categories, generated_at: new Date().toISOString() };
}

/** One page of the catalog (GET /api/capabilities): records, paging, marketplace info, availability. */
export async function catalogPage(query: Static<typeof CatalogQuery>) {
  const lane: Lane = query.visibility ?? "registry";
  const limit = query.limit ?? 100;
  const offset = query.offset ?? 0;
  const { rows, total, totalRelation } = await searchListings(db(), {
    search: query.search,
    category: query.category,
    lane,
    limit,
    offset,
    featuredPerSeller: getConfig().featuredPerSeller,
    matchCap: getConfig().catalogSearchMatchCap,
  });
  const gate = await readGate();
  return {
    capabilities: await listingRecords(rows, gate),
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
}

/** GET /api/capabilities/{id}: any listing's record, retired ones included (receipts point at them). */
export async function listingRecordById(id: string) {
  const [record] = await listingRecords([await requireListing(id)]);
  return record!;
}

/** GET /market.json: the canonical catalog (registry lane, first page) plus availability, read now. */
export async function marketDocument() {
  const page = await catalogPage({ visibility: "registry", limit: 100, offset: 0 });
  return {
    schema: `${getConfig().platformId}.market.v1`,
    platform: getConfig().platformId,
    generated_at: new Date().toISOString(),
    ...page,
  };
}
