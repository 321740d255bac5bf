import { describe, expect, it } from "vitest";
import { MCP_TOOLS } from "../../api/mcp/tools.js";
import { operationsRoutes } from "../../api/routes/operations.js";
import { pageRoutes } from "../../api/routes/pages.js";

// Operator and page routes are for operators and people: none of them is an MCP tool an agent could call.

describe("operator and page routes", () => {
  it("are not exposed as MCP tools", () => {
    const toolPaths = new Set(MCP_TOOLS.map((t) => t.path));
    for (const route of [...operationsRoutes, ...pageRoutes])
      expect(toolPaths.has(route.path), route.path).toBe(false);
    for (const tool of MCP_TOOLS) expect(tool.path).not.toMatch(/^\/(api\/)?admin\b|^\/metrics$/);
  });

  it("declare HTML or text, or are admin-only JSON", () => {
    for (const route of [...operationsRoutes, ...pageRoutes]) {
      const json = route.contentType === undefined;
      if (json) expect(route.auth, route.path).toBe("admin");
    }
  });
});
