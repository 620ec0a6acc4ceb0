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
  java: "tree-sitter-java/tree-sitter-java.wasm",
  c: "tree-sitter-c/tree-sitter-c.wasm",
  cpp: "tree-sitter-cpp/tree-sitter-cpp.wasm",
  csharp: "tree-sitter-c-sharp/tree-sitter-c_sharp.wasm",
  ruby: "tree-sitter-ruby/tree-sitter-ruby.wasm",
  // The full PHP grammar: a .php file is HTML text around `<?php … ?>` sections.
  php: "tree-sitter-php/tree-sitter-php.wasm",
});

/**
 * The languages a resident worker loads and warms up before it reports ready; the others load at
 * their first request. Thirteen grammars before readiness took 1.5-3 s on a loaded 2-core
 * machine against W6's 7 s readiness ceiling.
 */
export const FIRST_LANGUAGES = Object.freeze(["javascript", "jsx", "typescript", "tsx", "python", "rust", "go"]);

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
  java:
    "package m;\n\npublic class Limiter {\n  private int n;\n\n  @Override\n  public boolean allow() { return ++n > 0; }\n\n  static class Window { Window() {} }\n}\n",
  c: "#include <stddef.h>\n\nstruct limiter { int n; };\n\ntypedef struct { int a; } window;\n\nint limiter_allow(struct limiter *l) { return ++l->n > 0; }\n",
  cpp: "namespace rl {\ntemplate <typename T>\nclass Limiter {\n public:\n  bool allow() { return ++n > 0; }\n  int n = 0;\n};\nvoid reset(Limiter<int> &l) { l.n = 0; }\n}  // namespace rl\n",
  csharp:
    "namespace Rl\n{\n    [System.Serializable]\n    public class Limiter\n    {\n        private int _n;\n        public bool Allow() { return ++_n > 0; }\n    }\n}\n",
  ruby: "module Rl\n  class Limiter\n    def self.build = new\n\n    def allow\n      @n = (@n || 0) + 1\n    end\n  end\nend\n",
  php: "<?php\nnamespace Rl;\n\nclass Limiter\n{\n    private int $n = 0;\n\n    public function allow(): bool\n    {\n        return ++$this->n > 0;\n    }\n}\n",
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
 * returns {scopes, parse_ms, has_error, error_line} (`error_line`: the 1-based line of the first
 * syntax error, null when there is none); it throws DiscoveryError for a language not loaded or a
 * parse that yields no tree.
 */
export async function createEngine(languages = Object.keys(LANGUAGES)) {
  const loaded = new Map();
  const queries = new Map();
  const byGrammar = new Map(); // grammar -> its query (javascript and jsx share one)
  const load = async (more) => {
    // Grammars compile concurrently (V8 compiles wasm on background threads).
    const grammars = await Promise.all(more.map((language) => loadLanguage(language)));
    for (const [i, language] of more.entries()) {
      const grammar = grammars[i];
      loaded.set(language, grammar);
      const key = HANDLERS[language];
      let perGrammar = byGrammar.get(grammar);
      if (perGrammar === undefined) byGrammar.set(grammar, (perGrammar = new Map()));
      if (!perGrammar.has(key)) perGrammar.set(key, scopeQuery(grammar, key));
      queries.set(language, perGrammar.get(key));
    }
  };
  await load(languages);
  const parser = new Parser();
  const engine = {
    languages: [...loaded.keys()],
    /** Loads (and with `warmUp`, warms) more grammars into this engine. */
    async extend(more, { warmUp = true } = {}) {
      await load(more);
      engine.languages = [...loaded.keys()];
      if (warmUp) for (const language of more) engine.discover(language, WARMUP_SAMPLES[language]);
    },
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
        const has_error = tree.rootNode.hasError;
        const error_line = has_error ? firstErrorLine(tree.rootNode) : null;
        return { scopes, parse_ms: performance.now() - started, has_error, error_line };
      } finally {
        tree.delete();
      }
    },
  };
  return engine;
}

/**
 * The 1-based line of the first syntax error (an `ERROR` or `MISSING` node, in source order)
 * under `root`, which has one; scopes after it may be missing or misread.
 */
function firstErrorLine(root) {
  let node = root;
  for (let depth = 0; depth < 10000; depth++) {
    let next = null;
    for (const child of node.children) {
      if (child === null) continue;
      if (child.isError || child.isMissing) return child.startPosition.row + 1;
      if (child.hasError) {
        next = child;
        break;
      }
    }
    if (next === null) return node.startPosition.row + 1;
    node = next;
  }
  return node.startPosition.row + 1;
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

// Decorators, attributes and annotations belong to the scope they decorate, in every language.
// Most grammars make them children of the declaration; where a grammar makes them preceding
// siblings (Rust's `#[attr]` items; TypeScript's decorators of methods and of exported classes,
// tree-sitter-typescript #331 and #309), the scope starts at the first of them. Comments between
// them are inside; a comment above the first is not.
function leadingStart(node, isLeading) {
  let start = node;
  for (let s = node.previousNamedSibling; s !== null; s = s.previousNamedSibling) {
    if (isLeading(s)) start = s;
    else if (!s.type.endsWith("comment")) break;
  }
  return start;
}

const isDecorator = (n) => n.type === "decorator";

// JS/TS: a member's decorators are preceding siblings in TypeScript's grammar; an exported
// class's are children of the `export` statement, before the `export` keyword.
function withDecorators(handler) {
  return (node, enclosingKind) => {
    const found = handler(node, enclosingKind);
    if (found === null) return null;
    const range = found.range;
    const parent = range.parent;
    if (parent !== null && parent.type === "export_statement") {
      const first = parent.namedChildren.find((c) => c !== null && isDecorator(c));
      if (first !== undefined && first.startIndex < range.startIndex) return { ...found, from: first };
      return found;
    }
    const from = leadingStart(range, isDecorator);
    return from === range ? found : { ...found, from };
  };
}

const JS_HANDLERS = {
  function_declaration: named("function"),
  generator_function_declaration: named("function"),
  class_declaration: withDecorators(named("class")),
  abstract_class_declaration: withDecorators(named("class")),
  method_definition: withDecorators(named("method")),
  variable_declarator: jsDeclarator,
  field_definition: withDecorators(jsField),
  public_field_definition: withDecorators(jsField),
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

const isRustAttribute = (n) => n.type === "attribute_item";

// A Rust item's outer attributes (`#[derive(…)]`, `#[test]`, `#[cfg(…)]`) are its preceding
// `attribute_item` siblings in the grammar; the scope starts at the first.
function withAttributes(handler) {
  return (node, enclosingKind) => {
    const found = handler(node, enclosingKind);
    if (found === null) return null;
    const from = leadingStart(found.range, isRustAttribute);
    return from === found.range ? found : { ...found, from };
  };
}

const RUST_HANDLERS_BARE = {
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

const RUST_HANDLERS = Object.fromEntries(
  Object.entries(RUST_HANDLERS_BARE).map(([type, handler]) => [type, withAttributes(handler)]),
);

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

// ---------------------------------------------------------------------------------------------
// Java and C#: `Outer.Inner.method`. Annotations and attributes are children of the declaration
// (its modifiers / attribute lists), so a scope covers them as it is. A constructor is named by
// its class (`RangeSet.RangeSet`), a C# destructor by `~` and its class (`Py.GILState.~GILState`).
// Java's `package` and C#'s file-scoped `namespace N;` are not scopes (nothing is nested in them);
// a C# `namespace N { … }` block is (`N.C.M`).

const JAVA_HANDLERS_BARE = {
  class_declaration: named("class"),
  interface_declaration: named("interface"),
  annotation_type_declaration: named("interface"),
  enum_declaration: named("enum"),
  record_declaration: named("record"),
  method_declaration: named("method"),
  constructor_declaration: named("constructor"),
  compact_constructor_declaration: named("constructor"),
};

// A member of an anonymous class (`new Object() { public int hashCode() {…} }`) or of an enum
// constant's body is not a member of the class around it (java.util.EnumMap has its own
// `hashCode`): it is named through what holds it, the field or variable (`EnumMap.NULL.hashCode`),
// the enum constant (`IsoCountryCode.PART1_ALPHA2.createCountryCodeSet`) or a static initializer
// (`ResourceBundle.static.setParent`); in a method, the method already encloses it
// (`ArrayList.SubList.listIterator.hasNext`).
function javaHolders(node) {
  const holders = [];
  let anonymous = false;
  for (let p = node.parent; p !== null && JAVA_HANDLERS_BARE[p.type] === undefined; p = p.parent) {
    if (p.type === "class_body" && (p.parent?.type === "object_creation_expression" || p.parent?.type === "enum_constant")) {
      anonymous = true;
    } else if (anonymous && (p.type === "variable_declarator" || p.type === "enum_constant")) {
      const name = fieldText(p, "name");
      if (name !== null) holders.unshift(name);
    } else if (anonymous && p.type === "static_initializer") {
      holders.unshift("static");
    }
  }
  return holders;
}

const JAVA_HANDLERS = Object.fromEntries(
  Object.entries(JAVA_HANDLERS_BARE).map(([type, handler]) => [
    type,
    (node, enclosingKind) => {
      const found = handler(node, enclosingKind);
      if (found === null) return null;
      const holders = javaHolders(node);
      return holders.length === 0 ? found : { ...found, name: `${holders.join(".")}.${found.name}` };
    },
  ]),
);

// C#: an explicit interface implementation `IntPtr ILibDL.dlopen(…)` is named as written,
// `LinuxLibDL.ILibDL.dlopen` (a class can also have its own `dlopen`); an operator is
// `operator ==`, a conversion `operator int` (the target type: `implicit`/`explicit` cannot both
// convert to one type).
function csharpMethod(node) {
  const name = fieldText(node, "name");
  if (name === null) return null;
  const explicit = node.namedChildren.find((c) => c !== null && c.type === "explicit_interface_specifier");
  if (explicit === undefined) return { kind: "method", name, range: node };
  return { kind: "method", name: `${explicit.text.replace(/\s+/g, "")}${name}`, range: node };
}

function csharpOperator(node) {
  const target = node.type === "operator_declaration" ? node.childForFieldName("operator") : node.childForFieldName("type");
  return target === null ? null : { kind: "method", name: `operator ${target.text}`, range: node };
}

const CSHARP_HANDLERS = {
  namespace_declaration: named("namespace"),
  class_declaration: named("class"),
  struct_declaration: named("struct"),
  interface_declaration: named("interface"),
  enum_declaration: named("enum"),
  record_declaration: named("record"),
  record_struct_declaration: named("record"),
  method_declaration: csharpMethod,
  operator_declaration: csharpOperator,
  conversion_operator_declaration: csharpOperator,
  constructor_declaration: named("constructor"),
  // `~GILState() { … }` (a finalizer) is named as written, `Py.GILState.~GILState`.
  destructor_declaration: (node) => {
    const name = fieldText(node, "name");
    return name === null ? null : { kind: "destructor", name: `~${name}`, range: node };
  },
  local_function_statement: named("function"),
};

// ---------------------------------------------------------------------------------------------
// C and C++. A function definition is named by its declarator (through pointers, references and
// parentheses); a prototype (`int f(void);`, `void m();` in a class) declares and is no scope.
// C++ names are `ns::Class::method`; an out-of-line `R IntervalMap<K, V>::size() const` is the
// method `IntervalMap::size` (template arguments dropped) of its namespace. `template <…>` is
// inside the scope it introduces; so is `typedef` around a struct (`typedef struct {…} T;` is
// the struct `T`); C++ attributes (`[[nodiscard]]`) are children already.

const DECLARATOR_WRAPPERS = new Set([
  "function_declarator",
  "pointer_declarator",
  "reference_declarator",
  "parenthesized_declarator",
  "attributed_declarator",
]);

function declaratorName(node) {
  let d = node.childForFieldName("declarator");
  for (let i = 0; i < 16 && d !== null; i++) {
    if (!DECLARATOR_WRAPPERS.has(d.type)) break;
    d = d.childForFieldName("declarator") ?? d.namedChildren.find((c) => c !== null && c.type !== "type_qualifier") ?? null;
  }
  if (d === null) return null;
  // A conversion operator is named by its target type, `operator bool` (not `operator bool()
  // const`): its declarator holds its parameters and qualifiers.
  const castName = (n) => {
    const params = n.descendantsOfType("parameter_list")[0];
    const text = params === undefined ? n.text : n.text.slice(0, params.startIndex - n.startIndex);
    return text.replace(/\s+/g, " ").trim();
  };
  if (d.type === "operator_cast") return castName(d);
  let innermost = d;
  while (innermost.type === "qualified_identifier" && innermost.childForFieldName("name") !== null) {
    innermost = innermost.childForFieldName("name");
  }
  if (innermost.type === "operator_cast") {
    const scope = d.text.slice(0, innermost.startIndex - d.startIndex).replace(/\s+/g, "");
    let bare = scope;
    for (let k = 0; k < 8 && bare.includes("<"); k++) bare = bare.replace(/<[^<>]*>/g, "");
    return `${bare}${castName(innermost)}`;
  }
  if (d.type === "qualified_identifier") {
    // Drop template arguments from the qualifying part only (`operator<` keeps its `<`).
    const text = d.text.replace(/\s+/g, " ");
    const cut = text.lastIndexOf("::");
    let scope = text.slice(0, cut);
    for (let k = 0; k < 8 && scope.includes("<"); k++) scope = scope.replace(/<[^<>]*>/g, "");
    return `${scope.replace(/\s+/g, "")}::${text.slice(cut + 2)}`;
  }
  return d.text;
}

// The node a declaration's scope covers: itself, inside any `template <…>` wrappers.
function templated(node) {
  let range = node;
  while (range.parent !== null && range.parent.type === "template_declaration") range = range.parent;
  return range;
}

function cFunction(node, enclosingKind) {
  // C++ `S(const S &) = delete;` / `S() = default;` have no body: declarations, like prototypes.
  if (node.childForFieldName("body") === null) return null;
  const name = declaratorName(node);
  if (name === null) return null;
  const member = enclosingKind === "class" || enclosingKind === "struct" || name.includes("::");
  return { kind: member ? "method" : "function", name, range: templated(node) };
}

// `struct S {…}` / `union U {…}` / `enum E {…}` / C++ `class C {…}` with a body; inside a
// `typedef`, the typedef is the scope and an anonymous struct takes the typedef's name.
function cType(kind) {
  return (node) => {
    if (node.childForFieldName("body") === null) return null; // `struct S *p`: a use, no scope
    let name = fieldText(node, "name");
    let range = node;
    const parent = node.parent;
    if (parent !== null && parent.type === "type_definition" && parent.childForFieldName("type")?.id === node.id) {
      range = parent;
      name ??= fieldText(parent, "declarator");
    }
    if (name === null) return null;
    return { kind, name, range: templated(range) };
  };
}

const C_HANDLERS = {
  function_definition: cFunction,
  struct_specifier: cType("struct"),
  union_specifier: cType("struct"),
  enum_specifier: cType("enum"),
};

const CPP_HANDLERS = {
  ...C_HANDLERS,
  class_specifier: cType("class"),
  // `namespace {…}` (anonymous) is no scope; `namespace a::b {…}` is `a::b`.
  namespace_definition: (node) => {
    const name = fieldText(node, "name");
    return name === null ? null : { kind: "namespace", name, range: node };
  },
};

// ---------------------------------------------------------------------------------------------
// Ruby: `Module::Class#method` for instance methods, `Class.method` for singleton methods
// (`def self.m`, and a `def` inside `class << self`, which is no scope itself). A `def` outside
// any class or module is a function.

function rubyInSingletonClass(node) {
  for (let p = node.parent; p !== null; p = p.parent) {
    if (p.type === "singleton_class") return true;
    if (p.type === "class" || p.type === "module") return false;
  }
  return false;
}

// `class ::Digest::Class` inside `module Digest` names the top-level constant: the scope is
// `Digest::Class`, not nested under the module (`absolute`).
function rubyNamespace(kind) {
  return (node) => {
    const name = fieldText(node, "name");
    if (name === null) return null;
    if (name.startsWith("::")) return { kind, name: name.slice(2), range: node, absolute: true };
    return { kind, name, range: node };
  };
}

const RUBY_HANDLERS = {
  module: rubyNamespace("module"),
  class: rubyNamespace("class"),
  method: (node, enclosingKind) => {
    const name = fieldText(node, "name");
    if (name === null) return null;
    if (enclosingKind === null) return { kind: "function", name, range: node };
    return { kind: "method", name, range: node, singleton: rubyInSingletonClass(node) };
  },
  singleton_method: (node) => {
    const name = fieldText(node, "name");
    return name === null ? null : { kind: "method", name, range: node, singleton: true };
  },
};

// ---------------------------------------------------------------------------------------------
// PHP: `Class::method`; a `namespace N { … }` block is a scope (`N\Class::method`), the
// statement `namespace N;` is not (like Java's package). Attributes (`#[…]`) are children of
// the declaration.

const PHP_HANDLERS = {
  namespace_definition: (node) => {
    if (node.childForFieldName("body") === null) return null;
    const name = fieldText(node, "name");
    return name === null ? null : { kind: "namespace", name, range: node };
  },
  class_declaration: named("class"),
  interface_declaration: named("interface"),
  trait_declaration: named("trait"),
  enum_declaration: named("enum"),
  method_declaration: named("method"),
  function_definition: named("function"),
};

// How a scope's qualified name joins its enclosing scope's, per language (default ".").
const TYPE_KINDS = new Set(["class", "module", "struct", "interface", "enum", "trait", "namespace"]);
const JOINS = {
  cpp: () => "::",
  ruby: (enclosing, found) =>
    found.kind === "method" ? (found.singleton ? "." : "#") : enclosing.kind === "method" ? "." : "::",
  php: (enclosing) => (enclosing.kind === "namespace" ? "\\" : TYPE_KINDS.has(enclosing.kind) ? "::" : "."),
};

const HANDLERS = {
  javascript: JS_HANDLERS,
  jsx: JS_HANDLERS,
  typescript: JS_HANDLERS,
  tsx: JS_HANDLERS,
  python: PYTHON_HANDLERS,
  rust: RUST_HANDLERS,
  go: GO_HANDLERS,
  java: JAVA_HANDLERS,
  c: C_HANDLERS,
  cpp: CPP_HANDLERS,
  csharp: CSHARP_HANDLERS,
  ruby: RUBY_HANDLERS,
  php: PHP_HANDLERS,
};

// One query per grammar capturing every candidate scope node (@scope). The query runs inside the
// wasm module, which is much faster than visiting every node from JS; the handlers then decide.
// Only node types the grammar has are asked for (looked up by name: compiling a trial query per
// type cost 30-600 ms per grammar at startup).
function scopeQuery(grammar, handlers) {
  const has = (type) => (grammar.idForNodeType(type, true) ?? 0) !== 0;
  const patterns = [];
  for (const type of Object.keys(handlers)) {
    if (!has(type)) continue;
    if (type === "variable_declarator") {
      const values = [...FUNCTION_VALUES, ...CLASS_VALUES].filter(has);
      if (values.length > 0) {
        patterns.push(`(variable_declarator value: [${values.map((t) => `(${t})`).join(" ")}]) @scope`);
        continue;
      }
    }
    patterns.push(`(${type}) @scope`);
  }
  return new Query(grammar, patterns.join("\n"));
}

function collectScopes(language, query, tree, source) {
  const handlers = HANDLERS[language];
  const join = JOINS[language] ?? (() => ".");
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
    const qname =
      enclosing === null || found.absolute
        ? found.name
        : `${enclosing.qname}${join(enclosing, found)}${found.name}`;
    const r = found.range;
    const from = found.from ?? r; // leading decorators/attributes, when they are siblings
    const startRow = from.startPosition.row;
    const end = r.endPosition;
    const endRow = end.column === 0 && end.row > startRow ? end.row - 1 : end.row;
    scopes.push({
      kind: found.kind,
      name: qname,
      start_byte: toByte(from.startIndex),
      end_byte: toByte(r.endIndex),
      start_line: startRow + 1,
      end_line: endRow + 1,
    });
    stack.push({ end: r.endIndex, qname, kind: found.kind });
  }
  scopes.sort((a, b) => a.start_byte - b.start_byte || b.end_byte - a.end_byte);
  return scopes;
}
