import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import type { Worker } from "bullmq";
import type { Address, Hash } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, expect, it } from "vitest";
import { ERC20_ABI } from "../../shared/chain/client.js";
import { setDevChain } from "../../shared/chain/dev-chain.js";
import { overrideConfig } from "../../shared/config.js";
import { getQueue } from "../../shared/queues.js";
import { startSettlementConfirmationsWorker } from "../../workers/settlement-confirmations.js";
import { type LocalChain, localWalletClient, startLocalChain } from "../helpers/chain.js";
import { api } from "../helpers/http.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";

// The whole money path through the HTTP API only, as a newcomer would walk it on a local chain:
// register → generate a wallet → get test USDC on chain → deposit instructions → transfer → verify →
// the settlement-confirmations worker credits it → a seller publishes a paid listing → paid execute →
// receipt with the 97/3 split → both wallets show the result; then the README's example script walks the
// same path on its own. Own database: it asserts exact balances of the platform's revenue too.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let platformAddress: Address;
let service: TestService;
let settlements: Worker;
let seller: TestSeller;

beforeAll(async () => {
  ownDb = await useOwnDatabase("moneyflow");
  chain = await startLocalChain();
  platformAddress = (await usePaidChain(chain)).address;
  // DEV_CHAIN mode as `npm start` sets it up: the dev routes (chain info, faucet) the example script uses.
  overrideConfig({ devChain: true });
  setDevChain(chain);
  service = await startService();
  settlements = startSettlementConfirmationsWorker();
  await settlements.waitUntilReady();
  seller = await startSeller((call, res) =>
    json(res, 200, { success: true, output: { summary: `read ${JSON.stringify(call.body)}` } }),
  );
});

afterAll(async () => {
  setDevChain(undefined);
  await seller?.close();
  await settlements?.close();
  await getQueue("settlement-confirmations")
    .obliterate({ force: true })
    .catch(() => {});
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

async function register(intent: "buyer" | "seller") {
  const res = await api("POST", "/api/quickstart", {
    body: { name: `${intent}-${randomBytes(3).toString("hex")}`, intent },
  });
  expect(res.status).toBe(201);
  return res.body.api_key as string;
}

it("deposit → verified credit → paid execute → receipt with split → balances", async () => {
  // The buyer registers and gets a self-custody wallet, linked to it.
  const buyerKey = await register("buyer");
  const wallet = await api("POST", "/api/crypto/wallet", { key: buyerKey });
  expect(wallet.status).toBe(201);
  expect(wallet.body.linked).toBe(true);
  const account = privateKeyToAccount(wallet.body.private_key);
  expect(account.address).toBe(wallet.body.address);

  // Test USDC and gas on the local chain (what POST /api/dev/faucet does under DEV_CHAIN=1).
  await chain.fundEth(account.address, 10n ** 17n);
  await chain.mint(account.address, 5_000_000n);

  const purchase = await api("POST", "/api/wallet/purchase", { key: buyerKey, body: { amount_usdc: 2 } });
  expect(purchase.status).toBe(200);
  expect(purchase.body.transfer.to_address).toBe(platformAddress);
  const hash: Hash = await localWalletClient(chain, account).writeContract({
    address: purchase.body.transfer.token_address,
    abi: ERC20_ABI,
    functionName: "transfer",
    args: [purchase.body.transfer.to_address, BigInt(purchase.body.amount_atomic)],
  });
  await chain.publicClient.waitForTransactionReceipt({ hash });

  const verify = await api("POST", "/api/wallet/purchase/verify", { key: buyerKey, body: { tx_hash: hash } });
  expect([200, 202]).toContain(verify.status);
  await expect
    .poll(
      async () => (await api("GET", "/api/wallet", { key: buyerKey })).body.balances.USDC.available_usdc,
      {
        timeout: 15_000,
      },
    )
    .toBe("2.000000");

  // A seller publishes a paid listing on its own endpoint.
  const sellerKey = await register("seller");
  const task = `summarise-${randomBytes(3).toString("hex")}`;
  const listing = await api("POST", "/api/capabilities", {
    key: sellerKey,
    body: {
      name: "Summariser",
      description: "Summarises a text in one line.",
      category: "nlp",
      endpoint_url: seller.url,
      pricing_model: "per_call",
      price_per_unit: 0.25,
      input_schema: { type: "object", required: ["text"], properties: { text: { type: "string" } } },
      tags: [task],
    },
  });
  expect(listing.status).toBe(201);

  // The buyer sees it in match, then pays for a call through the router.
  const match = await api("GET", `/api/execute/match?task=${task}`, { key: buyerKey });
  expect(match.body.candidates[0]).toMatchObject({ listing_id: listing.body.id, price_usdc: "0.250000" });
  const run = await api("POST", "/api/execute", {
    key: buyerKey,
    body: { task, input: { text: "hello" }, constraints: { max_cost: 0.5 } },
  });
  expect(run.status).toBe(200);
  expect(run.body.output.summary).toContain('"text":"hello"');
  expect(run.body.cost).toMatchObject({ amount_usdc: "0.250000", charged: true });

  const receipt = await api("GET", `/api/commerce/receipts/${run.body.receipt_id}`, { key: buyerKey });
  expect(receipt.body).toMatchObject({
    amount_usdc: "0.250000",
    split: { seller_share_usdc: "0.242500", platform_fee_usdc: "0.007500" },
    settlement: { state: "captured" },
  });

  const buyerWallet = (await api("GET", "/api/wallet", { key: buyerKey })).body;
  expect(buyerWallet.balances.USDC).toMatchObject({ available_usdc: "1.750000", held_usdc: "0.000000" });
  const sellerWallet = (await api("GET", "/api/wallet", { key: sellerKey })).body;
  expect(sellerWallet.balances.USDC.seller_payable_usdc).toBe("0.242500");

  // On chain: the deposit really moved (the call itself moved nothing on chain — it was prepaid).
  const onChain = (address: Address) =>
    chain.publicClient.readContract({
      address: purchase.body.transfer.token_address,
      abi: ERC20_ABI,
      functionName: "balanceOf",
      args: [address],
    });
  expect(await onChain(account.address)).toBe(3_000_000n);
  expect(await onChain(platformAddress)).toBe(2_000_000n);
});

// The README's paid-call walkthrough is examples/paid-call.mjs; this runs it, unchanged, against this
// service, so the README cannot rot. After the test above: it deposits to the platform address too.
it("examples/paid-call.mjs reaches a paid call with a receipt, from nothing", async () => {
  const child = spawn(process.execPath, ["examples/paid-call.mjs"], {
    env: { ...process.env, AGENTMARKET_URL: service.baseUrl },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d) => {
    output += d;
  });
  child.stderr.on("data", (d) => {
    output += d;
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  expect(code, output).toBe(0);
  const last = JSON.parse(output.trim().split("\n").at(-1)!);
  expect(last).toMatchObject({ ok: true, amount_usdc: "0.250000" });
  expect(output).toContain("seller_share_usdc");
}, 90_000);

// The Node SDK's example agent (examples/node/agent.mjs) funds itself on the dev chain and buys a call.
it("examples/node/agent.mjs registers, funds itself, runs a paid task and prints its receipt", async () => {
  const sellerKey = await register("seller");
  const task = `node-example-${Date.now().toString(36)}`;
  const listing = await api("POST", "/api/capabilities", {
    key: sellerKey,
    body: {
      name: "Node example listing",
      description: "A paid listing the Node SDK example buys.",
      category: "devtools",
      endpoint_url: seller.url,
      pricing_model: "per_call",
      price_per_unit: 0.1,
      input_schema: { type: "object" },
      tags: [task],
    },
  });
  expect(listing.status, listing.text).toBe(201);
  const child = spawn(process.execPath, ["examples/node/agent.mjs", task, '{"n":1}'], {
    env: { ...process.env, AGENTMARKET_URL: service.baseUrl },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (d) => {
    output += d;
  });
  child.stderr.on("data", (d) => {
    output += d;
  });
  const code = await new Promise<number | null>((resolve) => child.once("exit", resolve));
  expect(code, output).toBe(0);
  const last = JSON.parse(output.trim().split("\n").at(-1)!);
  expect(last).toMatchObject({ ok: true, receipt: { amount_usdc: "0.100000" } });
}, 90_000);
