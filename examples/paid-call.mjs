// A paid call from nothing, against a service started with `DEV_CHAIN=1` (docs/payments.md "Try a paid call
// locally"): register a buyer, get a wallet and test USDC, deposit it (the ERC-20 transfer included),
// wait for the credit, start a seller endpoint on loopback, publish it as a paid listing, buy one call
// through the router and print the receipt with its 97/3 split.
//
//   node examples/paid-call.mjs            # AGENTMARKET_URL defaults to http://localhost:3000
//
// The service must allow outbound calls to loopback for the seller endpoint started here:
// `OUTBOUND_ALLOWLIST=127.0.0.1,localhost` (by default only public addresses are called).
// Uses viem from this repository's node_modules; run it from the repository root.
import { createServer } from "node:http";
import { createWalletClient, defineChain, http, parseAbi } from "viem";
import { privateKeyToAccount } from "viem/accounts";

const BASE = process.env.AGENTMARKET_URL ?? "http://localhost:3000";
const ERC20 = parseAbi(["function transfer(address to, uint256 value) returns (bool)"]);

async function call(method, path, { key, body } = {}) {
  const res = await fetch(`${BASE}${path}`, {
    method,
    headers: {
      ...(key ? { authorization: `Bearer ${key}` } : {}),
      ...(body ? { "content-type": "application/json" } : {}),
    },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = await res.json();
  if (res.status >= 400)
    throw new Error(`${method} ${path} → ${res.status} ${JSON.stringify(json.error ?? json)}`);
  return json;
}

const step = (text) => console.log(`\n▶ ${text}`);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// 1. A buyer with a self-custody wallet (the key is shown once; the wallet is linked to the agent).
step("register a buyer and generate its wallet");
const buyer = await call("POST", "/api/quickstart", { body: { name: "example-buyer", intent: "buyer" } });
const wallet = await call("POST", "/api/crypto/wallet", { key: buyer.api_key });
const account = privateKeyToAccount(wallet.private_key);
console.log(`buyer ${buyer.agent_id}, wallet ${account.address}`);

// 2. Test USDC and gas from the dev faucet.
step("get 5 test USDC and gas from the dev faucet");
const chainInfo = await call("GET", "/api/dev/chain");
await call("POST", "/api/dev/faucet", { body: { wallet_address: account.address, amount_usdc: 5 } });

// 3. Deposit instructions, then the transfer they describe, sent from the linked wallet.
step("ask for deposit instructions and send the USDC transfer");
const purchase = await call("POST", "/api/wallet/purchase", { key: buyer.api_key, body: { amount_usdc: 2 } });
const chain = defineChain({
  id: purchase.transfer.chain_id,
  name: "dev chain",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [chainInfo.rpc_url] } },
});
const client = createWalletClient({ account, chain, transport: http(chainInfo.rpc_url) });
const txHash = await client.writeContract({
  address: purchase.transfer.token_address,
  abi: ERC20,
  functionName: "transfer",
  args: [purchase.transfer.to_address, BigInt(purchase.amount_atomic)],
});
console.log(`transfer sent: ${txHash}`);

// 4. Claim it; verify reads the chain and says what it saw. Poll until credited.
step("verify the transfer and wait for the credit");
let deposit = await call("POST", "/api/wallet/purchase/verify", {
  key: buyer.api_key,
  body: { tx_hash: txHash },
});
for (let i = 0; deposit.state !== "credited"; i++) {
  console.log(`deposit ${deposit.state}: ${deposit.message}`);
  if (deposit.state === "refused" || i > 60) throw new Error(`deposit not credited: ${deposit.message}`);
  await sleep(1000);
  deposit = await call("GET", `/api/wallet/deposits/${deposit.deposit_id}`, { key: buyer.api_key });
}
console.log(deposit.message);

// 5. A seller endpoint on loopback: it answers the platform's calls in the invocation protocol.
step("start a seller endpoint and publish it as a paid listing");
const endpoint = createServer((req, res) => {
  let raw = "";
  req.on("data", (chunk) => {
    raw += chunk;
  });
  req.on("end", () => {
    const { input } = JSON.parse(raw || "{}");
    res.setHeader("content-type", "application/json");
    res.end(
      JSON.stringify({
        success: true,
        output: { summary: `${String(input?.text ?? "").length} characters` },
      }),
    );
  });
});
await new Promise((resolve) => endpoint.listen(0, "127.0.0.1", resolve));
const endpointUrl = `http://127.0.0.1:${endpoint.address().port}/summarise`;

const seller = await call("POST", "/api/quickstart", { body: { name: "example-seller", intent: "seller" } });
const task = `summarise-${Date.now().toString(36)}`;
const listing = await call("POST", "/api/capabilities", {
  key: seller.api_key,
  body: {
    name: "Example summariser",
    description: "Counts the characters of a text (an example seller).",
    category: "nlp",
    endpoint_url: endpointUrl,
    pricing_model: "per_call",
    price_per_unit: 0.25,
    input_schema: { type: "object", required: ["text"], properties: { text: { type: "string" } } },
    output_schema: { type: "object", required: ["summary"], properties: { summary: { type: "string" } } },
    tags: [task],
    safe_to_retry: true,
    data_retention: "none",
  },
});
console.log(`listing ${listing.id} at ${endpointUrl}, task "${task}", 0.25 USDC per call`);

// 6. Buy one call through the router and read the receipt.
step("buy one call through the router");
const run = await call("POST", "/api/execute", {
  key: buyer.api_key,
  body: { task, input: { text: "hello, agents" }, constraints: { max_cost: 0.5 } },
});
console.log(`output: ${JSON.stringify(run.output)} (served by ${run.served_listing_id})`);
const receipt = await call("GET", `/api/commerce/receipts/${run.receipt_id}`, { key: buyer.api_key });
console.log(
  `receipt ${receipt.receipt_id}: paid ${receipt.amount_usdc} USDC, split ${JSON.stringify(receipt.split)}`,
);
const balances = await call("GET", "/api/wallet", { key: buyer.api_key });
console.log(`buyer available: ${balances.balances.USDC.available_usdc} USDC`);

endpoint.close();
console.log(JSON.stringify({ ok: true, receipt_id: receipt.receipt_id, amount_usdc: receipt.amount_usdc }));
