//! R2's SIGKILL races across processes (both backends): an agent-side `store-probe` submitting
//! and saving and a replica-side one submitting through a lease, on one target of one database,
//! each SIGKILLed at seeded random points and restarted; a restarted side retries its
//! unknown outcome as the identical submission under the same request key (R3: the stored
//! receipt, never an invented success), and the replica catches up from its lease's changes. Afterwards every
//! acknowledged edit of either side is present exactly once, its receipt is the stored one byte
//! for byte, and every save replays byte for byte. Kill points are counted in lines the
//! probe wrote (the parent kills after reading a random number of them), so nothing sleeps.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use patchdiff::store::replica::{LEASE_MAX_TTL_MS, LeaseRequest};
use patchdiff::store::*;

use crate::backends::Backend;
use crate::util::*;

backend_tests!(sigkilled_agent_and_replica_processes_lose_no_acknowledged_edit_or_save);

/// Submissions per side.
const PER_SIDE: u64 = 24;

use crate::util::Rng;

fn wall_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// One side's writer as the parent sees it across its restarts.
#[derive(Default)]
struct Side {
    acked: Vec<Receipt>,
    saves: Vec<SaveResult>,
    /// The last `TRY` without its `ACK`: the submission whose outcome is unknown.
    pending: Option<Vec<String>>,
    kills: u32,
    /// Restarts that retried an unknown outcome by its request key.
    retries: u32,
}

impl Side {
    /// Reads one whole line the probe wrote; `None` at EOF (a torn last line is dropped: it
    /// acknowledged nothing).
    fn read(out: &mut BufReader<std::process::ChildStdout>) -> Option<String> {
        let mut s = String::new();
        match out.read_line(&mut s) {
            Ok(n) if n > 0 && s.ends_with('\n') => Some(s.trim_end().to_owned()),
            _ => None,
        }
    }

    /// Takes one line into the side's state; true at `DONE`.
    fn take(&mut self, line: &str, prefix: char) -> bool {
        if let Some(rest) = line.strip_prefix("TRY ") {
            let fields: Vec<String> = rest.split(' ').map(str::to_owned).collect();
            assert_eq!(fields[0], self.acked.len().to_string(), "{line}");
            self.pending = Some(fields);
        } else if let Some(json) = line.strip_prefix("ACK ") {
            let r: Receipt = serde_json::from_str(json).unwrap();
            assert_eq!(r.request_key, format!("{prefix}{}", self.acked.len()));
            assert_eq!(r.outcome, Outcome::Accepted, "{line}");
            self.acked.push(r);
            self.pending = None;
        } else if let Some(json) = line.strip_prefix("SAVE ") {
            self.saves.push(serde_json::from_str(json).unwrap());
        } else {
            return line == "DONE";
        }
        false
    }

    /// Runs probes built by `spawn(start, pending)` until the side acknowledged everything,
    /// killing each after a random number of its lines (up to `kills` times).
    fn drive(
        &mut self,
        rng: &mut Rng,
        prefix: char,
        max_kills: u32,
        spawn: impl Fn(u64, Option<&[String]>) -> Child,
    ) {
        loop {
            self.retries += u32::from(self.pending.is_some());
            let mut child = spawn(self.acked.len() as u64, self.pending.as_deref());
            let mut out = BufReader::new(child.stdout.take().unwrap());
            assert_eq!(Self::read(&mut out).as_deref(), Some("READY"));
            let budget = (self.kills < max_kills).then(|| 1 + rng.below(9));
            let mut read = 0;
            let mut done = false;
            while budget.is_none_or(|b| read < b) {
                let Some(line) = Self::read(&mut out) else {
                    break;
                };
                read += 1;
                if self.take(&line, prefix) {
                    done = true;
                    break;
                }
            }
            if done {
                assert!(child.wait().unwrap().success());
                return;
            }
            // SIGKILL at a random point: mid-submission, mid-save or between them.
            let _ = child.kill();
            child.wait().unwrap();
            self.kills += 1;
            // What it wrote before it died was acknowledged.
            while let Some(line) = Self::read(&mut out) {
                if self.take(&line, prefix) {
                    return;
                }
            }
        }
    }
}

fn probe(args: &[String]) -> Child {
    Command::new(example_binary("store-probe"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn store-probe")
}

fn sigkilled_agent_and_replica_processes_lose_no_acknowledged_edit_or_save(b: Backend) {
    let seed = std::env::var("RACE_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| wall_ms() | 1);
    println!("replica SIGKILL races on {}: RACE_SEED={seed}", b.name());
    let (scratch, store) = fresh(b);
    init(&store, "t", "agent: <<A>>\n---\nreplica: <<R>>\n");
    let cp = store
        .replica_acquire(
            &LeaseRequest {
                integration: "build-container".into(),
                targets: vec!["t".into()],
                ttl_ms: LEASE_MAX_TTL_MS,
            },
            &wall_ms,
        )
        .unwrap();
    let db = db_arg(&scratch);
    let (lease, cursor0, sha0) = (
        cp.lease.lease_id.clone(),
        cp.targets[0].cursor.clone(),
        cp.targets[0].sha256.clone(),
    );

    let agent_db = db.clone();
    let agent = std::thread::spawn(move || {
        let mut rng = Rng(seed);
        let mut side = Side::default();
        side.drive(&mut rng, 'a', 8, |start, pending| {
            let base = pending.map_or("-".to_owned(), |p| p[1].clone());
            let args = ["agent-side", &agent_db, "t"].map(str::to_owned);
            probe(&[&args[..], &[start.to_string(), PER_SIDE.to_string(), base]].concat())
        });
        side
    });
    let replica = std::thread::spawn(move || {
        let mut rng = Rng(seed.rotate_left(17) | 1);
        let mut side = Side::default();
        // The replica's cursor and content digest as of its last acknowledged submission's
        // catch-up; a restart starts there (or retries the pending one where it was).
        side.drive(&mut rng, 'r', 8, |start, pending| {
            let (cursor, sha, retry) = match pending {
                Some(p) => (p[1].clone(), p[2].clone(), "1"),
                None => (cursor0.clone(), sha0.clone(), "0"),
            };
            let args = ["replica-side", &db, "t", &lease].map(str::to_owned);
            let tail = [
                start.to_string(),
                PER_SIDE.to_string(),
                cursor,
                sha,
                retry.to_owned(),
            ];
            probe(&[&args[..], &tail].concat())
        });
        side
    });
    let agent = agent.join().expect("agent side");
    let replica = replica.join().expect("replica side");
    println!(
        "seed {seed}: agent killed {} times ({} retries by key), replica {} times ({}); {} saves \
         acknowledged",
        agent.kills,
        agent.retries,
        replica.kills,
        replica.retries,
        agent.saves.len()
    );
    assert!(agent.kills > 0 && replica.kills > 0, "seed {seed}");

    let store = scratch.open();
    let t = store.read_target("t").unwrap();
    for (side, prefix) in [(&agent, 'a'), (&replica, 'r')] {
        assert_eq!(side.acked.len() as u64, PER_SIDE, "seed {seed}");
        for r in &side.acked {
            // K4: the acknowledged receipt is the stored one, byte for byte, and its edit is
            // in the content exactly once.
            let stored = store.stored_receipt("t", &r.request_key).unwrap();
            assert_eq!(
                stored.as_deref(),
                Some(serde_json::to_string(r).unwrap().as_str()),
                "seed {seed}: {}",
                r.request_key
            );
            let mark = format!("[{}]", r.request_key);
            assert_eq!(t.content.matches(&mark).count(), 1, "seed {seed}: {mark}");
        }
        let expected: String = (0..PER_SIDE).map(|i| format!("[{prefix}{i}]")).collect();
        assert!(t.content.contains(&expected), "seed {seed}: {}", t.content);
    }
    // Exactly one journal edit per key, and every save replays byte for byte (replay_to_end
    // checks each save's bytes against the replayed content at its place in the journal).
    let (entries, replayed) = replay_to_end(&store, "t");
    assert_eq!(replayed, t.content, "seed {seed}");
    let mut keys: Vec<&str> = entries
        .iter()
        .filter(|e| e.kind == JournalKind::Edit)
        .filter_map(|e| e.request_key.as_deref())
        .collect();
    keys.sort_unstable();
    let before = keys.len();
    keys.dedup();
    assert_eq!(before, keys.len(), "seed {seed}: a key journalled twice");
    assert_eq!(keys.len() as u64, 2 * PER_SIDE, "seed {seed}");
    for s in &agent.saves {
        let saved = store.saved_version("t", s.version).unwrap();
        assert_eq!(saved.sha256, s.sha256, "seed {seed}: version {}", s.version);
        assert!(
            entries
                .iter()
                .any(|e| e.kind == JournalKind::Save && e.version == s.version),
            "seed {seed}: version {} is journalled",
            s.version
        );
    }
}
