// Waymark private pipe protocol, worker side (SPEC W3, W11).
//
// Frames: a 4-byte big-endian unsigned length, then that many bytes of UTF-8 JSON.
//   - supervisor -> worker (stdin): at most MAX_IN_FRAME bytes (1 MiB); control frames only,
//     the source travels through the owned request file `<root>/<token>/source`.
//   - worker -> supervisor (stdout): at most MAX_OUT_FRAME bytes (2 MiB result cap + 64 KiB
//     envelope). A result whose scopes JSON exceeds OUTPUT_CAP (2 MiB) is replaced by the domain
//     error `output_too_large`.
// Messages:
//   worker:     {"type":"ready","generation":G,"pid":P,"mode":"resident"|"oneshot",
//                "languages":[...],"warmup_ms":F,"engine":"web-tree-sitter@0.25.10"}
//   supervisor: {"type":"discover","generation":G,"request":R,"language":L,"token":T,
//                "bytes":N,"sha256":HEX,"query":Q?}   (Q: see selectScopes in discovery_core)
//   worker:     {"type":"result","generation":G,"request":R,"ok":true,"scopes":[...],
//                "parse_ms":F,"read_ms":F,"has_error":B,"error_line":N?,"scope_count":N,
//                "names":[...]?}   (error_line: 1-based line of the first syntax error)
//            or {"type":"result","generation":G,"request":R,"ok":false,
//                "error":{"code":"parse_failed"|"output_too_large"|"integrity_mismatch"|
//                         "unsupported_language","message":S}}
// W11 stdin-reader guard: the worker exits as soon as its stdin closes (parent gone or done).

import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { selectScopes } from "./discovery_core.mjs";

export const MAX_IN_FRAME = 1024 * 1024;
export const OUTPUT_CAP = 2 * 1024 * 1024;
export const MAX_OUT_FRAME = OUTPUT_CAP + 64 * 1024;
export const ENGINE = "web-tree-sitter@0.25.10";

const TOKEN_RE = /^[A-Za-z0-9_-]{1,64}$/;

// One decoder each, made once: without `stream`, every decode() starts afresh, and a decoder
// costs more to create than a small frame costs to decode.
const FRAME_DECODER = new TextDecoder("utf-8", { fatal: true });
const SOURCE_DECODER = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** Parses `--name value` / `--name=value` arguments into a Map. */
export function parseArgs(argv) {
  const args = new Map();
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (!a.startsWith("--")) continue;
    const eq = a.indexOf("=");
    if (eq > 0) args.set(a.slice(2, eq), a.slice(eq + 1));
    else if (i + 1 < argv.length && !argv[i + 1].startsWith("--")) args.set(a.slice(2), argv[++i]);
    else args.set(a.slice(2), "");
  }
  return args;
}

/** Fatal protocol fault on the worker side: say why on stderr and exit non-zero. */
export function die(message, code = 3) {
  try {
    process.stderr.write(`waymark worker: ${message}\n`);
  } finally {
    process.exit(code);
  }
}

/** Writes one frame (object -> JSON) to stdout. Throws when it exceeds MAX_OUT_FRAME. */
export function writeFrame(message) {
  writeJsonFrame(JSON.stringify(message));
}

/** Writes one frame from already-serialized JSON text. Throws when it exceeds MAX_OUT_FRAME. */
export function writeJsonFrame(json) {
  const length = Buffer.byteLength(json, "utf8");
  if (length > MAX_OUT_FRAME) {
    throw new Error(`frame of ${length} bytes exceeds ${MAX_OUT_FRAME}`);
  }
  // Header and body encoded into one buffer: one copy, one write.
  const frame = Buffer.allocUnsafe(4 + length);
  frame.writeUInt32BE(length, 0);
  frame.write(json, 4, length, "utf8");
  process.stdout.write(frame);
}

/** Writes raw bytes as one frame (used by test fault scripts only). */
export function writeRawFrame(bytes) {
  const header = Buffer.alloc(4);
  header.writeUInt32BE(bytes.length, 0);
  process.stdout.write(Buffer.concat([header, bytes]));
}

/**
 * Reads frames from stdin and calls `onMessage(obj)` for each, in order. Oversize or invalid
 * frames are fatal. When stdin ends (or fails), the process exits 0 (W11 stdin-reader guard).
 */
export function readFrames(onMessage) {
  let buffered = Buffer.alloc(0);
  const onEnd = () => process.exit(0);
  process.stdin.on("end", onEnd);
  process.stdin.on("close", onEnd);
  process.stdin.on("error", onEnd);
  // The supervisor closed its end (shutdown, retirement, parent death): leave quietly instead of
  // dumping an unhandled EPIPE into the captured stderr.
  process.stdout.on("error", (e) => process.exit(e && e.code === "EPIPE" ? 0 : 1));
  process.stdin.on("data", (chunk) => {
    buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
    while (buffered.length >= 4) {
      const len = buffered.readUInt32BE(0);
      if (len > MAX_IN_FRAME) die(`incoming frame of ${len} bytes exceeds ${MAX_IN_FRAME}`);
      if (buffered.length < 4 + len) break;
      const body = buffered.subarray(4, 4 + len);
      buffered = buffered.subarray(4 + len);
      let message;
      try {
        message = JSON.parse(FRAME_DECODER.decode(body));
      } catch (e) {
        die(`invalid frame: ${e.message}`);
      }
      onMessage(message);
    }
  });
}

/**
 * Reads and checks the owned request file for a discover frame; returns the source string.
 * Throws {code: "integrity_mismatch"} when the token, byte count, SHA-256 or UTF-8 is wrong.
 */
export function readRequestSource(root, request) {
  const fail = (message) => Object.assign(new Error(message), { code: "integrity_mismatch" });
  if (typeof request.token !== "string" || !TOKEN_RE.test(request.token)) {
    throw fail("invalid request directory token");
  }
  let bytes;
  try {
    bytes = readFileSync(join(root, request.token, "source"));
  } catch (e) {
    throw fail(`cannot read request file: ${e.code ?? e.message}`);
  }
  if (bytes.length !== request.bytes) {
    throw fail(`request file has ${bytes.length} bytes, frame says ${request.bytes}`);
  }
  const digest = createHash("sha256").update(bytes).digest("hex");
  if (digest !== request.sha256) {
    throw fail("request file SHA-256 differs from the frame");
  }
  try {
    return SOURCE_DECODER.decode(bytes);
  } catch {
    throw fail("request file is not valid UTF-8");
  }
}

/** Handles one discover frame with `engine` and writes the result frame. */
export function answer(engine, root, generation, request) {
  const base = { type: "result", generation, request: request.request };
  const error = (code, message) => writeFrame({ ...base, ok: false, error: { code, message } });
  if (request.type !== "discover") die(`unexpected message type ${JSON.stringify(request.type)}`);
  if (request.generation !== generation) die(`request for generation ${request.generation}`);
  const readStarted = performance.now();
  let source;
  try {
    source = readRequestSource(root, request);
  } catch (e) {
    return error(e.code ?? "integrity_mismatch", e.message);
  }
  const read_ms = performance.now() - readStarted;
  let found;
  try {
    found = engine.discover(request.language, source);
  } catch (e) {
    return error(e.code ?? "parse_failed", String(e.message ?? e));
  }
  let selected;
  try {
    selected = selectScopes(found.scopes, request.query);
  } catch (e) {
    return error(e.code ?? "invalid_query", String(e.message ?? e));
  }
  const scopesJson = JSON.stringify(selected.scopes);
  const scopesBytes = Buffer.byteLength(scopesJson, "utf8");
  if (scopesBytes > OUTPUT_CAP) {
    return error("output_too_large", `result of ${scopesBytes} bytes exceeds ${OUTPUT_CAP}`);
  }
  // The scopes are serialized once: for the cap check and as part of the frame.
  const head = JSON.stringify({
    ...base,
    ok: true,
    parse_ms: found.parse_ms,
    read_ms,
    has_error: found.has_error,
    ...(found.error_line === null ? {} : { error_line: found.error_line }),
    scope_count: found.scopes.length,
    ...(selected.names === undefined ? {} : { names: selected.names }),
  });
  writeJsonFrame(`${head.slice(0, -1)},"scopes":${scopesJson}}`);
}
