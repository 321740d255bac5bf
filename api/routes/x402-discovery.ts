import type { Static } from "@sinclair/typebox";
import { AppError } from "../../shared/errors.js";
import { EchoResult } from "../../shared/tools/index.js";
import {
  ListingParams,
  PageQuery,
  WellKnownX402,
  wellKnownX402,
  X402Discovery,
  X402EchoQuery,
  X402ListingDetail,
  X402ListingDiscovery,
  X402Listings,
  X402Marketplace,
  X402ServiceCard,
  x402Discover,
  x402ListingDetail,
  x402ListingDiscover,
  x402Listings,
  x402Marketplace,
  x402ServiceCard,
  x402TestEcho,
} from "../../shared/x402/index.js";
import { defineRoute, Reply } from "../route.js";

// The read side of the x402 gateway: overview, catalog, discovery documents and listing details. No key,
// no payment, every availability state (each says whether paid execution is enabled now).

const fresh = (body: unknown) => new Reply(200, body, { "Cache-Control": "no-store" });

/** /api/x402/invoke alone: there is no collection (spec); say where listings are. */
function noCollection(): never {
  throw new AppError("NOT_FOUND", "there is no collection at /api/x402/invoke: name a listing", {
    catalog: "/api/x402/listings",
    match: "/api/x402/execute/match?task=<task>",
    invoke: "/api/x402/invoke/{listing_id}",
  });
}

export const x402DiscoveryRoutes = [
  defineRoute({
    method: "get",
    path: "/api/x402/marketplace",
    tag: "x402",
    summary: "Overview of the x402 edge: what it is, whether it takes payments now, how to pay, links",
    auth: "none",
    responses: { 200: X402Marketplace },
    async handle() {
      return fresh(await x402Marketplace());
    },
  }),
  defineRoute({
    method: "get",
    path: "/api/x402/listings",
    tag: "x402",
    summary: "Paid and free invokable listings with price in atomic USDC units and the invoke URL",
    auth: "none",
    query: PageQuery,
    responses: { 200: X402Listings },
    errors: ["SCHEMA_VALIDATION_FAILED"],
    async handle(_ctx, { query }: { query: Static<typeof PageQuery> }) {
      return fresh(await x402Listings(query));
    },
  }),
  defineRoute({
    method: "get",
    path: "/api/x402/discover",
    tag: "x402",
    summary: "Payable listings as x402 discovery resources ({x402Version, items[], pagination})",
    auth: "none",
    query: PageQuery,
    responses: { 200: X402Discovery },
    errors: ["SCHEMA_VALIDATION_FAILED"],
    async handle(_ctx, { query }: { query: Static<typeof PageQuery> }) {
      return fresh(await x402Discover(query));
    },
  }),
  defineRoute({
    method: "get",
    path: "/api/x402/test/echo",
    tag: "x402",
    summary: "Free echo through the x402 edge: no quote, no payment",
    auth: "none",
    query: X402EchoQuery,
    responses: { 200: EchoResult },
    errors: ["SCHEMA_VALIDATION_FAILED"],
    async handle(ctx, { query }: { query: Static<typeof X402EchoQuery> }) {
      return x402TestEcho(query.message, ctx.headers);
    },
  }),
  defineRoute({
    method: "get",
    path: "/api/x402/invoke/{listing_id}",
    tag: "x402",
    summary: "One listing on the x402 edge: price, schemas, payment requirements and how to pay",
    auth: "none",
    params: ListingParams,
    responses: { 200: X402ListingDetail },
    errors: ["LISTING_NOT_FOUND", "SCHEMA_VALIDATION_FAILED"],
    async handle(_ctx, { params }: { params: Static<typeof ListingParams> }) {
      return fresh(await x402ListingDetail(params.listing_id));
    },
  }),
  defineRoute({
    method: "get",
    path: "/api/x402/invoke/{listing_id}/discover",
    tag: "x402",
    summary: "One paid listing as an x402 discovery resource, with its bazaar extension",
    auth: "none",
    params: ListingParams,
    responses: { 200: X402ListingDiscovery },
    errors: ["LISTING_NOT_FOUND", "LISTING_NOT_INVOCABLE", "SCHEMA_VALIDATION_FAILED"],
    async handle(_ctx, { params }: { params: Static<typeof ListingParams> }) {
      return fresh(await x402ListingDiscover(params.listing_id));
    },
  }),
  defineRoute({
    method: "get",
    path: "/api/x402/invoke",
    tag: "x402",
    summary: "Not a collection: 404 naming the catalog, match and invoke URLs",
    auth: "none",
    responses: {},
    errors: ["NOT_FOUND"],
    async handle() {
      noCollection();
    },
  }),
  defineRoute({
    method: "post",
    path: "/api/x402/invoke",
    tag: "x402",
    summary: "Not a collection: 404 naming the catalog, match and invoke URLs",
    auth: "none",
    responses: {},
    errors: ["NOT_FOUND"],
    async handle() {
      noCollection();
    },
  }),
  defineRoute({
    method: "get",
    path: "/.well-known/x402",
    tag: "discovery",
    summary: "x402scan discovery: {version: 1, resources: [payable resource URLs], instructions}",
    auth: "none",
    responses: { 200: WellKnownX402 },
    async handle() {
      return fresh(await wellKnownX402());
    },
  }),
  defineRoute({
    method: "get",
    path: "/.well-known/x402/service.json",
    tag: "discovery",
    summary: "The x402 service card: networks, asset, payTo, endpoints, protocols, paid-execution state",
    auth: "none",
    responses: { 200: X402ServiceCard },
    async handle() {
      return fresh(await x402ServiceCard());
    },
  }),
];
