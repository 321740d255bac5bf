import { getAddress, parseAbiItem, parseEther } from "viem";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ERC20_ABI } from "../../shared/chain/client.js";
import { overrideConfig } from "../../shared/config.js";
import { closeDb, db } from "../../shared/db/knex.js";
import { captureHold, creditDeposit, holdFunds } from "../../shared/money/ledger/flows.js";
import { balances } from "../../shared/money/ledger/ledger.js";
import { processPayoutSweep } from "../../shared/money/payouts/payouts.js";
import { closeQueues, getQueue } from "../../shared/queues.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent } from "../helpers/factories.js";
import { holdOf } from "../helpers/money.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { type RunningProcess, startProcess, waitFor } from "../helpers/processes.js";
import { linkWalletDirect } from "../helpers/wallets.js";

// A payout is never sent twice, even when its worker dies between signing and confirmation: the
// Procfile's `payouts` process (dist/workers/main.js payouts) is SIGKILLed right after it committed the
// signed transfer and before it broadcast it (PAYOUT_PAUSE_AFTER_SIGN_MS holds it there); a new process
// re-broadcasts the recorded bytes, and `settlement-confirmations` (also an OS process) books it once.

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
const processes: RunningProcess[] = [];
const platformKey = generatePrivateKey();
const platform = privateKeyToAccount(platformKey);

const USDC = (n: number) => BigInt(Math.round(n * 1_000_000));

function env(extra: Record<string, string> = {}): Record<string, string> {
  return {
    DATABASE_URL: ownDb.url,
    CHAIN_RPC_URL: chain.rpcUrl,
    CHAIN_ID: String(chain.chainId),
    USDC_ADDRESS: getAddress(chain.tokenAddress),
    PLATFORM_SIGNER_KEY: platformKey,
    CHAIN_CONFIRMATIONS: "1",
    PAYOUT_THRESHOLD_USDC: "10",
    PAYOUT_SWEEP_INTERVAL_MS: "0",
    WORKER_LOCK_DURATION_MS: "2000",
    WORKER_STALLED_INTERVAL_MS: "1000",
    LOG_LEVEL: "warn",
    ...extra,
  };
}

function start(queue: "payouts" | "settlement-confirmations", extra: Record<string, string> = {}) {
  const p = startProcess("dist/workers/main.js", [queue], env(extra));
  processes.push(p);
  return p;
}

beforeAll(async () => {
  ownDb = await useOwnDatabase("payout_crash");
  chain = await startLocalChain();
  await chain.fundEth(platform.address, parseEther("10"));
  await usePaidChain(chain, { platformKey, confirmations: 1 });
  overrideConfig({ payoutThresholdMicros: USDC(10) });
  await chain.mint(platform.address, USDC(100));
});

afterAll(async () => {
  for (const p of processes) p.child.kill("SIGKILL");
  for (const queue of ["payouts", "settlement-confirmations"] as const) {
    await getQueue(queue)
      .obliterate({ force: true })
      .catch(() => {});
  }
  await closeQueues();
  await closeDb();
  await chain?.stop();
  await ownDb?.drop();
});

describe("a payouts worker SIGKILLed between signing and confirmation", () => {
  it("a new process completes the payout with exactly one on-chain transfer", async () => {
    // A seller with 12 × 97 % payable and a linked wallet.
    const seller = await buildAgent("seller");
    const buyer = await buildAgent("buyer");
    const { address: wallet } = await chain.newWallet({ eth: 0n });
    await linkWalletDirect(seller.agentId, wallet);
    const ref = { type: "test", id: "crash" };
    await creditDeposit({
      agentId: buyer.agentId,
      currency: "USDC",
      amountMicros: USDC(12),
      reference: ref,
      idempotencyKey: "t:d",
    });
    const hold = {
      agentId: buyer.agentId,
      currency: "USDC" as const,
      amountMicros: USDC(12),
      reference: ref,
      idempotencyKey: "t:h",
    };
    await holdFunds(hold);
    const { sellerMicros } = await captureHold({
      ...holdOf(hold),
      idempotencyKey: "t:c",
      sellerAgentId: seller.agentId,
    });
    const nonceBefore = await chain.publicClient.getTransactionCount({ address: platform.address });

    const doomed = start("payouts", { PAYOUT_PAUSE_AFTER_SIGN_MS: "60000" });
    expect(await processPayoutSweep()).toBe(1);
    const payout = await db()("payouts").where({ seller_id: seller.agentId }).first();

    const signed = await waitFor("the payouts process to commit the signed transfer", async () =>
      db()("chain_transactions").where({ purpose: "payout", subject_id: payout.id }).first(),
    ).catch((error) => {
      throw new Error(`${error}\n--- payouts output ---\n${doomed.output()}`);
    });
    // Its pause line is written after that commit (and asynchronously): killed only once it is in the pause.
    await waitFor("the payouts process to say it is pausing before the broadcast", async () =>
      /PAYOUT_PAUSE_AFTER_SIGN_MS/.test(doomed.output()),
    );
    doomed.child.kill("SIGKILL");
    expect(await doomed.exited).toBe("SIGKILL");
    // Killed after the commit, before the broadcast: signed and recorded, nothing on chain.
    expect(signed.status).toBe("signed");
    expect(await chain.publicClient.getTransactionCount({ address: platform.address })).toBe(nonceBefore);
    expect((await db()("payouts").where({ id: payout.id }).first()).status).toBe("pending");

    const worker = start("payouts");
    const confirmer = start("settlement-confirmations");
    const done = await waitFor(
      "the payout to be confirmed",
      async () => {
        const row = await db()("payouts").where({ id: payout.id }).first();
        return row.status === "confirmed" && row;
      },
      30_000,
    ).catch((error) => {
      throw new Error(
        `${error}\n--- payouts ---\n${worker.output()}\n--- confirmations ---\n${confirmer.output()}`,
      );
    });

    // The recorded bytes went out: the same transaction, one nonce used, one Transfer to the seller.
    expect(done.tx_hash).toBe(signed.tx_hash);
    const rows = await db()("chain_transactions").where({ purpose: "payout", subject_id: payout.id });
    expect(rows).toHaveLength(1);
    const transfers = async () =>
      chain.publicClient.getLogs({
        address: chain.tokenAddress,
        event: parseAbiItem("event Transfer(address indexed from, address indexed to, uint256 value)"),
        args: { from: platform.address, to: wallet },
        fromBlock: 0n,
      });
    expect(await transfers()).toHaveLength(1);
    const balanceOf = () =>
      chain.publicClient.readContract({
        address: chain.tokenAddress,
        abi: ERC20_ABI,
        functionName: "balanceOf",
        args: [wallet],
      });
    expect(await balanceOf()).toBe(sellerMicros);
    expect(await chain.publicClient.getTransactionCount({ address: platform.address })).toBe(nonceBefore + 1);
    expect((await balances(seller.agentId, "USDC")).payable).toBe(0n);
    expect(await db()("ledger_transactions").where({ kind: "payout", reference_id: payout.id })).toHaveLength(
      1,
    );

    // Give any duplicate delivery time to show itself before concluding "exactly once".
    await new Promise((r) => setTimeout(r, 2500));
    expect(await transfers()).toHaveLength(1);
    expect(await balanceOf()).toBe(sellerMicros);
    expect(await db()("ledger_transactions").where({ kind: "payout", reference_id: payout.id })).toHaveLength(
      1,
    );
    expect(
      await db()("payment_evidence")
        .where({ subject_type: "payout", subject_id: payout.id })
        .pluck("state")
        .then((states: string[]) => states.sort()),
    ).toEqual(["confirmation", "payout", "settlement"]);
  });
});
