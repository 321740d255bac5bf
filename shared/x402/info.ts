import { caip2 } from "../chain/client.js";
import { getConfig } from "../config.js";
import { chainDescriptor, LOCAL_CHAIN_ID, paidGate } from "../money/index.js";

// GET /api/x402/info: the spec's payment network record, built from configuration and the live gate.
// It claims nothing it cannot back: the configured rail is execution-ready only while the gate is open
// AND the x402 execute route is actually served; every other network is listed as not ready.

const BASE_CHAIN_ID = 8453;
const CIRCLE_USDC_BASE = "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913";

/** Networks the spec lists besides the settlement rail: known, never execution-ready here. */
const OTHER_NETWORKS = [
  {
    network: "polygon",
    network_caip2: "eip155:137",
    asset: "USDC",
    asset_address: "0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359",
    standard: "native_circle_usdc",
    chain_family: "evm",
  },
  {
    network: "arbitrum",
    network_caip2: "eip155:42161",
    asset: "USDC",
    asset_address: "0xaf88d065e77c8cC2239327C5EDb3A432268e5831",
    standard: "native_circle_usdc",
    chain_family: "evm",
  },
  {
    network: "world",
    network_caip2: "eip155:480",
    asset: "USDC",
    asset_address: "0x79A02482A880bCE3F13e09Da970dC34db4CD24d1",
    standard: "native_circle_usdc",
    chain_family: "evm",
  },
  {
    network: "solana",
    network_caip2: "solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp",
    asset: "USDC",
    asset_address: "EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v",
    standard: "native_circle_usdc",
    chain_family: "solana",
  },
  {
    network: "polygon",
    network_caip2: "eip155:137",
    asset: "USDT",
    asset_address: "0xc2132D05D31c914a87C6611C10748AEb04B58e8F",
    standard: "erc20_permit2",
    chain_family: "evm",
  },
  {
    network: "arbitrum",
    network_caip2: "eip155:42161",
    asset: "USDT",
    asset_address: "0xFd086bC7CD5C481DCC9C85ebE478A1C0b69FCbb9",
    standard: "erc20_permit2",
    chain_family: "evm",
  },
] as const;

/** The spec's endpoint names → paths (each reported as served or not from the route list, never assumed). */
const ENDPOINTS = {
  info: "/api/x402/info",
  marketplace_gateway: "/api/x402/marketplace",
  catalog: "/api/x402/listings",
  discover: "/api/x402/discover",
  execute_match: "/api/x402/execute/match",
  execute: "/api/x402/execute",
  test_echo: "/api/x402/test/echo",
} as const;

/** Documents the record links to besides the endpoints. */
const DOCUMENTS = { service_card: "/.well-known/x402/service.json", openapi: "/openapi.json" } as const;

const EXECUTE_ROUTE = "post /api/x402/execute";

/** A slug for the configured chain's network name: "base" on 8453, else from CHAIN_NAME. */
function networkName(chainId: number, chainName: string): string {
  if (chainId === BASE_CHAIN_ID) return "base";
  return (
    chainName
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, "-")
      .replace(/^-|-$/g, "") || `chain-${chainId}`
  );
}

/**
 * The payment network record. servedRoutes holds "method path" of every route this API serves (so an
 * endpoint is reported live only when it is).
 */
export async function paymentNetworkRecord(servedRoutes: ReadonlySet<string>) {
  const config = getConfig();
  const base = config.publicBaseUrl;
  const gate = await paidGate();
  const network = caip2(config.chainId);
  const name = networkName(config.chainId, config.chainName);
  const served = (path: string) => servedRoutes.has(`get ${path}`) || servedRoutes.has(`post ${path}`);
  const executeServed = servedRoutes.has(EXECUTE_ROUTE);
  const blockers = [
    ...(gate.enabled ? [] : [`paid_execution_unavailable:${gate.reason ?? "unknown"}`]),
    ...(executeServed ? [] : ["x402_execute_not_served_yet"]),
  ];
  const isCircleBase = config.chainId === BASE_CHAIN_ID && config.usdcAddress === CIRCLE_USDC_BASE;
  const rail = {
    network: name,
    network_caip2: network,
    asset: "USDC",
    asset_address: config.usdcAddress,
    standard: isCircleBase ? "native_circle_usdc" : "eip3009_test_token",
    chain_family: "evm",
    normalization_required: false,
    execution_ready: blockers.length === 0,
    execution_blockers: blockers,
  };
  const others = OTHER_NETWORKS.filter((n) => n.network_caip2 !== network).map((n) => ({
    ...n,
    normalization_required: true,
    execution_ready: false,
    execution_blockers: ["not_settled_on_this_network"],
  }));
  const baseEntry =
    config.chainId === BASE_CHAIN_ID
      ? []
      : [
          {
            network: "base",
            network_caip2: caip2(BASE_CHAIN_ID),
            asset: "USDC",
            asset_address: CIRCLE_USDC_BASE,
            standard: "native_circle_usdc",
            chain_family: "evm",
            normalization_required: true,
            execution_ready: false,
            execution_blockers: ["not_the_configured_settlement_chain"],
          },
        ];
  const endpoints = Object.fromEntries(Object.entries(ENDPOINTS).map(([k, path]) => [k, `${base}${path}`]));
  const endpointStatus = Object.fromEntries(
    Object.entries({ ...ENDPOINTS, ...DOCUMENTS }).map(([k, path]) => [
      k,
      { served: served(path), availability: served(path) ? "live" : "not_served_yet" },
    ]),
  );
  return {
    name: `${config.platformId} x402 gateway`,
    description:
      "Pay-per-request access to marketplace listings over x402: the first call answers 402 with a payment " +
      "challenge, the retry carries a signed USDC authorization and gets the result. Settlement is on chain; " +
      "only states with evidence are reported.",
    payment_protocol: "x402" as const,
    x402_version: 2,
    currency: "USDC" as const,
    network,
    payment_networks_supported: [rail, ...baseEntry, ...others],
    payment_network: name,
    payment_network_caip2: network,
    payment_asset: "USDC",
    payment_asset_address: config.usdcAddress,
    settlement_network: name,
    settlement_network_caip2: network,
    settlement_asset: "USDC",
    settlement_asset_address: config.usdcAddress,
    normalization_path: {
      type: "same_rail",
      required: false,
      status: "not_required",
      from_network: network,
      to_network: network,
      asset: "USDC",
      settlement_asset: "USDC",
      provider: null,
    },
    endpoints,
    endpoint_status: endpointStatus,
    templates: {
      invoke: `${base}/api/x402/invoke/{listing_id}`,
      detail: `${base}/api/x402/invoke/{listing_id}`,
      discover: `${base}/api/x402/invoke/{listing_id}/discover`,
      note:
        "{listing_id} is a listing UUID from the catalog or match; there is no collection route at /api/x402/invoke. " +
        (served("/api/x402/invoke/{listing_id}") ? "" : "These routes are not served yet."),
    },
    recommended_flow: {
      name: "route_first" as const,
      description:
        "Let the router choose: match the task to get a quote, then execute the quote and answer the 402 challenge.",
      steps: [
        `GET ${base}/market.json — proceed only when availability.paid_execution is 'enabled'`,
        `GET ${base}${ENDPOINTS.execute_match}?task=<task> → quote_id`,
        `POST ${base}${ENDPOINTS.execute} {quote_id, input} → 402 with the payment challenge`,
        "sign the challenge (EIP-3009 transferWithAuthorization) and retry with header PAYMENT-SIGNATURE",
        "read the result and the PAYMENT-RESPONSE header; the settlement is confirmed on chain separately",
      ],
    },
    marketplace_gateway: {
      overview: `${base}${ENDPOINTS.marketplace_gateway}`,
      purpose: "the curated x402 edge of the marketplace: listings payable per request without registration",
    },
    wallet_requirement:
      `A USDC wallet on ${config.chainName} (${network}) that can sign EIP-3009 transferWithAuthorization ` +
      "(x402 scheme 'exact'); no platform registration and no ETH for gas (the platform submits the settlement).",
    walletless_alternative:
      "Register with POST /api/quickstart and call POST /api/execute with the API key: free tasks need no " +
      "wallet; paid tasks draw on a balance funded by a deposit (GET /api/wallet/pricing).",
    service_card: `${base}${DOCUMENTS.service_card}`,
    openapi: `${base}${DOCUMENTS.openapi}`,
    mpp_status: executeServed
      ? {
          supported: true,
          status: "live",
          note:
            "MPP (IETF 'Payment' scheme, method evm, intent charge, credential type authorization): every 402 of " +
            "the paid x402 routes also carries WWW-Authenticate: Payment; answer with Authorization: Payment and " +
            "read Payment-Receipt on success",
        }
      : {
          supported: false,
          status: "not_served_yet",
          note: "MPP (WWW-Authenticate: Payment / Authorization: Payment) arrives with the x402 gateway routes",
        },
    paid_execution: {
      enabled: gate.enabled,
      reason: gate.reason,
      read_first: `${base}/market.json`,
    },
    chain: await chainDescriptor(),
    local_chain: config.chainId === LOCAL_CHAIN_ID,
    generated_at: new Date().toISOString(),
  };
}
