import { describe, expect, it } from "vitest";
import { llmsTxtProblems, skillProblems } from "../../shared/discovery/documents.js";
import { mcpServerJson, registryName } from "../../shared/discovery/mcp-server.js";
import { A2A_AGENT_CARD_SCHEMA } from "../../shared/discovery/standards/a2a-agent-card.js";
import { MCP_SERVER_JSON_SCHEMA } from "../../shared/discovery/standards/mcp-server-json.js";
import { createAjv } from "../../shared/kernel/json-schema.js";

// The standards' checks the discovery documents are held to (docs/discovery.md), each shown to refuse
// what its standard refuses, so a check that stopped checking would be noticed.

const ajv = createAjv();
const validServer = ajv.compile(MCP_SERVER_JSON_SCHEMA);
const validCard = ajv.compile(A2A_AGENT_CARD_SCHEMA);
const sources = { baseUrl: "https://market.example.com", routes: [], mcp: true };

describe("server.json (MCP registry, 2025-12-11)", () => {
  it("ours meets the schema: name pattern, description length, a streamable-http remote with the key header", () => {
    const doc = mcpServerJson(sources);
    expect(validServer(doc), JSON.stringify(validServer.errors)).toBe(true);
    expect(doc.name).toBe("com.example.market/agent-market");
    expect(doc.description.length).toBeLessThanOrEqual(100);
    expect(doc.remotes[0]).toMatchObject({ type: "streamable-http", url: "https://market.example.com/mcp" });
    expect(doc.remotes[0]!.headers[0]!.value).toBe("Bearer {api_key}");
  });

  it("the schema refuses what the registry refuses", () => {
    const doc = mcpServerJson(sources);
    for (const broken of [
      { ...doc, name: "no-slash" },
      { ...doc, name: "a/b c" },
      { ...doc, description: "x".repeat(101) },
      { ...doc, version: "latest" },
      { ...doc, version: "^1.0.0" },
      { ...doc, $schema: "https://example.com/other.json" },
      { ...doc, remotes: [{ type: "websocket", url: "https://x.example/mcp" }] },
    ]) {
      expect(validServer(broken), JSON.stringify(broken).slice(0, 80)).toBe(false);
    }
  });

  it("names from hosts: reverse DNS, IPs kept, ports dropped", () => {
    expect(registryName("http://localhost:3000")).toBe("localhost/agent-market");
    expect(registryName("http://127.0.0.1:8080")).toBe("127.0.0.1/agent-market");
    expect(registryName("https://api.agents.example.org")).toBe("org.example.agents.api/agent-market");
  });
});

describe("the A2A v1.0 card schema", () => {
  const card = {
    name: "n",
    description: "d",
    version: "1",
    supportedInterfaces: [{ url: "https://x.example", protocolBinding: "HTTP+JSON", protocolVersion: "1.0" }],
    capabilities: {},
    defaultInputModes: ["application/json"],
    defaultOutputModes: ["application/json"],
    skills: [{ id: "s", name: "S", description: "does s", tags: ["t"] }],
  };

  it("accepts a minimal card and refuses missing members, unknown bindings and v0.3 shapes", () => {
    expect(validCard(card)).toBe(true);
    const { skills: _s, ...noSkills } = card;
    expect(validCard(noSkills)).toBe(false);
    expect(
      validCard({
        ...card,
        supportedInterfaces: [{ url: "https://x.example", protocolBinding: "REST", protocolVersion: "1.0" }],
      }),
    ).toBe(false);
    expect(validCard({ ...card, supportedInterfaces: [] })).toBe(false);
    expect(validCard({ ...card, skills: [{ id: "s", name: "S", description: "d" }] })).toBe(false);
    expect(validCard({ ...card, securitySchemes: { k: { type: "http", scheme: "bearer" } } })).toBe(false);
  });
});

describe("text grammars", () => {
  it("llms.txt: an H1, a blockquote, then H2 sections of links with Optional last", () => {
    const good =
      "# Name\n\n> Summary.\n\nSome text.\n\n## Docs\n\n- [A](https://x.example/a): notes\n\n## Optional\n\n- [B](https://x.example/b)\n";
    expect(llmsTxtProblems(good)).toEqual([]);
    expect(llmsTxtProblems("Name\n\n> S\n")).toContain("line 1 is not an H1 title");
    expect(llmsTxtProblems("# Name\n\nno quote\n\n## D\n\n- [A](https://x.example)\n")).toContain(
      "the H1 is not followed by a blockquote summary",
    );
    expect(llmsTxtProblems("# N\n\n> S\n\n## D\n\nprose in a section\n").join()).toMatch(
      /only "- \[name\]\(url\)/,
    );
    expect(
      llmsTxtProblems(
        "# N\n\n> S\n\n## Optional\n\n- [A](https://x.example)\n\n## Later\n\n- [B](https://x.example)\n",
      ),
    ).toContain("Optional is not the last section");
  });

  it("skill.md: front matter name and description, and a runnable curl example", () => {
    const good =
      "---\nname: my-skill\ndescription: Does things.\n---\n\n# T\n\n```bash\ncurl -s https://x.example\n```\n";
    expect(skillProblems(good)).toEqual([]);
    expect(skillProblems("# no front matter")).toEqual(["no YAML front matter"]);
    expect(skillProblems(good.replace("my-skill", "My Skill")).join()).toMatch(/name must be/);
    expect(skillProblems(good.replace("Does things.", '""')).join()).toMatch(/description must be/);
    expect(skillProblems(good.replace("curl -s", "wget")).join()).toMatch(/no runnable curl/);
  });
});
