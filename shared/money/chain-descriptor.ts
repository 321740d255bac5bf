import { formatEther, formatGwei } from "viem";
import { caip2, chainSettings, platformAddress, publicClient } from "../chain/client.js";
import { getDevChain } from "../chain/dev-chain.js";
import { rpcErrorSummary } from "../chain/rpc-error.js";
import { getConfig } from "../config.js";
import { logger } from "../log.js";
import { PLATFORM_FEE_PERCENT } from "./ledger/ledger.js";

// The chain descriptor of the spec ("wallet funding info"), built in one place from configuration and
// reused by GET /api/x402/info, GET /api/wallet/pricing and the purchase instructions.

/** About one ERC-20 transfer (spec "Limits": ~65000 gas units per deposit transaction). */
export const DEPOSIT_GAS_UNITS = 65_000n;

/** Hardhat's chain id: the local chain of tests and DEV_CHAIN=1, which has no block explorer. */
export const LOCAL_CHAIN_ID = 31337;

/** Public, keyless RPC endpoints we may show instead of a configured URL that carries credentials. */
const PUBLIC_RPC: Record<number, string> = {
  8453: "https://mainnet.base.org",
  84532: "https://sepolia.base.org",
};

const GAS_PRICE_CACHE_MS = 15_000;

export const PLATFORM_FEE_RATE = Number(PLATFORM_FEE_PERCENT) / 100;

/** A path segment this long and opaque is an API key (Alchemy /v2/<key>, Infura /v3/<key>, …). */
const KEY_LIKE_SEGMENT = /^[A-Za-z0-9_-]{20,}$/;

/**
 * The RPC URL as we may publish it: never with userinfo, a query string or a key-like path segment. A
 * URL that carries any of them is replaced by the chain's public RPC when we know one, else withheld.
 */
export function publicRpcUrl(
  raw: string | undefined,
  chainId: number,
): { url: string | null; null_reason: string | null } {
  if (!raw) return { url: null, null_reason: "no_settlement_rpc_configured" };
  let parsed: URL;
  try {
    parsed = new URL(raw);
  } catch {
    return { url: null, null_reason: "configured_rpc_url_not_publishable" };
  }
  const keyInPath = parsed.pathname.split("/").some((segment) => KEY_LIKE_SEGMENT.test(segment));
  const credentialed = parsed.username !== "" || parsed.password !== "" || parsed.search !== "" || keyInPath;
  if (!credentialed)
    return { url: `${parsed.origin}${parsed.pathname.replace(/\/$/, "")}`, null_reason: null };
  const fallback = PUBLIC_RPC[chainId];
  return fallback
    ? { url: fallback, null_reason: null }
    : { url: null, null_reason: "configured_rpc_url_carries_credentials" };
}

export interface GasEstimate {
  gas_units: number;
  gas_price_gwei: string | null;
  gas_price_null_reason: string | null;
  estimated_cost_eth: string | null;
  estimated_cost_eth_null_reason: string | null;
  estimated_cost_usd: string | null;
  estimated_cost_usd_null_reason: string;
  observed_at: string | null;
}

let gasCache: { key: string; at: number; price: Promise<bigint | null> } | undefined;

/** A live eth_gasPrice (cached briefly, failures too); null when no RPC is configured or it fails. */
function gasPrice(): Promise<bigint | null> {
  const config = getConfig();
  if (!chainSettings(config)) return Promise.resolve(null);
  const key = `${config.chainRpcUrl}|${config.chainId}`;
  const now = Date.now();
  if (!gasCache || gasCache.key !== key || now - gasCache.at > GAS_PRICE_CACHE_MS) {
    const price = publicClient()
      .getGasPrice()
      .catch((err: unknown) => {
        logger().warn(rpcErrorSummary(err), "gas price could not be read");
        return null;
      });
    gasCache = { key, at: now, price };
  }
  return gasCache.price;
}

/** The deposit's gas estimate from a live gas price; every figure we cannot know is null with a reason. */
export async function gasEstimate(): Promise<GasEstimate> {
  const configured = chainSettings() !== undefined;
  const price = await gasPrice();
  const unknown = configured ? "gas_price_unavailable_rpc_unreachable" : "no_settlement_rpc_configured";
  return {
    gas_units: Number(DEPOSIT_GAS_UNITS),
    gas_price_gwei: price === null ? null : formatGwei(price),
    gas_price_null_reason: price === null ? unknown : null,
    estimated_cost_eth: price === null ? null : formatEther(price * DEPOSIT_GAS_UNITS),
    estimated_cost_eth_null_reason: price === null ? unknown : null,
    estimated_cost_usd: null,
    estimated_cost_usd_null_reason: "no_eth_usd_price_source_configured",
    observed_at: price === null ? null : new Date().toISOString(),
  };
}

function instructions(usdc: string, chainId: number, confirmations: number): string[] {
  return [
    "Read GET /market.json first: send nothing while availability.paid_execution is not 'enabled'.",
    "Link the wallet you will pay from: POST /api/crypto/connect (sign the challenge) or POST /api/crypto/wallet.",
    "POST /api/wallet/purchase {amount_usdc} returns the exact transfer to make.",
    `From the linked wallet, send USDC (token ${usdc}, chain id ${chainId}) to platform_address with an ERC-20 transfer.`,
    `POST /api/wallet/purchase/verify {tx_hash}; it is credited after ${confirmations} confirmation(s) — poll GET /api/wallet/deposits/{deposit_id}.`,
    'Gasless instead: POST /api/wallet/purchase {amount_usdc, method: "authorization"}, sign its typed_data (EIP-3009) with the linked wallet and POST /api/wallet/purchase/authorize {deposit_request_id, signature}; the platform submits it and pays the gas.',
  ];
}

function howToGetUsdc(chainId: number, usdc: string): string[] {
  if (chainId === LOCAL_CHAIN_ID) {
    return [
      "This is a local development chain: POST /api/dev/faucet {wallet_address, amount_usdc} mints test USDC (DEV_CHAIN=1 only).",
    ];
  }
  return [
    "Withdraw USDC from an exchange to your wallet choosing the Base network.",
    "Or bridge native USDC from another chain with Circle's CCTP (not a wrapped token).",
    `Check the token contract is ${usdc}: any other token called USDC is not credited.`,
  ];
}

/** The chain descriptor (spec "Chain descriptor"), with a live gas estimate. */
export async function chainDescriptor() {
  const config = getConfig();
  const rpc = publicRpcUrl(config.chainRpcUrl, config.chainId);
  const pay = platformAddress() ?? null;
  const local = config.chainId === LOCAL_CHAIN_ID;
  const dev = config.devChain && getDevChain() !== undefined;
  return {
    name: config.chainName,
    chainId: config.chainId,
    network: caip2(config.chainId),
    rpcUrl: rpc.url,
    rpcUrl_null_reason: rpc.null_reason,
    usdc: config.usdcAddress,
    explorer: local ? null : config.chainExplorerUrl,
    explorer_null_reason: local ? "local_development_chain" : null,
    decimals: 6,
    platform_address: pay,
    platform_address_null_reason: pay ? null : "no_platform_address_configured",
    platform_fee_rate: PLATFORM_FEE_RATE,
    payment_methods: ["usdc_base"],
    supported_tokens: ["USDC"],
    settlement: "on_chain",
    confirmations_required: config.chainConfirmations,
    gas_estimate: await gasEstimate(),
    instructions: instructions(config.usdcAddress, config.chainId, config.chainConfirmations),
    how_to_get_usdc_on_base: howToGetUsdc(config.chainId, config.usdcAddress),
    gas_note:
      "A transfer deposit is one ERC-20 transfer sent from your linked wallet, so that wallet pays its gas in " +
      `ETH (about ${DEPOSIT_GAS_UNITS} gas units). A gasless deposit (method "authorization") needs no ETH: ` +
      "you sign an EIP-3009 authorization and the platform submits it and pays the gas, as it does for " +
      "payouts and x402 settlements.",
    faucet: dev
      ? {
          path: "/api/dev/faucet",
          method: "POST",
          body: { wallet_address: "0x…", amount_usdc: "100" },
          note: "DEV_CHAIN=1 only: mints test USDC and tops up gas ETH on the local chain",
        }
      : null,
    faucet_null_reason: dev ? null : "no_faucet_on_this_chain",
  };
}
