import { randomBytes } from "node:crypto";
import knexFactory from "knex";
import { type Address, createWalletClient, defineChain, type Hex, http, parseAbi } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { ECHO_MESSAGE, type EchoSpec, postJson, register, sleep } from "../lib.js";

/**
 * The paid execute of `npm run bench:execute`, on the ledger path of the service's dev chain
 * (DEV_CHAIN=1, docs/payments.md "Try a paid call locally"): a buyer funded the way a newcomer is
 * (wallet, faucet, deposit instructions, the USDC transfer, verify until credited), a paid listing on
 * the bench's loopback seller, and the execute of its task. Each execute holds, calls, captures 97/3
 * and writes its evidence: the paid hot path, not a demo of it.
 */

/** The listing's price: small, so that the buyer's deposit lasts any run. */
export const PAID_PRICE_USDC = "0.001";
const PAID_PRICE_MICROS = "1000";
const DEPOSIT_USDC = 200;
const SLUG_PREFIX = "bench-paid-";
const CREDIT_TIMEOUT_MS = 60_000;
const ERC20 = parseAbi(["function transfer(address to, uint256 value) returns (bool)"]);
/**
 * How many buyers the spread paid row shares its c=32 load over. One buyer's holds and captures lock
 * its own accounts and daily spend row, and every capture locks the platform's fee account; the one-buyer
 * row beside the spread one tells the two apart.
 */
export const PAID_BUYERS = 8;

export interface PaidSetup {
  /** The loopback seller called directly, as the router calls it (its direct call). */
  direct: EchoSpec;
  /** POST /api/execute of the paid listing's task, by one buyer. */
  execute: EchoSpec;
  /** The same execute by PAID_BUYERS buyers, one spec each (the first is `execute`'s buyer). */
  spread: EchoSpec[];
}

async function getJson(url: string, key?: string): Promise<{ status: number; json: any }> {
  const res = await fetch(url, {
    headers: key ? { authorization: `Bearer ${key}` } : {},
    signal: AbortSignal.timeout(30_000),
  });
  return { status: res.status, json: await res.json().catch(() => null) };
}

function expectStatus(what: string, res: { status: number; json: any }, ...statuses: number[]): any {
  if (!statuses.includes(res.status))
    throw new Error(`paid setup: ${what} answered ${res.status}: ${JSON.stringify(res.json).slice(0, 600)}`);
  return res.json;
}

/** A buyer holding DEPOSIT_USDC on the ledger, credited by a real deposit on the dev chain. */
async function fundedBuyer(baseUrl: string): Promise<string> {
  const key = await register(baseUrl);
  const auth = { authorization: `Bearer ${key}` };
  const wallet = expectStatus(
    "POST /api/crypto/wallet",
    await postJson(`${baseUrl}/api/crypto/wallet`, {}, auth),
    201,
  );
  const account = privateKeyToAccount(wallet.private_key as Hex);
  const chainInfo = expectStatus(
    "GET /api/dev/chain (is DEV_CHAIN=1 set?)",
    await getJson(`${baseUrl}/api/dev/chain`),
    200,
  );
  expectStatus(
    "POST /api/dev/faucet",
    await postJson(`${baseUrl}/api/dev/faucet`, {
      wallet_address: account.address,
      amount_usdc: DEPOSIT_USDC,
    }),
    200,
  );
  const purchase = expectStatus(
    "POST /api/wallet/purchase",
    await postJson(`${baseUrl}/api/wallet/purchase`, { amount_usdc: DEPOSIT_USDC }, auth),
    200,
  );
  const chain = defineChain({
    id: purchase.transfer.chain_id,
    name: "dev chain",
    nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 },
    rpcUrls: { default: { http: [chainInfo.rpc_url] } },
  });
  const client = createWalletClient({ account, chain, transport: http(chainInfo.rpc_url) });
  const txHash = await client.writeContract({
    address: purchase.transfer.token_address as Address,
    abi: ERC20,
    functionName: "transfer",
    args: [purchase.transfer.to_address as Address, BigInt(purchase.amount_atomic)],
  });
  let deposit = expectStatus(
    "POST /api/wallet/purchase/verify",
    await postJson(`${baseUrl}/api/wallet/purchase/verify`, { tx_hash: txHash }, auth),
    // 202 while the transfer waits for its confirmations.
    200,
    202,
  );
  const deadline = Date.now() + CREDIT_TIMEOUT_MS;
  while (deposit.state !== "credited") {
    if (deposit.state === "refused" || Date.now() > deadline)
      throw new Error(`paid setup: deposit not credited (${deposit.state}): ${deposit.message}`);
    await sleep(500);
    deposit = expectStatus(
      "GET /api/wallet/deposits/:id",
      await getJson(`${baseUrl}/api/wallet/deposits/${deposit.deposit_id}`, key),
      200,
    );
  }
  return key;
}

/**
 * Funds a buyer, inserts a paid listing (a seller agent's, on `sellerUrl`, with the echo listing's
 * limits so that c=32 measures the path and not a per-listing limit) into the service's database the
 * way bench/fallback.ts does, and checks one paid execute end to end: 200, the echo, and a charge.
 */
export async function setUpPaid(baseUrl: string, databaseUrl: string, sellerUrl: string): Promise<PaidSetup> {
  await retirePaidListings(databaseUrl);
  const knex = knexFactory({ client: "pg", connection: databaseUrl, pool: { min: 0, max: 1 } });
  try {
    // One at a time: each deposit's transfer and confirmation on the dev chain, as a newcomer's.
    const buyerKeys: string[] = [];
    for (let i = 0; i < PAID_BUYERS; i++) buyerKeys.push(await fundedBuyer(baseUrl));
    const buyerKey = buyerKeys[0]!;
    const seller = expectStatus(
      "POST /api/quickstart (seller)",
      await postJson(`${baseUrl}/api/quickstart`, { name: "bench-seller", intent: "seller" }),
      201,
    );
    const tag = `${SLUG_PREFIX}${randomBytes(6).toString("hex")}`;
    await knex("listings").insert({
      slug: tag,
      name: `Bench paid echo ${tag}`,
      description: "created by bench:execute (the paid execute)",
      category: "bench",
      endpoint_url: sellerUrl,
      price_micros: PAID_PRICE_MICROS,
      input_schema: { type: "object" },
      output_schema: null,
      tags: [tag],
      safe_to_retry: true,
      max_latency_ms: 30000,
      status: "active",
      featured: false,
      verification_status: null,
      seller_id: seller.agent_id,
      // The first-party echo listing's limits (migration 20261122003000_raise_echo_limits).
      rate_limit: 600000,
      concurrency_limit: 1024,
    });
    const json = { "content-type": "application/json" };
    const direct: EchoSpec = {
      scenario: "direct POST seller (loopback)",
      url: sellerUrl,
      headers: json,
      body: JSON.stringify({ input: { message: ECHO_MESSAGE } }),
      connections: 1,
    };
    const execute: EchoSpec = {
      scenario: `router POST /api/execute paid ${PAID_PRICE_USDC} USDC`,
      url: `${baseUrl}/api/execute`,
      headers: { ...json, authorization: `Bearer ${buyerKey}` },
      body: JSON.stringify({ task: tag, input: { message: ECHO_MESSAGE }, constraints: { max_cost: 0.01 } }),
      connections: 1,
    };
    const spread = buyerKeys.map((key) => ({
      ...execute,
      scenario: `router POST /api/execute paid ${PAID_PRICE_USDC} USDC, ${PAID_BUYERS} buyers`,
      headers: { ...json, authorization: `Bearer ${key}` },
    }));
    const res = await postJson(execute.url, JSON.parse(execute.body), execute.headers);
    if (
      res.status !== 200 ||
      res.json?.output?.echo?.message !== ECHO_MESSAGE ||
      res.json?.cost?.charged !== true
    )
      throw new Error(
        `paid execute pre-flight answered ${res.status}: ${JSON.stringify(res.json).slice(0, 600)}`,
      );
    return { direct, execute, spread };
  } finally {
    await knex.destroy();
  }
}

/** Retires the bench's paid listings (the rows stay), so that later runs' sweeps do not probe them. */
export async function retirePaidListings(databaseUrl: string): Promise<void> {
  const knex = knexFactory({ client: "pg", connection: databaseUrl, pool: { min: 0, max: 1 } });
  try {
    await knex("listings")
      .where("slug", "like", `${SLUG_PREFIX}%`)
      .andWhere({ status: "active" })
      .update({ status: "retired", retired_at: knex.fn.now() });
  } finally {
    await knex.destroy();
  }
}
