import { getAddress } from "viem";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { publicRpcUrl } from "../../shared/money/chain-descriptor.js";
import { resetGateCache } from "../../shared/money/gate/availability.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { api } from "../helpers/http.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { startService, type TestService } from "../helpers/service.js";

let service: TestService;
let chain: LocalChain;

beforeAll(async () => {
  chain = await startLocalChain();
  service = await startService({ worker: false, sweeper: false });
});
afterAll(async () => {
  await service.stop();
  await chain.stop();
});

const SPEC_ENDPOINTS = [
  "info",
  "marketplace_gateway",
  "catalog",
  "discover",
  "execute_match",
  "execute",
  "test_echo",
];

describe("GET /api/x402/info without a settlement rail", () => {
  it("is the spec's payment network record, with nothing execution-ready", async () => {
    const res = await api("GET", "/api/x402/info");
    expect(res.status).toBe(200);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const base = getConfig().publicBaseUrl;
    expect(res.body).toMatchObject({
      payment_protocol: "x402",
      currency: "USDC",
      network: "eip155:8453",
      payment_network: "base",
      payment_network_caip2: "eip155:8453",
      payment_asset: "USDC",
      payment_asset_address: "0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913",
      settlement_network_caip2: "eip155:8453",
      normalization_path: {
        type: "same_rail",
        required: false,
        status: "not_required",
        from_network: "eip155:8453",
        to_network: "eip155:8453",
        provider: null,
      },
      recommended_flow: { name: "route_first" },
      openapi: `${base}/openapi.json`,
      paid_execution: { enabled: false, reason: "platform_custody_frozen" },
    });
    expect(Object.keys(res.body.endpoints).sort()).toEqual([...SPEC_ENDPOINTS].sort());
    for (const url of Object.values(res.body.endpoints))
      expect(url as string).toMatch(new RegExp(`^${base}/api/x402/`));
    expect(res.body.endpoint_status.info).toEqual({ served: true, availability: "live" });
    expect(res.body.endpoint_status.execute).toEqual({ served: true, availability: "live" });
    expect(res.body.mpp_status).toMatchObject({ supported: true, status: "live" });
    expect(res.body.endpoint_status.openapi.served).toBe(true);

    const networks = res.body.payment_networks_supported;
    expect(networks.every((n: any) => n.execution_ready === false)).toBe(true);
    const rail = networks[0];
    expect(rail).toMatchObject({
      network: "base",
      network_caip2: "eip155:8453",
      asset: "USDC",
      standard: "native_circle_usdc",
      chain_family: "evm",
      normalization_required: false,
      execution_blockers: ["paid_execution_unavailable:platform_custody_frozen"],
    });
    const others = networks.slice(1).map((n: any) => `${n.network}:${n.asset}`);
    expect(others.sort()).toEqual(
      ["polygon:USDC", "arbitrum:USDC", "world:USDC", "solana:USDC", "polygon:USDT", "arbitrum:USDT"].sort(),
    );
    expect(networks.slice(1).every((n: any) => n.normalization_required === true)).toBe(true);
    expect(networks.find((n: any) => n.network === "solana").chain_family).toBe("solana");

    expect(res.body.chain).toMatchObject({
      chainId: 8453,
      rpcUrl: null,
      rpcUrl_null_reason: "no_settlement_rpc_configured",
      platform_address: null,
      decimals: 6,
      platform_fee_rate: 0.03,
      payment_methods: ["usdc_base"],
      supported_tokens: ["USDC"],
      settlement: "on_chain",
      faucet: null,
      gas_estimate: {
        gas_units: 65000,
        gas_price_gwei: null,
        estimated_cost_usd: null,
        estimated_cost_usd_null_reason: "no_eth_usd_price_source_configured",
      },
    });
  });
});

describe("GET /api/x402/info on a live local chain", () => {
  it("reports the configured rail, the platform address and a live gas estimate", async () => {
    const config = getConfig();
    const platform = await usePaidChain(chain);
    try {
      const res = await api("GET", "/api/x402/info");
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({
        network: "eip155:31337",
        payment_asset_address: getAddress(chain.tokenAddress),
        paid_execution: { enabled: true, reason: null },
        local_chain: true,
      });
      const rail = res.body.payment_networks_supported[0];
      expect(rail).toMatchObject({
        network_caip2: "eip155:31337",
        asset_address: getAddress(chain.tokenAddress),
        standard: "eip3009_test_token",
        // The gate is open and the x402 execute route is served: the configured rail is ready.
        execution_ready: true,
        execution_blockers: [],
      });
      expect(res.body.payment_networks_supported.find((n: any) => n.network === "base")).toMatchObject({
        execution_ready: false,
        normalization_required: true,
      });
      expect(res.body.chain).toMatchObject({
        chainId: 31337,
        rpcUrl: chain.rpcUrl,
        usdc: getAddress(chain.tokenAddress),
        explorer: null,
        explorer_null_reason: "local_development_chain",
        platform_address: platform.address,
        confirmations_required: 1,
      });
      const gas = res.body.chain.gas_estimate;
      expect(gas.gas_price_gwei).toMatch(/^\d+(\.\d+)?$/);
      expect(gas.estimated_cost_eth).toMatch(/^\d+(\.\d+)?$/);
      expect(gas.gas_price_null_reason).toBeNull();
    } finally {
      overrideConfig(config);
      resetGateCache();
    }
  });

  it("never shows credentials embedded in CHAIN_RPC_URL", async () => {
    const config = getConfig();
    await usePaidChain(chain);
    const port = new URL(chain.rpcUrl).port;
    overrideConfig({ chainRpcUrl: `http://alice:s3cretpass@127.0.0.1:${port}/rpc?apikey=TOPSECRETKEY` });
    resetGateCache();
    try {
      const res = await api("GET", "/api/x402/info");
      expect(res.status).toBe(200);
      expect(res.text).not.toContain("s3cretpass");
      expect(res.text).not.toContain("TOPSECRETKEY");
      expect(res.text).not.toContain("alice");
      expect(res.body.chain).toMatchObject({
        rpcUrl: null,
        rpcUrl_null_reason: "configured_rpc_url_carries_credentials",
      });
      const pricing = await api("GET", "/api/wallet/pricing");
      expect(pricing.text).not.toContain("s3cretpass");
      expect(pricing.text).not.toContain("TOPSECRETKEY");
    } finally {
      overrideConfig(config);
      resetGateCache();
    }
  });
});

describe("publicRpcUrl", () => {
  it.each([
    ["https://mainnet.base.org", 8453, "https://mainnet.base.org"],
    ["https://rpc.example.com/base/", 8453, "https://rpc.example.com/base"],
    ["https://user:pw@rpc.example.com", 8453, "https://mainnet.base.org"],
    ["https://rpc.example.com/?key=abc", 8453, "https://mainnet.base.org"],
    ["https://base-mainnet.g.alchemy.com/v2/AbCdEfGhIjKlMnOpQrStUvWx", 8453, "https://mainnet.base.org"],
    ["https://mainnet.infura.io/v3/0123456789abcdef0123456789abcdef", 10, null],
    ["https://user:pw@rpc.example.com", 10, null],
    ["http://127.0.0.1:8545", 31337, "http://127.0.0.1:8545"],
  ])("%s on chain %i → %s", (raw, chainId, expected) => {
    expect(publicRpcUrl(raw, chainId).url).toBe(expected);
  });

  it("says why when there is no URL to show", () => {
    expect(publicRpcUrl(undefined, 8453)).toEqual({ url: null, null_reason: "no_settlement_rpc_configured" });
  });
});
