import { describe, expect, it } from "vitest";
import { db } from "../../shared/db/knex.js";
import {
  ParseInput,
  ParseOutput,
  ResearchInput,
  ResearchOutput,
  ScrapeInput,
  ScrapeOutput,
  SearchInput,
  SearchOutput,
  TOOL_IDS,
  TOOLS,
} from "../../shared/tools/index.js";

// The seed migration holds a snapshot of the tools' schemas, prices and paths (a migration never imports
// application code): this fails when the two drift apart.

const plain = (schema: unknown) => JSON.parse(JSON.stringify(schema));
const SCHEMAS = {
  document_parse: [ParseInput, ParseOutput],
  page_scrape: [ScrapeInput, ScrapeOutput],
  web_search: [SearchInput, SearchOutput],
  research_brief: [ResearchInput, ResearchOutput],
} as const;

describe("the seeded tool listings", () => {
  it.each(TOOL_IDS)("%s matches the tool's schemas, price, path, slug and aliases", async (id) => {
    const row = await db()("listings").where({ tool_id: id }).first();
    expect(row).toBeDefined();
    expect(row.input_schema).toEqual(plain(SCHEMAS[id][0]));
    expect(row.output_schema).toEqual(plain(SCHEMAS[id][1]));
    expect(BigInt(row.price_micros)).toBe(TOOLS[id].priceMicros);
    expect(row.endpoint_url).toBe(TOOLS[id].path);
    expect(row.slug).toBe(TOOLS[id].slug);
    expect(row.tags).toEqual(expect.arrayContaining([...TOOLS[id].aliases]));
  });
});
