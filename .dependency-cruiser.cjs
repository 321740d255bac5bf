// The dependency rule (docs/architecture.md), checked by `npm run deps` inside `npm test`.
//
// shared/ holds one folder per bounded context plus infrastructure. A context may import the
// infrastructure and the contexts listed for it below (a DAG: each list names only contexts below it),
// and reaches another context only through that context's index.ts. api/, workers/, bench/ and scripts/
// reach a context only through its index.ts too, never its store or inner modules. Tests may reach inside.

/** Each context and the contexts it may depend on. Keep in step with docs/architecture.md. */
const CONTEXTS = {
  audit: [],
  outbox: [],
  system: [],
  tools: [],
  identity: ["audit"],
  money: ["audit", "outbox"],
  catalog: ["audit", "outbox", "identity", "money", "tools"],
  routing: ["audit", "outbox", "identity", "money", "catalog", "tools"],
  x402: ["audit", "outbox", "identity", "money", "catalog", "routing", "tools"],
  sandbox: ["audit", "outbox", "identity", "money", "catalog", "routing", "x402", "tools"],
  discovery: ["audit", "outbox", "identity", "money", "catalog", "routing", "x402", "tools"],
  verification: ["outbox", "identity", "money", "catalog", "routing"],
  operations: ["audit", "outbox", "system", "tools", "money", "catalog", "routing", "x402"],
};
const NAMES = Object.keys(CONTEXTS);
const ANY_CONTEXT = `^shared/(${NAMES.join("|")})/`;
const INFRASTRUCTURE =
  "^shared/(config|errors|log|queues|queue-names|redis|lifecycle)\\.ts$|^shared/(db|net|chain|infra|kernel|observability)/";

const contextRules = NAMES.map((name) => {
  const forbidden = NAMES.filter((other) => other !== name && !CONTEXTS[name].includes(other));
  return {
    name: `${name}-depends-only-on-${CONTEXTS[name].join("-") || "infrastructure"}`,
    comment: `shared/${name} may import only the infrastructure${CONTEXTS[name].length ? ` and ${CONTEXTS[name].join(", ")}` : ""} (docs/architecture.md)`,
    severity: "error",
    from: { path: `^shared/${name}/` },
    to: { path: forbidden.length ? `^shared/(${forbidden.join("|")})/` : "^$" },
  };
});

module.exports = {
  forbidden: [
    {
      name: "no-circular",
      comment: "a cycle between modules hides an unclear boundary; break it",
      severity: "error",
      from: {},
      to: { circular: true },
    },
    ...contextRules,
    {
      name: "infrastructure-imports-no-context",
      comment: "infrastructure (config, errors, db, net, chain, kernel…) knows no bounded context",
      severity: "error",
      from: { path: INFRASTRUCTURE },
      to: { path: ANY_CONTEXT },
    },
    {
      name: "outside-code-uses-a-context-index",
      comment:
        "api/, workers/, bench/ and scripts/ reach a context only through its index.ts, never its store or inner modules",
      severity: "error",
      from: { path: "^(api|workers|bench|scripts)/" },
      to: { path: ANY_CONTEXT, pathNot: `${ANY_CONTEXT}index\\.ts$` },
    },
    {
      name: "contexts-use-each-others-index",
      comment: "a context reaches another context only through that context's index.ts",
      severity: "error",
      from: { path: "^shared/([^/]+)/" },
      to: { path: ANY_CONTEXT, pathNot: ["^shared/$1/", `${ANY_CONTEXT}index\\.ts$`] },
    },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    exclude: { path: "^(node_modules|dist)/" },
    tsPreCompilationDeps: true,
    moduleSystems: ["es6"],
  },
};
