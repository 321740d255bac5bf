import { randomBytes } from "node:crypto";
import type { Static } from "@sinclair/typebox";
import { recordAudit } from "../audit/index.js";
import { db } from "../db/knex.js";
import { AppError, validationError } from "../errors.js";
import { isUuid } from "../kernel/ids.js";
import { createAjv } from "../kernel/json-schema.js";
import { parseUsdc } from "../kernel/money.js";
import { payoutSummary } from "../money/index.js";
import { checkEndpointUrl, UnsafeEndpoint } from "../net/url-policy.js";
import { BOND_TERMS, FREE_LISTING_SLOTS } from "./bond-terms.js";
import type { ChangeListingBody, PublishListingBody } from "./schemas.js";
import { hasOpenBond, stakeView } from "./stake.js";
import {
  countLiveListings,
  findOwnedListing,
  insertListing,
  type ListingChanges,
  type ListingRow,
  listSellerListings,
  lockOwnedListing,
  retireListing,
  updateListing,
} from "./store/listings.js";
import { findAgent, lockAgent } from "./store/sellers.js";

export { BOND_MICROS, FREE_LISTING_SLOTS } from "./bond-terms.js";

const schemaAjv = createAjv();

function checkSchema(schema: unknown, path: string): void {
  try {
    schemaAjv.compile(schema as object);
  } catch (error) {
    throw validationError("a declared JSON Schema does not compile", [
      { path, message: (error as Error).message },
    ]);
  }
}

async function checkEndpoint(raw: string): Promise<void> {
  try {
    await checkEndpointUrl(raw);
  } catch (error) {
    if (!(error instanceof UnsafeEndpoint)) throw error;
    throw validationError("endpoint_url is not callable under the platform's outbound policy", [
      { path: "/endpoint_url", message: error.message },
    ]);
  }
}

function slugFor(name: string): string {
  const base = name
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 48);
  return `${base || "listing"}-${randomBytes(3).toString("hex")}`;
}

async function requireSeller(agentId: string): Promise<void> {
  const agent = await findAgent(db(), agentId);
  if (agent?.intent === "buyer") {
    throw new AppError(
      "POLICY_BLOCKED",
      "buyer agents cannot publish listings; register with intent seller or both",
      {
        intent: agent.intent,
      },
    );
  }
}

/**
 * The seller's publishing position, computed from their real listings and bond: the next listing needs
 * the bond only when the free slot is used and no bond is open. Also where its payouts stand.
 */
export async function sellerStatus(agentId: string) {
  const [listings, stake, payouts] = await Promise.all([
    listSellerListings(db(), agentId),
    stakeView(agentId),
    payoutSummary(agentId),
  ]);
  const live = listings.filter((l) => l.status === "active").length;
  const remaining = Math.max(0, FREE_LISTING_SLOTS - live);
  const stakeRequired = remaining === 0 && !stake.bonded;
  return {
    agent_id: agentId,
    live_listings: live,
    free_concurrent_listing_slots: FREE_LISTING_SLOTS,
    free_concurrent_listing_slots_remaining: remaining,
    stake_required_for_next_listing: stakeRequired,
    bond: {
      posted: stake.bonded,
      status: stake.bonded ? stake.stake!.status : null,
      bonded_usdc: stake.bonded ? stake.stake!.bonded_usdc : "0.000000",
      can_downgrade: stake.can_downgrade,
      can_release: stake.can_release,
      details: "/api/stake",
      ...BOND_TERMS,
    },
    payouts,
    publish_listing_template: {
      method: "POST",
      path: "/api/capabilities",
      body: {
        name: "PDF table extractor",
        description: "Extracts tables from a PDF URL as CSV rows.",
        category: "devtools",
        endpoint_url: "https://api.example.com/agentmarket/invoke",
        pricing_model: "per_call",
        price_per_unit: 0,
        input_schema: {
          type: "object",
          required: ["url"],
          properties: { url: { type: "string", format: "uri" } },
        },
        tags: ["pdf", "tables", "extraction"],
      },
      notes: [
        "publish only when the endpoint really answers: the router POSTs {invocation_id, listing_id, attempt, input}",
        "price_per_unit is USDC with at most 6 decimals; a positive price only records a proposed contract",
      ],
    },
    next_best_action: stakeRequired
      ? "retire_a_listing_or_post_the_bond_for_another_live_listing"
      : "publish_listing_with_a_concrete_endpoint",
    listings: listings.map((l) => ({
      id: l.id,
      slug: l.slug,
      name: l.name,
      status: l.status,
      version: l.version,
    })),
  };
}

/**
 * Publishes a listing after every check (role, price, schemas, endpoint policy), then, with the seller
 * row locked so concurrent publishes cannot share one free slot (and a bond release cannot slip in),
 * applies the slot rule: a further live listing needs an open bond (402 with the bond's terms and
 * nothing created otherwise; POST /api/stake posts it).
 */
export async function publishListing(
  agentId: string,
  body: Static<typeof PublishListingBody>,
  requestId: string,
): Promise<ListingRow> {
  await requireSeller(agentId);
  const priceMicros = parseUsdc(body.price_per_unit, "/price_per_unit");
  checkSchema(body.input_schema, "/input_schema");
  if (body.output_schema) checkSchema(body.output_schema, "/output_schema");
  await checkEndpoint(body.endpoint_url);

  return db().transaction(async (trx) => {
    await lockAgent(trx, agentId);
    const live = await countLiveListings(trx, agentId);
    if (live >= FREE_LISTING_SLOTS && !(await hasOpenBond(trx, agentId))) {
      throw new AppError("PAYMENT_REQUIRED", "a further live listing needs the seller bond", {
        live_listings: live,
        free_concurrent_listing_slots: FREE_LISTING_SLOTS,
        bonded: false,
        ...BOND_TERMS,
        what_to_do: "fund your balance (GET /api/wallet), POST /api/stake, then publish again",
      });
    }
    const listing = await insertListing(trx, {
      seller_id: agentId,
      slug: slugFor(body.name),
      name: body.name.trim(),
      description: body.description,
      long_description: body.long_description ?? "",
      category: body.category,
      endpoint_url: body.endpoint_url,
      pricing_model: body.pricing_model,
      price_micros: priceMicros,
      input_schema: body.input_schema,
      output_schema: body.output_schema ?? null,
      tags: body.tags,
      safe_to_retry: body.safe_to_retry ?? false,
      data_retention: body.data_retention ?? "none",
      allowed_use: body.allowed_use ?? "",
      tumbler_enabled: body.tumbler_enabled ?? false,
      reviewed_by: "automated_publish_checks",
      review_notes: "passed schema, price and endpoint-policy checks at publish time",
    });
    await recordAudit(trx, {
      actorAgentId: agentId,
      action: "listing.published",
      subjectType: "listing",
      subjectId: listing.id,
      requestId,
      data: { price_micros: listing.price_micros, version: listing.version },
    });
    return listing;
  });
}

/** Fields whose change alters what a buyer is contracting for: they bump the minor version. */
const CONTRACT_FIELDS = new Set([
  "endpoint_url",
  "input_schema",
  "output_schema",
  "price_per_unit",
  "pricing_model",
  "safe_to_retry",
]);

/** Semver bump: a contract change → minor (x.Y.0), a descriptive one → patch (x.y.Z). */
export function nextVersion(version: string, changed: string[]): string {
  const [major = 1, minor = 0, patch = 0] = version.split(".").map((n) => Number.parseInt(n, 10) || 0);
  return changed.some((f) => CONTRACT_FIELDS.has(f))
    ? `${major}.${minor + 1}.0`
    : `${major}.${minor}.${patch + 1}`;
}

/** Changes a seller's own live listing, bumping its version and recording the change (and price). */
export async function changeListing(
  agentId: string,
  listingId: string,
  body: Static<typeof ChangeListingBody>,
  requestId: string,
): Promise<ListingRow> {
  const changes: ListingChanges = {};
  const { price_per_unit, pricing_model: _model, ...rest } = body;
  Object.assign(changes, rest);
  if (price_per_unit !== undefined) changes.price_micros = parseUsdc(price_per_unit, "/price_per_unit");
  if (body.input_schema) checkSchema(body.input_schema, "/input_schema");
  if (body.output_schema) checkSchema(body.output_schema, "/output_schema");
  if (body.endpoint_url) await checkEndpoint(body.endpoint_url);
  if (rest.name) changes.name = rest.name.trim();

  return db().transaction(async (trx) => {
    const current = isUuid(listingId) ? await lockOwnedListing(trx, listingId, agentId) : undefined;
    if (!current)
      throw new AppError("LISTING_NOT_FOUND", "no listing with this id among yours", {
        listing_id: listingId,
      });
    if (current.status !== "active") {
      throw new AppError("LISTING_NOT_INVOCABLE", "a retired listing cannot change", {
        listing_id: listingId,
      });
    }
    changes.version = nextVersion(current.version, Object.keys(body));
    const updated = await updateListing(trx, current, changes, agentId);
    await recordAudit(trx, {
      actorAgentId: agentId,
      action: "listing.changed",
      subjectType: "listing",
      subjectId: listingId,
      requestId,
      data: { fields: Object.keys(body), from_version: current.version, to_version: updated.version },
    });
    return updated;
  });
}

/** Retires a seller's own listing: it leaves the catalog and frees its slot; the record stays for receipts. */
export async function retireOwnListing(
  agentId: string,
  listingId: string,
  requestId: string,
): Promise<ListingRow> {
  const listing = isUuid(listingId) ? await findOwnedListing(db(), listingId, agentId) : undefined;
  if (!listing)
    throw new AppError("LISTING_NOT_FOUND", "no listing with this id among yours", { listing_id: listingId });
  const retired = await retireListing(db(), listingId);
  if (!retired) return listing; // already retired: retiring again changes nothing
  await recordAudit(db(), {
    actorAgentId: agentId,
    action: "listing.retired",
    subjectType: "listing",
    subjectId: listingId,
    requestId,
  });
  return retired;
}
