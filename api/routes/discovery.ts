import { Type } from "@sinclair/typebox";
import { stringify } from "yaml";
import { buildOpenApi } from "../openapi.js";
import { defineRoute, Reply, type RouteDef } from "../route.js";

/** /openapi.json and /openapi.yaml, built once from every declared route (these two included). */
export function discoveryRoutes(allRoutes: () => RouteDef[]): RouteDef[] {
  let cached: { json: unknown; yaml: string } | undefined;
  const document = () => {
    if (!cached) {
      const json = buildOpenApi(allRoutes());
      cached = { json, yaml: stringify(json, { aliasDuplicateObjects: false }) };
    }
    return cached;
  };
  return [
    defineRoute({
      method: "get",
      path: "/openapi.json",
      tag: "discovery",
      summary: "OpenAPI 3.1 document (JSON)",
      auth: "none",
      responses: { 200: Type.Record(Type.String(), Type.Unknown()) },
      async handle() {
        return document().json;
      },
    }),
    defineRoute({
      method: "get",
      path: "/openapi.yaml",
      tag: "discovery",
      summary: "OpenAPI 3.1 document (YAML)",
      auth: "none",
      contentType: "application/yaml",
      responses: { 200: Type.String() },
      async handle() {
        return new Reply(200, document().yaml, {}, "application/yaml");
      },
    }),
  ];
}
