import fs from "node:fs";
import { type Address, getAddress, type Hex, type PrivateKeyAccount } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { creditDeposit } from "../../shared/money/ledger/flows.js";
import { MAX_OPEN_CHALLENGES } from "../../shared/money/wallets/link.js";
import { buildAgent, type TestAgent } from "../helpers/factories.js";
import { api, errorCode } from "../helpers/http.js";
import { startService, type TestService } from "../helpers/service.js";

// Everything the process writes to stdout/stderr (pino writes through fs), so a test can prove that a
// secret never reached a log line. The logger is made verbose before anything creates it.
overrideConfig({ logLevel: "trace" });
const written: string[] = [];
const realWrite = fs.write;
const realWriteSync = fs.writeSync;
vi.spyOn(fs, "writeSync").mockImplementation(((fd: number, data: unknown, ...rest: unknown[]) => {
  if (fd === 1 || fd === 2) {
    const text = typeof data === "string" ? data : Buffer.from(data as Uint8Array).toString("utf8");
    written.push(text);
    return Buffer.byteLength(text);
  }
  return (realWriteSync as (...a: unknown[]) => number)(fd, data, ...rest);
}) as typeof fs.writeSync);
vi.spyOn(fs, "write").mockImplementation(((fd: number, data: unknown, ...rest: unknown[]) => {
  if (fd === 1 || fd === 2) {
    const text = typeof data === "string" ? data : Buffer.from(data as Uint8Array).toString("utf8");
    written.push(text);
    const callback = rest.find((r) => typeof r === "function") as
      | ((err: null, n: number) => void)
      | undefined;
    callback?.(null, Buffer.byteLength(text));
    return;
  }
  return (realWrite as (...a: unknown[]) => void)(fd, data, ...rest);
}) as typeof fs.write);

let service: TestService;

beforeAll(async () => {
  service = await startService({ worker: false, sweeper: false });
});
afterAll(async () => {
  vi.restoreAllMocks();
  await service.stop();
});

function newAccount(): PrivateKeyAccount {
  return privateKeyToAccount(generatePrivateKey());
}

async function challenge(agent: TestAgent, address: string) {
  const res = await api("POST", "/api/crypto/connect", {
    key: agent.apiKey,
    body: { wallet_address: address },
  });
  expect(res.status).toBe(200);
  expect(res.body.step).toBe("sign_challenge");
  return res.body.challenge as {
    challenge_id: string;
    message: string;
    wallet_address: string;
    expires_at: string;
  };
}

async function submit(agent: TestAgent, address: string, challengeId: string, signature: Hex) {
  return api("POST", "/api/crypto/connect", {
    key: agent.apiKey,
    body: { wallet_address: address, challenge_id: challengeId, signature },
  });
}

/** The whole connect flow for an account; returns the step-2 response. */
async function link(agent: TestAgent, account: PrivateKeyAccount, address: string = account.address) {
  const c = await challenge(agent, address);
  return submit(agent, address, c.challenge_id, await account.signMessage({ message: c.message }));
}

async function openLinks(agentId: string) {
  return db()("wallet_links").where({ agent_id: agentId }).orderBy("linked_at");
}

describe("POST /api/crypto/connect", () => {
  it("links a wallet: challenge, personal_sign signature, linked (checksummed), audited", async () => {
    const agent = await buildAgent();
    const account = newAccount();
    const c = await challenge(agent, account.address.toLowerCase());
    expect(c.wallet_address).toBe(account.address);
    expect(c.message).toContain(account.address);
    expect(c.message).toContain(agent.agentId);
    expect(c.message).toContain("Chain ID: 8453");
    expect(c.message).toMatch(/Nonce: [0-9a-f]{32}/);
    expect(c.message).toContain(`Expiration Time: ${c.expires_at}`);
    expect(new Date(c.expires_at).getTime() - Date.now()).toBeGreaterThan(9 * 60_000);

    const res = await submit(
      agent,
      account.address.toLowerCase(),
      c.challenge_id,
      await account.signMessage({ message: c.message }),
    );
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      step: "linked",
      linked_wallet: { address: account.address, method: "signature", chain_family: "evm" },
      already_linked: false,
      replaced_address: null,
    });

    const wallet = await api("GET", "/api/wallet", { key: agent.apiKey });
    expect(wallet.body.linked_wallet.address).toBe(account.address);
    expect(wallet.body.linked_wallet_null_reason).toBeNull();
    const audit = await db()("audit_events").where({
      actor_agent_id: agent.agentId,
      action: "wallet.linked",
    });
    expect(audit).toHaveLength(1);
    expect(audit[0].data).toMatchObject({ address: account.address, challenge_id: c.challenge_id });
  });

  it("accepts an all-uppercase address and answers with the checksummed form", async () => {
    const agent = await buildAgent();
    const account = newAccount();
    const upper = `0x${account.address.slice(2).toUpperCase()}`;
    const res = await link(agent, account, upper);
    expect(res.status).toBe(200);
    expect(res.body.linked_wallet.address).toBe(account.address);
  });

  it("refuses a mixed-case address with a wrong EIP-55 checksum (400) and a malformed one", async () => {
    const agent = await buildAgent();
    // Flip the case of the first letter digit: a wrong checksum, as long as the address stays mixed case.
    // It does not when that letter was its only capital (or the only small letter): then all-lower or
    // all-upper is a valid unchecksummed address, so such an address is passed over for another.
    const withFlip = (address: string) => {
      const i = address.slice(2).search(/[a-fA-F]/) + 2;
      const c = address[i]!;
      const flipped = c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase();
      return `${address.slice(0, i)}${flipped}${address.slice(i + 1)}`;
    };
    const mixed = (address: string) => /[a-f]/.test(address.slice(2)) && /[A-F]/.test(address.slice(2));
    let good = newAccount().address;
    while (!mixed(withFlip(good))) good = newAccount().address;
    const bad = withFlip(good);
    const res = await api("POST", "/api/crypto/connect", {
      key: agent.apiKey,
      body: { wallet_address: bad },
    });
    expect(res.status).toBe(400);
    expect(errorCode(res)).toBe("SCHEMA_VALIDATION_FAILED");
    expect(res.body.error.details.violations[0].path).toBe("/wallet_address");

    for (const wallet_address of ["0x1234", `${good}00`, good.slice(2), "0Xabc"]) {
      const r = await api("POST", "/api/crypto/connect", { key: agent.apiKey, body: { wallet_address } });
      expect(r.status, wallet_address).toBe(400);
    }
  });

  it("refuses a signature by another key with WALLET_SIGNATURE_INVALID, and the challenge stays usable", async () => {
    const agent = await buildAgent();
    const owner = newAccount();
    const impostor = newAccount();
    const c = await challenge(agent, owner.address);
    const res = await submit(
      agent,
      owner.address,
      c.challenge_id,
      await impostor.signMessage({ message: c.message }),
    );
    expect(res.status).toBe(400);
    expect(errorCode(res)).toBe("WALLET_SIGNATURE_INVALID");
    expect(res.body.error.details).toMatchObject({
      expected_signer: owner.address,
      recovered_signer: impostor.address,
    });
    expect(await openLinks(agent.agentId)).toHaveLength(0);

    // A signature over a different text by the right key is refused too.
    const other = await submit(
      agent,
      owner.address,
      c.challenge_id,
      await owner.signMessage({ message: "hello" }),
    );
    expect(errorCode(other)).toBe("WALLET_SIGNATURE_INVALID");
    const garbage = await submit(agent, owner.address, c.challenge_id, "0xdeadbeef");
    expect(errorCode(garbage)).toBe("WALLET_SIGNATURE_INVALID");

    const ok = await submit(
      agent,
      owner.address,
      c.challenge_id,
      await owner.signMessage({ message: c.message }),
    );
    expect(ok.status).toBe(200);
  });

  it("refuses a reused, an expired, another agent's and another address's challenge", async () => {
    const agent = await buildAgent();
    const account = newAccount();
    const c = await challenge(agent, account.address);
    const signature = await account.signMessage({ message: c.message });
    expect((await submit(agent, account.address, c.challenge_id, signature)).status).toBe(200);
    const reused = await submit(agent, account.address, c.challenge_id, signature);
    expect(reused.status).toBe(400);
    expect(errorCode(reused)).toBe("WALLET_CHALLENGE_INVALID");
    expect(reused.body.error.details.reason).toBe("already_used");

    const c2 = await challenge(agent, account.address);
    await db()("wallet_link_challenges")
      .where({ id: c2.challenge_id })
      .update({
        issued_at: db().raw("now() - interval '20 minutes'"),
        expires_at: db().raw("now() - interval '10 minutes'"),
      });
    const expired = await submit(
      agent,
      account.address,
      c2.challenge_id,
      await account.signMessage({ message: c2.message }),
    );
    expect(errorCode(expired)).toBe("WALLET_CHALLENGE_INVALID");
    expect(expired.body.error.details.reason).toBe("expired");

    const stranger = await buildAgent();
    const c3 = await challenge(agent, account.address);
    const foreign = await submit(
      stranger,
      account.address,
      c3.challenge_id,
      await account.signMessage({ message: c3.message }),
    );
    expect(foreign.body.error.details.reason).toBe("not_found");

    const other = newAccount();
    const mismatch = await submit(
      agent,
      other.address,
      c3.challenge_id,
      await other.signMessage({ message: c3.message }),
    );
    expect(mismatch.body.error.details.reason).toBe("address_mismatch");
  });

  it("consumes a challenge once when two requests use it at the same time", async () => {
    const agent = await buildAgent();
    const account = newAccount();
    const c = await challenge(agent, account.address);
    const signature = await account.signMessage({ message: c.message });
    const results = await Promise.all(
      Array.from({ length: 5 }, () => submit(agent, account.address, c.challenge_id, signature)),
    );
    expect(results.map((r) => r.status).sort()).toEqual([200, 400, 400, 400, 400]);
    expect(
      results.filter((r) => r.status === 400).every((r) => r.body.error.details.reason === "already_used"),
    ).toBe(true);
    expect(await openLinks(agent.agentId)).toHaveLength(1);
  });

  it("refuses an address linked to another agent with 409 CONFLICT and links nothing", async () => {
    const first = await buildAgent();
    const second = await buildAgent();
    const account = newAccount();
    expect((await link(first, account)).status).toBe(200);
    const res = await link(second, account);
    expect(res.status).toBe(409);
    expect(errorCode(res)).toBe("CONFLICT");
    expect(res.body.error.details.reason).toBe("wallet_owned_by_another_agent");
    expect(await openLinks(second.agentId)).toHaveLength(0);
    const wallet = await api("GET", "/api/wallet", { key: second.apiKey });
    expect(wallet.body.linked_wallet).toBeNull();
  });

  it("re-linking replaces the previous address and keeps the history; the same address again is a no-op", async () => {
    const agent = await buildAgent();
    const a = newAccount();
    const b = newAccount();
    expect((await link(agent, a)).status).toBe(200);
    const res = await link(agent, b);
    expect(res.body).toMatchObject({ replaced_address: a.address, linked_wallet: { address: b.address } });
    const again = await link(agent, b);
    expect(again.body).toMatchObject({ already_linked: true, replaced_address: null });
    const history = await openLinks(agent.agentId);
    expect(history.map((h) => [h.address, h.unlinked_at === null])).toEqual([
      [a.address, false],
      [b.address, true],
    ]);
    expect((await api("GET", "/api/wallet", { key: agent.apiKey })).body.linked_wallet.address).toBe(
      b.address,
    );
    // The old address stays this agent's: it can come back without a conflict.
    expect((await link(agent, a)).body.replaced_address).toBe(b.address);
  });

  it("needs challenge_id and signature together, and a key", async () => {
    const agent = await buildAgent();
    const address = newAccount().address;
    const c = await challenge(agent, address);
    const res = await api("POST", "/api/crypto/connect", {
      key: agent.apiKey,
      body: { wallet_address: address, challenge_id: c.challenge_id },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.details.violations[0].path).toBe("/signature");
    expect((await api("POST", "/api/crypto/connect", { body: { wallet_address: address } })).status).toBe(
      401,
    );
  });

  it(`caps open challenges per agent at ${MAX_OPEN_CHALLENGES}`, async () => {
    const agent = await buildAgent();
    const address = newAccount().address;
    for (let i = 0; i < MAX_OPEN_CHALLENGES; i++) await challenge(agent, address);
    const res = await api("POST", "/api/crypto/connect", {
      key: agent.apiKey,
      body: { wallet_address: address },
    });
    expect(res.status).toBe(429);
    expect(errorCode(res)).toBe("RATE_LIMITED");
  });
});

/** Every text-like column of every table, searched for a string: where a secret could have been stored. */
async function rowsContaining(needle: string): Promise<string[]> {
  const columns = await db().raw(
    `select table_name, column_name from information_schema.columns
      where table_schema = 'public' and data_type in ('text', 'character varying', 'jsonb', 'json', 'bytea')`,
  );
  const hits: string[] = [];
  for (const { table_name, column_name } of columns.rows as { table_name: string; column_name: string }[]) {
    const cast = `"${column_name}"::text`;
    const [row] = await db()(table_name)
      .whereRaw(`${cast} ilike ?`, [`%${needle}%`])
      .count({ n: "*" });
    if (Number(row!.n) > 0) hits.push(`${table_name}.${column_name}`);
  }
  return hits;
}

describe("POST /api/crypto/wallet", () => {
  it("returns a working key once, links the address, and never stores or logs the key", async () => {
    const agent = await buildAgent();
    const before = written.length;
    const res = await api("POST", "/api/crypto/wallet", { key: agent.apiKey });
    expect(res.status).toBe(201);
    expect(res.headers.get("cache-control")).toBe("no-store");
    const { address, private_key } = res.body;
    expect(privateKeyToAccount(private_key).address).toBe(address);
    expect(getAddress(address)).toBe(address);
    expect(res.body).toMatchObject({
      linked: true,
      custody: "self",
      linked_wallet: { address, method: "generated" },
    });

    const digits = (private_key as string).slice(2);
    expect(await rowsContaining(digits)).toEqual([]);
    // The capture works (the request was logged) and holds no trace of the key.
    const logged = written.slice(before).join("");
    expect(logged).toContain("/api/crypto/wallet");
    expect(logged.toLowerCase()).not.toContain(digits);
    // Its address is stored (the link and the audit), only the key is not.
    expect(await rowsContaining(address.slice(2))).toEqual(
      expect.arrayContaining(["wallet_addresses.address", "wallet_links.address", "audit_events.data"]),
    );
  });

  it("keeps an existing link and says how to switch", async () => {
    const agent = await buildAgent();
    const linked = newAccount();
    expect((await link(agent, linked)).status).toBe(200);
    const res = await api("POST", "/api/crypto/wallet", { key: agent.apiKey });
    expect(res.status).toBe(201);
    expect(res.body.linked).toBe(false);
    expect(res.body.linked_wallet.address).toBe(linked.address);
    expect(res.body.link_note).toContain("/api/crypto/connect");
    // Switching to the generated address through the connect flow works: the agent owns it.
    const generated = privateKeyToAccount(res.body.private_key as Hex);
    const switched = await link(agent, generated);
    expect(switched.body.linked_wallet.address).toBe(generated.address as Address);
  });
});

describe("GET /api/wallet", () => {
  it("is readable while paid execution is off: zero USDC, no tUSDC, no link, funding unavailable", async () => {
    const agent = await buildAgent();
    const res = await api("GET", "/api/wallet", { key: agent.apiKey });
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      agent_id: agent.agentId,
      balances: {
        USDC: {
          available_usdc: "0.000000",
          held_usdc: "0.000000",
          seller_payable_usdc: "0.000000",
          decimals: 6,
        },
      },
      linked_wallet: null,
      linked_wallet_null_reason: "no_wallet_linked",
      funding: {
        status: "temporarily_unavailable",
        reason: "platform_custody_frozen",
        paid_execution_enabled: false,
      },
      deposit_to: { platform_address: null, platform_address_null_reason: "funding_not_authorized" },
      pending_deposits: [],
      recent_deposits: [],
    });
    expect(res.body.balances.tUSDC).toBeUndefined();
    expect((await api("GET", "/api/wallet")).status).toBe(401);
  });

  it("shows tUSDC, marked as the sandbox unit, once the agent has some", async () => {
    const agent = await buildAgent();
    await creditDeposit({
      agentId: agent.agentId,
      currency: "tUSDC",
      amountMicros: 2_500_000n,
      reference: { type: "test", id: agent.agentId },
      idempotencyKey: `test:tusdc:${agent.agentId}`,
    });
    const res = await api("GET", "/api/wallet", { key: agent.apiKey });
    expect(res.body.balances.tUSDC).toMatchObject({ available_usdc: "2.500000" });
    expect(res.body.balances.tUSDC.note).toContain("sandbox");
    expect(res.body.balances.USDC.available_usdc).toBe("0.000000");
  });
});

describe("paid wallet routes while paid execution is off", () => {
  it("purchase and verify answer 503 TEMPORARILY_UNAVAILABLE with the reason", async () => {
    const agent = await buildAgent();
    const purchase = await api("POST", "/api/wallet/purchase", {
      key: agent.apiKey,
      body: { amount_usdc: "5" },
    });
    expect(purchase.status).toBe(503);
    expect(errorCode(purchase)).toBe("TEMPORARILY_UNAVAILABLE");
    expect(purchase.body.error.details.reason).toBe("platform_custody_frozen");
    expect(purchase.headers.get("retry-after")).toBeTruthy();
    const verify = await api("POST", "/api/wallet/purchase/verify", {
      key: agent.apiKey,
      body: { tx_hash: `0x${"ab".repeat(32)}` },
    });
    expect(verify.status).toBe(503);
  });
});

describe("GET /api/wallet/pricing", () => {
  it("states the currency, the exact 97/3 fee rule, the spec's prices and the chain", async () => {
    const res = await api("GET", "/api/wallet/pricing");
    expect(res.status).toBe(200);
    expect(res.body).toMatchObject({
      currency: "USDC",
      decimals: 6,
      platform_fee_rate: 0.03,
      split: {
        seller: 0.97,
        platform: 0.03,
        example: { amount_usdc: "0.020000", fee_usdc: "0.000600", seller_usdc: "0.019400" },
      },
      verification: { price_usdc: "5.000000" },
      seller_bond_usdc: "1.000000",
      deposits: { minimum_purchase_usdc: "0.010000" },
      chain: {
        chainId: 8453,
        decimals: 6,
        platform_fee_rate: 0.03,
        payment_methods: ["usdc_base"],
        supported_tokens: ["USDC"],
        settlement: "on_chain",
        faucet: null,
        rpcUrl: null,
        rpcUrl_null_reason: "no_settlement_rpc_configured",
      },
    });
    expect(res.body.split.fee_rule).toContain("floor(amount_micros × 3 / 100)");
    expect(Object.fromEntries(res.body.tools.map((t: any) => [t.service, t.price_usdc]))).toEqual({
      page_scrape: "0.020000",
      document_parse: "0.020000",
      research_brief: "0.500000",
      web_search: "0.010000",
    });
    expect(res.body.chain.gas_estimate).toMatchObject({
      gas_units: 65000,
      gas_price_gwei: null,
      gas_price_null_reason: "no_settlement_rpc_configured",
    });
  });
});
