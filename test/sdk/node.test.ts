import { execFile, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { Worker } from "bullmq";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AgentMarket, AgentMarketError } from "../../sdk/node/src/index.js";
import { payAndInvoke } from "../../sdk/node/src/x402.js";
import { getConfig } from "../../shared/config.js";
import { getQueue } from "../../shared/queues.js";
import { startSettlementConfirmationsWorker } from "../../workers/settlement-confirmations.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { fundAgent, usdc } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";
import { usdcBalance, x402Buyer } from "../helpers/x402.js";

// The Node SDK (sdk/node) and its CLI against the running service on a paid local chain: the full flow,
// one error per code family, the retry rule, and the packed package installed into an empty project.

const root = fileURLToPath(new URL("../../", import.meta.url));
let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let seller: TestSeller;
let sellerAgent: TestAgent;
let baseUrl: string;
let settlements: Worker;

beforeAll(async () => {
  ownDb = await useOwnDatabase("sdknode");
  chain = await startLocalChain();
  await usePaidChain(chain);
  service = await startService();
  settlements = startSettlementConfirmationsWorker();
  await settlements.waitUntilReady();
  seller = await startSeller((call, res) =>
    json(res, 200, { success: true, output: { got: call.body.input } }),
  );
  sellerAgent = await buildAgent("seller");
  baseUrl = `http://127.0.0.1:${getConfig().port}`;
});
afterAll(async () => {
  await settlements?.close();
  await getQueue("settlement-confirmations")
    .obliterate({ force: true })
    .catch(() => {});
  await seller?.close();
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

async function errorOf(promise: Promise<unknown>): Promise<AgentMarketError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AgentMarketError);
  return error as AgentMarketError;
}

describe("the Node SDK", () => {
  it("runs the whole flow: register, free execute, publish, match, quote, paid execute, status, receipt, invoke", async () => {
    const anonymous = new AgentMarket({ baseUrl });
    const registered = await anonymous.register("sdk-buyer");
    const buyer = anonymous.withKey(registered.api_key);

    const free = await buildListing({ endpointUrl: seller.url });
    const ran = await buyer.execute(free.slug, { hello: "sdk" });
    expect(ran).toMatchObject({ success: true, output: { got: { hello: "sdk" } } });

    const sellerReg = await anonymous.register("sdk-seller", "seller");
    const sellerClient = anonymous.withKey(sellerReg.api_key);
    const slug = `sdk-${Date.now().toString(36)}`;
    const published = (await sellerClient.publish({
      name: `SDK listing ${slug}`,
      description: "published through the Node SDK",
      category: "devtools",
      endpoint_url: seller.url,
      pricing_model: "per_call",
      price_per_unit: 0,
      input_schema: { type: "object" },
      tags: [slug],
    })) as { id: string };
    expect(published.id).toEqual(expect.any(String));
    expect((await sellerClient.sellerStatus()) as object).toBeTruthy();

    const paid = await buildListing({ endpointUrl: seller.url, price: 0.05, sellerId: sellerAgent.agentId });
    const match = await buyer.match(paid.slug, 1);
    expect(match.candidates.length).toBeGreaterThan(0);
    await fundAgent(registered.agent_id, usdc(1));
    const quote = await buyer.quote(paid.id, { maxCost: 1 });
    expect(quote).toMatchObject({
      price_usdc: "0.050000",
      seller_share_usdc: "0.048500",
      platform_fee_usdc: "0.001500",
    });
    const bought = (await buyer.execute(paid.slug, { q: 1 }, 1, { quoteId: quote.quote_id })) as {
      invocation_id: string;
      receipt_id: string;
    };
    const status = await buyer.waitForResult(bought.invocation_id, { timeoutMs: 20_000 });
    expect(status.status).toBe("succeeded");
    const receipt = (await buyer.receipt(bought.receipt_id)) as {
      amount_usdc: string;
      split: { seller_share_usdc: string };
    };
    expect(receipt.amount_usdc).toBe("0.050000");
    expect(receipt.split.seller_share_usdc).toBe("0.048500");
    expect((await buyer.status(bought.invocation_id)).status).toBe("succeeded");
    const invoked = await buyer.invoke(free.id, { via: "invoke" });
    expect(invoked).toMatchObject({ success: true, output: { got: { via: "invoke" } } });
    expect(((await buyer.wallet()) as { balances?: unknown }).balances).toBeTruthy();

    // One error per family, each typed with code, status and retryable.
    const bad = await errorOf(new AgentMarket({ baseUrl, apiKey: "amk_not_a_real_key" }).wallet());
    expect(bad).toMatchObject({ code: "UNAUTHORIZED", status: 401, retryable: false });
    expect(await errorOf(buyer.execute("", {}))).toMatchObject({
      code: "SCHEMA_VALIDATION_FAILED",
      status: 400,
    });
    expect(await errorOf(buyer.receipt("00000000-0000-4000-8000-000000000000"))).toMatchObject({
      status: 404,
    });
    const reused = await errorOf(buyer.execute(paid.slug, { q: 2 }, 1, { quoteId: quote.quote_id }));
    expect(reused).toMatchObject({ code: "QUOTE_NOT_USABLE", status: 409 });
    const unfunded = anonymous.withKey((await anonymous.register("sdk-poor")).api_key);
    const broke = await errorOf(unfunded.invoke(paid.id, { q: 3 }, { maxCost: 1 }));
    expect(broke).toMatchObject({ code: "PAYMENT_REQUIRED", status: 402 });
    expect(broke.envelope?.error.request_id).toEqual(expect.any(String));
  });

  it("retries only retryable failures, with the same idempotency key, honouring Retry-After", async () => {
    const keys: (string | null)[] = [];
    let calls = 0;
    const fake: typeof fetch = async (_url, init) => {
      calls++;
      keys.push(new Headers(init?.headers).get("x-idempotency-key"));
      if (calls < 3) {
        return new Response(
          JSON.stringify({
            success: false,
            error: {
              code: "TEMPORARILY_UNAVAILABLE",
              message: "later",
              retryable: true,
              buyer_action: "",
              fallback: "",
              request_id: "r",
            },
          }),
          { status: 503, headers: { "content-type": "application/json", "retry-after": "0" } },
        );
      }
      return new Response(JSON.stringify({ success: true, output: {} }), {
        headers: { "content-type": "application/json" },
      });
    };
    const client = new AgentMarket({ baseUrl: "http://sdk.invalid", apiKey: "amk_x", fetch: fake });
    await client.execute("t", {});
    expect(calls).toBe(3);
    expect(new Set(keys).size).toBe(1);
    expect(keys[0]).toMatch(/^[0-9a-f-]{36}$/);

    calls = 0;
    const refusing: typeof fetch = async () => {
      calls++;
      return new Response(
        JSON.stringify({
          success: false,
          error: {
            code: "SCHEMA_VALIDATION_FAILED",
            message: "no",
            retryable: false,
            buyer_action: "",
            fallback: "",
            request_id: "r",
          },
        }),
        { status: 400, headers: { "content-type": "application/json" } },
      );
    };
    const error = await errorOf(
      new AgentMarket({ baseUrl: "http://sdk.invalid", fetch: refusing }).execute("t", {}),
    );
    expect(error.code).toBe("SCHEMA_VALIDATION_FAILED");
    expect(calls).toBe(1);
  });
});

/** A child process run without blocking this one (the service under test runs in this process). */
function run(
  file: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(file, args, { ...opts, encoding: "utf8", timeout: 90_000 }, (error, stdout, stderr) => {
      const status = error ? (typeof error.code === "number" ? error.code : null) : 0;
      resolve({ status, stdout, stderr });
    });
  });
}

describe("the optional x402 helper", () => {
  it("pays the x402 edge with a viem account and the official client: result, settlement, exact debit", async () => {
    const buyer = await x402Buyer(chain, 1_000_000n);
    const before = await usdcBalance(chain, buyer.wallet.address);
    const listing = await buildListing({
      endpointUrl: seller.url,
      price: 0.04,
      sellerId: sellerAgent.agentId,
    });
    const paid = await payAndInvoke(
      {
        baseUrl,
        account: buyer.wallet.account,
        allowedAssets: [{ network: `eip155:${chain.chainId}`, asset: chain.tokenAddress }],
      },
      listing.id,
      { q: "x402" },
    );
    expect(paid.status).toBe(200);
    expect(paid.body).toMatchObject({ success: true, output: { got: { q: "x402" } } });
    expect(paid.settlement).toMatchObject({ success: true });
    expect(await usdcBalance(chain, buyer.wallet.address)).toBe(before - 40_000n);
  });
});

describe("the CLI", () => {
  const cli = (args: string[], env: Record<string, string> = {}) =>
    run(process.execPath, [join(root, "sdk/node/dist/cli.js"), ...args, "--base-url", baseUrl], {
      env: { ...process.env, AGENTMARKET_API_KEY: "", ...env },
    });

  it("registers (key stored 0600), executes and waits, reads status, and exits with documented codes", async () => {
    const dir = mkdtempSync(join(tmpdir(), "agentmarket-cli-"));
    const env = { AGENTMARKET_CONFIG_DIR: dir };
    const reg = await cli(["register", "cli-agent", "--json"], env);
    expect(reg.status, reg.stderr).toBe(0);
    expect(statSync(join(dir, "config.json")).mode & 0o777).toBe(0o600);
    const free = await buildListing({ endpointUrl: seller.url });
    const ran = await cli(["execute", free.slug, "--input", '{"from":"cli"}', "--json"], env);
    expect(ran.status, ran.stderr).toBe(0);
    const result = JSON.parse(ran.stdout) as { invocation_id: string; output: unknown };
    expect(result.output).toEqual({ got: { from: "cli" } });
    const status = await cli(["status", result.invocation_id, "--json"], env);
    expect(JSON.parse(status.stdout).status).toBe("succeeded");
    const listingFile = join(dir, "listing.json");
    writeFileSync(listingFile, "{not json");
    expect((await cli(["publish", listingFile], env)).status).toBe(1);
    expect((await cli(["frobnicate"], env)).status).toBe(1);
    const missing = await cli(["receipt", "00000000-0000-4000-8000-000000000000"], env);
    expect(missing.status).toBe(2);
    expect(missing.stderr).toMatch(/^NOT_FOUND|RECEIPT_UNAVAILABLE/);
  });

  it("a seller publishes from a file; a funded buyer matches, quotes, invokes with the quote and reads the receipt", async () => {
    const sellerEnv = { AGENTMARKET_CONFIG_DIR: mkdtempSync(join(tmpdir(), "agentmarket-cli-seller-")) };
    expect((await cli(["register", "cli-seller", "--intent", "seller", "--json"], sellerEnv)).status).toBe(0);
    const slug = `cli-${Date.now().toString(36)}`;
    const listingFile = join(sellerEnv.AGENTMARKET_CONFIG_DIR, "listing.json");
    writeFileSync(
      listingFile,
      JSON.stringify({
        name: `CLI listing ${slug}`,
        description: "published through the CLI",
        category: "devtools",
        endpoint_url: seller.url,
        pricing_model: "per_call",
        price_per_unit: 0,
        input_schema: { type: "object" },
        tags: [slug],
      }),
    );
    const published = await cli(["publish", listingFile, "--json"], sellerEnv);
    expect(published.status, published.stderr).toBe(0);
    expect(JSON.parse(published.stdout).slug).toEqual(expect.any(String));

    const buyerEnv = { AGENTMARKET_CONFIG_DIR: mkdtempSync(join(tmpdir(), "agentmarket-cli-buyer-")) };
    const reg = await cli(["register", "cli-buyer", "--json"], buyerEnv);
    await fundAgent(JSON.parse(reg.stdout).agent_id, usdc(1));
    const paid = await buildListing({ endpointUrl: seller.url, price: 0.05, sellerId: sellerAgent.agentId });

    const matched = await cli(["match", paid.slug, "--max-cost", "1"], buyerEnv);
    expect(matched.status, matched.stderr).toBe(0);
    expect(matched.stdout).toMatch(/^1\. /);
    const quoted = await cli(["quote", paid.id, "--max-cost", "1", "--json"], buyerEnv);
    expect(quoted.status, quoted.stderr).toBe(0);
    const quote = JSON.parse(quoted.stdout) as { quote_id: string; price_usdc: string };
    expect(quote.price_usdc).toBe("0.050000");
    const invoked = await cli(
      ["invoke", paid.id, "--input", '{"via":"cli"}', "--quote", quote.quote_id, "--json"],
      buyerEnv,
    );
    expect(invoked.status, invoked.stderr).toBe(0);
    const result = JSON.parse(invoked.stdout) as { receipt_id?: string; invocation_id: string };
    const receiptId =
      result.receipt_id ??
      (
        JSON.parse((await cli(["status", result.invocation_id, "--json"], buyerEnv)).stdout) as {
          receipt_id: string;
        }
      ).receipt_id;
    const receipt = await cli(["receipt", receiptId, "--json"], buyerEnv);
    expect(receipt.status, receipt.stderr).toBe(0);
    expect(JSON.parse(receipt.stdout)).toMatchObject({ amount_usdc: "0.050000" });
    // The quote pays once: a second use is refused by the service, not retryable → exit 2.
    const again = await cli(["invoke", paid.id, "--input", "{}", "--quote", quote.quote_id], buyerEnv);
    expect(again.status).toBe(2);
    expect(again.stderr).toMatch(/^QUOTE_NOT_USABLE/);
  });
});

describe("the packed package", () => {
  it("npm pack works, and the tarball installed into an empty project calls the service", async () => {
    const out = mkdtempSync(join(tmpdir(), "agentmarket-pack-"));
    const pack = spawnSync("npm", ["pack", "--pack-destination", out], {
      cwd: join(root, "sdk/node"),
      encoding: "utf8",
    });
    expect(pack.status, pack.stderr).toBe(0);
    const tarball = readdirSync(out).find((f) => f.endsWith(".tgz"))!;
    const project = mkdtempSync(join(tmpdir(), "agentmarket-empty-"));
    writeFileSync(join(project, "package.json"), '{"name":"empty","version":"1.0.0","type":"module"}');
    const install = spawnSync(
      "npm",
      ["install", "--no-audit", "--no-fund", "--offline", join(out, tarball)],
      {
        cwd: project,
        encoding: "utf8",
      },
    );
    expect(install.status, install.stderr).toBe(0);
    const script = `import { AgentMarket } from "agentmarket"; const a = await new AgentMarket({ baseUrl: ${JSON.stringify(baseUrl)} }).register("packed"); console.log(a.api_key.slice(0, 4));`;
    const used = await run(process.execPath, ["--input-type=module", "-e", script], { cwd: project });
    expect(used.stdout.trim(), used.stderr).toBe("amk_");
    // The CLI as a user of the installed package runs it.
    const help = await run("npx", ["--offline", "agentmarket", "--help"], { cwd: project });
    expect(help.status, help.stderr).toBe(0);
    expect(help.stdout).toMatch(/^usage: agentmarket <command>/);
  });
});
