// A small agent on the Node SDK (sdk/node), against a service started with `DEV_CHAIN=1`: register, fund
// itself on the dev chain (faucet → deposit → credit), execute a task, poll until it ends, print the receipt.
//
//   npm run build && node examples/node/agent.mjs [task] [input-json]
//
// AGENTMARKET_URL defaults to http://localhost:3000; the task defaults to "echo" (free). Give a paid
// listing's task alias to see a paid call and its 97/3 split. Run from the repository root (it uses the
// built SDK and viem from this repository).
import { createWalletClient, defineChain, http, parseAbi } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { AgentMarket } from "../../sdk/node/dist/index.js";

const baseUrl = process.env.AGENTMARKET_URL ?? "http://localhost:3000";
const [task = "echo", inputJson = '{"message":"hello from the Node SDK"}'] = process.argv.slice(2);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

const market = new AgentMarket({ baseUrl });
const registered = await market.register(`node-agent-${Date.now().toString(36)}`);
const me = market.withKey(registered.api_key);
console.log(`registered ${registered.agent_id}`);

// Fund: a self-custody wallet, test USDC from the dev faucet, then the deposit the service describes.
const wallet = (await me.request("POST", "/api/crypto/wallet", {})).body;
const account = privateKeyToAccount(wallet.private_key);
const chainInfo = (await me.request("GET", "/api/dev/chain")).body;
await me.request("POST", "/api/dev/faucet", { wallet_address: account.address, amount_usdc: 2 });
const purchase = (await me.request("POST", "/api/wallet/purchase", { amount_usdc: 1 })).body;
const chain = defineChain({
  id: purchase.transfer.chain_id,
  name: "dev chain",
  nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
  rpcUrls: { default: { http: [chainInfo.rpc_url] } },
});
const txHash = await createWalletClient({ account, chain, transport: http(chainInfo.rpc_url) }).writeContract(
  {
    address: purchase.transfer.token_address,
    abi: parseAbi(["function transfer(address to, uint256 value) returns (bool)"]),
    functionName: "transfer",
    args: [purchase.transfer.to_address, BigInt(purchase.amount_atomic)],
  },
);
let deposit = (await me.request("POST", "/api/wallet/purchase/verify", { tx_hash: txHash })).body;
for (let i = 0; deposit.state !== "credited"; i++) {
  if (deposit.state === "refused" || i > 60) throw new Error(`deposit not credited: ${deposit.message}`);
  await sleep(1000);
  deposit = (await me.request("GET", `/api/wallet/deposits/${deposit.deposit_id}`)).body;
}
console.log(`funded: ${deposit.message}`);

// Execute, then poll until the run has ended, then read the receipt.
const started = await me.execute(task, JSON.parse(inputJson), 1);
const final = "status_url" in started ? await me.waitForResult(started.invocation_id) : started;
const receipt = final.receipt_id ? await me.receipt(final.receipt_id) : null;
console.log(
  JSON.stringify({
    ok: final.success ?? final.status === "succeeded",
    invocation_id: final.invocation_id,
    receipt,
  }),
);
