import { AppError } from "../errors.js";
import { formatUsdc, micros } from "../kernel/money.js";
import type { ApiKeyRow } from "./store/api-keys.js";

// What one API key may buy and spend (docs/payments.md "Keys, scopes and spend limits"). The policy travels in
// the Principal, read with the key row on every request, so every route sees the key's current policy.

/** In a seller allowlist or blocklist: the platform's own (first-party) listings, which have no seller. */
export const PLATFORM_SELLER = "platform";

export interface KeyPolicy {
  /** Listing categories the key may buy from; null = any. */
  categories: readonly string[] | null;
  /** Highest listed price per call the key may buy (a scope: pricier listings are out of reach). */
  maxPriceMicros: bigint | null;
  /** Seller agent ids (or "platform"); at most one of the two lists is set. */
  sellerAllowlist: readonly string[] | null;
  sellerBlocklist: readonly string[] | null;
  /** Most one call may hold (a limit: 429 WALLET_LIMIT_EXCEEDED). */
  perCallLimitMicros: bigint | null;
  /** Most the key may reserve and spend per UTC day. */
  dailyCapMicros: bigint | null;
  /** A purchase holding more than this waits for a supervisor's decision. */
  approvalAboveMicros: bigint | null;
  supervisor: boolean;
  manageKeys: boolean;
}

/** The registration key's policy: no scopes, no limits, every power. */
export const UNRESTRICTED: KeyPolicy = Object.freeze({
  categories: null,
  maxPriceMicros: null,
  sellerAllowlist: null,
  sellerBlocklist: null,
  perCallLimitMicros: null,
  dailyCapMicros: null,
  approvalAboveMicros: null,
  supervisor: true,
  manageKeys: true,
});

const amount = (column: string | null) => (column === null ? null : micros(column));

/** A key row's policy, with money as bigint. */
export function policyFromRow(row: ApiKeyRow): KeyPolicy {
  return {
    categories: row.categories,
    maxPriceMicros: amount(row.max_price_micros),
    sellerAllowlist: row.seller_allowlist,
    sellerBlocklist: row.seller_blocklist,
    perCallLimitMicros: amount(row.per_call_limit_micros),
    dailyCapMicros: amount(row.daily_cap_micros),
    approvalAboveMicros: amount(row.approval_above_micros),
    supervisor: row.supervisor,
    manageKeys: row.manage_keys,
  };
}

export const SCOPE_EXCLUSIONS = [
  "outside_key_categories",
  "over_key_price_ceiling",
  "seller_not_in_key_allowlist",
  "seller_in_key_blocklist",
] as const;

export type ScopeExclusion = (typeof SCOPE_EXCLUSIONS)[number];

/** Which scope each exclusion comes from, as named in the key's `scopes`. */
const SCOPE_OF: Record<ScopeExclusion, string> = {
  outside_key_categories: "categories",
  over_key_price_ceiling: "max_price_usdc",
  seller_not_in_key_allowlist: "seller_allowlist",
  seller_in_key_blocklist: "seller_blocklist",
};

export function isScopeExclusion(reason: string): reason is ScopeExclusion {
  return (SCOPE_EXCLUSIONS as readonly string[]).includes(reason);
}

/**
 * What a key's scopes look at in a listing. Declared here rather than borrowed from the catalog's row
 * type: identity sits below the catalog in the dependency rule (docs/architecture.md).
 */
export interface ScopedListing {
  id: string;
  category: string;
  seller_id: string | null;
  price_micros: string;
}

/**
 * Why the key's scopes keep it from a listing, or null when they do not. The platform's free
 * first-party listings (the echo check) are open to every key (spec Authentication 3: "no scopes
 * required"); every other listing, free or paid, must pass the category and seller scopes, because a
 * scope also decides whom the key's input may be sent to. Only the price ceiling is about money, and a
 * free listing never exceeds it.
 */
export function scopeExclusion(policy: KeyPolicy, listing: ScopedListing): ScopeExclusion | null {
  const price = micros(listing.price_micros);
  if (listing.seller_id === null && price === 0n) return null;
  if (policy.categories && !policy.categories.includes(listing.category)) return "outside_key_categories";
  const seller = listing.seller_id ?? PLATFORM_SELLER;
  if (policy.sellerAllowlist && !policy.sellerAllowlist.includes(seller))
    return "seller_not_in_key_allowlist";
  if (policy.sellerBlocklist?.includes(seller)) return "seller_in_key_blocklist";
  if (policy.maxPriceMicros !== null && price > policy.maxPriceMicros) return "over_key_price_ceiling";
  return null;
}

/** 403 POLICY_BLOCKED for a direct invoke of a listing outside the key's scopes, naming the scope. */
export function scopeBlocked(listing: ScopedListing, reason: ScopeExclusion): AppError {
  return new AppError(
    "POLICY_BLOCKED",
    `this API key's ${SCOPE_OF[reason]} scope does not allow this listing`,
    {
      listing_id: listing.id,
      reason,
      scope: SCOPE_OF[reason],
      listing_category: listing.category,
      listing_seller: listing.seller_id ?? PLATFORM_SELLER,
      listing_price_usdc: formatUsdc(micros(listing.price_micros)),
      hint: "use a key whose scopes allow it (GET /api/keys shows them), or choose an allowed listing",
    },
  );
}

/** 403 POLICY_BLOCKED for an execute whose every candidate the key's scopes excluded. */
export function scopesExcludeTask(
  task: string,
  excluded: { listing: { id: string }; reason: string }[],
): AppError {
  const scoped = excluded.filter((e) => isScopeExclusion(e.reason));
  const scopes = [...new Set(scoped.map((e) => SCOPE_OF[e.reason as ScopeExclusion]))];
  return new AppError(
    "POLICY_BLOCKED",
    `this API key's ${scopes.join(" and ")} scope${scopes.length > 1 ? "s" : ""} exclude every listing for task "${task}"`,
    {
      task,
      scopes,
      excluded: excluded.map((e) => ({ listing_id: e.listing.id, reason: e.reason })),
      hint: "GET /api/execute/match shows each exclusion; use a key whose scopes allow one of them",
    },
  );
}

const subset = (child: readonly string[] | null, parent: readonly string[]) =>
  child?.every((c) => parent.includes(c)) === true;
const notAbove = (child: bigint | null, parent: bigint) => child !== null && child <= parent;

/**
 * Where `child` would reach further than `parent` (empty when it stays within): a key never grants or
 * manages a key with wider scopes, higher limits, a higher approval threshold or powers it lacks.
 */
export function widerThan(parent: KeyPolicy, child: KeyPolicy): string[] {
  const wider: string[] = [];
  if (parent.categories && !subset(child.categories, parent.categories)) wider.push("categories");
  if (parent.maxPriceMicros !== null && !notAbove(child.maxPriceMicros, parent.maxPriceMicros))
    wider.push("max_price_usdc");
  if (parent.sellerAllowlist && !subset(child.sellerAllowlist, parent.sellerAllowlist))
    wider.push("seller_allowlist");
  if (parent.sellerBlocklist) {
    const blocked = parent.sellerBlocklist;
    const keepsBlocks =
      child.sellerBlocklist !== null && blocked.every((b) => child.sellerBlocklist?.includes(b));
    const allowsNone = child.sellerAllowlist?.every((a) => !blocked.includes(a)) === true;
    if (!keepsBlocks && !allowsNone) wider.push("seller_blocklist");
  }
  if (parent.perCallLimitMicros !== null && !notAbove(child.perCallLimitMicros, parent.perCallLimitMicros))
    wider.push("per_call_usdc");
  if (parent.dailyCapMicros !== null && !notAbove(child.dailyCapMicros, parent.dailyCapMicros))
    wider.push("daily_cap_usdc");
  if (parent.approvalAboveMicros !== null && !notAbove(child.approvalAboveMicros, parent.approvalAboveMicros))
    wider.push("approval_above_usdc");
  if (child.supervisor && !parent.supervisor) wider.push("supervisor");
  if (child.manageKeys && !parent.manageKeys) wider.push("manage_keys");
  return wider;
}

const usdc = (v: bigint | null) => (v === null ? null : formatUsdc(v));

/** The wire view of a policy (amounts as 6-decimal strings). */
export function policyView(p: KeyPolicy) {
  return {
    scopes: {
      categories: p.categories ? [...p.categories] : null,
      max_price_usdc: usdc(p.maxPriceMicros),
      seller_allowlist: p.sellerAllowlist ? [...p.sellerAllowlist] : null,
      seller_blocklist: p.sellerBlocklist ? [...p.sellerBlocklist] : null,
    },
    limits: { per_call_usdc: usdc(p.perCallLimitMicros), daily_cap_usdc: usdc(p.dailyCapMicros) },
    approval_above_usdc: usdc(p.approvalAboveMicros),
    supervisor: p.supervisor,
    manage_keys: p.manageKeys,
  };
}
