import {
  type Address,
  type Chain,
  createPublicClient,
  createWalletClient,
  defineChain,
  http,
  type PrivateKeyAccount,
  type PublicClient,
  type WalletClient,
} from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { type Config, getConfig } from "../config.js";

// The one place that turns settings into viem clients (DESIGN §6). Everything on chain — deposits,
// settlements, payouts, the gate's live check — goes through these, so the chain is chosen by
// configuration only: Base in production, the local EVM in tests and under DEV_CHAIN=1.

/** The settlement chain as configured; undefined when no RPC URL is set (no rail). */
export interface ChainSettings {
  rpcUrl: string;
  chainId: number;
  name: string;
  explorerUrl: string;
  usdcAddress: Address;
  confirmations: number;
}

export function chainSettings(config: Config = getConfig()): ChainSettings | undefined {
  if (!config.chainRpcUrl) return undefined;
  return {
    rpcUrl: config.chainRpcUrl,
    chainId: config.chainId,
    name: config.chainName,
    explorerUrl: config.chainExplorerUrl,
    usdcAddress: config.usdcAddress,
    confirmations: config.chainConfirmations,
  };
}

/** CAIP-2 id of the configured chain, e.g. eip155:8453. */
export function caip2(chainId: number = getConfig().chainId): `eip155:${number}` {
  return `eip155:${chainId}`;
}

function viemChain(s: ChainSettings): Chain {
  return defineChain({
    id: s.chainId,
    name: s.name,
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [s.rpcUrl] } },
    blockExplorers: { default: { name: s.name, url: s.explorerUrl } },
  });
}

// Clients are cached per settings identity: tests and the DEV_CHAIN launcher replace the config.
let cached: { key: string; pub: PublicClient; chain: Chain } | undefined;

function cacheKey(s: ChainSettings, timeoutMs: number): string {
  return `${s.rpcUrl}|${s.chainId}|${timeoutMs}`;
}

/** A read client for the configured chain; throws when no chain is configured (check the gate first). */
export function publicClient(): PublicClient {
  return clients().pub;
}

function clients(): { pub: PublicClient; chain: Chain } {
  const config = getConfig();
  const s = chainSettings(config);
  if (!s) throw new Error("no settlement chain is configured (CHAIN_RPC_URL)");
  const key = cacheKey(s, config.chainRpcTimeoutMs);
  if (cached?.key !== key) {
    const chain = viemChain(s);
    // cacheTime 0: confirmation counts and the gate's check must see the chain as it is now, not a
    // block number viem cached up to a polling interval ago.
    const pub = createPublicClient({
      chain,
      cacheTime: 0,
      transport: http(s.rpcUrl, { timeout: config.chainRpcTimeoutMs, retryCount: 1 }),
    }) as PublicClient;
    cached = { key, pub, chain };
  }
  return cached;
}

// Deriving the account from the key (a secp256k1 public key, then keccak) costs ~0.4 ms of CPU, and the
// paid gate asks for it twice on every paid call (docs/benchmarks.md "The fourth round"). Kept per key,
// since tests and the DEV_CHAIN launcher replace the config.
let signer: { key: string; account: PrivateKeyAccount } | undefined;

/** The platform's hot account, from PLATFORM_SIGNER_KEY; undefined when none is configured. */
export function platformSigner(): PrivateKeyAccount | undefined {
  const key = getConfig().platformSignerKey;
  if (!key) return undefined;
  if (signer?.key !== key) signer = { key, account: privateKeyToAccount(key) };
  return signer.account;
}

/** Where buyers pay the platform: PLATFORM_ADDRESS, else the signer's address, else undefined. */
export function platformAddress(): Address | undefined {
  return getConfig().platformAddress ?? platformSigner()?.address;
}

/** A wallet client that signs with the platform key; throws when no signer is configured. */
export function platformWalletClient(): WalletClient {
  const account = platformSigner();
  if (!account) throw new Error("no platform signer is configured (PLATFORM_SIGNER_KEY)");
  const { chain } = clients();
  const config = getConfig();
  return createWalletClient({
    account,
    chain,
    transport: http(config.chainRpcUrl, { timeout: config.chainRpcTimeoutMs, retryCount: 1 }),
  });
}

/** The ERC-20 fragment we read on any USDC-like token. */
export const ERC20_ABI = [
  {
    type: "event",
    name: "Transfer",
    inputs: [
      { name: "from", type: "address", indexed: true },
      { name: "to", type: "address", indexed: true },
      { name: "value", type: "uint256", indexed: false },
    ],
  },
  {
    type: "function",
    name: "balanceOf",
    stateMutability: "view",
    inputs: [{ name: "account", type: "address" }],
    outputs: [{ name: "", type: "uint256" }],
  },
  {
    type: "function",
    name: "transfer",
    stateMutability: "nonpayable",
    inputs: [
      { name: "to", type: "address" },
      { name: "value", type: "uint256" },
    ],
    outputs: [{ name: "", type: "bool" }],
  },
] as const;

/** The EIP-3009 fragment of USDC (v2.2, and our TestUSDC) that x402 settlement uses. */
export const EIP3009_ABI = [
  {
    type: "function",
    name: "transferWithAuthorization",
    stateMutability: "nonpayable",
    inputs: [
      { name: "from", type: "address" },
      { name: "to", type: "address" },
      { name: "value", type: "uint256" },
      { name: "validAfter", type: "uint256" },
      { name: "validBefore", type: "uint256" },
      { name: "nonce", type: "bytes32" },
      { name: "signature", type: "bytes" },
    ],
    outputs: [],
  },
  {
    type: "function",
    name: "authorizationState",
    stateMutability: "view",
    inputs: [
      { name: "authorizer", type: "address" },
      { name: "nonce", type: "bytes32" },
    ],
    outputs: [{ name: "", type: "bool" }],
  },
] as const;
