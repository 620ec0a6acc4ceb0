// TEST ONLY: a Waymark worker that misbehaves on purpose, for faults the real worker cannot
// produce (SPEC W4, W6, W9 tests). Selected by the supervisor config's worker script override;
// the fault comes from `--fault NAME`:
//   garbage          ready, then answers the first request with a frame that is not JSON
//   unsolicited      ready, then immediately sends a result frame nobody asked for
//   wrong_generation answers with generation + 1
//   wrong_request    answers with request + 1
//   stderr_flood     writes 1 MiB to stderr, then answers correctly
//   hang             ready, then never answers
//   no_ready         never reports ready
//   balloon          on a request, allocates and touches 256 MiB, then never answers
//   spin             ready, then spins synchronously forever: the main thread never returns to
//                    the event loop, so the stdin-reader guard never runs (a long parse, W11)
//   pin_request      answers correctly, but first moves its request directory aside and leaves
//                    a regular file in its place, so the supervisor cannot remove the request
//                    directory (the CLEANUP worker error)
//   stall_marker     answers correctly, except that a request whose source contains STALL_HERE
//                    first writes a line to the FIFO $PATCHDIFF_TEST_STALL_ENTERED (blocking
//                    until the test reads it) and then reads the FIFO
//                    $PATCHDIFF_TEST_STALL_RELEASE (blocking until the test writes it): a
//                    validation the test holds stalled, with no timing involved
// Every mode keeps the W11 stdin-reader guard (exits when stdin closes), though `spin` never
// gets to run it.

import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";

import { createEngine } from "../discovery_core.mjs";
import {
  ENGINE,
  answer,
  die,
  parseArgs,
  readFrames,
  writeFrame,
  writeRawFrame,
} from "../worker_protocol.mjs";

const args = parseArgs(process.argv.slice(2));
const fault = args.get("fault");
const generation = Number(args.get("generation"));
const root = args.get("root");
if (!root || !Number.isSafeInteger(generation)) die("missing --generation/--root", 2);

const keep = [];
const ready = () =>
  writeFrame({ type: "ready", generation, pid: process.pid, mode: "resident", languages: ["javascript"], warmup_ms: 0, engine: ENGINE });

switch (fault) {
  case "no_ready":
    readFrames(() => {});
    break;
  case "hang":
    readFrames(() => {});
    ready();
    break;
  case "garbage":
    readFrames(() => writeRawFrame(Buffer.from([0xff, 0xfe, 0x00, 0x7b, 0x21])));
    ready();
    break;
  case "unsolicited":
    readFrames(() => {});
    ready();
    writeFrame({ type: "result", generation, request: 999, ok: true, scopes: [], parse_ms: 0 });
    break;
  case "wrong_generation":
  case "wrong_request":
    readFrames((req) =>
      writeFrame({
        type: "result",
        generation: fault === "wrong_generation" ? generation + 1 : generation,
        request: fault === "wrong_request" ? req.request + 1 : req.request,
        ok: true,
        scopes: [],
        parse_ms: 0,
      }),
    );
    ready();
    break;
  case "stderr_flood": {
    const engine = await createEngine(["javascript"]);
    readFrames((req) => {
      // 1 MiB of stderr, handed to the kernel before the answer is written.
      const flood = Buffer.alloc(1024 * 1024, 0x78);
      process.stderr.write(flood, () => answer(engine, root, generation, req));
    });
    ready();
    break;
  }
  case "balloon":
    readFrames(() => {
      const mib = Buffer.alloc(1024 * 1024, 1);
      for (let i = 0; i < 256; i++) keep.push(Buffer.from(mib));
    });
    ready();
    break;
  case "spin":
    readFrames(() => {});
    ready();
    // Once the ready frame has been handed to the pipe, the main thread never comes back.
    process.stdout.write(Buffer.alloc(0), () => {
      for (;;) {
        // busy, as in a long synchronous parse
      }
    });
    break;
  case "pin_request": {
    const engine = await createEngine(["javascript"]);
    const aside = join(root, "aside");
    mkdirSync(aside, { recursive: true });
    readFrames((req) => {
      renameSync(join(root, req.token), join(aside, req.token));
      writeFileSync(join(root, req.token), "not a directory\n");
      answer(engine, aside, generation, req);
    });
    ready();
    break;
  }
  case "stall_marker": {
    const engine = await createEngine(["javascript"]);
    readFrames((req) => {
      const source = readFileSync(join(root, req.token, "source"), "utf8");
      if (source.includes("STALL_HERE")) {
        writeFileSync(process.env.PATCHDIFF_TEST_STALL_ENTERED, "entered\n");
        readFileSync(process.env.PATCHDIFF_TEST_STALL_RELEASE);
      }
      answer(engine, root, generation, req);
    });
    ready();
    break;
  }
  default:
    die(`unknown --fault ${fault}`, 2);
}
