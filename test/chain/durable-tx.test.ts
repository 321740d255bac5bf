import { randomUUID } from "node:crypto";
import type { Address } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { confirmation, sendOnce } from "../../shared/chain/durable-tx.js";
import { TEST_TOKEN_ABI } from "../../shared/chain/test-token-artifact.js";
import { overrideConfig } from "../../shared/config.js";
import { closeDb, db } from "../../shared/db/knex.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";

// A platform transaction is signed and recorded before it is broadcast, and never sent twice: a retry
// (after a crash, or a concurrent run) re-broadcasts the recorded bytes or finds them mined.

let chain: LocalChain;
const platformKey = generatePrivateKey();
const platform = privateKeyToAccount(platformKey);

beforeAll(async () => {
  chain = await startLocalChain();
  overrideConfig({
    chainRpcUrl: chain.rpcUrl,
    chainId: chain.chainId,
    usdcAddress: chain.tokenAddress,
    platformSignerKey: platformKey,
  });
  await chain.fundEth(platform.address, 10n ** 18n);
  await chain.mint(platform.address, 1_000_000_000n);
});
afterAll(async () => {
  await chain?.stop();
  await closeDb();
});

function transfer(to: Address, amount: bigint) {
  return {
    address: chain.tokenAddress,
    abi: TEST_TOKEN_ABI,
    functionName: "transfer",
    args: [to, amount],
  } as const;
}

async function tokenBalance(address: Address): Promise<bigint> {
  return chain.publicClient.readContract({
    address: chain.tokenAddress,
    abi: TEST_TOKEN_ABI,
    functionName: "balanceOf",
    args: [address],
  }) as Promise<bigint>;
}

const recipient = () => privateKeyToAccount(generatePrivateKey()).address;

describe("sendOnce", () => {
  it("sends once per subject: a second call returns the same transaction and moves nothing more", async () => {
    const to = recipient();
    const subject = randomUUID();
    const first = await sendOnce("test", subject, transfer(to, 5n));
    const second = await sendOnce("test", subject, transfer(to, 5n));
    expect(second.tx_hash).toBe(first.tx_hash);
    expect(await tokenBalance(to)).toBe(5n);
    const rows = await db()("chain_transactions").where({ purpose: "test", subject_id: subject });
    expect(rows).toHaveLength(1);
    expect(rows[0].status).toBe("mined");
  });

  it("a crash between recording and broadcasting: the retry broadcasts the recorded bytes, once", async () => {
    const to = recipient();
    const subject = randomUUID();
    await expect(
      sendOnce("test", subject, transfer(to, 7n), {
        beforeBroadcast: async () => {
          throw new Error("worker killed");
        },
      }),
    ).rejects.toThrow("worker killed");
    const recorded = await db()("chain_transactions").where({ purpose: "test", subject_id: subject }).first();
    expect(recorded.status).toBe("signed");
    expect(await tokenBalance(to)).toBe(0n);
    const retried = await sendOnce("test", subject, transfer(to, 7n));
    expect(retried.tx_hash).toBe(recorded.tx_hash);
    expect(await tokenBalance(to)).toBe(7n);
  });

  it("concurrent sends for one subject make one transaction; for many subjects, one nonce each", async () => {
    const to = recipient();
    const subject = randomUUID();
    const same = await Promise.all(
      Array.from({ length: 5 }, () => sendOnce("test", subject, transfer(to, 1n))),
    );
    expect(new Set(same.map((r) => r.tx_hash)).size).toBe(1);
    expect(await tokenBalance(to)).toBe(1n);

    const many = await Promise.all(
      Array.from({ length: 6 }, () => sendOnce("test", randomUUID(), transfer(to, 10n))),
    );
    expect(new Set(many.map((r) => r.nonce)).size).toBe(6);
    for (const row of many) expect((await confirmation(row, 1)).state).toBe("confirmed");
    expect(await tokenBalance(to)).toBe(61n);
  });

  it("a call that would revert fails before anything is signed or stored", async () => {
    const subject = randomUUID();
    await expect(sendOnce("test", subject, transfer(recipient(), 10n ** 30n))).rejects.toThrow();
    expect(await db()("chain_transactions").where({ purpose: "test", subject_id: subject })).toHaveLength(0);
  });

  it("confirmation counts blocks on top of the mined one", async () => {
    const row = await sendOnce("test", randomUUID(), transfer(recipient(), 1n));
    expect(await confirmation(row, 1)).toMatchObject({ state: "confirmed", confirmations: 1 });
    expect(await confirmation(row, 3)).toMatchObject({ state: "pending", confirmations: 1 });
    await chain.mine(2);
    expect(await confirmation(row, 3)).toMatchObject({ state: "confirmed", confirmations: 3 });
  });

  it("a transaction stranded unbroadcast (its subject never retried) is sent before the next one", async () => {
    const to = recipient();
    const stranded = randomUUID();
    await expect(
      sendOnce("test", stranded, transfer(to, 3n), {
        beforeBroadcast: async () => {
          throw new Error("worker killed");
        },
      }),
    ).rejects.toThrow("worker killed");
    // Old enough to count as stranded (nothing else will retry this subject).
    await db()("chain_transactions")
      .where({ purpose: "test", subject_id: stranded })
      .update({ created_at: db().raw("now() - interval '1 minute'") });
    const next = await sendOnce("test", randomUUID(), transfer(to, 4n));
    expect((await confirmation(next, 1)).state).toBe("confirmed");
    const first = await db()("chain_transactions").where({ purpose: "test", subject_id: stranded }).first();
    expect(["broadcast", "mined"]).toContain(first.status);
    expect(await tokenBalance(to)).toBe(7n);
  });
});
