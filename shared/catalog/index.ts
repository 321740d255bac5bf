// The catalog context's public surface: listings and the full listing record, search and the market
// document, sellers publishing and changing listings, the seller bond, the price list. Owns listings,
// listing_stats, listing_changes, health_probes, stakes. Depends on audit, outbox, identity and money.

export {
  catalogPage,
  catalogPageJson,
  listingCategories,
  listingRecordById,
  listingRecords,
  marketDocument,
} from "./catalog.js";
export { hostedTools, listingHistory } from "./history.js";
export { checkListingInput, toolUnavailableReason } from "./hosted-tools.js";
export { requireListing } from "./listing-lookup.js";
export { PLATFORM_MAX_LATENCY_MS, ROUTER_MAX_ATTEMPTS } from "./listing-record/index.js";
export { walletPricing } from "./pricing.js";
export {
  CatalogQuery,
  CategoryList,
  ChangeListingBody,
  ListingIdParams,
  ListingPage,
  ListingRecordSchema,
  MarketDocument,
  PublishListingBody,
  SellerStatus,
} from "./schemas.js";
export { changeListing, publishListing, retireOwnListing, sellerStatus } from "./seller.js";
export { downgradeStake, postStake, releaseStake, stakeView } from "./stake.js";
export { CATALOG_GENERATION_SQL, CATALOG_MOVED, catalogUnmoved } from "./store/generation.js";
export { activeListingIdsAfter, recordProbe } from "./store/health-probes.js";
export type { LanePage, ListingSearch } from "./store/listing-search.js";
export { browseListings, searchListings } from "./store/listing-search.js";
export type { RecentCallStats } from "./store/listing-stats.js";
export { readListingStats, readRecentCallStats } from "./store/listing-stats.js";
export type { Lane, ListingRow, TaskListings, VerificationStatus } from "./store/listings.js";
export {
  findActiveByTaskAlias,
  findActiveByTaskAliasAt,
  findListing,
  listingColumns,
  taskAlias,
  withoutUnavailableTools,
} from "./store/listings.js";
