// The half of the dependency rule that dependency-cruiser cannot see (docs/architecture.md "The
// dependency rule", rule 5): api/ and workers/ never use a context's store, not even through a re-export
// in its index.ts. A context's index may re-export store functions for sibling contexts (the quotes a
// gateway writes, the evidence rows a settlement appends); routes and workers call the context's rules.
//
//   node scripts/check-store-reach.mjs [root]     (run by `npm run deps`)
//
// Reads each shared/<context>/index.ts for names re-exported from a store module (store.ts, store/…,
// <folder>/store.ts), then every import of api/ and workers/ from a context index, and fails with one line
// per offending name. Plain JavaScript with regular expressions: the sources are biome-formatted, so an
// export or import statement has one shape.
import fs from "node:fs";
import path from "node:path";

const root = path.resolve(process.argv[2] ?? ".");
const RULE = "api-and-workers-never-use-a-store";

/** name → store module, per context, from `export { a, b } from "./store/x.js"` lines of its index. */
function storeExports() {
  const byContext = new Map();
  const shared = path.join(root, "shared");
  for (const context of fs.readdirSync(shared)) {
    const index = path.join(shared, context, "index.ts");
    if (!fs.existsSync(index)) continue;
    const names = new Map();
    for (const m of fs
      .readFileSync(index, "utf8")
      .matchAll(/export\s+(?:type\s+)?\{([^}]*)\}\s+from\s+"([^"]+)"/g)) {
      if (!/(^|\/)store(\/|\.js$)/.test(m[2].replace(/^\.\//, ""))) continue;
      for (const name of m[1].split(",").map((s) => s.trim().replace(/^type\s+/, ""))) {
        if (name)
          names.set(
            name.split(/\s+as\s+/).pop(),
            `shared/${context}/${m[2].replace(/^\.\//, "").replace(/\.js$/, ".ts")}`,
          );
      }
    }
    byContext.set(context, names);
  }
  return byContext;
}

function sourceFiles(dir) {
  const full = path.join(root, dir);
  if (!fs.existsSync(full)) return [];
  return fs
    .readdirSync(full, { recursive: true })
    .filter((f) => f.endsWith(".ts"))
    .map((f) => path.join(dir, f));
}

const stores = storeExports();
const violations = [];
for (const file of [...sourceFiles("api"), ...sourceFiles("workers")]) {
  const text = fs.readFileSync(path.join(root, file), "utf8");
  for (const m of text.matchAll(/import\s+(?:type\s+)?\{([^}]*)\}\s+from\s+"([^"]+)"/g)) {
    const target = path.posix.normalize(
      path.posix.join(path.posix.dirname(file.split(path.sep).join("/")), m[2]),
    );
    const context = /^shared\/([^/]+)\/index\.js$/.exec(target)?.[1];
    const names = context && stores.get(context);
    if (!names) continue;
    for (const part of m[1].split(",")) {
      const name = part
        .trim()
        .replace(/^type\s+/, "")
        .split(/\s+as\s+/)[0];
      if (names.has(name))
        violations.push(
          `  error ${RULE}: ${file} → ${names.get(name)} (${name}, through shared/${context}/index.ts)`,
        );
    }
  }
}
if (violations.length > 0) {
  console.error(violations.join("\n"));
  console.error(
    `\nx ${violations.length} store reach(es): call the context's rules, not its store (docs/architecture.md)`,
  );
  process.exit(1);
}
console.log("✔ api/ and workers/ use no store through a context index");
