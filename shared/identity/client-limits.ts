import { getConfig } from "../config.js";
import { AppError } from "../errors.js";
import { commandRedis, luaScript } from "../redis.js";

// A per-client, per-route request budget for keyless routes that write rows (docs/api.md "Errors"): a fixed
// window per wall-clock minute in Redis, so every API process counts against the same budget.

const COUNT = luaScript(`
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('EXPIRE', KEYS[1], 61) end
return n`);

/** Counts one request of `client` on `route`; over KEYLESS_REQUESTS_PER_MINUTE → 429 RATE_LIMITED. */
export async function countClientRequest(route: string, client: string): Promise<void> {
  const { queuePrefix, keylessRequestsPerMinute: max } = getConfig();
  const now = Date.now();
  const minute = Math.floor(now / 60_000);
  const key = `${queuePrefix}:clients:${route}:${client}:${minute}`;
  const n = Number(await COUNT(commandRedis(), [key], []));
  if (n > max) {
    throw new AppError("RATE_LIMITED", `more than ${max} requests a minute from this client on this route`, {
      limit_per_minute: max,
      retry_after_seconds: Math.max(1, Math.ceil(((minute + 1) * 60_000 - now) / 1000)),
    });
  }
}
