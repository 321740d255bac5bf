import type { LookupFunction } from "node:net";
import { Agent } from "undici";
import {
  checkHostName,
  checkResolvedAddresses,
  type ResolveAll,
  type ResolvedAddress,
} from "./url-policy.js";

/**
 * The connection side of the safe fetch boundary. The address check runs inside the socket's own DNS
 * lookup, so the socket connects to exactly the addresses that were checked: a name cannot answer
 * "public" to a check and "private" to the connect a moment later (DNS rebinding). IP-literal hosts
 * skip lookup altogether; safe-fetch checks those before the request.
 */

/** A net.connect lookup that resolves with resolveAll and, when guarded, refuses any non-public answer. */
export function createLookup(resolveAll: ResolveAll, guarded: boolean): LookupFunction {
  return (hostname, options, callback) => {
    const answer = async (): Promise<ResolvedAddress[]> => {
      if (guarded) checkHostName(hostname);
      const addresses = await resolveAll(hostname);
      // ANY bad address refuses the name: net may try them all (happy eyeballs), so all must be safe.
      if (guarded) checkResolvedAddresses(hostname, addresses);
      const family = options.family === "IPv4" ? 4 : options.family === "IPv6" ? 6 : options.family;
      const wanted = family ? addresses.filter((a) => a.family === family) : addresses;
      if (wanted.length === 0) {
        throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: "ENOTFOUND", hostname });
      }
      return wanted;
    };
    answer().then(
      (addresses) => {
        // Node asks for every address when it races families (autoSelectFamily), otherwise for one.
        if (options.all) callback(null, addresses);
        else callback(null, addresses[0]!.address, addresses[0]!.family);
      },
      (error: NodeJS.ErrnoException) => callback(error, ""),
    );
  };
}

export interface Dispatchers {
  /** For every host the address rules apply to: the lookup checks each answer. */
  guarded: Agent;
  /** For allowlisted hosts and the trusted first-party origin only. */
  exempt: Agent;
}

// undici's defaults are a 10 s connect timeout and no pool limit; the caller's time budget still caps it.
function agent(lookup: LookupFunction): Agent {
  return new Agent({
    connections: 256,
    keepAliveTimeout: 10_000,
    connect: { timeout: 5_000, lookup },
  });
}

/** Two connection pools, so a connection opened without the check is never reused by a checked call. */
export function createDispatchers(resolveAll: ResolveAll): Dispatchers {
  return { guarded: agent(createLookup(resolveAll, true)), exempt: agent(createLookup(resolveAll, false)) };
}
