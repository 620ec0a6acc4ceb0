#!/usr/bin/env python3
"""Offline replay of a scripted-agent plan against the bundled fixtures (no server involved).

This is the fixture owner's own check that the plans do what they claim; the real run goes
through `patchdiff mcp` (observed profile) and a real MCP client.

    python3 assets/canary/simulate_plan.py                  # demo + wrong plans, byte checks
    python3 assets/canary/simulate_plan.py --run-checks     # ... and the behavioral checks
    python3 assets/canary/simulate_plan.py PLAN.jsonl       # one plan; prints per-target verdicts
    python3 assets/canary/simulate_plan.py --export DIR     # write DIR/<plan>/<target>/<module_file>
    python3 assets/canary/simulate_plan.py --tree-sitter integrations/waymark
                      # resolve scope names with the pinned tree-sitter grammars (ts_scopes.mjs)
                      # instead of the built-in locator, and report where the two disagree

Semantics modelled (plain strings, UTF-8 bytes):
- `${step.field}` substitution: a JSON string that is exactly `${step.field}` becomes that field's
  JSON value (type kept); inside a longer string it is replaced textually.
- Targets start at the fixture's original bytes, version 0, revision 0.
- observe_scope by qualified name locates the scope with a small per-language locator (Python:
  indentation; JavaScript and Rust: brace matching), or with `--tree-sitter` through the real
  grammars, and fails on an unknown or ambiguous name; by `lines` it takes the 1-based inclusive
  line range.
- submit (strict observation mode): every operation names a live observation of this target,
  whose scope has not been edited since it was observed; `old_text` must occur exactly once in
  the whole file (stricter than the server's "exactly once inside the scope", as an
  approximation) and that occurrence must lie inside the observed scope; operations of one
  submission must not overlap. Any failure rejects the whole submission and changes nothing.
  An accepted submission bumps the revision; observations whose scope it touched become stale.
- save: version += 1; the export is the latest *saved* content.
- `expect` is matched as a recursive subset of the structured result; `expect_error: true`
  requires an error result.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"

BENIGN_LEAD = re.compile(r"(?:export\s+)?(?:default\s+)?(?:(?:const|let|var)\s+)?")
PLACEHOLDER = re.compile(r"\$\{([A-Za-z0-9_.-]+?)\.([A-Za-z0-9_]+)\}")


class PlanError(Exception):
    """The plan itself is broken (bad step reference, failed expectation, ...)."""


class ToolError(Exception):
    """A domain failure: the tool call comes back with isError."""


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# -- scope locator --------------------------------------------------------------------------------


def _line_starts(text: str) -> list[int]:
    starts = [0]
    for i, ch in enumerate(text):
        if ch == "\n":
            starts.append(i + 1)
    return starts


def _python_scope(text: str, parts: list[str]) -> tuple[int, int] | None:
    lines = text.split("\n")
    offsets = _line_starts(text)
    lo, hi, parent_indent = 0, len(lines), -1
    found = None
    for part in parts:
        pat = re.compile(rf"^(\s*)(async\s+def|def|class)\s+{re.escape(part)}\b")
        found = None
        child_indent = None
        for i in range(lo, hi):
            if not lines[i].strip():
                continue
            indent = len(lines[i]) - len(lines[i].lstrip())
            if child_indent is None and indent > parent_indent:
                child_indent = indent
            m = pat.match(lines[i])
            if m and indent == child_indent:
                found = i
                break
        if found is None:
            return None
        indent = len(lines[found]) - len(lines[found].lstrip())
        end = found
        for j in range(found + 1, hi):
            if not lines[j].strip():
                continue
            if len(lines[j]) - len(lines[j].lstrip()) <= indent:
                break
            end = j
        lo, hi, parent_indent = found + 1, end + 1, indent
        start_byte = offsets[found] + indent
        end_byte = offsets[end] + len(lines[end])
    return (start_byte, end_byte) if found is not None else None


_RUST_CHAR = re.compile(r"'(\\.|[^\\'])'")


def _skip_template(text: str, i: int) -> int:
    """`text[i]` opens a JS template literal; returns the offset just past it."""
    j, n = i + 1, len(text)
    while j < n:
        if text[j] == "\\":
            j += 2
        elif text[j] == "`":
            return j + 1
        elif text.startswith("${", j):
            depth = 0
            for k, ch in _structural(text, j + 1, n, rust=False):
                if ch == "{":
                    depth += 1
                elif ch == "}":
                    depth -= 1
                    if depth == 0:
                        j = k + 1
                        break
            else:
                return n
        else:
            j += 1
    return n


def _structural(text: str, lo: int, hi: int, rust: bool):
    """Yields (offset, char) for ()[]{}; outside comments, string/char literals and JS template
    literals (regular-expression literals are not recognised; the fixtures keep them balanced)."""
    i = lo
    while i < hi:
        ch = text[i]
        if text.startswith("//", i):
            nl = text.find("\n", i)
            i = hi if nl < 0 else nl
        elif text.startswith("/*", i):
            close = text.find("*/", i + 2)
            i = hi if close < 0 else close + 2
        elif ch == '"' or (ch == "'" and not rust):
            j = i + 1
            while j < hi and text[j] != ch:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        elif ch == "'":
            m = _RUST_CHAR.match(text, i)
            i = m.end() if m else i + 1  # a char literal, or a lifetime
        elif ch == "`" and not rust:
            i = _skip_template(text, i)
        else:
            if ch in "()[]{};":
                yield i, ch
            i += 1


def _brace_end(text: str, start: int, rust: bool) -> int | None:
    """From a declaration at `start`, the offset just past its body's closing brace (or the `;`
    of a brace-less declaration such as `const f = (x) => x + 1;`)."""
    parens = braces = 0
    for i, ch in _structural(text, start, len(text), rust):
        if ch in "([":
            parens += 1
        elif ch in ")]":
            parens -= 1
        elif ch == "{":
            braces += 1
        elif ch == "}":
            braces -= 1
            if braces == 0 and parens == 0:
                return i + 1
        elif ch == ";" and braces == 0 and parens == 0:
            return i + 1
    return None


def _brace_scope(text: str, parts: list[str], language: str,
                 lo: int = 0, hi: int | None = None) -> tuple[int, int] | None:
    """Resolves parts[0] among the declarations directly inside [lo, hi), then the rest inside
    its body; tries every candidate (e.g. Rust `struct A` and `impl A`) until one resolves."""
    rust = language == "rust"
    hi = len(text) if hi is None else hi
    part, rest = parts[0], parts[1:]
    name = re.escape(part)
    vis = r"(?:pub(?:\([a-z]+\))?\s+)?"
    if rust:
        pats = [rf"{vis}(?:const\s+)?(?:async\s+)?(?:unsafe\s+)?fn\s+{name}\b",
                rf"impl(?:<[^>]*>)?\s+(?:[\w:]+(?:<[^>]*>)?\s+for\s+)?{name}\b", rf"{vis}(?:struct|enum|trait|mod)\s+{name}\b"]
    else:
        pats = [rf"(?:export\s+)?(?:default\s+)?class\s+{name}\b",
                rf"(?:export\s+)?(?:async\s+)?function\*?\s+{name}\s*\(",
                rf"(?:export\s+)?(?:const|let|var)\s+{name}\s*="]
        if lo > 0:  # inside a class body: methods and accessors
            pats.append(rf"(?:static\s+)?(?:async\s+)?(?:get\s+|set\s+)?\*?#?{name}\s*\(")
    regex = re.compile(rf"^[ \t]*(?:{'|'.join(pats)})", re.M)
    for m in regex.finditer(text, lo, hi):
        start = m.start() + (len(m.group(0)) - len(m.group(0).lstrip()))
        if _depth(text, lo, start, rust) != 0:
            continue  # nested deeper than a direct child
        end = _brace_end(text, start, rust)
        if end is None or end > hi:
            continue
        if not rest:
            return start, end
        body = -1
        for i, ch in _structural(text, start, end, rust):
            if ch == "{":
                body = i
                break
        if body >= 0:
            found = _brace_scope(text, rest, language, body + 1, end - 1)
            if found is not None:
                return found
    return None


def _depth(text: str, lo: int, hi: int, rust: bool) -> int:
    """Brace depth at `hi`, counted from `lo`."""
    depth = 0
    for _, ch in _structural(text, lo, hi, rust):
        depth += {"{": 1, "}": -1}.get(ch, 0)
    return depth


def locate_scope(text: str, name: str, language: str) -> tuple[int, int] | None:
    """Character span [start, end) of the scope with qualified name `name`, or None."""
    parts = name.split(".")
    if language == "python":
        return _python_scope(text, parts)
    return _brace_scope(text, parts, language)


# -- simulated server -----------------------------------------------------------------------------


class Target:
    def __init__(self, fx: dict) -> None:
        self.fx = fx
        self.content = (FIXTURES / fx["original"]).read_bytes().decode("utf-8")
        self.saved = self.content
        self.version = 0
        self.revision = 0


class Observation:
    def __init__(self, oid: str, target: str, start: int, end: int) -> None:
        self.oid, self.target, self.start, self.end = oid, target, start, end
        self.stale = False


def tree_sitter_scopes(waymark: Path, language: str, content: str) -> list[dict]:
    """Scopes from ts_scopes.mjs, with byte offsets converted to str indexes."""
    ext = {"javascript": ".js", "python": ".py", "rust": ".rs"}[language]
    with tempfile.TemporaryDirectory(prefix="pd-scopes-") as tmp:
        path = Path(tmp) / ("source" + ext)
        path.write_bytes(content.encode("utf-8"))
        proc = subprocess.run(["node", str(HERE / "ts_scopes.mjs"), str(waymark), language, str(path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if proc.returncode != 0:
        raise ToolError(f"tree-sitter discovery failed: {proc.stderr.strip()}")
    data = content.encode("utf-8")
    scopes = json.loads(proc.stdout)
    for scope in scopes:
        scope["start"] = len(data[:scope["start_byte"]].decode("utf-8"))
        scope["end"] = len(data[:scope["end_byte"]].decode("utf-8"))
    return scopes


class Simulator:
    def __init__(self, manifest: dict, waymark: Path | None = None, log=print) -> None:
        self.waymark = waymark
        self.log = log
        self.disagreements = 0
        self.targets = {fx["target"]: Target(fx) for fx in manifest["fixtures"]}
        self.observations: dict[str, Observation] = {}
        self.receipts: dict[str, tuple[str, dict]] = {}
        self.attempts = 0

    def target(self, args: dict) -> Target:
        name = args.get("target")
        if name not in self.targets:
            raise ToolError(f"unknown target {name!r}")
        return self.targets[name]

    def call(self, tool: str, args: dict) -> dict:
        handler = getattr(self, "tool_" + tool.removeprefix("patchdiff_"), None)
        if handler is None:
            raise ToolError(f"tool {tool!r} is not in the observed profile")
        return handler(args)

    def tool_read_target(self, args: dict) -> dict:
        t = self.target(args)
        return {"target": t.fx["target"], "version": t.version, "revision": t.revision,
                "sha256": sha256(t.content.encode()), "language": t.fx["language"], "content": t.content}

    def tool_find_occurrences(self, args: dict) -> dict:
        t = self.target(args)
        needle = args["text"]
        if not needle:
            raise ToolError("text must not be empty")
        occurrences, i = [], t.content.find(needle)
        while i >= 0:
            before = t.content[:i]
            line = before.count("\n") + 1
            col = len(before) - (before.rfind("\n") + 1)
            occurrences.append({
                "start_byte": len(before.encode()), "end_byte": len((before + needle).encode()),
                "line": line, "column": len(before[len(before) - col:].encode()) + 1, "scope": None,
            })
            i = t.content.find(needle, i + 1)
        return {"occurrences": occurrences}

    def tool_observe_scope(self, args: dict) -> dict:
        t = self.target(args)
        if "scope" in args:
            name = args["scope"]
            span = locate_scope(t.content, name, t.fx["language"])
            kind = "scope"
            if self.waymark is not None:
                found = [s for s in tree_sitter_scopes(self.waymark, t.fx["language"], t.content)
                         if s["name"] == name]
                if len(found) != 1:
                    raise ToolError(f"{t.fx['target']}: {len(found)} tree-sitter scopes named {name!r}")
                ts_span, kind = (found[0]["start"], found[0]["end"]), found[0]["kind"]
                # Benign: the built-in locator includes `export`/`const` keywords before the
                # declaration and the `;` after a brace-less arrow function.
                benign = span is not None and span[0] <= ts_span[0] and span[1] >= ts_span[1] and \
                    BENIGN_LEAD.fullmatch(t.content[span[0]:ts_span[0]]) is not None and \
                    t.content[ts_span[1]:span[1]] in ("", ";")
                if not benign:
                    self.disagreements += 1
                    self.log(f"  note: built-in locator {span} and tree-sitter {ts_span} disagree on {name}")
                span = ts_span
            if span is None:
                raise ToolError(f"{t.fx['target']}: no scope named {name!r}")
        elif "lines" in args:
            first, last = args["lines"]["start"], args["lines"]["end"]
            offsets = _line_starts(t.content)
            if not 1 <= first <= last <= len(offsets):
                raise ToolError(f"line range {first}-{last} out of range")
            end = offsets[last] - 1 if last < len(offsets) else len(t.content)
            span, kind, name = (offsets[first - 1], end), "lines", f"lines {first}-{last}"
        else:
            raise ToolError("observe_scope needs scope or lines")
        oid = f"obs-{len(self.observations) + 1}"
        self.observations[oid] = Observation(oid, t.fx["target"], *span)
        text = t.content[span[0]:span[1]]
        return {
            "observation_id": oid, "revision": t.revision,
            "scope": {"kind": kind, "name": name,
                      "start_byte": len(t.content[:span[0]].encode()),
                      "end_byte": len(t.content[:span[1]].encode()),
                      "start_line": t.content.count("\n", 0, span[0]) + 1,
                      "end_line": t.content.count("\n", 0, span[1]) + 1},
            "sha256": sha256(text.encode()), "text": text,
        }

    def tool_submit_observed_operations(self, args: dict) -> dict:
        t = self.target(args)
        key = args["request_key"]
        fingerprint = json.dumps(args, sort_keys=True)
        if key in self.receipts:
            previous, receipt = self.receipts[key]
            if previous != fingerprint:
                raise ToolError("REQUEST_KEY_CONFLICT")
            return receipt
        self.attempts += 1
        reasons, edits = [], []
        for n, op in enumerate(args["operations"]):
            obs = self.observations.get(op["observation_id"])
            old = op["old_text"]
            if obs is None or obs.target != t.fx["target"]:
                reasons.append(f"operation {n}: unknown observation {op['observation_id']!r}")
                continue
            if obs.stale:
                reasons.append(f"operation {n}: observation {obs.oid} is stale; observe again")
                continue
            count = t.content.count(old) if old else 0
            if count != 1:
                reasons.append(f"operation {n}: old_text occurs {count} times (must be exactly once)")
                continue
            at = t.content.find(old)
            if not (obs.start <= at and at + len(old) <= obs.end):
                reasons.append(f"operation {n}: old_text lies outside observed scope {obs.oid}")
                continue
            edits.append((at, at + len(old), op["new_text"], obs))
        edits.sort(key=lambda e: e[0])
        for a, b in zip(edits, edits[1:]):
            if a[1] > b[0]:
                reasons.append("operations overlap")
        if reasons:
            outcome = "rejected"
        else:
            outcome = "accepted"
            for start, end, new, _ in reversed(edits):
                t.content = t.content[:start] + new + t.content[end:]
                for obs in self.observations.values():
                    if obs.target != t.fx["target"] or obs.stale:
                        continue
                    if end <= obs.start:  # edit before the scope: shift it
                        delta = len(new) - (end - start)
                        obs.start, obs.end = obs.start + delta, obs.end + delta
                    elif start < obs.end or (start == end and start <= obs.end):
                        obs.stale = True  # the scope itself was edited
            t.revision += 1
        receipt = {"request_key": key, "attempt_id": f"att-{self.attempts}", "outcome": outcome,
                   "revision": t.revision, "sha256": sha256(t.content.encode()),
                   "corrections": [], "reasons": reasons}
        self.receipts[key] = (fingerprint, receipt)
        return receipt

    def tool_save(self, args: dict) -> dict:
        t = self.target(args)
        t.version += 1
        t.saved = t.content
        return {"target": t.fx["target"], "version": t.version, "revision": t.revision,
                "sha256": sha256(t.saved.encode())}


# -- plan replay ----------------------------------------------------------------------------------


def substitute(value, results: dict):
    if isinstance(value, dict):
        return {k: substitute(v, results) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, results) for v in value]
    if not isinstance(value, str):
        return value

    def lookup(step: str, field: str):
        if step not in results:
            raise PlanError(f"reference to unknown or later step {step!r}")
        if field not in results[step]:
            raise PlanError(f"step {step!r} has no result field {field!r}")
        return results[step][field]

    whole = PLACEHOLDER.fullmatch(value)
    if whole:
        return lookup(*whole.groups())

    def text(m):
        v = lookup(*m.groups())
        return v if isinstance(v, str) else json.dumps(v)

    return PLACEHOLDER.sub(text, value)


def is_subset(expect, actual) -> bool:
    if isinstance(expect, dict):
        return isinstance(actual, dict) and all(k in actual and is_subset(v, actual[k]) for k, v in expect.items())
    return expect == actual


def replay(plan_path: Path, manifest: dict, log=print, waymark: Path | None = None) -> Simulator:
    sim = Simulator(manifest, waymark, log)
    results: dict[str, dict] = {}
    for number, raw in enumerate(plan_path.read_text(encoding="utf-8").splitlines(), 1):
        if not raw.strip():
            continue
        call = json.loads(raw)
        step = call["step"]
        if step in results:
            raise PlanError(f"line {number}: duplicate step name {step!r}")
        args = substitute(call["args"], results)
        try:
            result, error = sim.call(call["tool"], args), None
        except ToolError as err:
            result, error = {"error": str(err)}, str(err)
        if error is None and result.get("outcome") == "rejected":
            # The server returns a rejected receipt as an isError result (M5).
            error = "; ".join(result.get("reasons", []))
        if call.get("expect_error"):
            if error is None:
                raise PlanError(f"line {number} ({step}): expected an error result, got {result}")
        elif error is not None:
            raise PlanError(f"line {number} ({step}): {call['tool']} failed: {error}")
        if "expect" in call and not is_subset(call["expect"], result):
            shown = {k: result.get(k) for k in [*call["expect"], "reasons"] if k in result}
            raise PlanError(f"line {number} ({step}): expected {call['expect']}, got {shown}")
        results[step] = result
        detail = result.get("outcome") or result.get("observation_id") or ""
        if result.get("reasons"):
            detail += f" ({'; '.join(result['reasons'])})"
        log(f"  {step:<20} {call['tool']:<38} {detail}")
    return sim


def differing_targets(sim: Simulator) -> list[str]:
    out = []
    for name, t in sim.targets.items():
        if t.saved.encode("utf-8") != (FIXTURES / t.fx["expected"]).read_bytes():
            out.append(name)
    return out


def export(sim: Simulator, dest: Path) -> None:
    for name, t in sim.targets.items():
        path = dest / name / t.fx["module_file"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(t.saved.encode("utf-8"))


def run_verify(dest: Path) -> dict[str, bool]:
    """Runs the real evaluator (`patchdiff evaluate`, PATCHDIFF env var or `patchdiff` on PATH)
    on an export; returns target -> behavioral check passed."""
    flat = dest / "_evaluate"
    flat.mkdir(exist_ok=True)
    for target_dir in dest.iterdir():
        if target_dir.is_dir() and target_dir != flat:
            for f in target_dir.iterdir():
                shutil.copyfile(f, flat / f.name)
    exe = os.environ.get("PATCHDIFF", "patchdiff")
    proc = subprocess.run([exe, "evaluate", "--manifest", str(FIXTURES / "manifest.json"),
                           "--exports", str(flat), "--json"],
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        evaluation = json.loads(proc.stdout)
    except json.JSONDecodeError:
        print(f"  evaluator failed: {proc.stderr.strip()}")
        return {}
    return {t["name"]: bool(t["behavioral"]) for t in evaluation["targets"]}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("plans", nargs="*", type=Path, help="plans to replay (default: demo and wrong)")
    ap.add_argument("--run-checks", action="store_true", help="also run each target's behavioral check")
    ap.add_argument("--export", type=Path, help="write saved contents to DIR/<plan>/<target>/<module_file>")
    ap.add_argument("--tree-sitter", dest="waymark", type=Path, metavar="WAYMARK_DIR",
                    help="resolve scope names with the tree-sitter grammars in WAYMARK_DIR/node_modules")
    opts = ap.parse_args(argv)
    manifest = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))

    default = not opts.plans
    # plan -> targets that must differ from expected (None: just report)
    plans = {HERE / "demo.plan.jsonl": [], HERE / "wrong.plan.jsonl": ["chess"]} if default \
        else {p: None for p in opts.plans}
    ok = True
    for plan, want in plans.items():
        print(f"{plan.name}:")
        try:
            sim = replay(plan, manifest, waymark=opts.waymark)
        except PlanError as err:
            print(f"  PLAN ERROR: {err}")
            ok = False
            continue
        if sim.disagreements:
            print(f"  FAIL: {sim.disagreements} scope(s) located differently by tree-sitter")
            ok = False
        differ = differing_targets(sim)
        for name in sim.targets:
            print(f"  {name:<12} {'differs from expected' if name in differ else 'matches expected bytes'}")
        if want is not None and differ != want:
            print(f"  FAIL: expected {want or 'no target'} to differ, got {differ or 'none'}")
            ok = False
        with tempfile.TemporaryDirectory(prefix="pd-sim-") as tmp:
            dest = (opts.export / plan.name.split(".")[0]) if opts.export else Path(tmp)
            export(sim, dest)
            if opts.run_checks:
                verdicts = run_verify(dest)
                for name in sim.targets:
                    passed = verdicts.get(name)
                    print(f"  {name:<12} behavioral check {'passes' if passed else 'FAILS'}")
                failing = [n for n in sim.targets if not verdicts.get(n)]
                if want is not None and failing != want:
                    print(f"  FAIL: expected behavioral failures {want or 'none'}, got {failing or 'none'}")
                    ok = False
    print("simulate: all good" if ok else "simulate: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
