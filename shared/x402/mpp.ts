import { createHmac, hkdfSync, timingSafeEqual } from "node:crypto";
import { type Hex, keccak256, toBytes } from "viem";
import { USDC_EIP712 } from "../chain/eip3009.js";
import { getConfig } from "../config.js";
import { createAjv, violationsOf } from "../kernel/json-schema.js";
import {
  MAX_TIMEOUT_SECONDS,
  malformedPayment,
  type PayableQuote,
  type PresentedPayment,
} from "./protocol.js";
import { MppCredential } from "./schemas/payment.js";

// MPP, the IETF "Payment" HTTP authentication scheme (notes/payment-protocols.md §5), written here
// because mppx is not a dependency. Only what the gateway needs: the "evm" method, "charge" intent,
// credential type "authorization" (EIP-3009, draft-evm-charge-01).
//
//   402   WWW-Authenticate: Payment id="<id>", realm="<host>", method="evm", intent="charge",
//                           request="<base64url(JCS JSON)>", expires="<RFC 3339>", description="…"
//         request = {amount (atomic), currency (token), recipient, description, externalId (quote id),
//                    methodDetails: {chainId, credentialTypes: ["authorization"], decimals: 6, permit2Address}}
//   retry Authorization: Payment <base64url(JSON {challenge: {the params above}, source?, payload:
//                    {type: "authorization", from, to, value, validAfter, validBefore, nonce, signature}})>
//   2xx   Payment-Receipt: <base64url(JSON {status: "success", method, intent, timestamp, challengeId,
//                    externalId, settlement, reference?})>
//
// Challenges are stateless: id = base64url(HMAC-SHA256(secret, realm|method|intent|request|expires|
// digest|opaque)), the draft's recommendation, with a secret derived (HKDF) from PLATFORM_SIGNER_KEY. A
// credential is accepted only if its echoed params hash to its id (so the request, amount and quote are
// ours), it has not expired, and its EIP-3009 nonce is keccak256(abi.encodePacked(id, realm)) — the
// draft's challenge binding, which also makes one challenge payable once on chain.

export const MPP_METHOD = "evm";
export const MPP_INTENT = "charge";
const PERMIT2 = "0x000000000022D473030F116dDEE9F6B43aC78BA3";

export interface MppChallenge {
  id: string;
  realm: string;
  method: string;
  intent: string;
  request: string;
  expires?: string;
  digest?: string;
  opaque?: string;
  description?: string;
}

export interface MppRequest {
  amount: string;
  currency: string;
  recipient: string;
  description?: string;
  externalId?: string;
  methodDetails: { chainId: number; credentialTypes?: string[]; decimals?: number; permit2Address?: string };
}

/** The realm: this service's host, as buyers address it. */
export function mppRealm(): string {
  return new URL(getConfig().publicBaseUrl).host;
}

let derived: { from: string; key: Buffer } | undefined;

function secret(): Buffer {
  const signerKey = getConfig().platformSignerKey;
  if (!signerKey) throw new Error("MPP challenges need PLATFORM_SIGNER_KEY (the gate is closed without it)");
  if (derived?.from !== signerKey) {
    const ikm = Buffer.from(signerKey.slice(2), "hex");
    const key = Buffer.from(hkdfSync("sha256", ikm, "agentmarket", "mpp-challenge-id/v1", 32));
    derived = { from: signerKey, key };
  }
  return derived.key;
}

/** RFC 8785 JSON canonicalization for the values we emit (strings, integers, objects, arrays). */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function computeId(c: Omit<MppChallenge, "id" | "description">): string {
  const material = [c.realm, c.method, c.intent, c.request, c.expires ?? "", c.digest ?? "", c.opaque ?? ""];
  return createHmac("sha256", secret()).update(material.join("|")).digest("base64url");
}

/** keccak256(abi.encodePacked(challenge.id, challenge.realm)): the EIP-3009 nonce an MPP payment must use. */
export function challengeNonce(id: string, realm: string): Hex {
  return keccak256(toBytes(`${id}${realm}`));
}

/** The MPP challenge that pays a quote (its expiry is the quote's). */
export function mppChallenge(
  quote: PayableQuote & { expires_at: Date },
  description: string,
): { challenge: MppChallenge; request: MppRequest } {
  const request: MppRequest = {
    amount: quote.amount_micros,
    currency: quote.asset!,
    recipient: quote.pay_to!,
    description,
    externalId: quote.id,
    methodDetails: {
      chainId: Number(quote.network!.split(":")[1]),
      credentialTypes: ["authorization"],
      decimals: 6,
      permit2Address: PERMIT2,
    },
  };
  const params = {
    realm: mppRealm(),
    method: MPP_METHOD,
    intent: MPP_INTENT,
    request: Buffer.from(canonicalJson(request)).toString("base64url"),
    expires: quote.expires_at.toISOString(),
  };
  return { challenge: { id: computeId(params), ...params, description }, request };
}

const quoted = (v: string) => `"${v.replace(/[\\"]/g, (m) => `\\${m}`)}"`;

/** The WWW-Authenticate value of a challenge. */
export function formatWwwAuthenticate(c: MppChallenge): string {
  const params: [string, string | undefined][] = [
    ["id", c.id],
    ["realm", c.realm],
    ["method", c.method],
    ["intent", c.intent],
    ["request", c.request],
    ["expires", c.expires],
    ["digest", c.digest],
    ["opaque", c.opaque],
    ["description", c.description],
  ];
  return `Payment ${params
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `${k}=${quoted(v!)}`)
    .join(", ")}`;
}

/** Parses a `Payment` challenge (auth-params, quoted or token values); undefined when it is not one. */
export function parseWwwAuthenticate(value: string): MppChallenge | undefined {
  const match = /^\s*Payment\s+(.*)$/is.exec(value);
  if (!match) return undefined;
  const params: Record<string, string> = {};
  const re = /\s*([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))\s*(?:,|$)/gy;
  const rest = match[1]!;
  let m: RegExpExecArray | null = re.exec(rest);
  while (m) {
    params[m[1]!.toLowerCase()] = m[2] !== undefined ? m[2].replace(/\\(.)/g, "$1") : m[3]!;
    if (re.lastIndex >= rest.length) break;
    m = re.exec(rest);
  }
  if (!params.id || !params.realm || !params.method || !params.intent || !params.request) return undefined;
  return params as unknown as MppChallenge;
}

const checkCredential = createAjv().compile(MppCredential);

export interface DecodedMpp {
  presented: PresentedPayment;
  challenge: MppChallenge;
  /** Why the credential cannot pay (402), or null when its challenge is ours, fresh and bound. */
  rejection: string | null;
}

/** Decodes `Authorization: Payment <credential>`; malformed → 400, a challenge we did not issue → rejection. */
export function decodeMppCredential(value: string): DecodedMpp {
  const header = "authorization";
  const match = /^\s*Payment\s+([A-Za-z0-9_-]+={0,2})\s*$/i.exec(value);
  if (!match) throw malformedPayment(header, "expected `Payment <base64url credential>`");
  let credential: unknown;
  try {
    credential = JSON.parse(Buffer.from(match[1]!, "base64url").toString("utf8"));
  } catch {
    throw malformedPayment(header, "the credential is not base64url-encoded JSON");
  }
  if (!checkCredential(credential)) {
    throw malformedPayment(
      header,
      "not an MPP evm/charge authorization credential",
      violationsOf(checkCredential.errors),
    );
  }
  const { challenge, payload } = credential as {
    challenge: MppChallenge;
    payload: {
      from: string;
      to: string;
      value: string;
      validAfter: string;
      validBefore: string;
      nonce: string;
      signature: Hex;
    };
  };
  let request: MppRequest | undefined;
  try {
    request = JSON.parse(Buffer.from(challenge.request, "base64url").toString("utf8")) as MppRequest;
  } catch {
    request = undefined;
  }
  const chainId = request?.methodDetails?.chainId;
  const presented: PresentedPayment = {
    protocol: "mpp",
    header,
    scheme: "exact",
    network: `eip155:${chainId ?? 0}`,
    accepted: {
      scheme: "exact",
      network: `eip155:${chainId ?? 0}`,
      asset: String(request?.currency ?? ""),
      amount: String(request?.amount ?? ""),
      payTo: String(request?.recipient ?? ""),
      maxTimeoutSeconds: MAX_TIMEOUT_SECONDS,
      extra: { ...USDC_EIP712, quote_id: request?.externalId },
    },
    ...(typeof request?.externalId === "string" ? { quoteId: request.externalId } : {}),
    authorization: {
      from: payload.from,
      to: payload.to,
      value: payload.value,
      validAfter: payload.validAfter,
      validBefore: payload.validBefore,
      nonce: payload.nonce,
    },
    signature: payload.signature,
    challengeId: challenge.id,
  };
  return { presented, challenge, rejection: rejection(challenge, request, payload.nonce) };
}

function rejection(c: MppChallenge, request: MppRequest | undefined, nonce: string): string | null {
  const expected = computeId(c);
  const a = Buffer.from(expected);
  const b = Buffer.from(c.id);
  if (a.length !== b.length || !timingSafeEqual(a, b) || !request) return "invalid_mpp_challenge";
  if (c.realm !== mppRealm() || c.method !== MPP_METHOD || c.intent !== MPP_INTENT)
    return "invalid_mpp_challenge";
  if (!c.expires || !(Date.parse(c.expires) > Date.now())) return "mpp_challenge_expired";
  if (nonce.toLowerCase() !== challengeNonce(c.id, c.realm)) return "mpp_nonce_not_bound_to_challenge";
  return null;
}

/** The Payment-Receipt value: what has evidence, nothing more (reference only once a tx exists). */
export function encodeMppReceipt(r: {
  challengeId: string;
  quoteId: string;
  state: "submitted" | "confirmed" | "pending_submission";
  reference: string | null;
}): string {
  const receipt = {
    status: "success",
    method: MPP_METHOD,
    intent: MPP_INTENT,
    timestamp: new Date().toISOString(),
    challengeId: r.challengeId,
    externalId: r.quoteId,
    settlement: r.state,
    ...(r.reference ? { reference: r.reference } : {}),
  };
  return Buffer.from(JSON.stringify(receipt)).toString("base64url");
}
