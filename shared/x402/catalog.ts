import { browseListings, type ListingRow, requireListing } from "../catalog/index.js";
import { USDC_EIP712 } from "../chain/eip3009.js";
import { getConfig } from "../config.js";
import { db } from "../db/knex.js";
import { AppError, paidExecutionUnavailable } from "../errors.js";
import { formatUsdc, micros } from "../kernel/money.js";
import { paidGate } from "../money/index.js";
import { candidateView, openCircuits, rankCandidates } from "../routing/index.js";
import { buildEcho, ECHO_DEFAULT_MESSAGE } from "../tools/index.js";
import { bazaarFor } from "./challenge.js";
import { MPP_INTENT, MPP_METHOD } from "./mpp.js";
import { listingRequirements, MAX_TIMEOUT_SECONDS, x402Rail } from "./protocol.js";
import { createQuote, notPayable } from "./quotes.js";
import { listPayableListings } from "./store/listings.js";
import { quoteView } from "./views.js";

// The read side of the x402 edge: overview, catalog, discovery documents (notes §6: the facilitator
// discovery "resources" shape, x402scan's /.well-known/x402, our service card) and listing details.
// They answer in every availability state and say whether paid execution is enabled right now.

const base = () => getConfig().publicBaseUrl;

export const X402_PATHS = {
  marketplace: "/api/x402/marketplace",
  listings: "/api/x402/listings",
  discover: "/api/x402/discover",
  execute_match: "/api/x402/execute/match",
  execute: "/api/x402/execute",
  test_echo: "/api/x402/test/echo",
  invoke: "/api/x402/invoke/{listing_id}",
  listing_discover: "/api/x402/invoke/{listing_id}/discover",
  status: "/api/x402/status/{invocation_id}",
  info: "/api/x402/info",
  well_known: "/.well-known/x402",
  service_card: "/.well-known/x402/service.json",
  openapi: "/openapi.json",
} as const;

const links = () => Object.fromEntries(Object.entries(X402_PATHS).map(([k, p]) => [k, `${base()}${p}`]));
const invokeUrl = (id: string) => `${base()}/api/x402/invoke/${id}`;

async function gateView() {
  const gate = await paidGate();
  return { enabled: gate.enabled, reason: gate.reason, read_first: `${base()}/market.json` };
}

function railView() {
  const rail = x402Rail();
  if (!rail) return { rail: null, rail_null_reason: "no_settlement_chain_or_address_configured" };
  return {
    rail: {
      scheme: "exact",
      network: rail.network,
      asset: rail.asset,
      asset_symbol: "USDC",
      decimals: 6,
      eip712: USDC_EIP712,
      pay_to: rail.payTo,
      max_timeout_seconds: MAX_TIMEOUT_SECONDS,
    },
    rail_null_reason: null,
  };
}

const HOW_TO_PAY = [
  "GET /api/x402/execute/match?task=<task> → quote_id (or pick a listing from /api/x402/listings)",
  "POST /api/x402/execute {quote_id, input} (or POST /api/x402/invoke/{listing_id} {input}) → 402 with " +
    "PAYMENT-REQUIRED (x402 v2) and WWW-Authenticate: Payment (MPP)",
  "sign the EIP-3009 TransferWithAuthorization it describes and send the same request again with " +
    "PAYMENT-SIGNATURE (x402 v2), X-PAYMENT (x402 v1) or Authorization: Payment (MPP)",
  "200: the result plus PAYMENT-RESPONSE (the settlement transaction) — or 202 and the status URL; " +
    "a failed call is never settled",
];

/** GET /api/x402/marketplace: what the edge is, whether it can take payments now, how to pay. */
export async function x402Marketplace() {
  return {
    name: `${getConfig().platformId} x402 gateway`,
    description:
      "Pay-per-request access to marketplace listings without registration: the first call answers 402 " +
      "with a payment challenge, the retry carries a signed USDC authorization, the call runs, and the " +
      "platform settles on chain only after it succeeded. Revenue splits 97 % seller / 3 % platform.",
    paid_execution: await gateView(),
    ...railView(),
    protocols: ["x402 v2 (PAYMENT-SIGNATURE)", "x402 v1 (X-PAYMENT)", "MPP (Authorization: Payment)"],
    how_to_pay: HOW_TO_PAY,
    free_listings:
      "Free listings are not sold on this edge (nothing to pay); call them with an API key through " +
      "POST /api/invoke/{listing_id}. GET /api/x402/test/echo is a free check of the edge itself.",
    links: links(),
  };
}

/** One listing as the x402 catalog shows it. */
function catalogEntry(listing: ListingRow, gateOpen: boolean) {
  const price = micros(listing.price_micros);
  const blocked = notPayable(listing);
  return {
    listing_id: listing.id,
    name: listing.name,
    slug: listing.slug,
    description: listing.description,
    category: listing.category,
    tags: listing.tags,
    price_usdc: formatUsdc(price),
    price_atomic: price.toString(),
    currency: "USDC" as const,
    requires_payment: price > 0n,
    payable_now: blocked === null && gateOpen,
    not_payable_reason: blocked ?? (gateOpen ? null : "paid_execution_unavailable"),
    invoke_url: price > 0n ? invokeUrl(listing.id) : null,
    free_route: price > 0n ? null : `${base()}/api/invoke/${listing.id}`,
    detail_url: invokeUrl(listing.id),
    discover_url: `${invokeUrl(listing.id)}/discover`,
    input_schema: listing.input_schema,
    output_schema: listing.output_schema,
  };
}

/** GET /api/x402/listings: paid and free invokable listings, price in atomic units, the invoke URL. */
export async function x402Listings(page: { limit: number; offset: number }) {
  const gate = await gateView();
  const { rows, total } = await browseListings(db(), {
    lane: "registry",
    limit: page.limit,
    offset: page.offset,
    featuredPerSeller: getConfig().featuredPerSeller,
  });
  return { paid_execution: gate, total, ...page, listings: rows.map((l) => catalogEntry(l, gate.enabled)) };
}

/** One discovery resource (notes §6, facilitator /discovery/resources item) for a paid listing. */
async function discoveryItem(listing: ListingRow) {
  return {
    resource: invokeUrl(listing.id),
    type: "http" as const,
    x402Version: 2,
    accepts: await listingRequirements(listing.price_micros),
    lastUpdated: listing.updated_at.toISOString(),
    description: listing.description,
    mimeType: "application/json",
    serviceName: listing.name,
    tags: listing.tags,
    extensions: bazaarFor("invoke", listing, undefined, "POST"),
  };
}

/** GET /api/x402/discover: every payable listing as an x402 discovery resource, paged. */
export async function x402Discover(page: { limit: number; offset: number }) {
  const { rows, total } = await listPayableListings(db(), page);
  return {
    x402Version: 2,
    items: await Promise.all(rows.map(discoveryItem)),
    pagination: { ...page, total },
    paid_execution: await gateView(),
    note: "accepts carry no quote_id: the 402 of each resource binds a fresh quote; rail empty when no chain is configured",
  };
}

const loadListing = (id: string) => requireListing(id, X402_PATHS.listings);

/** GET /api/x402/invoke/{listing_id}: price, schemas and how to pay for one listing. */
export async function x402ListingDetail(listingId: string) {
  const listing = await loadListing(listingId);
  const gate = await gateView();
  return {
    ...catalogEntry(listing, gate.enabled),
    paid_execution: gate,
    ...railView(),
    accepts: micros(listing.price_micros) > 0n ? await listingRequirements(listing.price_micros) : [],
    mpp: { scheme: "Payment", method: MPP_METHOD, intent: MPP_INTENT, credential_types: ["authorization"] },
    invoke: {
      method: "POST",
      url: invokeUrl(listing.id),
      body: { input: "<an object valid against input_schema>" },
    },
    how_to_pay: HOW_TO_PAY,
  };
}

/** GET /api/x402/invoke/{listing_id}/discover: the listing's discovery resource with its bazaar info. */
export async function x402ListingDiscover(listingId: string) {
  const listing = await loadListing(listingId);
  if (micros(listing.price_micros) === 0n) {
    throw new AppError("LISTING_NOT_INVOCABLE", "free listings are not sold over x402", {
      reason: "free_listing_use_keyed_routes",
      free_route: `${base()}/api/invoke/${listing.id}`,
    });
  }
  return { ...(await discoveryItem(listing)), paid_execution: await gateView() };
}

/** GET /api/x402/execute/match?task: the top candidate, and a quote for it when it is paid. */
export async function x402Match(task: string) {
  const gate = await paidGate();
  const ranking = await rankCandidates(task, null, gate, openCircuits);
  const top = ranking.eligible[0];
  if (!top) {
    if (!gate.enabled && ranking.excluded.some((e) => e.reason === "paid_execution_unavailable")) {
      throw paidExecutionUnavailable(gate.reason ?? "paid_execution_disabled");
    }
    throw new AppError("LISTING_NOT_FOUND", `no eligible listing answers to task "${task}"`, {
      task,
      excluded: ranking.excluded.map((e) => ({ listing_id: e.listing.id, reason: e.reason })),
      hint: X402_PATHS.listings,
    });
  }
  const candidate = candidateView(top, 1);
  if (micros(top.listing.price_micros) === 0n) {
    return {
      task,
      requires_payment: false,
      quote_id: null,
      quote_null_reason: "free_listing_needs_no_payment",
      candidate,
      free_route: {
        method: "POST",
        url: `${base()}/api/invoke/${top.listing.id}`,
        auth: "API key (POST /api/quickstart)",
      },
    };
  }
  const quote = await createQuote(top.listing, task);
  return {
    task,
    requires_payment: true,
    ...quoteView(quote, top.listing),
    quote_null_reason: null,
    candidate,
    input_schema: top.listing.input_schema,
    execute: {
      method: "POST",
      url: `${base()}${X402_PATHS.execute}`,
      body: { quote_id: quote.id, input: {} },
    },
  };
}

/** GET /.well-known/x402 (x402scan's fan-out convention): the payable resources. */
export async function wellKnownX402() {
  const { rows } = await listPayableListings(db(), { limit: 500, offset: 0 });
  return {
    version: 1,
    resources: rows.map((l) => invokeUrl(l.id)),
    instructions:
      "POST each resource with {input} to get its 402 challenge (x402 v2 PAYMENT-REQUIRED and MPP " +
      `WWW-Authenticate). Routed calls: ${base()}${X402_PATHS.execute_match}?task=… then ${base()}${X402_PATHS.execute}. ` +
      `Service card: ${base()}${X402_PATHS.service_card}.`,
  };
}

/** GET /.well-known/x402/service.json: our service card (docs/x402.md "x402 gateway" documents the shape). */
export async function x402ServiceCard() {
  const { rail, rail_null_reason } = railView();
  return {
    schema: `${getConfig().platformId}.x402-service.v1`,
    name: `${getConfig().platformId} x402 gateway`,
    description: "Marketplace listings payable per request over x402 and MPP; no registration.",
    networks: rail ? [rail] : [],
    networks_null_reason: rail_null_reason,
    pay_to: rail?.pay_to ?? null,
    endpoints: links(),
    protocols: [
      {
        name: "x402",
        version: 2,
        schemes: ["exact"],
        headers: {
          challenge: "PAYMENT-REQUIRED",
          payment: ["PAYMENT-SIGNATURE", "X-PAYMENT-SIGNATURE"],
          response: "PAYMENT-RESPONSE",
        },
      },
      {
        name: "x402",
        version: 1,
        schemes: ["exact"],
        headers: { payment: ["X-PAYMENT"], response: "X-PAYMENT-RESPONSE" },
        note: "v1 payloads are accepted on the retry; the 402 itself is v2 (header) with a human body",
      },
      {
        name: "mpp",
        scheme: "Payment",
        method: MPP_METHOD,
        intent: MPP_INTENT,
        credential_types: ["authorization"],
        headers: { challenge: "WWW-Authenticate", payment: "Authorization", receipt: "Payment-Receipt" },
      },
    ],
    pricing: { mode: "quote", currency: "USDC", decimals: 6, split: { seller: 0.97, platform: 0.03 } },
    settlement:
      "on chain after the call succeeds (transferWithAuthorization by the platform); failed calls are never settled",
    paid_execution: await gateView(),
    generated_at: new Date().toISOString(),
  };
}

/** GET /api/x402/test/echo: the free echo, served through the edge (no quote, no payment). */
export function x402TestEcho(message: string | undefined, headers: Record<string, unknown>) {
  return {
    ...buildEcho({ message: message ?? ECHO_DEFAULT_MESSAGE }, headers, Date.now()),
    x402: {
      payment: "none",
      note: "a free check of the x402 edge; paid listings answer 402 with PAYMENT-REQUIRED and WWW-Authenticate",
      marketplace: `${base()}${X402_PATHS.marketplace}`,
    },
  };
}
