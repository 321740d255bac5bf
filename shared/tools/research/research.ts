import { getConfig } from "../../config.js";
import { AppError } from "../../errors.js";
import { createAjv } from "../../kernel/json-schema.js";
import { callProviderJson, providerFailure } from "../provider-http.js";
import { BRIEF_BOUNDS, BRIEF_SCHEMA, type ResearchInputT, type ResearchOutputT } from "./schemas.js";

// The research brief: one OpenAI-compatible chat completion (OpenAI, Ollama, vLLM, LiteLLM…) asked for a
// JSON brief, validated against the same schema. json_schema (strict) where the backend supports it,
// json_object plus the schema in the prompt where it does not. Truncated, refused, invalid or off-schema
// answers are failures (not billable); invalid JSON is retried once within the deadline.

export const BROWSING_NOTE =
  "Synthesized from the model's own knowledge; the web was not browsed and no sources were fetched. " +
  "Verify time-sensitive facts.";

const SYSTEM_PROMPT = [
  "You are a careful research analyst. Write a concise research brief answering the user's question.",
  "You cannot browse the web: use only what you already know, say where knowledge may be dated or uncertain,",
  "and list only source URLs you are confident exist (an empty list is fine).",
  "Answer with one JSON object and nothing else.",
].join(" ");

const checkBrief = createAjv().compile({
  ...BRIEF_SCHEMA,
  properties: {
    ...BRIEF_SCHEMA.properties,
    executive_summary: BRIEF_BOUNDS.executive_summary,
    analysis: BRIEF_BOUNDS.analysis,
    key_findings: { ...BRIEF_SCHEMA.properties.key_findings, ...BRIEF_BOUNDS.key_findings },
    caveats: { ...BRIEF_SCHEMA.properties.caveats, ...BRIEF_BOUNDS.caveats },
    next_steps: { ...BRIEF_SCHEMA.properties.next_steps, ...BRIEF_BOUNDS.next_steps },
  },
});

function userPrompt(input: ResearchInputT): string {
  const parts = [`Question: ${input.query}`];
  if (input.context) parts.push(`Context from the requester:\n${input.context}`);
  if (input.focus_areas?.length)
    parts.push(`Focus areas:\n${input.focus_areas.map((f, i) => `${i + 1}. ${f}`).join("\n")}`);
  return parts.join("\n\n");
}

function requestBody(input: ResearchInputT) {
  const config = getConfig();
  const jsonSchema = config.researchStructuredOutput === "json_schema";
  const system = jsonSchema
    ? SYSTEM_PROMPT
    : `${SYSTEM_PROMPT} The object must match this JSON Schema exactly:\n${JSON.stringify(BRIEF_SCHEMA)}`;
  return {
    model: config.researchModel,
    messages: [
      { role: "system", content: system },
      { role: "user", content: userPrompt(input) },
    ],
    response_format: jsonSchema
      ? { type: "json_schema", json_schema: { name: "research_brief", strict: true, schema: BRIEF_SCHEMA } }
      : { type: "json_object" },
    [config.researchTokenParam]: config.researchMaxTokens,
    temperature: 0.2,
    stream: false,
  };
}

type Attempt =
  | { ok: true; brief: Omit<ResearchOutputT, "method"> }
  | { ok: false; retry: boolean; why: string };

/** One completion → a brief, or why not (retry only for content that is not valid JSON). */
function readCompletion(json: unknown): Attempt {
  const choice = (json as { choices?: unknown[] })?.choices?.[0] as
    | { message?: { content?: unknown; refusal?: unknown }; finish_reason?: unknown }
    | undefined;
  if (!choice?.message) return { ok: false, retry: false, why: "answered without choices[0].message" };
  if (choice.message.refusal) return { ok: false, retry: false, why: "the model refused" };
  if (choice.finish_reason === "length")
    return { ok: false, retry: false, why: "the answer hit the token bound" };
  if (typeof choice.message.content !== "string")
    return { ok: false, retry: false, why: "no message content" };
  let parsed: unknown;
  try {
    parsed = JSON.parse(choice.message.content.replace(/^\s*```(?:json)?\s*|\s*```\s*$/g, ""));
  } catch {
    return { ok: false, retry: true, why: "the answer is not valid JSON" };
  }
  if (!checkBrief(parsed))
    return { ok: false, retry: true, why: "the answer does not match the brief schema" };
  return { ok: true, brief: parsed as Omit<ResearchOutputT, "method"> };
}

/** The research-brief tool (RESEARCH_BASE_URL, RESEARCH_MODEL): bounded tokens and time, validated. */
export async function researchBrief(
  input: ResearchInputT,
): Promise<{ success: true; output: ResearchOutputT }> {
  const config = getConfig();
  const deadline = Date.now() + config.researchTimeoutMs;
  const body = requestBody(input);
  let last = "no answer";
  for (let attempt = 1; attempt <= 2; attempt++) {
    const left = deadline - Date.now();
    if (left < 500) break;
    const { json } = await callProviderJson(
      "research model",
      `${config.researchBaseUrl}/v1/chat/completions`,
      {
        method: "POST",
        headers: config.researchApiKey ? { authorization: `Bearer ${config.researchApiKey}` } : {},
        body,
        timeoutMs: left,
      },
    );
    const result = readCompletion(json);
    if (result.ok) {
      return {
        success: true,
        output: {
          executive_summary: result.brief.executive_summary,
          key_findings: result.brief.key_findings,
          analysis: result.brief.analysis,
          caveats: result.brief.caveats,
          next_steps: result.brief.next_steps,
          method: {
            synthesized_from: "model_knowledge",
            browsed_web: false,
            note: BROWSING_NOTE,
            model: config.researchModel ?? "",
            structured_output: config.researchStructuredOutput,
          },
        },
      };
    }
    last = result.why;
    if (!result.retry) break;
  }
  if (Date.now() >= deadline)
    throw new AppError("TIMEOUT", "research model: no valid brief in time", { reason: "provider_timeout" });
  throw providerFailure("research model", last);
}
