import { createHash, randomBytes } from "node:crypto";
import { crc32 } from "node:zlib";

const PREFIX = "amk_";
const ALPHABET = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BODY_LENGTH = 32;
const CHECKSUM_LENGTH = 6;
const KEY_PATTERN = new RegExp(`^${PREFIX}[0-9A-Za-z]{${BODY_LENGTH + CHECKSUM_LENGTH}}$`);

function base62(bytes: Buffer, length: number): string {
  let out = "";
  for (const byte of bytes) {
    // 62 * 4 = 248: rejecting bytes ≥ 248 keeps every character equally likely.
    if (byte < 248) out += ALPHABET[byte % 62];
    if (out.length === length) break;
  }
  return out;
}

function checksum(body: string): string {
  let value = crc32(body);
  let out = "";
  for (let i = 0; i < CHECKSUM_LENGTH; i++) {
    out = ALPHABET[value % 62] + out;
    value = Math.floor(value / 62);
  }
  return out;
}

/** Creates a new API key: amk_ + 32 random base62 characters + a 6-character CRC32 checksum. */
export function generateApiKey(): string {
  let body = "";
  while (body.length < BODY_LENGTH) body += base62(randomBytes(48), BODY_LENGTH - body.length);
  return `${PREFIX}${body}${checksum(body)}`;
}

/** True when the token has our shape and its checksum holds: fakes and typos fail without a lookup. */
export function isWellFormedApiKey(token: string): boolean {
  if (!KEY_PATTERN.test(token)) return false;
  const body = token.slice(PREFIX.length, PREFIX.length + BODY_LENGTH);
  return checksum(body) === token.slice(PREFIX.length + BODY_LENGTH);
}

/** SHA-256 of the whole token: keys are high-entropy, so a fast hash is the right one to store. */
export function hashApiKey(token: string): string {
  return createHash("sha256").update(token).digest("hex");
}

export function apiKeyDisplay(token: string): { prefix: string; lastFour: string } {
  return { prefix: PREFIX, lastFour: token.slice(-4) };
}
