import { lookup } from "node:dns/promises";
import ipaddr from "ipaddr.js";
import { getConfig } from "../config.js";

/**
 * Which endpoint URLs the platform will ever call: http(s), no credentials, and a host that is a public
 * unicast address or a name whose every address is one. Loopback, private, link-local, CGNAT, metadata,
 * multicast, reserved and IPv4-mapped forms of those are refused, as are localhost, .local, .localhost,
 * .internal and single-label names. OUTBOUND_ALLOWLIST names hosts exempt from the address rule, for
 * tests and local development only; it is empty by default.
 *
 * The same rules serve publish time (checkEndpointUrl) and fetch time (safe-fetch: before each hop and
 * again inside the connect lookup), so the two can never disagree.
 */
export class UnsafeEndpoint extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UnsafeEndpoint";
  }
}

/** One DNS answer; the shape of dns.lookup(…, { all: true }). */
export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves every address of a name; injectable so tests never depend on real DNS. */
export type ResolveAll = (hostname: string) => Promise<ResolvedAddress[]>;

/** The system resolver (what the OS would connect to), every address, in the OS's order. */
export const systemResolveAll: ResolveAll = (hostname) => lookup(hostname, { all: true, verbatim: true });

const BLOCKED_SUFFIXES = [".localhost", ".local", ".internal", ".localdomain", ".home.arpa"];

// IANA's global unicast block. ipaddr.js calls some addresses outside it "unicast" (IPv4-compatible
// ::a.b.c.d, unassigned space), and those are not reachable public hosts either.
const IPV6_GLOBAL_UNICAST = ipaddr.IPv6.parseCIDR("2000::/3");

function unwrap(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    return (parsed as ipaddr.IPv6).toIPv4Address();
  }
  return parsed;
}

/** The ipaddr.js range an address falls in ("unicast" only for public ones); mapped IPv6 is unwrapped. */
export function addressRange(address: string): string {
  const parsed = unwrap(address);
  const range = parsed.range();
  if (range === "unicast" && parsed instanceof ipaddr.IPv6 && !parsed.match(IPV6_GLOBAL_UNICAST))
    return "reserved";
  return range;
}

/** True for a public unicast address; IPv4-mapped IPv6 is judged as the IPv4 address it carries. */
export function isPublicAddress(address: string): boolean {
  return ipaddr.isValid(address) && addressRange(address) === "unicast";
}

/** True when OUTBOUND_ALLOWLIST names this URL's host (with or without its port). */
export function isAllowlisted(url: URL): boolean {
  const allow = getConfig().outboundAllowlist;
  return allow.includes(url.hostname.toLowerCase()) || allow.includes(url.host.toLowerCase());
}

/** Refuses local and internal names (no DNS needed); the connect-time lookup calls it too. */
export function checkHostName(hostname: string): void {
  // "localhost." and "LOCALHOST" are the same name; judge the canonical form.
  const host = hostname.toLowerCase().replace(/\.+$/, "");
  if (host === "localhost") throw new UnsafeEndpoint(`host ${hostname} is refused: localhost`);
  const suffix = BLOCKED_SUFFIXES.find((s) => host.endsWith(s));
  if (suffix) throw new UnsafeEndpoint(`host ${hostname} is refused: ${suffix} names are local or internal`);
  if (!host.includes("."))
    throw new UnsafeEndpoint(`host ${hostname} is refused: single-label names are local or internal`);
}

/** Refuses an address that is not public unicast, naming its range. */
export function checkAddress(address: string, resolvedFrom?: string): void {
  if (isPublicAddress(address)) return;
  const range = ipaddr.isValid(address) ? addressRange(address) : "invalid";
  const subject = resolvedFrom ? `host ${resolvedFrom} resolves to ${address}, which` : `address ${address}`;
  throw new UnsafeEndpoint(`${subject} is not a public address (${range} range)`);
}

/** Refuses a DNS answer unless it is non-empty and every address in it is public. */
export function checkResolvedAddresses(hostname: string, addresses: readonly ResolvedAddress[]): void {
  if (addresses.length === 0) throw new UnsafeEndpoint(`host ${hostname} resolves to no address`);
  for (const { address } of addresses) checkAddress(address, hostname);
}

export interface UrlVerdict {
  url: URL;
  /** True when the address rules do not apply (allowlisted host, or exempted by the caller). */
  exempt: boolean;
  /** The name whose addresses still need checking; undefined for IP literals and exempt hosts. */
  resolve: string | undefined;
}

/**
 * The rules that need no DNS: a valid http(s) URL without credentials; unless exempt, an IP-literal host
 * must be public and a name must not be local or internal. Throws UnsafeEndpoint naming the rule.
 */
export function checkUrlRules(raw: string | URL, options: { exempt?: boolean } = {}): UrlVerdict {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UnsafeEndpoint("is not a valid URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new UnsafeEndpoint(`must use http or https, not ${url.protocol}`);
  // Credentials in a URL end up in logs and evidence, and would be replayed to every redirect target.
  if (url.username || url.password) throw new UnsafeEndpoint("must not carry credentials");
  const exempt = options.exempt === true || isAllowlisted(url);
  if (exempt) return { url, exempt, resolve: undefined };

  // WHATWG URL parsing already turned decimal, hex and octal IPv4 spellings into dotted quads.
  const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (ipaddr.isValid(host)) {
    checkAddress(host);
    return { url, exempt, resolve: undefined };
  }
  checkHostName(host);
  return { url, exempt, resolve: host };
}

/** Parses and checks an endpoint URL (DNS included); throws UnsafeEndpoint with the reason. */
export async function checkEndpointUrl(raw: string, resolveAll: ResolveAll = systemResolveAll): Promise<URL> {
  const { url, resolve } = checkUrlRules(raw);
  if (resolve === undefined) return url;
  let addresses: ResolvedAddress[];
  try {
    addresses = await resolveAll(resolve);
  } catch {
    throw new UnsafeEndpoint(`host ${resolve} does not resolve`);
  }
  checkResolvedAddresses(resolve, addresses);
  return url;
}
