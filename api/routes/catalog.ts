import type { Static } from "@sinclair/typebox";
import {
  CatalogQuery,
  CategoryList,
  ChangeListingBody,
  catalogPageJson,
  changeListing,
  ListingIdParams,
  ListingPage,
  ListingRecordSchema,
  listingCategories,
  listingRecordById,
  listingRecords,
  MarketDocument,
  marketDocument,
  PublishListingBody,
  publishListing,
  retireOwnListing,
} from "../../shared/catalog/index.js";
import { defineRoute, Reply } from "../route.js";

async function recordOf(listing: Parameters<typeof listingRecords>[0][number]) {
  const [record] = await listingRecords([listing]);
  return record!;
}

const browseRoute = defineRoute({
  method: "get",
  path: "/api/capabilities",
  tag: "catalog",
  summary: "Browse and search the catalog by lane (featured, search, registry)",
  auth: "none",
  query: CatalogQuery,
  responses: { 200: ListingPage },
  errors: ["SCHEMA_VALIDATION_FAILED"],
  async handle(_ctx, { query }: { query: Static<typeof CatalogQuery> }) {
    return catalogPageJson(query);
  },
});

const readRoute = defineRoute({
  method: "get",
  path: "/api/capabilities/{id}",
  tag: "catalog",
  summary: "One listing's full record, with contracts, telemetry and evidence",
  auth: "none",
  params: ListingIdParams,
  responses: { 200: ListingRecordSchema },
  errors: ["LISTING_NOT_FOUND"],
  async handle(_ctx, { params }: { params: Static<typeof ListingIdParams> }) {
    return listingRecordById(params.id);
  },
});

const publishRoute = defineRoute({
  method: "post",
  path: "/api/capabilities",
  tag: "seller",
  summary: "Publish a listing (one free live listing; more need the $1 bond)",
  auth: "key",
  body: PublishListingBody,
  responses: { 201: ListingRecordSchema },
  errors: ["SCHEMA_VALIDATION_FAILED", "POLICY_BLOCKED", "PAYMENT_REQUIRED"],
  async handle(ctx, { body }: { body: Static<typeof PublishListingBody> }) {
    const listing = await publishListing(ctx.state.auth!.agentId, body, ctx.state.requestId);
    return new Reply(201, await recordOf(listing), { Location: `/api/capabilities/${listing.id}` });
  },
});

const changeRoute = defineRoute({
  method: "patch",
  path: "/api/capabilities/{id}",
  tag: "seller",
  summary: "Change your listing: bumps its version (contract change → minor, else patch) and keeps history",
  auth: "key",
  params: ListingIdParams,
  body: ChangeListingBody,
  responses: { 200: ListingRecordSchema },
  errors: ["SCHEMA_VALIDATION_FAILED", "LISTING_NOT_FOUND", "LISTING_NOT_INVOCABLE"],
  async handle(
    ctx,
    { params, body }: { params: Static<typeof ListingIdParams>; body: Static<typeof ChangeListingBody> },
  ) {
    return recordOf(await changeListing(ctx.state.auth!.agentId, params.id, body, ctx.state.requestId));
  },
});

const retireRoute = defineRoute({
  method: "delete",
  path: "/api/capabilities/{id}",
  tag: "seller",
  summary: "Retire your listing: it leaves the catalog and frees its slot; the record stays for receipts",
  auth: "key",
  params: ListingIdParams,
  responses: { 200: ListingRecordSchema },
  errors: ["LISTING_NOT_FOUND"],
  async handle(ctx, { params }: { params: Static<typeof ListingIdParams> }) {
    return recordOf(await retireOwnListing(ctx.state.auth!.agentId, params.id, ctx.state.requestId));
  },
});

const marketRoute = defineRoute({
  method: "get",
  path: "/market.json",
  tag: "discovery",
  summary: "The canonical catalog plus the availability block, computed on every read: read before paying",
  auth: "none",
  responses: { 200: MarketDocument },
  async handle() {
    return new Reply(200, await marketDocument(), { "Cache-Control": "no-store" });
  },
});

const categoriesRoute = defineRoute({
  method: "get",
  path: "/api/categories",
  tag: "catalog",
  summary: "The categories of public listings, with how many listings each holds",
  auth: "none",
  responses: { 200: CategoryList },
  async handle() {
    return listingCategories();
  },
});

export const catalogRoutes = [
  browseRoute,
  categoriesRoute,
  readRoute,
  publishRoute,
  changeRoute,
  retireRoute,
  marketRoute,
];
