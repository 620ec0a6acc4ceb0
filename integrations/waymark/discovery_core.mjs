// Waymark discovery core (SPEC W1, W2): structural scopes of one source text.
//
// Both the resident worker (waymark_worker.mjs) and the one-shot runner (waymark_oneshot.mjs)
// call this module, so both modes use the same pinned engine (web-tree-sitter 0.25.10 and the
// grammar packages pinned in package-lock.json). Only module/grammar initialization is cached;
// nothing about documents, symbols or results is kept between calls (W2).
//
// A scope is {kind, name, start_byte, end_byte, start_line, end_line}:
//   - kind: class | function | method | interface | enum | struct | impl | trait | module
//   - name: the qualified name, enclosing scope names joined with "." (`Calendar.addWindow`)
//   - start_byte/end_byte: UTF-8 byte offsets into the source, end exclusive. tree-sitter reports
//     UTF-16 indices of the JS string; they are converted here.
//   - start_line/end_line: 1-based, inclusive. A node that ends at column 0 of a line (after a
//     trailing newline) ends on the line before.
// Scopes are sorted by start_byte, then larger (enclosing) first.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { performance } from "node:perf_hooks";
import { Language, Parser, Query } from "web-tree-sitter";

const require = createRequire(import.meta.url);

/**
 * The languages this core discovers, with their grammar wasm files. `jsx` is JavaScript's grammar
 * (it parses JSX); `tsx` is the TSX grammar tree-sitter-typescript ships beside TypeScript's.
 */
export const LANGUAGES = Object.freeze({
  javascript: "tree-sitter-javascript/tree-sitter-javascript.wasm",
  jsx: "tree-sitter-javascript/tree-sitter-javascript.wasm",
  typescript: "tree-sitter-typescript/tree-sitter-typescript.wasm",
  tsx: "tree-sitter-typescript/tree-sitter-tsx.wasm",
  python: "tree-sitter-python/tree-sitter-python.wasm",
  rust: "tree-sitter-rust/tree-sitter-rust.wasm",
  go: "tree-sitter-go/tree-sitter-go.wasm",
});

/** A small sample per language, parsed once at startup to warm up the JIT (FACTS: 9-24 ms). */
const WARMUP_SAMPLES = Object.freeze({
  javascript:
    "class Calendar {\n  addWindow(w) { return this.w.push(w); }\n}\nfunction parseLine(l) { return l.split(','); }\nconst f = (x) => { return x * 2; };\n",
  typescript:
    "interface Window { start: number }\nenum Color { Red }\nclass Calendar {\n  addWindow(w: Window): void { this.w.push(w); }\n}\nexport function parseLine(l: string): string[] { return l.split(','); }\n",
  python:
    "class RateLimiter:\n    @property\n    def allow(self):\n        return True\n\ndef parse_line(line):\n    return line.split(',')\n",
  jsx: "function App({ items }) {\n  return <ul>{items.map((i) => <li key={i}>{i}</li>)}</ul>;\n}\nconst Row = () => <tr />;\n",
  tsx: "interface Props { n: number }\nexport function App({ n }: Props): JSX.Element {\n  return <div>{n}</div>;\n}\nconst Row = (p: Props) => <tr />;\n",
  go: "package m\n\ntype Limiter struct{ n int }\n\nfunc (l *Limiter) Allow() bool { l.n++; return true }\n\ntype Limit interface{ Limit() int }\n\nfunc ParseLine(l string) []string { return nil }\n",
  rust:
    "struct RateLimiter { n: u32 }\nimpl RateLimiter {\n    fn allow(&mut self) -> bool { self.n += 1; true }\n}\ntrait T { fn t(&self); }\nenum E { A }\nmod m { fn inner() {} }\nfn parse_line(l: &str) -> Vec<&str> { l.split(',').collect() }\n",
});

let parserInit = null;
const languageCache = new Map(); // wasm path -> Promise<Language> (grammar initialization only)

function loadLanguage(language) {
  const rel = LANGUAGES[language];
  if (rel === undefined) {
    throw new DiscoveryError("unsupported_language", `unsupported language: ${language}`);
  }
  let pending = languageCache.get(rel);
  if (pending === undefined) {
    parserInit ??= Parser.init();
    pending = parserInit.then(() => Language.load(readFileSync(require.resolve(rel))));
    languageCache.set(rel, pending);
  }
  return pending;
}

/** A discovery failure with a protocol error code (`parse_failed`, `unsupported_language`). */
export class DiscoveryError extends Error {
  constructor(code, message) {
    super(message);
    this.code = code;
  }
}

/**
 * Loads the grammars of `languages` (default: all) and parses a warm-up sample with each.
 * Returns {warmup_ms, languages}. Call before reporting ready.
 */
export async function initEngine(languages = Object.keys(LANGUAGES), { warmUp = true } = {}) {
  const started = performance.now();
  const engine = await createEngine(languages);
  if (warmUp) {
    for (const language of languages) {
      engine.discover(language, WARMUP_SAMPLES[language]);
    }
  }
  return { engine, warmup_ms: performance.now() - started, languages: [...languages] };
}

/**
 * Creates an engine over the loaded grammars of `languages`. `engine.discover(language, source)`
 * returns {scopes, parse_ms, has_error}; it throws DiscoveryError for a language not loaded or a
 * parse that yields no tree.
 */
export async function createEngine(languages = Object.keys(LANGUAGES)) {
  const loaded = new Map();
  const queries = new Map();
  for (const language of languages) {
    const grammar = await loadLanguage(language);
    loaded.set(language, grammar);
    queries.set(language, scopeQuery(grammar, HANDLERS[language]));
  }
  const parser = new Parser();
  return {
    languages: [...loaded.keys()],
    discover(language, source) {
      const grammar = loaded.get(language);
      if (grammar === undefined) {
        throw new DiscoveryError("unsupported_language", `language not loaded: ${language}`);
      }
      const started = performance.now();
      parser.setLanguage(grammar);
      parser.reset();
      const tree = parser.parse(source);
      if (tree === null) {
        throw new DiscoveryError("parse_failed", "the parser returned no tree");
      }
      try {
        const scopes = collectScopes(language, queries.get(language), tree, source);
        return { scopes, parse_ms: performance.now() - started, has_error: tree.rootNode.hasError };
      } finally {
        tree.delete();
      }
    },
  };
}

/** How many distinct names an unmatched name query lists (for the agent's advice). */
export const NAMES_LISTED = 40;

/**
 * Answers the question a request asks, so the result stays small whatever the file (a
 * generated file can have tens of thousands of scopes):
 *   - absent/null: every scope;
 *   - {name}: the scopes with that qualified name, and when there is none, the first
 *     NAMES_LISTED distinct names (`names`) for the agent's advice;
 *   - {covering: [[start, end], ...]}: for each UTF-8 byte range, the innermost scope
 *     containing it (each scope once, in scope order);
 *   - {summary: true}: no scopes (validation: does it parse, and how cleanly).
 * Returns {scopes, names?}; callers add `scope_count` (all scopes) and `has_error`.
 */
export function selectScopes(scopes, query) {
  if (query === undefined || query === null) return { scopes };
  if (query.summary === true) return { scopes: [] };
  if (typeof query.name === "string") {
    const matches = scopes.filter((s) => s.name === query.name);
    if (matches.length > 0) return { scopes: matches };
    const names = [];
    const seen = new Set();
    for (const s of scopes) {
      if (names.length >= NAMES_LISTED) break;
      if (!seen.has(s.name)) {
        seen.add(s.name);
        names.push(s.name);
      }
    }
    return { scopes: [], names };
  }
  if (Array.isArray(query.covering)) {
    const picked = new Set();
    for (const [start, end] of query.covering) {
      let best = -1;
      for (let i = 0; i < scopes.length; i++) {
        const s = scopes[i];
        if (s.start_byte > start) break; // sorted by start: no later scope contains it
        if (end <= s.end_byte) {
          const better = best < 0 || s.end_byte - s.start_byte <= scopes[best].end_byte - scopes[best].start_byte;
          if (better) best = i;
        }
      }
      if (best >= 0) picked.add(best);
    }
    return { scopes: [...picked].sort((a, b) => a - b).map((i) => scopes[i]) };
  }
  throw new DiscoveryError("invalid_query", `unknown discovery query ${JSON.stringify(query)}`);
}

/** Convenience: discover scopes with a lazily created engine for all languages. */
let sharedEngine = null;
export async function discoverScopes(language, source) {
  sharedEngine ??= createEngine();
  const engine = await sharedEngine;
  return engine.discover(language, source).scopes;
}

// ---------------------------------------------------------------------------------------------
// Offsets: UTF-16 code units (JS string indices) -> UTF-8 bytes.

function makeOffsetMapper(source) {
  if (Buffer.byteLength(source, "utf8") === source.length) {
    return (index) => index; // pure ASCII: identical
  }
  const n = source.length;
  const map = new Uint32Array(n + 1);
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    map[i] = bytes;
    const c = source.charCodeAt(i);
    if (c < 0x80) {
      bytes += 1;
    } else if (c < 0x800) {
      bytes += 2;
    } else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n) {
      const d = source.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        // A surrogate pair is 4 UTF-8 bytes; an index between the halves maps to the pair end.
        bytes += 4;
        map[i + 1] = bytes;
        i += 1;
        continue;
      }
      bytes += 3; // lone surrogate: encoded as U+FFFD (3 bytes)
    } else {
      bytes += 3;
    }
  }
  map[n] = bytes;
  return (index) => map[index];
}

// ---------------------------------------------------------------------------------------------
// Scope collection.

const FUNCTION_VALUES = new Set([
  "arrow_function",
  "function_expression",
  "function",
  "generator_function",
  "generator_function_expression",
]);
const CLASS_VALUES = new Set(["class", "class_expression"]);

function fieldText(node, field) {
  const child = node.childForFieldName(field);
  return child === null ? null : child.text;
}

// JS/TS: `const f = () => {}` / `let g = function () {}` / `const C = class {}`.
function jsDeclarator(node) {
  const nameNode = node.childForFieldName("name");
  const value = node.childForFieldName("value");
  if (nameNode === null || value === null || nameNode.type !== "identifier") return null;
  let kind;
  if (FUNCTION_VALUES.has(value.type)) kind = "function";
  else if (CLASS_VALUES.has(value.type)) kind = "class";
  else return null;
  // A declaration with a single declarator covers `const ... ;` as a whole.
  let range = node;
  const parent = node.parent;
  if (
    parent !== null &&
    (parent.type === "lexical_declaration" || parent.type === "variable_declaration") &&
    parent.namedChildren.filter((c) => c !== null && c.type === "variable_declarator").length === 1
  ) {
    range = parent;
  }
  return { kind, name: nameNode.text, range };
}

// JS `field_definition` (property) / TS `public_field_definition` (name) holding a function.
function jsField(node) {
  const value = node.childForFieldName("value");
  if (value === null || !FUNCTION_VALUES.has(value.type)) return null;
  const name = fieldText(node, "property") ?? fieldText(node, "name");
  if (name === null) return null;
  return { kind: "method", name, range: node };
}

function named(kind) {
  return (node) => {
    const name = fieldText(node, "name");
    return name === null ? null : { kind, name, range: node };
  };
}

const JS_HANDLERS = {
  function_declaration: named("function"),
  generator_function_declaration: named("function"),
  class_declaration: named("class"),
  abstract_class_declaration: named("class"),
  method_definition: named("method"),
  variable_declarator: jsDeclarator,
  field_definition: jsField,
  public_field_definition: jsField,
  interface_declaration: named("interface"),
  enum_declaration: named("enum"),
  internal_module: named("module"),
};

function pythonDefinition(node, enclosingKind) {
  const name = fieldText(node, "name");
  if (name === null) return null;
  if (node.type === "class_definition") return { kind: "class", name, range: node };
  return { kind: enclosingKind === "class" ? "method" : "function", name, range: node };
}

const PYTHON_HANDLERS = {
  class_definition: (node, enclosingKind) =>
    node.parent?.type === "decorated_definition" ? null : pythonDefinition(node, enclosingKind),
  function_definition: (node, enclosingKind) =>
    node.parent?.type === "decorated_definition" ? null : pythonDefinition(node, enclosingKind),
  // A decorated definition covers its decorators; kind and name come from the definition.
  decorated_definition: (node, enclosingKind) => {
    const def = node.childForFieldName("definition");
    if (def === null) return null;
    const scope = pythonDefinition(def, enclosingKind);
    return scope === null ? null : { ...scope, range: node };
  },
};

// `impl<T> fmt::Display for Vec<T>` -> `Vec`: the implemented type's name without generics.
function rustTypeName(typeNode) {
  let node = typeNode;
  for (let i = 0; i < 8 && node !== null; i++) {
    switch (node.type) {
      case "generic_type":
        node = node.childForFieldName("type");
        continue;
      case "reference_type":
      case "pointer_type":
        node = node.childForFieldName("type");
        continue;
      case "scoped_type_identifier":
        node = node.childForFieldName("name");
        continue;
      default:
        return node.text;
    }
  }
  return typeNode.text;
}

const RUST_HANDLERS = {
  function_item: (node, enclosingKind) => {
    const name = fieldText(node, "name");
    if (name === null) return null;
    const kind = enclosingKind === "impl" || enclosingKind === "trait" ? "method" : "function";
    return { kind, name, range: node };
  },
  function_signature_item: (node, enclosingKind) => {
    const name = fieldText(node, "name");
    if (name === null) return null;
    const kind = enclosingKind === "impl" || enclosingKind === "trait" ? "method" : "function";
    return { kind, name, range: node };
  },
  struct_item: named("struct"),
  union_item: named("struct"),
  enum_item: named("enum"),
  trait_item: named("trait"),
  impl_item: (node) => {
    const type = node.childForFieldName("type");
    return type === null ? null : { kind: "impl", name: rustTypeName(type), range: node };
  },
  mod_item: (node) => {
    if (node.childForFieldName("body") === null) return null; // `mod foo;` has no scope here
    return named("module")(node);
  },
};

// Go: `func (c *Calendar) Add()` is the method `Calendar.Add` (the receiver's type, without
// pointer or type parameters); `type T struct {…}` / `type I interface {…}` are struct/interface.
function goReceiverType(node) {
  const receiver = node.childForFieldName("receiver");
  const param = receiver?.namedChildren.find((c) => c !== null && c.type === "parameter_declaration");
  let type = param?.childForFieldName("type") ?? null;
  for (let i = 0; i < 4 && type !== null; i++) {
    if (type.type === "pointer_type") type = type.namedChildren[0] ?? null;
    else if (type.type === "generic_type") type = type.childForFieldName("type");
    else return type.text;
  }
  return null;
}

const GO_TYPE_KINDS = { struct_type: "struct", interface_type: "interface" };

const GO_HANDLERS = {
  function_declaration: named("function"),
  method_declaration: (node) => {
    const name = fieldText(node, "name");
    if (name === null) return null;
    const receiver = goReceiverType(node);
    return { kind: "method", name: receiver === null ? name : `${receiver}.${name}`, range: node };
  },
  type_spec: (node) => {
    const name = fieldText(node, "name");
    const kind = GO_TYPE_KINDS[node.childForFieldName("type")?.type];
    if (name === null || kind === undefined) return null;
    // `type T struct {…}` covers its `type` keyword; a grouped `type ( … )` covers the spec.
    const parent = node.parent;
    const single =
      parent !== null &&
      parent.type === "type_declaration" &&
      parent.namedChildren.filter((c) => c !== null && c.type === "type_spec").length === 1;
    return { kind, name, range: single ? parent : node };
  },
};

const HANDLERS = {
  javascript: JS_HANDLERS,
  jsx: JS_HANDLERS,
  typescript: JS_HANDLERS,
  tsx: JS_HANDLERS,
  python: PYTHON_HANDLERS,
  rust: RUST_HANDLERS,
  go: GO_HANDLERS,
};

// One query per grammar capturing every candidate scope node (@scope). The query runs inside the
// wasm module, which is much faster than visiting every node from JS; the handlers then decide.
function scopeQuery(grammar, handlers) {
  const patterns = [];
  for (const type of Object.keys(handlers)) {
    const pattern =
      type === "variable_declarator"
        ? `(variable_declarator value: [${[...FUNCTION_VALUES, ...CLASS_VALUES].map((t) => `(${t})`).join(" ")}]) @scope`
        : `(${type}) @scope`;
    for (const candidate of [pattern, `(${type}) @scope`]) {
      try {
        new Query(grammar, candidate).delete(); // only node types this grammar has
        patterns.push(candidate);
        break;
      } catch {
        // not a node type (or value alternative) of this grammar
      }
    }
  }
  return new Query(grammar, patterns.join("\n"));
}

function collectScopes(language, query, tree, source) {
  const handlers = HANDLERS[language];
  const toByte = makeOffsetMapper(source);
  const nodes = query.captures(tree.rootNode).map((c) => c.node);
  // Outer before inner: by start, then by larger end.
  nodes.sort((a, b) => a.startIndex - b.startIndex || b.endIndex - a.endIndex);
  const scopes = [];
  const stack = []; // open enclosing scopes: {end, qname, kind} (UTF-16 indices)
  for (const node of nodes) {
    const handler = handlers[node.type];
    if (handler === undefined) continue;
    while (stack.length > 0 && stack[stack.length - 1].end <= node.startIndex) stack.pop();
    const enclosing = stack.length > 0 ? stack[stack.length - 1] : null;
    const found = handler(node, enclosing === null ? null : enclosing.kind);
    if (found === null) continue;
    const qname = enclosing === null ? found.name : `${enclosing.qname}.${found.name}`;
    const r = found.range;
    const startRow = r.startPosition.row;
    const end = r.endPosition;
    const endRow = end.column === 0 && end.row > startRow ? end.row - 1 : end.row;
    scopes.push({
      kind: found.kind,
      name: qname,
      start_byte: toByte(r.startIndex),
      end_byte: toByte(r.endIndex),
      start_line: startRow + 1,
      end_line: endRow + 1,
    });
    stack.push({ end: r.endIndex, qname, kind: found.kind });
  }
  scopes.sort((a, b) => a.start_byte - b.start_byte || b.end_byte - a.end_byte);
  return scopes;
}
