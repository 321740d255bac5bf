// A strict parser of the Prometheus text exposition format (0.0.4): every line must be a HELP, a TYPE,
// or a sample whose metric has a TYPE; anything else fails the calling test.

export interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

export interface Exposition {
  types: Map<string, string>;
  help: Map<string, string>;
  samples: Sample[];
}

const NAME = "[a-zA-Z_:][a-zA-Z0-9_:]*";
const SAMPLE = new RegExp(`^(${NAME})(?:\\{(.*)\\})? (\\S+)(?: (-?\\d+))?$`);
const LABEL = /([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"(,|$)/y;

function parseLabels(text: string, line: string): Record<string, string> {
  const labels: Record<string, string> = {};
  LABEL.lastIndex = 0;
  while (LABEL.lastIndex < text.length) {
    const m = LABEL.exec(text);
    if (!m) throw new Error(`bad labels in: ${line}`);
    if (m[1]! in labels) throw new Error(`duplicate label ${m[1]} in: ${line}`);
    labels[m[1]!] = m[2]!.replace(/\\n/g, "\n").replace(/\\(["\\])/g, "$1");
  }
  return labels;
}

/** The family a sample belongs to: its name, or the histogram/summary it is a part of. */
function familyOf(name: string, types: Map<string, string>): string | undefined {
  if (types.has(name)) return name;
  for (const suffix of ["_bucket", "_sum", "_count"]) {
    if (name.endsWith(suffix)) {
      const base = name.slice(0, -suffix.length);
      if (types.get(base) === "histogram" || types.get(base) === "summary") return base;
    }
  }
  return undefined;
}

export function parseExposition(text: string): Exposition {
  const types = new Map<string, string>();
  const help = new Map<string, string>();
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "") continue;
    let m = /^# HELP (\S+) (.*)$/.exec(line);
    if (m) {
      help.set(m[1]!, m[2]!);
      continue;
    }
    m = /^# TYPE (\S+) (counter|gauge|histogram|summary|untyped)$/.exec(line);
    if (m) {
      if (types.has(m[1]!)) throw new Error(`second TYPE for ${m[1]}`);
      types.set(m[1]!, m[2]!);
      continue;
    }
    if (line.startsWith("#")) throw new Error(`unknown comment line: ${line}`);
    m = SAMPLE.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    // Go's ParseFloat (Prometheus's own parser) takes NaN and Inf in any case.
    const raw = m[3]!.toLowerCase();
    const value = raw === "+inf" ? Infinity : raw === "-inf" ? -Infinity : raw === "nan" ? NaN : Number(raw);
    if (Number.isNaN(value) && raw !== "nan") throw new Error(`bad value in: ${line}`);
    if (!familyOf(m[1]!, types)) throw new Error(`sample before its TYPE: ${line}`);
    samples.push({ name: m[1]!, labels: m[2] ? parseLabels(m[2], line) : {}, value });
  }
  return { types, help, samples };
}
