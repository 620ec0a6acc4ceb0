#!/usr/bin/env python3
"""Generates the scripted-agent plans (SPEC C4) from the bundled fixtures.

    python3 assets/canary/build_plans.py          # (re)write demo.plan.jsonl and wrong.plan.jsonl
    python3 assets/canary/build_plans.py --check  # exit 1 if the committed plans are stale

A plan is JSONL, one MCP tool call per line (see README.md next to this file). The edits are
written below as (old_text, new_text) pairs against each observed scope, the way an agent would
send them; line numbers for `lines` observations and the digests in `expect` are computed from
the fixture bytes here, never typed by hand. The generator applies every accepted submission to
its own copy of the target and refuses to write a plan whose old_text is not unique in the file.
`simulate_plan.py` re-checks the written plans independently.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FIXTURES = HERE.parent / "fixtures"
MANIFEST = json.loads((FIXTURES / "manifest.json").read_text(encoding="utf-8"))
BY_TARGET = {fx["target"]: fx for fx in MANIFEST["fixtures"]}


def sha256_text(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Plan:
    def __init__(self) -> None:
        self.calls: list[dict] = []
        self.content = {
            t: (FIXTURES / fx["original"]).read_bytes().decode("utf-8") for t, fx in BY_TARGET.items()
        }
        self.names: set[str] = set()
        self.keys: set[str] = set()

    def _add(self, name: str, tool: str, args: dict, expect: dict | None = None,
             expect_error: bool = False) -> None:
        assert name not in self.names, f"duplicate step name {name}"
        self.names.add(name)
        call = {"step": name, "tool": tool, "args": args}
        if expect is not None:
            call["expect"] = expect
        # A rejected receipt comes back as an isError result carrying the receipt (M5).
        if expect_error:
            call["expect_error"] = True
        self.calls.append(call)

    def read(self, name: str, target: str) -> None:
        fx = BY_TARGET[target]
        self._add(name, "patchdiff_read_target", {"target": target},
                  {"target": target, "version": 0, "language": fx["language"], "sha256": fx["sha256"]})

    def find(self, name: str, target: str, text: str) -> None:
        assert text in self.content[target], f"{target}: {text!r} not found"
        self._add(name, "patchdiff_find_occurrences", {"target": target, "text": text})

    def observe(self, name: str, target: str, scope: str) -> None:
        self._add(name, "patchdiff_observe_scope", {"target": target, "scope": scope})

    def observe_lines(self, name: str, target: str, first: str, last: str) -> None:
        """Observes the line range from the line starting with `first` to the one starting with `last`."""
        lines = self.content[target].split("\n")
        starts = [i for i, line in enumerate(lines) if line.startswith(first)]
        ends = [i for i, line in enumerate(lines) if line.startswith(last)]
        assert len(starts) == 1 and len(ends) == 1 and starts[0] <= ends[0], (target, first, last)
        self._add(name, "patchdiff_observe_scope",
                  {"target": target, "lines": {"start": starts[0] + 1, "end": ends[0] + 1}})

    def submit(self, name: str, target: str, key: str, observation: str,
               ops: list[tuple[str, str]], outcome: str = "accepted") -> None:
        assert key not in self.keys, f"duplicate request key {key}"
        self.keys.add(key)
        text = self.content[target]
        counts = [text.count(old) for old, _ in ops]
        if outcome == "accepted":
            assert all(c == 1 for c in counts), f"{name}: old_text not unique: {counts}"
            for old, new in ops:
                text = text.replace(old, new, 1)
            self.content[target] = text
        else:
            assert any(c != 1 for c in counts), f"{name}: expected a rejection but every old_text is unique"
        self._add(name, "patchdiff_submit_observed_operations", {
            "target": target,
            "request_key": key,
            "base_revision": f"${{{observation}.revision}}",
            "operations": [
                {"observation_id": f"${{{observation}.observation_id}}", "old_text": old, "new_text": new}
                for old, new in ops
            ],
        }, {"outcome": outcome}, expect_error=(outcome == "rejected"))

    def save(self, name: str, target: str) -> None:
        self._add(name, "patchdiff_save", {"target": target},
                  {"target": target, "version": 1, "sha256": sha256_text(self.content[target])})

    def render(self) -> str:
        return "".join(json.dumps(call, ensure_ascii=False) + "\n" for call in self.calls)


def build(wrong: bool) -> Plan:
    p = Plan()

    # calendar (JS): half-open overlap test + isInMaintenance end instant.
    p.read("cal-read", "calendar")
    p.find("cal-find", "calendar", "rangesOverlap(")
    p.observe("cal-obs-overlap", "calendar", "rangesOverlap")
    # A first attempt with an ambiguous old_text ("<=" occurs twice in the function): rejected.
    p.submit("cal-sub-ambiguous", "calendar", "cal-1", "cal-obs-overlap", [("<=", "<")], outcome="rejected")
    # The agent recovers with two unambiguous operations in one submission.
    p.submit("cal-sub-overlap", "calendar", "cal-2", "cal-obs-overlap", [
        ("aStart <= bEnd", "aStart < bEnd"),
        ("bStart <= aEnd", "bStart < aEnd"),
    ])
    p.observe("cal-obs-maint", "calendar", "Calendar.isInMaintenance")
    p.submit("cal-sub-maint", "calendar", "cal-3", "cal-obs-maint", [
        ("instant <= w.end", "instant < w.end"),
    ])
    p.save("cal-save", "calendar")

    # chess (Python): pawn double push over a piece + castling across an attacked square.
    p.observe("chess-obs-pawn", "chess", "Board._pawn_moves")
    p.submit("chess-sub-pawn", "chess", "chess-1", "chess-obs-pawn", [(
        "if r == start_rank and self.piece_at(*two) is None:",
        "if r == start_rank and self.piece_at(*one) is None and self.piece_at(*two) is None:",
    )])
    p.find("chess-find", "chess", "self.is_attacked(target, rank")
    p.observe("chess-obs-castle", "chess", "Board._castling_moves")
    attacker = "color" if wrong else "opponent(color)"  # the wrong plan checks the mover's own attacks
    p.submit("chess-sub-castle", "chess", "chess-2", "chess-obs-castle", [(
        "            if self.is_attacked(target, rank, opponent(color)):\n",
        f"            if any(self.is_attacked(x, rank, {attacker}) for x in (crossed, target)):\n",
    )])
    p.save("chess-save", "chess")

    # incidents (JS): SLA uses the first acknowledgement.
    p.observe("inc-obs-breach", "incidents", "isBreached")
    p.submit("inc-sub-breach", "incidents", "inc-1", "inc-obs-breach", [
        ("  return now > deadline;", "  return (incident.acknowledgedAt ?? now) > deadline;"),
    ])
    p.observe("inc-obs-ack", "incidents", "IncidentDesk.acknowledge")
    p.submit("inc-sub-ack", "incidents", "inc-2", "inc-obs-ack", [(
        "    incident.acknowledgedAt = t;\n    incident.acknowledgedBy = by;\n",
        "    if (incident.acknowledgedAt === null) {\n"
        "      incident.acknowledgedAt = t;\n"
        "      incident.acknowledgedBy = by;\n"
        "    }\n",
    )])
    p.save("inc-save", "incidents")

    # worker-logs (Python): import math (a line-range observation), nearest-rank percentile,
    # indented traceback lines skipped.
    p.read("wl-read", "worker-logs")
    p.observe_lines("wl-obs-imports", "worker-logs", "import argparse", "from datetime import")
    p.submit("wl-sub-imports", "worker-logs", "wl-1", "wl-obs-imports", [
        ("import json\nimport re\n", "import json\nimport math\nimport re\n"),
    ])
    p.observe("wl-obs-pct", "worker-logs", "percentile")
    p.submit("wl-sub-pct", "worker-logs", "wl-2", "wl-obs-pct", [(
        # (no trailing newline: the function's scope ends with its last statement)
        "    index = int(p / 100 * len(ordered))\n    return ordered[min(index, len(ordered) - 1)]",
        "    rank = math.ceil(p * len(ordered) / 100)\n    return ordered[rank - 1]",
    )])
    p.observe("wl-obs-sum", "worker-logs", "summarize")
    p.submit("wl-sub-sum", "worker-logs", "wl-3", "wl-obs-sum", [(
        "        if not line.strip():\n            continue\n",
        "        if not line.strip():\n            continue\n"
        "        if line[0] in \" \\t\":\n"
        "            continue  # traceback line belonging to the record above\n",
    )])
    p.save("wl-save", "worker-logs")

    # limiter (Rust): cap the refill at capacity, tolerate a clock stepping backwards.
    p.observe("lim-obs-refill", "limiter", "TokenBucket.refill")
    p.submit("lim-sub-refill", "limiter", "lim-1", "lim-obs-refill", [
        (
            "        let elapsed = now_ms - self.last_ms;\n",
            "        if now_ms <= self.last_ms {\n"
            "            return; // the clock stood still or stepped backwards: nothing was earned\n"
            "        }\n"
            "        let elapsed = now_ms - self.last_ms;\n",
        ),
        (
            "self.tokens += refill_amount(elapsed, self.refill_per_sec);",
            "self.tokens = (self.tokens + refill_amount(elapsed, self.refill_per_sec)).min(self.capacity);",
        ),
    ])
    p.save("lim-save", "limiter")
    return p


def main(argv: list[str]) -> int:
    stale = False
    for name, wrong in (("demo", False), ("wrong", True)):
        plan = build(wrong)
        differing = [t for t, fx in BY_TARGET.items()
                     if plan.content[t].encode("utf-8") != (FIXTURES / fx["expected"]).read_bytes()]
        want = ["chess"] if wrong else []
        assert differing == want, f"{name}: targets differing from expected: {differing}, want {want}"
        path = HERE / f"{name}.plan.jsonl"
        text = plan.render()
        if "--check" in argv:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                print(f"{path.name} is stale; run python3 assets/canary/build_plans.py", file=sys.stderr)
                stale = True
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path} ({len(plan.calls)} calls)")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
