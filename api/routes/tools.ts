import type { Static } from "@sinclair/typebox";
import {
  buildEcho,
  ECHO_DEFAULT_MESSAGE,
  EchoQuery,
  EchoResult,
  ProviderCallBody,
} from "../../shared/tools/index.js";
import { defineRoute } from "../route.js";

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

export const toolRoutes = [echoCheckRoute, echoProviderRoute];
