import { createHash } from "node:crypto";
import type { TSchema } from "@sinclair/typebox";
import { parse as parseYaml } from "yaml";
import { getConfig } from "../config.js";
import { createAjv, violationsOf } from "../kernel/json-schema.js";
import { signedAgentCard } from "./agent-card.js";
import { discoveryDocument, marketplaceDescriptor } from "./descriptor.js";
import { type LiveFacts, liveFacts } from "./facts.js";
import { agentsTxt, skillMd } from "./guides.js";
import { entryLinks, llmsFullTxt, llmsTxt, sha256Line } from "./llms.js";
import { machineCatalog } from "./machine-catalog.js";
import { mcpServerJson } from "./mcp-server.js";
import { publicProof } from "./public-proof.js";
import {
  AgentCardSchema,
  DiscoveryDocument,
  DiscoveryIndex,
  MachineCatalog,
  MarketplaceDescriptor,
  McpServerJsonSchema,
  PublicProof,
} from "./schemas.js";
import { type DiscoverySources, urlOf } from "./sources.js";

// The discovery documents as one registry: path, media type, how each is built and how it is checked.
// They are built together into one snapshot (kept DISCOVERY_CACHE_SECONDS), so /api/index.json's hashes
// always match the bodies served beside it, and every route serves bytes from that snapshot.

export interface DocumentSpec {
  name: string;
  path: string;
  mediaType: string;
  build(sources: DiscoverySources, facts: LiveFacts, built: Map<string, string>): Promise<string> | string;
  /** Problems with a body (parse, grammar, schema); empty when it is valid. */
  validate(body: string, sources: DiscoverySources): string[];
}

export interface ServedDocument {
  name: string;
  path: string;
  mediaType: string;
  body: string;
  sha256: string;
  etag: string;
}

const TEXT = "text/plain; charset=utf-8";
const MARKDOWN = "text/markdown; charset=utf-8";
const JSON_TYPE = "application/json; charset=utf-8";

const json = (value: unknown) => `${JSON.stringify(value, null, 2)}\n`;
const sha256 = (body: string) => createHash("sha256").update(body, "utf8").digest("hex");

const ajv = createAjv();
function schemaProblems(schema: TSchema, body: string): string[] {
  let value: unknown;
  try {
    value = JSON.parse(body);
  } catch (error) {
    return [`not JSON: ${(error as Error).message}`];
  }
  const check = ajv.compile(schema);
  return check(value) ? [] : violationsOf(check.errors).map((v) => `${v.path} ${v.message}`);
}

/** llms.txt grammar (llmstxt.org): H1, a blockquote, paragraphs without headings, H2 sections of links. */
export function llmsTxtProblems(body: string): string[] {
  const problems: string[] = [];
  const lines = body.split("\n");
  if (!/^# \S/.test(lines[0] ?? "")) problems.push("line 1 is not an H1 title");
  const firstContent = lines.slice(1).find((l) => l.trim() !== "");
  if (!firstContent?.startsWith("> ")) problems.push("the H1 is not followed by a blockquote summary");
  let section: string | null = null;
  const sections: string[] = [];
  for (const [i, line] of lines.entries()) {
    if (i === 0) continue;
    if (/^#{3,} /.test(line) || /^# /.test(line))
      problems.push(`line ${i + 1}: only one H1, and no H3 or deeper`);
    const h2 = /^## (.+)$/.exec(line);
    if (h2) {
      section = h2[1]!;
      sections.push(section);
      continue;
    }
    if (section && line.trim() !== "" && !/^- \[[^\]]+\]\([^)\s]+\)(: .+)?$/.test(line)) {
      problems.push(`line ${i + 1}: a section holds only "- [name](url): notes" items`);
    }
  }
  if (sections.length === 0) problems.push("no H2 link sections");
  if (sections.includes("Optional") && sections.at(-1) !== "Optional")
    problems.push("Optional is not the last section");
  return problems;
}

/** An Agent Skill: YAML front matter with name (lowercase, digits, hyphens, ≤ 64) and description (≤ 1024). */
export function skillProblems(body: string): string[] {
  const m = /^---\n([\s\S]*?)\n---\n/.exec(body);
  if (!m) return ["no YAML front matter"];
  let meta: Record<string, unknown>;
  try {
    meta = parseYaml(m[1]!) as Record<string, unknown>;
  } catch (error) {
    return [`front matter is not YAML: ${(error as Error).message}`];
  }
  const problems: string[] = [];
  if (typeof meta.name !== "string" || !/^[a-z0-9]+(-[a-z0-9]+)*$/.test(meta.name) || meta.name.length > 64)
    problems.push("name must be 1-64 lowercase letters, digits and single hyphens");
  if (typeof meta.description !== "string" || meta.description.length === 0 || meta.description.length > 1024)
    problems.push("description must be 1-1024 characters");
  if (!/```bash\ncurl /.test(body)) problems.push("no runnable curl example");
  return problems;
}

const mentionsBase = (body: string, sources: DiscoverySources) =>
  body.includes(sources.baseUrl) ? [] : [`does not use this deployment's base URL ${sources.baseUrl}`];

/** Every document, in the order /api/index.json lists them. */
export function documentSpecs(sources: DiscoverySources): DocumentSpec[] {
  const specs: DocumentSpec[] = [
    { name: "llms.txt", path: "/llms.txt", mediaType: TEXT, build: llmsTxt, validate: llmsTxtProblems },
    {
      name: "llms-full.txt",
      path: "/llms-full.txt",
      mediaType: TEXT,
      build: llmsFullTxt,
      validate: (body, s) => [
        ...(/^# \S/.test(body) ? [] : ["line 1 is not an H1 title"]),
        ...mentionsBase(body, s),
      ],
    },
    {
      name: "llms-full.sha256",
      path: "/llms-full.sha256",
      mediaType: TEXT,
      build: (_s, _f, built) => sha256Line(built.get("/llms-full.txt")!, "llms-full.txt"),
      validate: (body) =>
        /^[0-9a-f]{64} {2}llms-full\.txt\n$/.test(body) ? [] : ["not one sha256sum line for llms-full.txt"],
    },
    { name: "agents.txt", path: "/agents.txt", mediaType: TEXT, build: agentsTxt, validate: mentionsBase },
    {
      name: "skill.md",
      path: "/skill.md",
      mediaType: MARKDOWN,
      build: skillMd,
      validate: (body, s) => [...skillProblems(body), ...mentionsBase(body, s)],
    },
    {
      name: "agent-marketplace.json",
      path: "/.well-known/agent-marketplace.json",
      mediaType: JSON_TYPE,
      build: (s, f) => json(marketplaceDescriptor(s, f)),
      validate: (body) => schemaProblems(MarketplaceDescriptor, body),
    },
    {
      name: "agent-card.json",
      path: "/.well-known/agent-card.json",
      mediaType: JSON_TYPE,
      build: async (s, f) => json(await signedAgentCard(s, f)),
      validate: (body) => schemaProblems(AgentCardSchema, body),
    },
    {
      name: "discovery",
      path: "/api/discovery",
      mediaType: JSON_TYPE,
      build: (s, f) => json(discoveryDocument(s, f)),
      validate: (body) => schemaProblems(DiscoveryDocument, body),
    },
    {
      name: "catalog",
      path: "/api/catalog",
      mediaType: JSON_TYPE,
      build: async (s) => json(await machineCatalog(s, {})),
      validate: (body) => schemaProblems(MachineCatalog, body),
    },
    {
      name: "public-proof.json",
      path: "/public-proof.json",
      mediaType: JSON_TYPE,
      build: async (s, f) => json(await publicProof(s, f)),
      validate: (body) => schemaProblems(PublicProof, body),
    },
  ];
  if (sources.mcp) {
    specs.push({
      name: "mcp-server.json",
      path: "/.well-known/mcp/server.json",
      mediaType: JSON_TYPE,
      build: (s) => json(mcpServerJson(s)),
      validate: (body) => schemaProblems(McpServerJsonSchema, body),
    });
  }
  return specs;
}

export const INDEX_PATH = "/api/index.json";

/** /api/index.json: every document with URL, media type and sha256, and the entry points. */
function indexBody(sources: DiscoverySources, served: ServedDocument[]): string {
  const links = entryLinks(sources);
  return json({
    schema: "agentmarket.discovery-index.v1",
    base_url: sources.baseUrl,
    generated_at: new Date().toISOString(),
    documents: served.map((d) => ({
      name: d.name,
      url: urlOf(sources, d.path),
      media_type: d.mediaType,
      sha256: d.sha256,
      bytes: Buffer.byteLength(d.body, "utf8"),
    })),
    entry_points: [...links.start, ...links.services, ...links.payments].map(([name, url]) => ({
      name,
      url,
      method: "GET",
    })),
  });
}

export function indexProblems(body: string): string[] {
  return schemaProblems(DiscoveryIndex, body);
}

function served(spec: Pick<DocumentSpec, "name" | "path" | "mediaType">, body: string): ServedDocument {
  const hash = sha256(body);
  return { ...spec, body, sha256: hash, etag: `"${hash.slice(0, 32)}"` };
}

let snapshot: { at: number; docs: Promise<Map<string, ServedDocument>> } | undefined;

async function buildSnapshot(sources: DiscoverySources): Promise<Map<string, ServedDocument>> {
  const facts = await liveFacts(sources);
  const built = new Map<string, string>();
  const docs = new Map<string, ServedDocument>();
  for (const spec of documentSpecs(sources)) {
    const body = await spec.build(sources, facts, built);
    built.set(spec.path, body);
    docs.set(spec.path, served(spec, body));
  }
  const index = indexBody(sources, [...docs.values()]);
  docs.set(INDEX_PATH, served({ name: "index.json", path: INDEX_PATH, mediaType: JSON_TYPE }, index));
  return docs;
}

/** The current snapshot of every document, rebuilt when older than DISCOVERY_CACHE_SECONDS. */
export function discoverySnapshot(sources: DiscoverySources): Promise<Map<string, ServedDocument>> {
  const ttlMs = getConfig().discoveryCacheSeconds * 1000;
  if (!snapshot || Date.now() - snapshot.at >= ttlMs) {
    const entry = { at: Date.now(), docs: buildSnapshot(sources) };
    // A failed build is not kept: the next request tries again.
    entry.docs.catch(() => {
      if (snapshot === entry) snapshot = undefined;
    });
    snapshot = entry;
  }
  return snapshot.docs;
}

/** One document of the snapshot. */
export async function discoveryDocumentAt(sources: DiscoverySources, path: string): Promise<ServedDocument> {
  const doc = (await discoverySnapshot(sources)).get(path);
  if (!doc) throw new Error(`no discovery document at ${path}`);
  return doc;
}

/** A page of the machine catalog other than the snapshot's default page, built on request. */
export async function machineCatalogPage(
  sources: DiscoverySources,
  page: Parameters<typeof machineCatalog>[1],
): Promise<ServedDocument> {
  return served(
    { name: "catalog", path: "/api/catalog", mediaType: JSON_TYPE },
    json(await machineCatalog(sources, page)),
  );
}
