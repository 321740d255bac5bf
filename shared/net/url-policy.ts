import { lookup } from "node:dns/promises";
import ipaddr from "ipaddr.js";
import { getConfig } from "../config.js";

/**
 * Which endpoint URLs the platform will ever call: http(s), no credentials, and a host that is a public
 * unicast address or a name whose every address is one. Loopback, private, link-local, CGNAT, metadata,
 * multicast, reserved and IPv4-mapped forms of those are refused, as are localhost, .local, .localhost,
 * .internal and single-label names. OUTBOUND_ALLOWLIST names hosts exempt from the address rule, for
 * tests and local development only; it is empty by default.
 */
export class UnsafeEndpoint extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UnsafeEndpoint";
  }
}

const BLOCKED_SUFFIXES = [".localhost", ".local", ".internal", ".localdomain", ".home.arpa"];

/** True for a public unicast address; IPv4-mapped IPv6 is judged as the IPv4 address it carries. */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  let parsed = ipaddr.parse(address);
  if (parsed.kind() === "ipv6" && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) {
    parsed = (parsed as ipaddr.IPv6).toIPv4Address();
  }
  return parsed.range() === "unicast";
}

function isAllowlisted(url: URL): boolean {
  const allow = getConfig().outboundAllowlist;
  return allow.includes(url.hostname.toLowerCase()) || allow.includes(url.host.toLowerCase());
}

/** Parses and checks an endpoint URL (DNS included); throws UnsafeEndpoint with the reason. */
export async function checkEndpointUrl(raw: string): Promise<URL> {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new UnsafeEndpoint("is not a valid URL");
  }
  if (url.protocol !== "http:" && url.protocol !== "https:")
    throw new UnsafeEndpoint("must use http or https");
  if (url.username || url.password) throw new UnsafeEndpoint("must not carry credentials");
  if (isAllowlisted(url)) return url;

  // WHATWG URL parsing already turned decimal, hex and octal IPv4 spellings into dotted quads.
  const host = url.hostname.replace(/^\[|\]$/g, "").toLowerCase();
  if (ipaddr.isValid(host)) {
    if (!isPublicAddress(host)) throw new UnsafeEndpoint(`host ${host} is not a public address`);
    return url;
  }
  if (host === "localhost" || BLOCKED_SUFFIXES.some((s) => host.endsWith(s)) || !host.includes(".")) {
    throw new UnsafeEndpoint(`host ${host} is local or internal`);
  }
  let addresses: { address: string }[];
  try {
    addresses = await lookup(host, { all: true, verbatim: true });
  } catch {
    throw new UnsafeEndpoint(`host ${host} does not resolve`);
  }
  const unsafe = addresses.find((a) => !isPublicAddress(a.address));
  if (addresses.length === 0 || unsafe) {
    throw new UnsafeEndpoint(
      `host ${host} resolves to ${unsafe?.address ?? "nothing"}, which is not a public address`,
    );
  }
  return url;
}
