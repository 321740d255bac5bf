import { formatEther, getAddress } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ERC20_ABI } from "../../shared/chain/client.js";
import { setDevChain } from "../../shared/chain/dev-chain.js";
import { overrideConfig } from "../../shared/config.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { api, errorCode } from "../helpers/http.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { startService, type TestService } from "../helpers/service.js";

// The DEV_CHAIN=1 routes: absent (404) unless the mode is on; with it on, enabled in-process the way the
// npm start launcher does it (setDevChain + config), they describe the local chain and mint test USDC.

let chain: LocalChain;
let service: TestService | undefined;

beforeAll(async () => {
  chain = await startLocalChain();
});
afterAll(async () => {
  setDevChain(undefined);
  await service?.stop();
  await chain.stop();
});

describe("with DEV_CHAIN off", () => {
  it("the dev routes do not exist (404) and are not in OpenAPI", async () => {
    overrideConfig({ devChain: false });
    service = await startService({ worker: false, sweeper: false });
    try {
      const info = await api("GET", "/api/dev/chain");
      expect(info.status).toBe(404);
      expect(errorCode(info)).toBe("NOT_FOUND");
      const faucet = await api("POST", "/api/dev/faucet", {
        body: { wallet_address: chain.minter.address, amount_usdc: "1" },
      });
      expect(faucet.status).toBe(404);
      const doc = await api("GET", "/openapi.json");
      expect(Object.keys(doc.body.paths).filter((p) => p.startsWith("/api/dev/"))).toEqual([]);
    } finally {
      await service.stop();
      service = undefined;
    }
  });
});

describe("with DEV_CHAIN on", () => {
  let platformAddress: string;

  beforeAll(async () => {
    platformAddress = (await usePaidChain(chain, { confirmations: 2 })).address;
    overrideConfig({ devChain: true });
    setDevChain(chain);
    service = await startService({ worker: false, sweeper: false });
  });

  it("GET /api/dev/chain describes the local chain", async () => {
    const res = await api("GET", "/api/dev/chain");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      rpc_url: chain.rpcUrl,
      chain_id: 31337,
      network: "eip155:31337",
      token_address: getAddress(chain.tokenAddress),
      platform_address: platformAddress,
      minter: chain.minter.address,
      confirmations_required: 2,
      faucet: "/api/dev/faucet",
    });
    // The minter key never leaves the chain object.
    expect(res.text).not.toContain(chain.minter.privateKey.slice(2));
  });

  it("POST /api/dev/faucet mints test USDC and gives a new wallet gas", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey()).address;
    const res = await api("POST", "/api/dev/faucet", {
      body: { wallet_address: wallet.toLowerCase(), amount_usdc: "250.5" },
    });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      wallet_address: wallet,
      amount_usdc: "250.500000",
      amount_atomic: "250500000",
      token_address: getAddress(chain.tokenAddress),
      chain_id: 31337,
      eth_balance_set_to: "0.1",
    });
    const balance = await chain.publicClient.readContract({
      address: chain.tokenAddress,
      abi: ERC20_ABI,
      functionName: "balanceOf",
      args: [wallet],
    });
    expect(balance).toBe(250_500_000n);
    expect(formatEther(await chain.publicClient.getBalance({ address: wallet }))).toBe("0.1");
    const receipt = await chain.publicClient.getTransactionReceipt({ hash: res.body.tx_hash });
    expect(receipt.status).toBe("success");

    // A wallet that already has gas keeps its ETH.
    const again = await api("POST", "/api/dev/faucet", { body: { wallet_address: wallet, amount_usdc: 1 } });
    expect(again.body).toMatchObject({ eth_balance_set_to: null, eth_null_reason: "wallet_already_has_gas" });
  });

  it("caps the amount and validates the address", async () => {
    const wallet = privateKeyToAccount(generatePrivateKey()).address;
    for (const amount_usdc of ["1000.000001", "0", "5000"]) {
      const res = await api("POST", "/api/dev/faucet", { body: { wallet_address: wallet, amount_usdc } });
      expect(res.status, amount_usdc).toBe(400);
    }
    const max = await api("POST", "/api/dev/faucet", {
      body: { wallet_address: wallet, amount_usdc: "1000" },
    });
    expect(max.status).toBe(200);
    const badChecksum = wallet.replace(/[a-f]/, (c) => c.toUpperCase());
    if (badChecksum !== wallet) {
      const res = await api("POST", "/api/dev/faucet", {
        body: { wallet_address: badChecksum, amount_usdc: "1" },
      });
      expect(res.status).toBe(400);
    }
  });

  it("the chain descriptor points newcomers at the faucet", async () => {
    const res = await api("GET", "/api/wallet/pricing");
    expect(res.body.chain.faucet).toMatchObject({ path: "/api/dev/faucet", method: "POST" });
    expect(res.body.chain.how_to_get_usdc_on_base[0]).toContain("/api/dev/faucet");
  });
});
