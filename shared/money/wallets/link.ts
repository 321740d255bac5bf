import { randomBytes, randomUUID } from "node:crypto";
import { type Address, getAddress, type Hex, recoverMessageAddress, verifyMessage } from "viem";
import { recordAudit } from "../../audit/index.js";
import { getConfig } from "../../config.js";
import { db } from "../../db/knex.js";
import { AppError, validationError } from "../../errors.js";
import {
  type ChallengeRow,
  claimAddress,
  closeOpenLink,
  consumeChallenge,
  countOpenChallenges,
  deleteStaleChallenges,
  findChallenge,
  findOpenLink,
  insertChallenge,
  insertLink,
  lockAgentForLink,
  type WalletLinkRow,
} from "./store.js";

// Linking an external wallet (POST /api/crypto/connect): the server issues a challenge naming the
// agent, the address, the chain and a random nonce; the wallet signs it with EIP-191 personal_sign; the
// link is made when the signature recovers that address. EOAs only: smart-contract wallets (EIP-1271)
// cannot produce such a signature and are not supported yet.

/** How long a challenge can be used. */
export const CHALLENGE_TTL_MS = 10 * 60_000;

/** Unused, unexpired challenges one agent may hold at once. */
export const MAX_OPEN_CHALLENGES = 10;

const HEX_ADDRESS = /^0x[0-9a-fA-F]{40}$/;

/**
 * An EVM address from the API edge, in its checksummed form: 0x and 40 hex digits, all lowercase or all
 * uppercase (no checksum to check), or mixed case that must be a valid EIP-55 checksum — a mixed-case
 * address with a wrong checksum is a typo, never silently accepted.
 */
export function parseWalletAddress(raw: string, path = "/wallet_address"): Address {
  if (!HEX_ADDRESS.test(raw)) {
    throw validationError("invalid wallet address", [
      { path, message: "must be 0x followed by 40 hex digits" },
    ]);
  }
  const digits = raw.slice(2);
  const checksummed = getAddress(`0x${digits.toLowerCase()}`);
  if (digits !== digits.toLowerCase() && digits !== digits.toUpperCase() && checksummed !== raw) {
    throw validationError("invalid wallet address checksum", [
      { path, message: "mixed-case address with an invalid EIP-55 checksum (check for a typo)" },
    ]);
  }
  return checksummed;
}

/** A linked wallet as the API shows it. */
export function linkView(link: WalletLinkRow) {
  return {
    address: link.address,
    chain_family: "evm" as const,
    method: link.method,
    linked_at: link.linked_at.toISOString(),
  };
}

export interface IssuedChallenge {
  challenge_id: string;
  wallet_address: Address;
  chain_id: number;
  nonce: string;
  message: string;
  issued_at: string;
  expires_at: string;
}

function challengeMessage(c: {
  id: string;
  agentId: string;
  address: Address;
  chainId: number;
  nonce: string;
  issuedAt: Date;
  expiresAt: Date;
}): string {
  const config = getConfig();
  const base = new URL(config.publicBaseUrl);
  // Shaped like EIP-4361 (Sign-In with Ethereum) so wallets show it readably; the first line says what
  // the signature is for, and the statement says what it does not authorize.
  return [
    `${base.host} wants you to link this Ethereum account to an agent:`,
    c.address,
    "",
    `Link wallet ${c.address} to agent ${c.agentId} on ${config.platformId}. Signing proves you control this address; it authorizes no payment and no transaction.`,
    "",
    `URI: ${config.publicBaseUrl}/api/crypto/connect`,
    "Version: 1",
    `Chain ID: ${c.chainId}`,
    `Nonce: ${c.nonce}`,
    `Issued At: ${c.issuedAt.toISOString()}`,
    `Expiration Time: ${c.expiresAt.toISOString()}`,
    `Request ID: ${c.id}`,
  ].join("\n");
}

/** Step 1: a single-use challenge for this agent and address, valid for CHALLENGE_TTL_MS. */
export async function issueLinkChallenge(agentId: string, address: Address): Promise<IssuedChallenge> {
  const q = db();
  if ((await countOpenChallenges(q, agentId)) >= MAX_OPEN_CHALLENGES) {
    throw new AppError("RATE_LIMITED", "too many open wallet challenges; use one or let them expire", {
      open_challenges: MAX_OPEN_CHALLENGES,
      retry_after_seconds: 60,
    });
  }
  await deleteStaleChallenges(q, agentId);
  const id = randomUUID();
  const nonce = randomBytes(16).toString("hex");
  const chainId = getConfig().chainId;
  const issuedAt = new Date();
  const expiresAt = new Date(issuedAt.getTime() + CHALLENGE_TTL_MS);
  const message = challengeMessage({ id, agentId, address, chainId, nonce, issuedAt, expiresAt });
  await insertChallenge(q, {
    id,
    agent_id: agentId,
    address,
    chain_id: chainId,
    nonce,
    message,
    issued_at: issuedAt,
    expires_at: expiresAt,
  });
  return {
    challenge_id: id,
    wallet_address: address,
    chain_id: chainId,
    nonce,
    message,
    issued_at: issuedAt.toISOString(),
    expires_at: expiresAt.toISOString(),
  };
}

function challengeRefused(reason: string, message: string): AppError {
  return new AppError("WALLET_CHALLENGE_INVALID", message, {
    reason,
    next: "POST /api/crypto/connect {wallet_address} for a new challenge",
  });
}

/** Why a challenge cannot be used now, or undefined when it can. */
function unusable(
  challenge: ChallengeRow | undefined,
  address: Address,
  now = new Date(),
): AppError | undefined {
  if (!challenge) return challengeRefused("not_found", "no such challenge for this agent");
  if (challenge.address !== address)
    return challengeRefused("address_mismatch", "the challenge was issued for another wallet address");
  if (challenge.consumed_at) return challengeRefused("already_used", "the challenge was already used");
  if (challenge.expires_at <= now) return challengeRefused("expired", "the challenge has expired");
  return undefined;
}

async function signatureMatches(address: Address, message: string, signature: Hex): Promise<boolean> {
  try {
    return await verifyMessage({ address, message, signature });
  } catch {
    return false;
  }
}

async function recoveredSigner(message: string, signature: Hex): Promise<Address | null> {
  try {
    return await recoverMessageAddress({ message, signature });
  } catch {
    return null;
  }
}

export interface LinkResult {
  link: WalletLinkRow;
  replacedAddress: string | null;
  alreadyLinked: boolean;
}

/**
 * Step 2: verifies the signature over the stored challenge, then in one transaction consumes the
 * challenge (once, even under concurrent use), claims the address for this agent (409 CONFLICT when
 * another agent owns it) and makes it the agent's linked wallet, closing the previous link. Audited.
 */
export async function linkWithSignature(
  agentId: string,
  proof: { address: Address; challengeId: string; signature: Hex },
  requestId: string,
): Promise<LinkResult> {
  const challenge = await findChallenge(db(), agentId, proof.challengeId);
  const refusal = unusable(challenge, proof.address);
  if (refusal) throw refusal;
  if (!(await signatureMatches(proof.address, challenge!.message, proof.signature))) {
    throw new AppError("WALLET_SIGNATURE_INVALID", "the signature does not prove control of this address", {
      expected_signer: proof.address,
      recovered_signer: await recoveredSigner(challenge!.message, proof.signature),
      signing_method: "personal_sign (EIP-191) over the challenge message, byte for byte",
      smart_contract_wallets: "not supported yet (EIP-1271)",
    });
  }
  return db().transaction(async (trx) => {
    await lockAgentForLink(trx, agentId);
    if (!(await consumeChallenge(trx, agentId, proof.challengeId))) {
      throw (
        unusable(await findChallenge(trx, agentId, proof.challengeId), proof.address) ??
        challengeRefused("already_used", "the challenge was already used")
      );
    }
    const owner = await claimAddress(trx, agentId, proof.address);
    if (owner !== agentId) {
      throw new AppError("CONFLICT", "this wallet address is linked to another agent", {
        reason: "wallet_owned_by_another_agent",
        rule: "a wallet address belongs to one agent, so every deposit from it is attributable",
      });
    }
    const current = await findOpenLink(trx, agentId);
    const alreadyLinked = current?.address === proof.address;
    let link = current!;
    if (!alreadyLinked) {
      await closeOpenLink(trx, agentId);
      link = await insertLink(trx, {
        agent_id: agentId,
        address: proof.address,
        method: "signature",
        challenge_id: proof.challengeId,
        request_id: requestId,
      });
    }
    const replacedAddress = alreadyLinked ? null : (current?.address ?? null);
    await recordAudit(trx, {
      actorAgentId: agentId,
      action: "wallet.linked",
      subjectType: "wallet_link",
      subjectId: link.id,
      requestId,
      data: {
        address: proof.address,
        method: "signature",
        challenge_id: proof.challengeId,
        replaced_address: replacedAddress,
        unchanged: alreadyLinked,
      },
    });
    return { link, replacedAddress, alreadyLinked };
  });
}

/**
 * POST /api/crypto/connect: {wallet_address} issues a challenge (step 1); {wallet_address, challenge_id,
 * signature} links the wallet once the signature proves control of it (step 2).
 */
export async function connectWallet(
  agentId: string,
  body: { wallet_address: string; challenge_id?: string; signature?: string },
  requestId: string,
) {
  const address = parseWalletAddress(body.wallet_address);
  const hasId = body.challenge_id !== undefined;
  if (hasId !== (body.signature !== undefined)) {
    const missing = hasId ? "/signature" : "/challenge_id";
    throw validationError("challenge_id and signature are sent together", [
      { path: missing, message: "is required in step 2 (send only wallet_address for step 1)" },
    ]);
  }
  if (!hasId) {
    const challenge = await issueLinkChallenge(agentId, address);
    return {
      step: "sign_challenge" as const,
      challenge,
      signing: {
        method: "personal_sign",
        standard: "EIP-191",
        sign: "the message field exactly as given (UTF-8), with the key of wallet_address",
        single_use: true,
        supported_wallets:
          "externally owned accounts; smart-contract wallets (EIP-1271) are not supported yet",
      },
      next: {
        method: "POST" as const,
        path: "/api/crypto/connect",
        body: { wallet_address: address, challenge_id: challenge.challenge_id, signature: "0x…" },
      },
    };
  }
  const result = await linkWithSignature(
    agentId,
    { address, challengeId: body.challenge_id!, signature: body.signature as Hex },
    requestId,
  );
  return {
    step: "linked" as const,
    linked_wallet: linkView(result.link),
    already_linked: result.alreadyLinked,
    replaced_address: result.replacedAddress,
    note: "Deposits are credited only when sent from this address. Re-linking another address replaces it.",
    wallet_url: "/api/wallet",
  };
}
