// Waymark one-shot runner (SPEC W1): the same discovery core and protocol as the resident worker,
// for one discovery. It loads only the requested grammar (no warm-up parse: the real parse is the
// only one), reports ready, answers one discover frame and exits; it also exits when stdin closes.
//
// Usage: node --max-old-space-size=768 waymark_oneshot.mjs --generation G --root DIR --language L

import { initEngine, LANGUAGES } from "./discovery_core.mjs";
import { ENGINE, answer, die, parseArgs, readFrames, writeFrame } from "./worker_protocol.mjs";

const args = parseArgs(process.argv.slice(2));
const generation = Number(args.get("generation"));
const root = args.get("root");
const language = args.get("language");
if (!Number.isSafeInteger(generation) || generation < 0) die("missing or invalid --generation", 2);
if (!root) die("missing --root", 2);
if (!Object.hasOwn(LANGUAGES, language ?? "")) die(`unsupported --language ${language}`, 2);

const { engine, warmup_ms, languages } = await initEngine([language], { warmUp: false });
let answered = false;
readFrames((request) => {
  if (answered) die("a one-shot runner answers one request");
  answered = true;
  answer(engine, root, generation, request);
  // Exit once the answer has been handed to the pipe (a large frame drains asynchronously).
  process.stdout.write(Buffer.alloc(0), () => process.exit(0));
});
writeFrame({ type: "ready", generation, pid: process.pid, mode: "oneshot", languages, warmup_ms, engine: ENGINE });
