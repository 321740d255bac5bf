// The x402 context's public surface: the paid edge for agents without an API key, in x402 v2 (and v1
// headers) and MPP: the payment network record, listings and matches with quotes, 402 challenges,
// payment checks, the gateway's one-transaction purchase, and on-chain settlement. Owns x402_payments.
// Depends on audit, outbox, identity, money, catalog, routing and tools.

export {
  wellKnownX402,
  x402Discover,
  x402ListingDetail,
  x402ListingDiscover,
  x402Listings,
  x402Marketplace,
  x402Match,
  x402ServiceCard,
  x402TestEcho,
} from "./catalog.js";
export { purgeStaleQuotes } from "./challenge.js";
export { failedOrStuckSettlements, recheckSettlement } from "./console.js";
export { executeQuote, invokeListing } from "./gateway.js";
export { paymentNetworkRecord } from "./info.js";
export { canonicalJson, parseWwwAuthenticate } from "./mpp.js";
export { redriveX402Settlements, x402EdgeSettlement } from "./payments.js";
export {
  InvocationParams,
  ListingParams,
  PageQuery,
  WellKnownX402,
  X402Discovery,
  X402EchoQuery,
  X402ExecuteBody,
  X402InvokeBody,
  X402ListingDetail,
  X402ListingDiscovery,
  X402Listings,
  X402Marketplace,
  X402MatchQuery,
  X402MatchResult,
  X402PaidResult,
  X402Pending,
  X402ServiceCard,
  X402StatusResult,
} from "./schemas/gateway.js";
export { PaymentNetworkRecord } from "./schemas/info.js";
export type { X402SettlementOutcome } from "./settlement.js";
export { processX402Settlement } from "./settlement.js";
export { oldestOpenSettlementSeconds, settlementCountsByStatus } from "./store/console.js";
export { x402Status } from "./views.js";
