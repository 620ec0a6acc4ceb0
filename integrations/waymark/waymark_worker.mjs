// Waymark resident worker entry (SPEC W1, W3, W11): loads and warms up every grammar once (the
// first languages before it reports ready, the rest right after), then answers discover frames
// in order until stdin closes.
//
// Usage: node --max-old-space-size=768 waymark_worker.mjs --generation G --root DIR
// DIR is the generation's working root; request files live at DIR/<token>/source.

import { FIRST_LANGUAGES, LANGUAGES, initEngine } from "./discovery_core.mjs";
import { ENGINE, answer, die, parseArgs, readFrames, writeFrame } from "./worker_protocol.mjs";

const args = parseArgs(process.argv.slice(2));
const generation = Number(args.get("generation"));
const root = args.get("root");
if (!Number.isSafeInteger(generation) || generation < 0) die("missing or invalid --generation", 2);
if (!root) die("missing --root", 2);

// The first languages load before readiness, the rest right after it; frames are answered in
// order behind that load, so a request in a later language waits for its grammar (inside its
// active phase) instead of failing.
const later = Object.keys(LANGUAGES).filter((l) => !FIRST_LANGUAGES.includes(l));
const { engine, warmup_ms } = await initEngine(FIRST_LANGUAGES);
let inOrder = Promise.resolve();
const next = (step) => {
  inOrder = inOrder.then(step).catch((e) => die(`worker failed: ${e?.message ?? e}`, 4));
};
readFrames((request) => next(() => answer(engine, root, generation, request)));
const languages = Object.keys(LANGUAGES);
writeFrame({ type: "ready", generation, pid: process.pid, mode: "resident", languages, warmup_ms, engine: ENGINE });
next(() => engine.extend(later));
