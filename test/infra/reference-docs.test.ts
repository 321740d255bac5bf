import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { configurationReference, openApiReference, sdkTypesReference } from "../../scripts/reference-docs.js";
import { CONCURRENCY_SETTINGS, SETTINGS } from "../../shared/config.js";

// The committed reference documents are exactly what the code generates (`npm run docs` rewrites
// them). For docs/openapi.json this is also the proof that a refactor changed no route, schema or
// status: the document stays byte-identical.
const committed = (name: string) => readFileSync(new URL(`../../docs/${name}`, import.meta.url), "utf8");

describe("reference documents generated from code", () => {
  it("docs/configuration.md lists every environment variable the service reads, as generated", () => {
    const text = committed("configuration.md");
    const names = [...Object.values(SETTINGS), ...Object.values(CONCURRENCY_SETTINGS)].map((s) => s.name);
    expect(names.filter((name) => !text.includes(`\`${name}\``))).toEqual([]);
    expect(text, "docs/configuration.md is stale: run npm run docs").toBe(configurationReference());
  });

  it("docs/openapi.json is byte-identical to the document the routes generate", () => {
    expect(
      committed("openapi.json") === openApiReference(),
      "docs/openapi.json is stale: run npm run docs",
    ).toBe(true);
  });

  it("the Node SDK's types are generated from that document (openapi-typescript), as committed", async () => {
    const text = readFileSync(new URL("../../sdk/node/src/openapi.ts", import.meta.url), "utf8");
    expect(text === (await sdkTypesReference()), "sdk/node/src/openapi.ts is stale: run npm run docs").toBe(
      true,
    );
  });
});
