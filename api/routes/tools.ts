import { type Static, type TSchema, Type } from "@sinclair/typebox";
import type { ErrorCode } from "../../shared/errors.js";
import {
  buildEcho,
  ECHO_DEFAULT_MESSAGE,
  EchoQuery,
  EchoResult,
  ParseInput,
  ParseOutput,
  ProviderCallBody,
  ResearchInput,
  ResearchOutput,
  requireToolAvailable,
  runParse,
  runResearch,
  runScrape,
  runSearch,
  ScrapeInput,
  ScrapeOutput,
  SearchInput,
  SearchOutput,
  TOOLS,
  type ToolId,
} from "../../shared/tools/index.js";
import { defineRoute, type RouteDef } from "../route.js";

const echoCheckRoute = defineRoute({
  method: "get",
  path: "/api/tools/echo",
  tag: "tools",
  summary: "Free connectivity check: echoes the message with server facts",
  auth: "none",
  query: EchoQuery,
  responses: { 200: EchoResult },
  errors: ["SCHEMA_VALIDATION_FAILED"],
  async handle(ctx, { query }: { query: Static<typeof EchoQuery> }) {
    return buildEcho({ message: query.message ?? ECHO_DEFAULT_MESSAGE }, ctx.headers, Date.now());
  },
});

const echoProviderRoute = defineRoute({
  method: "post",
  path: "/api/tools/echo",
  tag: "tools",
  summary: "The echo provider endpoint, called by the router like any seller endpoint",
  description:
    "Takes the invocation protocol body {invocation_id, listing_id, attempt, input} and echoes input.",
  auth: "none",
  body: ProviderCallBody,
  responses: { 200: EchoResult },
  errors: ["SCHEMA_VALIDATION_FAILED"],
  async handle(ctx, { body }: { body: Static<typeof ProviderCallBody> }) {
    return buildEcho(body.input, ctx.headers, Date.now());
  },
});

/** The invocation protocol body of a hosted tool: {invocation_id, listing_id, attempt, input}. */
function callBody(input: TSchema) {
  return Type.Object({
    invocation_id: Type.Optional(Type.String({ format: "uuid" })),
    listing_id: Type.Optional(Type.String({ format: "uuid" })),
    attempt: Type.Optional(Type.Integer({ minimum: 1 })),
    input,
  });
}

const TOOL_ERRORS: ErrorCode[] = [
  "SCHEMA_VALIDATION_FAILED",
  "PROVIDER_UNAVAILABLE",
  "PROVIDER_FAILED",
  "TIMEOUT",
];

/**
 * A hosted tool's provider endpoint. auth "platform": only the executions worker's signed call gets in,
 * so every use goes through execute, invoke, the x402 edge, the sandbox or MCP and their money path.
 */
function hostedToolRoute(
  id: ToolId,
  summary: string,
  input: TSchema,
  output: TSchema,
  run: (input: never) => Promise<unknown>,
): RouteDef {
  return defineRoute({
    method: "post",
    path: TOOLS[id].path,
    tag: "tools",
    summary,
    description:
      "The hosted tool's provider endpoint (docs/tools.md). It answers only the platform's own signed calls " +
      "(the executions worker); buyers call the tool through POST /api/execute with its task alias, " +
      "POST /api/invoke/{listing_id}, the x402 edge, the sandbox or MCP.",
    auth: "platform",
    body: callBody(input),
    responses: { 200: Type.Object({ success: Type.Literal(true), output }) },
    errors: TOOL_ERRORS,
    async handle(_ctx, { body }: { body: { input: never } }) {
      requireToolAvailable(id);
      return run(body.input);
    },
  });
}

export const toolRoutes = [
  echoCheckRoute,
  echoProviderRoute,
  hostedToolRoute(
    "document_parse",
    "Document parse (CSV, JSON, Markdown, HTML), local and bounded",
    ParseInput,
    ParseOutput,
    runParse,
  ),
  hostedToolRoute(
    "page_scrape",
    "Page scrape of a public http(s) page: markdown, html, links",
    ScrapeInput,
    ScrapeOutput,
    runScrape,
  ),
  hostedToolRoute("web_search", "Web search: up to 10 results", SearchInput, SearchOutput, runSearch),
  hostedToolRoute(
    "research_brief",
    "Research brief synthesized by a language model (no browsing)",
    ResearchInput,
    ResearchOutput,
    runResearch,
  ),
];
