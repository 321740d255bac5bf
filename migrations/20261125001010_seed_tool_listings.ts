// Data: the four first-party tools of the spec's "Tool services" (document parse, page scrape, web search,
// research brief), listed like any service: platform-hosted (seller_id null, so a capture credits
// platform revenue), priced per call in micro-USDC, with input and output schemas and their task aliases
// as tags. Each endpoint is a path on our own API that the executions worker calls, signed, like any
// seller (docs/tools.md). tool_id binds a listing to its tool: one whose provider is not configured is
// hidden and refused (fail closed). The schemas are a snapshot of shared/tools' TypeBox schemas;
// test/tools/listings.test.ts fails when they drift apart.
import type { Knex } from "knex";

const TOOLS = [
  {
    tool_id: "document_parse",
    slug: "document-parse",
    name: "Document parse",
    description:
      "Parses CSV (typed rows), JSON (validated echo and shape stats), Markdown (blocks and a table of contents) and HTML (text, title, links). Local, deterministic, bounded; no network.",
    category: "data",
    endpoint_url: "/api/tools/parse",
    price_micros: 20000,
    tags: ["parse", "document-parse", "document_parse", "csv", "json", "markdown", "html"],
    safe_to_retry: false,
    max_latency_ms: 10000,
    rate_limit: 6000,
    concurrency_limit: 16,
    input_schema: {
      additionalProperties: false,
      oneOf: [
        {
          required: ["content"],
        },
        {
          required: ["content_base64"],
        },
      ],
      type: "object",
      required: ["format"],
      properties: {
        format: {
          description: "csv, json, markdown or html",
          anyOf: [
            {
              const: "csv",
              type: "string",
            },
            {
              const: "json",
              type: "string",
            },
            {
              const: "markdown",
              type: "string",
            },
            {
              const: "html",
              type: "string",
            },
          ],
        },
        content: {
          maxLength: 1048576,
          not: {
            pattern: "^\\uFEFF?%PDF-",
          },
          description: "the document, up to 1 MB of UTF-8 text (not PDF or Office)",
          type: "string",
        },
        content_base64: {
          maxLength: 1398104,
          pattern: "^(?!\\s*(?:JVBERi|UEsDB|0M8R4KGxGuE|77u/JVBERi))[A-Za-z0-9+/=\\s_-]*$",
          description: "the document as base64 of UTF-8 bytes, up to 1 MB decoded",
          type: "string",
        },
        delimiter: {
          default: ",",
          description: "CSV only: , ; tab or |",
          anyOf: [
            {
              const: ",",
              type: "string",
            },
            {
              const: ";",
              type: "string",
            },
            {
              const: "\t",
              type: "string",
            },
            {
              const: "|",
              type: "string",
            },
          ],
        },
        has_header: {
          default: true,
          description: "CSV only: the first row names the columns",
          type: "boolean",
        },
      },
    },
    output_schema: {
      additionalProperties: true,
      type: "object",
      required: ["format", "truncated", "input_bytes"],
      properties: {
        format: {
          anyOf: [
            {
              const: "csv",
              type: "string",
            },
            {
              const: "json",
              type: "string",
            },
            {
              const: "markdown",
              type: "string",
            },
            {
              const: "html",
              type: "string",
            },
          ],
        },
        truncated: {
          description: "true when any part of the output was cut at its bound",
          type: "boolean",
        },
        input_bytes: {
          minimum: 0,
          type: "integer",
        },
      },
    },
  },
  {
    tool_id: "page_scrape",
    slug: "page-scrape",
    name: "Page scrape",
    description:
      "Fetches one public http(s) page and returns its main content as Markdown, HTML and links, each bounded by max_length. Loopback, private and internal hosts are refused.",
    category: "web",
    endpoint_url: "/api/tools/scrape",
    price_micros: 20000,
    tags: ["scrape", "page-scrape", "page_scrape", "web-page", "markdown"],
    safe_to_retry: true,
    max_latency_ms: 30000,
    rate_limit: 6000,
    concurrency_limit: 16,
    input_schema: {
      additionalProperties: false,
      type: "object",
      required: ["url"],
      properties: {
        url: {
          minLength: 8,
          maxLength: 2048,
          pattern: "^[Hh][Tt][Tt][Pp][Ss]?://",
          description: "a public http(s) URL; loopback, private and internal hosts are refused",
          type: "string",
        },
        formats: {
          minItems: 1,
          maxItems: 3,
          uniqueItems: true,
          default: ["markdown"],
          type: "array",
          items: {
            anyOf: [
              {
                const: "markdown",
                type: "string",
              },
              {
                const: "html",
                type: "string",
              },
              {
                const: "links",
                type: "string",
              },
            ],
          },
        },
        only_main_content: {
          default: true,
          type: "boolean",
        },
        max_length: {
          minimum: 1000,
          maximum: 100000,
          default: 50000,
          description: "characters per format",
          type: "integer",
        },
      },
    },
    output_schema: {
      additionalProperties: true,
      type: "object",
      required: ["url", "final_url", "title", "truncated", "main_content_found", "provider"],
      properties: {
        url: {
          type: "string",
        },
        final_url: {
          type: "string",
        },
        title: {
          anyOf: [
            {
              type: "string",
            },
            {
              type: "null",
            },
          ],
        },
        markdown: {
          type: "string",
        },
        html: {
          type: "string",
        },
        links: {
          type: "array",
          items: {
            type: "string",
          },
        },
        truncated: {
          type: "boolean",
        },
        main_content_found: {
          type: "boolean",
        },
        provider: {
          type: "string",
        },
      },
    },
  },
  {
    tool_id: "web_search",
    slug: "web-search",
    name: "Web search",
    description: "Searches the web and returns up to 10 results, each with title, URL and a bounded snippet.",
    category: "web",
    endpoint_url: "/api/tools/search",
    price_micros: 10000,
    tags: ["search", "web-search", "web_search"],
    safe_to_retry: true,
    max_latency_ms: 15000,
    rate_limit: 6000,
    concurrency_limit: 32,
    input_schema: {
      additionalProperties: false,
      type: "object",
      required: ["query"],
      properties: {
        query: {
          minLength: 1,
          maxLength: 400,
          type: "string",
        },
        max_results: {
          minimum: 1,
          maximum: 10,
          default: 5,
          type: "integer",
        },
      },
    },
    output_schema: {
      additionalProperties: true,
      type: "object",
      required: ["query", "provider", "results"],
      properties: {
        query: {
          type: "string",
        },
        provider: {
          type: "string",
        },
        results: {
          maxItems: 10,
          type: "array",
          items: {
            type: "object",
            required: ["title", "url", "snippet", "published_at"],
            properties: {
              title: {
                type: "string",
              },
              url: {
                type: "string",
              },
              snippet: {
                maxLength: 500,
                type: "string",
              },
              published_at: {
                anyOf: [
                  {
                    type: "string",
                  },
                  {
                    type: "null",
                  },
                ],
              },
            },
          },
        },
      },
    },
  },
  {
    tool_id: "research_brief",
    slug: "research-brief",
    name: "Research brief",
    description:
      "A structured research brief (executive summary, key findings, analysis, caveats, next steps) synthesized by a language model from its own knowledge; it does not browse the web.",
    category: "research",
    endpoint_url: "/api/tools/research",
    price_micros: 500000,
    tags: ["research", "research-brief", "research_brief", "brief"],
    safe_to_retry: false,
    max_latency_ms: 30000,
    rate_limit: 6000,
    concurrency_limit: 8,
    input_schema: {
      additionalProperties: false,
      type: "object",
      required: ["query"],
      properties: {
        query: {
          minLength: 10,
          maxLength: 2000,
          type: "string",
        },
        context: {
          maxLength: 2000,
          type: "string",
        },
        focus_areas: {
          maxItems: 5,
          type: "array",
          items: {
            minLength: 1,
            maxLength: 200,
            type: "string",
          },
        },
      },
    },
    output_schema: {
      additionalProperties: true,
      type: "object",
      required: ["executive_summary", "key_findings", "analysis", "caveats", "next_steps", "method"],
      properties: {
        executive_summary: {
          type: "string",
        },
        key_findings: {
          type: "array",
          items: {
            type: "object",
            required: ["finding", "source_urls"],
            properties: {
              finding: {
                type: "string",
              },
              source_urls: {
                type: "array",
                items: {
                  type: "string",
                },
              },
            },
          },
        },
        analysis: {
          type: "string",
        },
        caveats: {
          type: "array",
          items: {
            type: "string",
          },
        },
        next_steps: {
          type: "array",
          items: {
            type: "string",
          },
        },
        method: {
          type: "object",
          required: ["synthesized_from", "browsed_web", "note", "model", "structured_output"],
          properties: {
            synthesized_from: {
              const: "model_knowledge",
              type: "string",
            },
            browsed_web: {
              const: false,
              type: "boolean",
            },
            note: {
              type: "string",
            },
            model: {
              type: "string",
            },
            structured_output: {
              type: "string",
            },
          },
        },
      },
    },
  },
];

export async function up(knex: Knex): Promise<void> {
  for (const tool of TOOLS) {
    await knex("listings").insert({
      ...tool,
      input_schema: JSON.stringify(tool.input_schema),
      output_schema: JSON.stringify(tool.output_schema),
      pricing_model: "per_call",
      public_supply_origin: "first_party_service",
      platform_hosted: true,
      tumbler_enabled: true,
    });
  }
}

export async function down(knex: Knex): Promise<void> {
  await knex("listings")
    .whereIn(
      "tool_id",
      TOOLS.map((t) => t.tool_id),
    )
    .delete();
}
