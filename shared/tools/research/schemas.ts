import { type Static, Type } from "@sinclair/typebox";

/** Research brief input (spec "Tool services"). */
export const ResearchInput = Type.Object(
  {
    query: Type.String({ minLength: 10, maxLength: 2000 }),
    context: Type.Optional(Type.String({ maxLength: 2000 })),
    focus_areas: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 5 })),
  },
  { additionalProperties: false },
);
export type ResearchInputT = Static<typeof ResearchInput>;

/**
 * The brief the model must answer with. Strict structured output wants every property required and
 * additionalProperties false at every level, and few other keywords: lengths are enforced after parsing.
 */
export const BRIEF_SCHEMA = {
  type: "object",
  additionalProperties: false,
  required: ["executive_summary", "key_findings", "analysis", "caveats", "next_steps"],
  properties: {
    executive_summary: { type: "string" },
    key_findings: {
      type: "array",
      items: {
        type: "object",
        additionalProperties: false,
        required: ["finding", "source_urls"],
        properties: {
          finding: { type: "string" },
          source_urls: { type: "array", items: { type: "string" } },
        },
      },
    },
    analysis: { type: "string" },
    caveats: { type: "array", items: { type: "string" } },
    next_steps: { type: "array", items: { type: "string" } },
  },
} as const;

/** Bounds checked after the model answers (beyond the shape). */
export const BRIEF_BOUNDS = {
  executive_summary: { type: "string", minLength: 1, maxLength: 4000 },
  key_findings: { type: "array", minItems: 1, maxItems: 12 },
  analysis: { type: "string", minLength: 1, maxLength: 12000 },
  caveats: { type: "array", maxItems: 12 },
  next_steps: { type: "array", maxItems: 12 },
} as const;

export const ResearchOutput = Type.Object(
  {
    executive_summary: Type.String(),
    key_findings: Type.Array(Type.Object({ finding: Type.String(), source_urls: Type.Array(Type.String()) })),
    analysis: Type.String(),
    caveats: Type.Array(Type.String()),
    next_steps: Type.Array(Type.String()),
    method: Type.Object({
      synthesized_from: Type.Literal("model_knowledge"),
      browsed_web: Type.Literal(false),
      note: Type.String(),
      model: Type.String(),
      structured_output: Type.String(),
    }),
  },
  { additionalProperties: true },
);
export type ResearchOutputT = Static<typeof ResearchOutput>;
