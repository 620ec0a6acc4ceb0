// Waymark resident worker entry (SPEC W1, W3, W11): loads and warms up every grammar once,
// reports ready, then answers discover frames until stdin closes.
//
// Usage: node --max-old-space-size=768 waymark_worker.mjs --generation G --root DIR
// DIR is the generation's working root; request files live at DIR/<token>/source.

import { initEngine } from "./discovery_core.mjs";
import { ENGINE, answer, die, parseArgs, readFrames, writeFrame } from "./worker_protocol.mjs";

const args = parseArgs(process.argv.slice(2));
const generation = Number(args.get("generation"));
const root = args.get("root");
if (!Number.isSafeInteger(generation) || generation < 0) die("missing or invalid --generation", 2);
if (!root) die("missing --root", 2);

const { engine, warmup_ms, languages } = await initEngine();
readFrames((request) => answer(engine, root, generation, request));
writeFrame({ type: "ready", generation, pid: process.pid, mode: "resident", languages, warmup_ms, engine: ENGINE });
