// Lists the structural scopes of a source file with the pinned tree-sitter grammars, named the
// way the plans name them (a stand-in for Waymark discovery, used only by simulate_plan.py):
// enclosing class / impl / function names joined by "." — JS `Calendar.addWindow`, top-level
// `function f` and `const f = () => {}` are `f`; Python `Board.is_legal_move`; Rust methods in
// `impl TokenBucket` are `TokenBucket.try_acquire`, free functions `refill_amount`.
//
//   node ts_scopes.mjs WAYMARK_DIR LANGUAGE FILE
//
// WAYMARK_DIR is a directory whose node_modules holds web-tree-sitter and the tree-sitter-*
// grammar packages (e.g. integrations/waymark). Prints a JSON array of
// {kind, name, start_byte, end_byte, start_line, end_line} (lines 1-based, end inclusive).
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [waymarkDir, language, file] = process.argv.slice(2);
if (!waymarkDir || !language || !file) {
  console.error('usage: node ts_scopes.mjs WAYMARK_DIR LANGUAGE FILE');
  process.exit(2);
}
const modules = join(waymarkDir, 'node_modules');
const grammars = {
  javascript: 'tree-sitter-javascript/tree-sitter-javascript.wasm',
  python: 'tree-sitter-python/tree-sitter-python.wasm',
  rust: 'tree-sitter-rust/tree-sitter-rust.wasm',
};
if (!grammars[language]) {
  console.error(`unsupported language ${language}`);
  process.exit(2);
}

const { Parser, Language } = await import(pathToFileURL(join(modules, 'web-tree-sitter/tree-sitter.js')).href);
await Parser.init();
const parser = new Parser();
parser.setLanguage(await Language.load(join(modules, grammars[language])));

const bytes = readFileSync(file);
const source = bytes.toString('utf8');
const tree = parser.parse(source);

// Byte offsets: web-tree-sitter indexes the JS string; convert through UTF-8 lengths.
const byteOffset = (index) => Buffer.byteLength(source.slice(0, index), 'utf8');

/** [kind, name] when the node opens a named scope, else null. */
function scopeOf(node) {
  const field = (name) => node.childForFieldName(name);
  switch (language) {
    case 'javascript':
      if (node.type === 'class_declaration' || node.type === 'class') {
        return field('name') ? ['class', field('name').text] : null;
      }
      if (node.type === 'function_declaration' || node.type === 'generator_function_declaration') {
        return ['function', field('name').text];
      }
      if (node.type === 'method_definition') return ['method', field('name').text];
      if (node.type === 'variable_declarator') {
        const value = field('value');
        const fn = value && ['arrow_function', 'function_expression', 'function'].includes(value.type);
        return fn && field('name').type === 'identifier' ? ['function', field('name').text] : null;
      }
      return null;
    case 'python':
      if (node.type === 'class_definition') return ['class', field('name').text];
      if (node.type === 'function_definition') return ['function', field('name').text];
      return null;
    case 'rust': {
      if (node.type === 'impl_item') {
        let type = field('type');
        while (type && type.type === 'generic_type') type = type.childForFieldName('type');
        return type ? ['impl', type.text] : null;
      }
      if (node.type === 'function_item') return ['function', field('name').text];
      if (['struct_item', 'enum_item', 'trait_item', 'mod_item'].includes(node.type)) {
        return [node.type.replace('_item', ''), field('name').text];
      }
      return null;
    }
    default:
      return null;
  }
}

const scopes = [];
function walk(node, prefix) {
  const scope = scopeOf(node);
  let inner = prefix;
  if (scope) {
    inner = [...prefix, scope[1]];
    scopes.push({
      kind: scope[0],
      name: inner.join('.'),
      start_byte: byteOffset(node.startIndex),
      end_byte: byteOffset(node.endIndex),
      start_line: node.startPosition.row + 1,
      end_line: node.endPosition.row + 1,
    });
  }
  for (const child of node.namedChildren) walk(child, inner);
}
walk(tree.rootNode, []);
if (tree.rootNode.hasError) {
  console.error(`${file}: parse errors`);
  process.exitCode = 1;
}
process.stdout.write(JSON.stringify(scopes) + '\n');
