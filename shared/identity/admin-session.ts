import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { getConfig } from "../config.js";
import { AppError } from "../errors.js";

// The operator's browser session for the /admin pages (docs/operations.md "Pages"): signing in with
// ADMIN_API_KEY in a form sets an HttpOnly, SameSite=Strict cookie holding an expiry and an HMAC of it
// keyed by ADMIN_API_KEY; the key itself never reaches the cookie. Rotating ADMIN_API_KEY ends every
// session at once.

export const ADMIN_SESSION_COOKIE = "am_admin";
export const ADMIN_SESSION_SECONDS = 8 * 3600;

const digest = (v: string) => createHash("sha256").update(v).digest();

function mac(secret: string, expires: number): string {
  return createHmac("sha256", secret).update(`admin-session.${expires}`).digest("base64url");
}

/** Checks a typed-in admin key; answers the cookie value of a new session. 404 without ADMIN_API_KEY. */
export function signInAdmin(token: string, nowMs = Date.now()): string {
  const secret = getConfig().adminApiKey;
  if (!secret) throw new AppError("NOT_FOUND", "no such route");
  if (!timingSafeEqual(digest(token), digest(secret)))
    throw new AppError("UNAUTHORIZED", "admin key is not recognised");
  const expires = Math.floor(nowMs / 1000) + ADMIN_SESSION_SECONDS;
  return `${expires}.${mac(secret, expires)}`;
}

/** Whether a session cookie is current: unexpired and signed with today's ADMIN_API_KEY. */
export function hasAdminSession(cookie: string | undefined, nowMs = Date.now()): boolean {
  const secret = getConfig().adminApiKey;
  if (!secret || !cookie) return false;
  const m = /^(\d{1,12})\.([A-Za-z0-9_-]{43})$/.exec(cookie);
  if (!m) return false;
  const expires = Number(m[1]);
  if (expires * 1000 <= nowMs) return false;
  return timingSafeEqual(digest(m[2]!), digest(mac(secret, expires)));
}
