import { createHash } from "node:crypto";
import { documentSpecs, INDEX_PATH, indexProblems } from "./documents.js";
import { type DiscoverySources, urlOf } from "./sources.js";

// GET /api/discovery/check: fetches every discovery document as a client would (over HTTP, from this
// service), and reports for each whether it answered 200 with its media type, parses and is valid for
// its standard, and matches the sha256 /api/index.json gives; then follows every URL of ours that any
// document advertises and reports those that do not resolve (404 or 5xx).

export interface Fetched {
  status: number;
  contentType: string | null;
  body: string;
}

/** Fetches a path of this service (the API passes one that reaches its own listening socket). */
export type FetchPath = (path: string) => Promise<Fetched>;

interface Check {
  name: string;
  ok: boolean;
  reason: string | null;
}

const pass = (name: string): Check => ({ name, ok: true, reason: null });
const fail = (name: string, reason: string): Check => ({ name, ok: false, reason });
const sha256 = (body: string) => createHash("sha256").update(body, "utf8").digest("hex");

export const CHECK_PATH = "/api/discovery/check";

/** At most this many advertised links are followed per check. */
const MAX_LINKS = 200;

/** URLs of ours in a body, without templated ones ({id}) and trailing punctuation. */
export function ourUrls(body: string, baseUrl: string): string[] {
  const escaped = baseUrl.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  const found = body.match(new RegExp(`${escaped}(/[^\\s"'<>)\\]\`]*)?`, "g")) ?? [];
  return found.map((u) => u.replace(/[.,;:]+$/, "")).filter((u) => !/[{}<>]/.test(u));
}

export async function discoveryCheck(sources: DiscoverySources, fetchPath: FetchPath) {
  const index = await fetchPath(INDEX_PATH).catch(() => undefined);
  const listed = new Map<string, string>();
  const indexChecks: Check[] = [];
  if (index?.status !== 200) {
    indexChecks.push(fail("answers 200", `status ${index?.status ?? "no answer"}`));
  } else {
    indexChecks.push(pass("answers 200"));
    const problems = indexProblems(index.body);
    indexChecks.push(problems.length ? fail("valid", problems.join("; ")) : pass("valid"));
    if (problems.length === 0) {
      for (const d of (JSON.parse(index.body) as { documents: { url: string; sha256: string }[] })
        .documents) {
        listed.set(d.url, d.sha256);
      }
    }
  }
  const documents = [
    {
      name: "index.json",
      url: urlOf(sources, INDEX_PATH),
      ok: indexChecks.every((c) => c.ok),
      checks: indexChecks,
    },
  ];
  const bodies: string[] = index ? [index.body] : [];
  const fetchedBodies = new Map<string, string>();

  for (const spec of documentSpecs(sources)) {
    const url = urlOf(sources, spec.path);
    const checks: Check[] = [];
    const got = await fetchPath(spec.path).catch((error: Error) => error);
    if (got instanceof Error) {
      checks.push(fail("answers 200", got.message));
    } else {
      bodies.push(got.body);
      fetchedBodies.set(spec.path, got.body);
      checks.push(got.status === 200 ? pass("answers 200") : fail("answers 200", `status ${got.status}`));
      const wanted = spec.mediaType.split(";")[0]!;
      checks.push(
        got.contentType?.startsWith(wanted)
          ? pass("media type")
          : fail("media type", `${got.contentType ?? "none"}, expected ${wanted}`),
      );
      const problems = spec.validate(got.body, sources);
      checks.push(problems.length ? fail("valid", problems.join("; ")) : pass("valid"));
      let expected = listed.get(url);
      if (expected !== undefined && expected !== sha256(got.body)) {
        // The snapshot may have rolled over between the index and this document: read both again.
        const again = await Promise.all([fetchPath(INDEX_PATH), fetchPath(spec.path)]).catch(() => undefined);
        if (again && again[0].status === 200 && indexProblems(again[0].body).length === 0) {
          const entry = (
            JSON.parse(again[0].body) as { documents: { url: string; sha256: string }[] }
          ).documents.find((d) => d.url === url);
          if (entry && entry.sha256 === sha256(again[1].body)) {
            expected = entry.sha256;
            got.body = again[1].body;
          }
        }
      }
      checks.push(
        expected === undefined
          ? fail("sha256 as indexed", "not listed in /api/index.json")
          : expected === sha256(got.body)
            ? pass("sha256 as indexed")
            : fail("sha256 as indexed", `body hashes to ${sha256(got.body)}, the index says ${expected}`),
      );
    }
    documents.push({ name: spec.name, url, ok: checks.every((c) => c.ok), checks });
  }

  // llms-full.sha256 must hash the llms-full.txt body served beside it.
  const full = fetchedBodies.get("/llms-full.txt");
  const line = fetchedBodies.get("/llms-full.sha256");
  const shaDoc = documents.find((d) => d.name === "llms-full.sha256");
  if (shaDoc && full !== undefined && line !== undefined) {
    const ok = line.startsWith(`${sha256(full)}  `);
    shaDoc.checks.push(
      ok ? pass("hashes llms-full.txt") : fail("hashes llms-full.txt", "the line does not match the body"),
    );
    shaDoc.ok &&= ok;
  }

  // The check's own URL is listed too; following it would run the check inside itself.
  const self = urlOf(sources, CHECK_PATH);
  const urls = [...new Set(bodies.flatMap((b) => ourUrls(b, sources.baseUrl)))]
    .filter((u) => u !== self)
    .slice(0, MAX_LINKS);
  const links = [];
  for (const url of urls) {
    const path = url.slice(sources.baseUrl.length) || "/";
    const got = await fetchPath(path).catch(() => undefined);
    const status = got?.status ?? null;
    links.push({ url, status, ok: status !== null && status !== 404 && status < 500 });
  }
  return {
    schema: "agentmarket.discovery-check.v1" as const,
    ok: documents.every((d) => d.ok) && links.every((l) => l.ok),
    checked_at: new Date().toISOString(),
    documents,
    links,
  };
}
