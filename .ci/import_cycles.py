#!/usr/bin/env python3
# Import cycles among the files of one module tree: python3 .ci/import_cycles.py src/canary
# Edges: every `crate::<tree>::X`, `super::X` and `self::X` path outside #[cfg(test)] (doc
# links included, so a link that would be a cycle is named too); `mod` lines are not edges.
# Module-level import graph of src/canary: an edge A -> B for every `crate::canary::B`,
# `super::B` (resolved against A's parent) or `self::B` path in A's source (tests excluded).
import os, re, sys
root = sys.argv[1] if len(sys.argv) > 1 else 'src/canary'
top = os.path.relpath(root, 'src').replace('/', '::')
mods = {}
for d, _, fs in os.walk(root):
    for f in fs:
        if not f.endswith('.rs'): continue
        p = os.path.join(d, f)
        rel = os.path.relpath(p, 'src')[:-3].split('/')
        if rel[-1] == 'mod': rel = rel[:-1]
        mods['::'.join(rel)] = p
def resolve(cur, parts):
    # cur: module path list; parts: path segments after the first keyword
    return parts
edges = {m: set() for m in mods}
for m, p in mods.items():
    src = open(p).read()
    src = src.split('#[cfg(test)]')[0]
    cur = m.split('::')
    is_dir = p.endswith('mod.rs')
    here = cur if is_dir else cur  # module path of this file
    for mt in re.finditer(r'\b(crate::' + re.escape(top) + r'|super(?:::super)*|self)::((?:[a-z_]+::)*)(\{[^}]*\}|[A-Za-z_]+)', src):
        head, mid, last = mt.group(1), mt.group(2), mt.group(3)
        if head == 'crate::' + top: base = top.split('::')
        elif head == 'self': base = list(here)
        else:
            n = head.count('super')
            base = list(here)[:-n] if n <= len(here) else []
        segs = [s for s in mid.split('::') if s]
        cands = []
        if last.startswith('{'):
            for item in re.split(r'[,\s]+', last.strip('{}')):
                item = item.split('::')[0]
                if item: cands.append(segs + [item])
        else:
            cands.append(segs + [last])
        for c in cands:
            # longest prefix naming a module
            best = None
            for k in range(len(c), 0, -1):
                name = '::'.join(base + c[:k])
                if name in mods: best = name; break
            if best is None and '::'.join(base) in mods: best = '::'.join(base)
            if best and best != m:
                edges[m].add(best)
    # Bare paths into this module's own children (`steps::init::…` in the parent).
    kids = re.findall(r'^\s*(?:pub(?:\([a-z]+\))? )?mod ([a-z_]+);', src, flags=re.M)
    for kid in kids:
        if re.search(r'(?<![:\w])' + kid + r'::', src):
            name = '::'.join(here + [kid])
            if name in mods:
                edges[m].add(name)
# a parent module declaring children (`pub mod x;`) is not an import edge: drop edges parent->descendant from `mod` lines only? We count only use/paths above.
sys.setrecursionlimit(10000)
color = {}
cycles = []
def dfs(u, stack):
    color[u] = 1; stack.append(u)
    for v in sorted(edges[u]):
        if color.get(v) == 1:
            cycles.append(stack[stack.index(v):] + [v])
        elif color.get(v) is None:
            dfs(v, stack)
    stack.pop(); color[u] = 2
for m in sorted(mods):
    if m not in color: dfs(m, [])
for m in sorted(edges):
    print(f"{m:40} -> {', '.join(sorted(edges[m]))}")
print('CYCLES:', len(cycles))
for c in cycles[:20]: print('  ' + ' -> '.join(c))
