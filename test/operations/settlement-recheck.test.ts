import { randomBytes } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { getConfig, overrideConfig } from "../../shared/config.js";
import { db } from "../../shared/db/knex.js";
import { getQueue } from "../../shared/queues.js";
import { processX402Settlement } from "../../shared/x402/settlement.js";
import { type LocalChain, startLocalChain } from "../helpers/chain.js";
import { buildAgent, buildListing, type TestAgent } from "../helpers/factories.js";
import { api } from "../helpers/http.js";
import { useOwnDatabase } from "../helpers/own-database.js";
import { usePaidChain } from "../helpers/paid-chain.js";
import { json, startSeller, type TestSeller } from "../helpers/seller.js";
import { startService, type TestService } from "../helpers/service.js";
import { usdcBalance, x402Buyer } from "../helpers/x402.js";

// The money console's x402 settlements (docs/operations.md "Money console"): a settlement still open
// is listed with its evidence; re-checks sent at once only re-send its job, and however often the
// job then runs, the buyer pays once. No settlement worker runs here: the test drives the job itself.

const ADMIN_KEY = `admin-${randomBytes(24).toString("hex")}`;
const admin = { key: ADMIN_KEY };

let ownDb: Awaited<ReturnType<typeof useOwnDatabase>>;
let chain: LocalChain;
let service: TestService;
let seller: TestSeller;
let sellerAgent: TestAgent;

beforeAll(async () => {
  ownDb = await useOwnDatabase("x402recheck");
  chain = await startLocalChain();
  await usePaidChain(chain);
  overrideConfig({ x402SettlementWaitMs: 0, adminApiKey: ADMIN_KEY });
  service = await startService();
  seller = await startSeller((_call, res) => json(res, 200, { success: true, output: { done: true } }));
  sellerAgent = await buildAgent("seller");
});

afterAll(async () => {
  await getQueue("settlement-confirmations")
    .obliterate({ force: true })
    .catch(() => {});
  await seller?.close();
  await service?.stop();
  await chain?.stop();
  await ownDb?.drop();
});

describe("POST /api/admin/money/settlements/{id}/recheck", () => {
  it("re-sends an open settlement's job; concurrent re-checks and runs settle it once", async () => {
    const listing = await buildListing({
      endpointUrl: seller.url,
      price: 0.05,
      sellerId: sellerAgent.agentId,
    });
    const buyer = await x402Buyer(chain, 100_000n);
    const paid = await buyer.pay(`http://127.0.0.1:${getConfig().port}/api/x402/invoke/${listing.id}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ input: {} }),
    });
    expect(paid.status).toBe(200);
    const paymentId = ((await paid.json()) as { payment: { payment_id: string } }).payment.payment_id;

    const listed = await api("GET", "/api/admin/money?stuck_after_seconds=0", admin);
    const item = listed.body.settlements.find(
      (s: { settlement_id: string }) => s.settlement_id === paymentId,
    );
    expect(item).toMatchObject({ status: "settling", amount_usdc: "0.050000" });
    expect(item.evidence.length).toBeGreaterThan(0);

    const answers = await Promise.all(
      Array.from({ length: 5 }, () =>
        api("POST", `/api/admin/money/settlements/${paymentId}/recheck`, admin),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(5).fill(200));
    expect(await getQueue("settlement-confirmations").getJob(paymentId)).toBeDefined();
    const audit = await db()("audit_events").where({
      subject_id: paymentId,
      action: "x402_settlement.rechecked",
    });
    expect(audit).toHaveLength(5);

    // The job run three times at once (as redelivery could): one transfer, the buyer debited once.
    await Promise.all([
      processX402Settlement(paymentId),
      processX402Settlement(paymentId),
      processX402Settlement(paymentId),
    ]);
    await expect
      .poll(async () => (await processX402Settlement(paymentId)).status, { timeout: 15_000 })
      .toBe("already_final");
    expect(await db()("x402_payments").where({ id: paymentId }).first()).toMatchObject({ status: "settled" });
    expect(
      await db()("chain_transactions").where({ purpose: "x402_settlement", subject_id: paymentId }),
    ).toHaveLength(1);
    expect(await usdcBalance(chain, buyer.wallet.address)).toBe(50_000n);

    const final = await api("POST", `/api/admin/money/settlements/${paymentId}/recheck`, admin);
    expect(final.status).toBe(409);
    expect(final.body.error.code).toBe("CONFLICT");
  });
});
