import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { recordAudit } from "../../audit/index.js";
import { caip2, platformAddress } from "../../chain/client.js";
import { getConfig } from "../../config.js";
import { db } from "../../db/knex.js";
import { formatUsdc } from "../../kernel/money.js";
import { depositView } from "../deposits/deposits.js";
import { listAgentDeposits } from "../deposits/store/deposits.js";
import { funding, paidGate } from "../gate/availability.js";
import { balances } from "../ledger/ledger.js";
import { payoutSummary } from "../payouts/payouts.js";
import { linkView } from "./link.js";
import { claimAddress, findOpenLink, insertLink, lockAgentForLink } from "./store.js";

// The agent's wallet (GET /api/wallet) and self-custody key generation (POST /api/crypto/wallet).

const OPEN_DEPOSITS_SHOWN = 50;
const RECENT_DEPOSITS_SHOWN = 10;

function balanceView(b: { available: bigint; held: bigint; payable: bigint; bonds: bigint }) {
  return {
    available_usdc: formatUsdc(b.available),
    held_usdc: formatUsdc(b.held),
    seller_payable_usdc: formatUsdc(b.payable),
    bonds_usdc: formatUsdc(b.bonds),
  };
}

/**
 * GET /api/wallet: balances, the linked wallet, open and recent deposits, and funding as the gate says
 * now. A read: it answers in every availability state ("a read contract until funding is authorized").
 */
export async function walletView(agentId: string) {
  const q = db();
  const [usdc, tusdc, link, open, recent, gate, payouts] = await Promise.all([
    balances(agentId, "USDC"),
    balances(agentId, "tUSDC"),
    findOpenLink(q, agentId),
    listAgentDeposits(q, agentId, "open", OPEN_DEPOSITS_SHOWN),
    listAgentDeposits(q, agentId, "final", RECENT_DEPOSITS_SHOWN),
    paidGate(),
    payoutSummary(agentId),
  ]);
  const config = getConfig();
  const sandboxUsed = Object.values(tusdc).some((v) => v !== 0n);
  return {
    agent_id: agentId,
    balances: {
      USDC: { ...balanceView(usdc), decimals: 6 },
      ...(sandboxUsed
        ? { tUSDC: { ...balanceView(tusdc), decimals: 6, note: "the sandbox's simulated unit; not money" } }
        : {}),
    },
    linked_wallet: link ? linkView(link) : null,
    linked_wallet_null_reason: link ? null : "no_wallet_linked",
    funding: {
      ...funding(gate),
      paid_execution_enabled: gate.enabled,
      contract: gate.enabled
        ? "funding is authorized: deposits are accepted and credited"
        : "read contract: this wallet can be read, but do not send funds until GET /market.json reports paid execution enabled",
      read_first: "/market.json",
    },
    deposit_to: {
      network: caip2(config.chainId),
      token_address: config.usdcAddress,
      platform_address: gate.enabled ? (platformAddress() ?? null) : null,
      platform_address_null_reason: gate.enabled ? null : "funding_not_authorized",
      confirmations_required: config.chainConfirmations,
    },
    pending_deposits: open.map(depositView),
    recent_deposits: recent.map(depositView),
    // Seller earnings: payable, the payout in flight, and why it accrues (docs/payments.md "Payouts").
    payouts,
    links: {
      pricing: "/api/wallet/pricing",
      connect: "/api/crypto/connect",
      generate: "/api/crypto/wallet",
      purchase: "/api/wallet/purchase",
      verify: "/api/wallet/purchase/verify",
      market: "/market.json",
    },
  };
}

/**
 * POST /api/crypto/wallet: a new self-custody key, returned once and never stored or logged. The
 * address is claimed for the agent (we know it holds the key) and becomes its linked wallet when it
 * has none; an existing link is left alone (switch with the connect flow). Audited without the key.
 */
export async function generateSelfCustodyWallet(agentId: string, requestId: string) {
  const privateKey = generatePrivateKey();
  const { address } = privateKeyToAccount(privateKey);
  const { created, existing } = await db().transaction(async (trx) => {
    await lockAgentForLink(trx, agentId);
    await claimAddress(trx, agentId, address);
    const current = await findOpenLink(trx, agentId);
    const link = current
      ? undefined
      : await insertLink(trx, {
          agent_id: agentId,
          address,
          method: "generated",
          challenge_id: null,
          request_id: requestId,
        });
    await recordAudit(trx, {
      actorAgentId: agentId,
      action: "wallet.generated",
      subjectType: "wallet_address",
      subjectId: address,
      requestId,
      data: { address, linked: link !== undefined, kept_linked_address: current?.address ?? null },
    });
    return { created: link, existing: current };
  });
  const linkedWallet = created ? linkView(created) : linkView(existing!);
  return {
    address,
    private_key: privateKey,
    private_key_notice:
      "Shown once. The platform does not store or log it and cannot recover it; whoever holds it controls " +
      "the funds. Put it in a secret manager before you send anything to this address.",
    key_format: "secp256k1 private key, 0x followed by 64 hex digits (imports into any EVM wallet)",
    custody: "self" as const,
    chain_family: "evm" as const,
    network: caip2(getConfig().chainId),
    linked: created !== undefined,
    linked_wallet: linkedWallet,
    link_note: created
      ? "This address is now your linked wallet: deposits are credited only when sent from it."
      : `Your linked wallet stays ${linkedWallet.address}. To switch, POST /api/crypto/connect ` +
        `{wallet_address: "${address}"} and sign the challenge with this key.`,
    next_steps: [
      "Store the private key; it is never shown again.",
      "Fund the address with USDC and a little ETH for gas on the settlement chain (GET /api/wallet/pricing).",
      "GET /market.json: deposit only while paid execution is enabled, then POST /api/wallet/purchase.",
    ],
  };
}
