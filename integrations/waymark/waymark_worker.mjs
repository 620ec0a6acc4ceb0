// Waymark resident worker entry (SPEC W1, W3, W11): loads each grammar once (the first
// languages, warmed up, before it reports ready; the others at their first request), then
// answers discover frames in order until stdin closes.
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

// The first languages load (and warm up) before readiness; each other language's grammar loads
// when its first request comes (tens of milliseconds, inside that request), so neither
// readiness nor the first languages' requests pay for grammars nobody asked for. Frames are
// answered in order.
const { engine, warmup_ms } = await initEngine(FIRST_LANGUAGES);
let inOrder = Promise.resolve();
readFrames((request) => {
  inOrder = inOrder
    .then(async () => {
      const language = request.language;
      if (Object.hasOwn(LANGUAGES, language ?? "") && !engine.languages.includes(language)) {
        await engine.extend([language], { warmUp: false });
      }
      answer(engine, root, generation, request);
    })
    .catch((e) => die(`worker failed: ${e?.message ?? e}`, 4));
});
const languages = Object.keys(LANGUAGES);
writeFrame({ type: "ready", generation, pid: process.pid, mode: "resident", languages, warmup_ms, engine: ENGINE });
