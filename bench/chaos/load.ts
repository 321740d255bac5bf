import { decodePaymentRequiredHeader, encodePaymentSignatureHeader } from "@x402/core/http";
import { ExactEvmScheme } from "@x402/evm/exact/client";
import { x402Client } from "@x402/fetch";
import type { Knex } from "knex";
import { type Address, createWalletClient, type Hex, http, parseEther } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { ERC20_ABI } from "../../shared/chain/client.js";
import type { LocalChain } from "../../shared/chain/local-chain.js";
import { type Answer, type ChaosClient, invocationIdOf, isTransient, newKey, type Sent } from "./client.js";
import type { Random } from "./random.js";

// The operation mix: free executes (echo and a loopback seller), paid executes and direct invokes from
// buyers funded by on-chain deposits, x402 payments with the official client, and deposits (a TestUSDC
// transfer, then verify). Payouts are the platform's own work: the payouts process sweeps sellers' payable
// balances to their linked wallets; they are counted from the database.

export const OP_KINDS = ["free_execute", "paid_execute", "paid_invoke", "x402_invoke", "deposit"] as const;
export type OpKind = (typeof OP_KINDS)[number];

export interface OpRecord {
  kind: OpKind;
  key: string;
  attempts: number;
  /** accepted: it names an invocation or deposit; refused: a clear code; unanswered: nothing by its deadline. */
  answer: "accepted" | "refused" | "unanswered";
  status?: number;
  code?: string;
  /** For an unanswered one: how many attempts got each kind of answer (the client's `seen`). */
  seen?: Record<string, number>;
  /** The invocation (or deposit) it created. */
  subject?: string;
  /** Filled after the drain: the subject's final state. */
  final?: string;
}

interface Buyer {
  key: string;
  agentId: string;
  wallet: { address: Address; privateKey: Hex };
  /** One chain transaction at a time per wallet (nonces). */
  chainLock: Promise<unknown>;
}

export interface Seller {
  key: string;
  agentId: string;
  wallet: Address;
}

export interface World {
  buyers: Buyer[];
  sellers: Seller[];
  listings: { freeFlaky: string; paidGood: string; paidFlaky: string; paidTask: string; freeTask: string };
  x402Payers: { client: x402Client; address: Address }[];
}

const DEPOSIT_MICROS = 2_000_000n;
const INITIAL_DEPOSIT_MICROS = 20_000_000n;

/** Registers agents, links wallets, publishes listings on the chaos sellers; funds buyers on chain. */
export async function buildWorld(opts: {
  client: ChaosClient;
  chain: LocalChain;
  db: Knex;
  sellerUrls: { good: string; flaky: string };
  buyers: number;
  x402Payers: number;
}): Promise<World> {
  const { client, chain } = opts;
  const must = async (what: string, p: Promise<{ answer: Answer | undefined }>, ok: number[]) => {
    const { answer } = await p;
    if (!answer || !ok.includes(answer.status))
      throw new Error(`${what}: ${answer?.status} ${JSON.stringify(answer?.body)}`);
    return answer.body;
  };
  const register = async (intent: "buyer" | "seller") => {
    const body = await must(
      "quickstart",
      client.send("POST", "/api/quickstart", { body: { name: `chaos ${intent}`, intent } }),
      [201],
    );
    const wallet = await must(
      "wallet",
      client.send("POST", "/api/crypto/wallet", { key: body.api_key }),
      [201],
    );
    return {
      key: body.api_key as string,
      agentId: body.agent_id as string,
      wallet: { address: wallet.address as Address, privateKey: wallet.private_key as Hex },
    };
  };
  const buyers: Buyer[] = [];
  for (let i = 0; i < opts.buyers; i++) {
    const b = await register("buyer");
    await chain.fundEth(b.wallet.address, parseEther("1"));
    await chain.mint(b.wallet.address, 1_000_000_000n);
    buyers.push({ ...b, chainLock: Promise.resolve() });
  }
  const good = await register("seller");
  const flaky = await register("seller");
  // One live listing per seller is free of the seller bond: the free listing has a seller of its own.
  const free = await register("seller");
  const suffix = Date.now().toString(36);
  const publish = async (seller: { key: string }, name: string, url: string, price: number, tag: string) => {
    const body = await must(
      "publish",
      client.send("POST", "/api/capabilities", {
        key: seller.key,
        body: {
          name,
          description: `${name}: a chaos-run seller on loopback.`,
          category: "devtools",
          endpoint_url: url,
          pricing_model: "per_call",
          price_per_unit: price,
          input_schema: { type: "object" },
          tags: [tag],
        },
      }),
      [201],
    );
    return body.id as string;
  };
  const paidTask = `chaos-paid-${suffix}`;
  const freeTask = `chaos-free-${suffix}`;
  const listings = {
    paidGood: await publish(good, "Chaos paid good", opts.sellerUrls.good, 0.05, paidTask),
    paidFlaky: await publish(flaky, "Chaos paid flaky", opts.sellerUrls.flaky, 0.03, paidTask),
    freeFlaky: await publish(free, "Chaos free flaky", opts.sellerUrls.flaky, 0, freeTask),
    paidTask,
    freeTask,
  };
  // A hanging seller is cut off at the listing's latency bound; the API gives no way to declare one, so
  // the harness sets it (30 s by default) to keep the run short.
  await opts
    .db("listings")
    .whereIn("id", [listings.paidGood, listings.paidFlaky, listings.freeFlaky])
    .update({ max_latency_ms: 3000 });
  const x402Payers = [];
  for (let i = 0; i < opts.x402Payers; i++) {
    const wallet = await chain.newWallet({ usdcMicros: 1_000_000_000n });
    const c = new x402Client().register("eip155:*", new ExactEvmScheme(wallet.account));
    c.setSpendControls({
      allowedAssets: [{ network: `eip155:${chain.chainId}`, asset: chain.tokenAddress }],
    });
    x402Payers.push({ client: c, address: wallet.address });
  }
  return {
    buyers,
    sellers: [
      { key: good.key, agentId: good.agentId, wallet: good.wallet.address },
      { key: flaky.key, agentId: flaky.agentId, wallet: flaky.wallet.address },
    ],
    listings,
    x402Payers,
  };
}

/** Classifies a sent request into a record. */
function record(kind: OpKind, key: string, sent: Sent, subject?: string): OpRecord {
  const { answer, attempts, seen } = sent;
  if (!answer || (isTransient(answer) && !subject)) {
    return {
      kind,
      key,
      attempts,
      answer: "unanswered",
      status: answer?.status,
      code: answer?.body?.error?.code,
      seen,
    };
  }
  if (subject) return { kind, key, attempts, answer: "accepted", status: answer.status, subject };
  // A refusal names its code, and for "no eligible listing" why the listing was excluded (e.g. circuit_open).
  const error = answer.body?.error;
  const excluded = error?.details?.excluded?.[0]?.reason;
  return {
    kind,
    key,
    attempts,
    answer: "refused",
    status: answer.status,
    code: `${error?.code ?? answer.status}${excluded ? ` (${excluded})` : ""}`,
  };
}

export class Load {
  readonly records: OpRecord[] = [];

  constructor(
    private readonly client: ChaosClient,
    private readonly chain: LocalChain,
    private readonly world: World,
    private readonly random: Random,
    private readonly platform: Address,
  ) {}

  /** The initial deposits that fund every buyer (operations too, before the faults start). */
  async fundBuyers(): Promise<void> {
    await Promise.all(this.world.buyers.map((b) => this.deposit(b, INITIAL_DEPOSIT_MICROS)));
  }

  async runOne(kind: OpKind): Promise<OpRecord> {
    const r = await this.dispatch(kind);
    this.records.push(r);
    return r;
  }

  private dispatch(kind: OpKind): Promise<OpRecord> {
    const { listings } = this.world;
    const buyer = this.random.pick(this.world.buyers);
    const key = newKey();
    const input = { n: this.random.int(0, 1_000_000) };
    const run = async (path: string, body: unknown) => {
      const sent = await this.client.send("POST", path, {
        key: buyer.key,
        body,
        headers: { "x-idempotency-key": key },
      });
      return record(kind, key, sent, invocationIdOf(sent.answer?.body));
    };
    switch (kind) {
      case "free_execute":
        return this.random.next() < 0.5
          ? run("/api/execute", { task: "echo", input })
          : run(`/api/invoke/${listings.freeFlaky}`, { input });
      case "paid_execute":
        return run("/api/execute", { task: listings.paidTask, input, constraints: { max_cost: 0.1 } });
      case "paid_invoke":
        return run(`/api/invoke/${this.random.next() < 0.5 ? listings.paidGood : listings.paidFlaky}`, {
          input,
          max_cost: 0.1,
        });
      case "x402_invoke":
        return this.x402(this.random.next() < 0.6 ? listings.paidGood : listings.paidFlaky, input);
      case "deposit":
        return this.deposit(buyer, DEPOSIT_MICROS);
    }
  }

  /** x402: the 402 challenge, a payment signed by the official client, then that same payment until an outcome. */
  private async x402(listingId: string, input: unknown): Promise<OpRecord> {
    const payer = this.random.pick(this.world.x402Payers);
    const path = `/api/x402/invoke/${listingId}`;
    const challenge = await this.client.send(
      "POST",
      path,
      { body: { input } },
      (a) => a.status === 402 || !isTransient(a),
    );
    const required = challenge.answer?.headers.get("payment-required");
    if (challenge.answer?.status !== 402 || !required) {
      return record("x402_invoke", "-", challenge);
    }
    const payload = await payer.client.createPaymentPayload(decodePaymentRequiredHeader(required));
    const header = encodePaymentSignatureHeader(payload);
    const nonce = String((payload.payload as { authorization?: { nonce?: string } }).authorization?.nonce);
    const sent = await this.client.send("POST", path, {
      body: { input },
      headers: { "payment-signature": header },
    });
    const seen = { ...challenge.seen };
    for (const [label, n] of Object.entries(sent.seen)) seen[label] = (seen[label] ?? 0) + n;
    const total = { answer: sent.answer, attempts: sent.attempts + challenge.attempts, seen };
    return record("x402_invoke", nonce, total, invocationIdOf(sent.answer?.body));
  }

  /** A TestUSDC transfer from the buyer's linked wallet to the platform, then verify (the hash is the key). */
  private async deposit(buyer: Buyer, amountMicros: bigint): Promise<OpRecord> {
    const send = async (): Promise<Hex> => {
      const account = privateKeyToAccount(buyer.wallet.privateKey);
      const wallet = createWalletClient({
        account,
        chain: this.chain.publicClient.chain!,
        transport: http(this.chain.rpcUrl, { retryCount: 0 }),
      });
      const hash = await wallet.writeContract({
        address: this.chain.tokenAddress,
        abi: ERC20_ABI,
        functionName: "transfer",
        args: [this.platform, amountMicros],
      });
      await this.chain.publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 });
      return hash;
    };
    const transfer = buyer.chainLock.then(send);
    buyer.chainLock = transfer.catch(() => undefined);
    const hash = await transfer;
    const sent = await this.client.send(
      "POST",
      "/api/wallet/purchase/verify",
      { key: buyer.key, body: { tx_hash: hash } },
      (a) => Boolean(a.body?.deposit_id) || !isTransient(a),
    );
    return record("deposit", hash, sent, sent.answer?.body?.deposit_id);
  }
}
