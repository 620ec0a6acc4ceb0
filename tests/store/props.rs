//! Property tests through the store, on SQLite and PostgreSQL (issue 15): random submissions from writers on stale bases,
//! interleaved with saves, agree with a model of operational transform (K3), and replaying the
//! journal reproduces every saved version byte for byte, also after reopening (K6).

use crate::backends::Backend;
use crate::util::*;
use patchdiff::store::*;
use proptest::prelude::*;

const TOKENS: usize = 8;

#[derive(Debug, Clone)]
enum Action {
    /// Submit edits after tokens `tokens` on a base `lag` revisions behind the current one.
    Submit {
        lag: u8,
        tokens: Vec<u8>,
    },
    Save,
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => (0u8..4, prop::collection::vec(0u8..TOKENS as u8, 1..3))
            .prop_map(|(lag, tokens)| Action::Submit { lag, tokens }),
        1 => Just(Action::Save),
    ]
}

fn token(n: usize) -> String {
    format!("<w{n}>")
}

/// Cases per backend: SQLite is an in-process file; every PostgreSQL case also creates a
/// database on the scratch cluster, so its variant runs fewer (CI time, issue 15). Both honour
/// `PROPTEST_CASES` when it is set.
fn cases(b: Backend) -> u32 {
    let default = match b {
        Backend::Sqlite => 24,
        Backend::Postgres => 8,
    };
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn store_agrees_with_ot_model_and_replay_reproduces_every_saved_version(b: Backend) {
    proptest!(ProptestConfig::with_cases(cases(b)), |(actions in prop::collection::vec(action(), 1..30))| {
        check_actions(b, &actions)?;
    });
}

fn check_actions(b: Backend, actions: &[Action]) -> Result<(), TestCaseError> {
    let (scratch, store) = fresh(b);
    // Non-ASCII separators keep byte offsets honest.
    let initial: String = (0..TOKENS)
        .map(|n| format!("{} 界😀\r\n", token(n)))
        .collect();
    init(&store, "t", &initial);
    // Model: per token, inserted marks (newest first) and the revision that last touched it.
    let mut marks: Vec<Vec<String>> = vec![Vec::new(); TOKENS];
    let mut touched_at = [0u64; TOKENS];
    let mut revision = 0u64;
    for (k, a) in actions.iter().enumerate() {
        match a {
            Action::Save => {
                let s = store.save("t").unwrap();
                prop_assert_eq!(s.revision, revision);
            }
            Action::Submit { lag, tokens } => {
                let base = revision.saturating_sub(*lag as u64);
                let ops: Vec<(Option<&str>, String, String)> = tokens
                    .iter()
                    .map(|&n| {
                        (
                            None,
                            token(n as usize),
                            format!("{}[{k}]", token(n as usize)),
                        )
                    })
                    .collect();
                let ops_ref: Vec<(Option<&str>, &str, &str)> = ops
                    .iter()
                    .map(|(o, a, b)| (*o, a.as_str(), b.as_str()))
                    .collect();
                let r = store
                    .submit("t", &sub(&format!("k{k}"), base, &ops_ref), false)
                    .unwrap();
                let distinct = tokens
                    .iter()
                    .collect::<std::collections::HashSet<_>>()
                    .len()
                    == tokens.len();
                let fresh_enough = tokens.iter().all(|&n| touched_at[n as usize] <= base);
                let expect_accept = distinct && fresh_enough;
                prop_assert_eq!(
                    r.outcome == Outcome::Accepted,
                    expect_accept,
                    "action {} {:?} at revision {}: {:?}",
                    k,
                    a,
                    revision,
                    r.reasons
                );
                if expect_accept {
                    revision += 1;
                    prop_assert_eq!(r.revision, revision);
                    for &n in tokens {
                        marks[n as usize].insert(0, format!("[{k}]"));
                        touched_at[n as usize] = revision;
                    }
                } else if !distinct {
                    prop_assert!(
                        r.reason_codes
                            .iter()
                            .any(|c| *c == "OVERLAPPING_OPERATIONS")
                    );
                } else {
                    prop_assert!(r.reason_codes.iter().any(|c| *c == "EDIT_CONFLICT"));
                }
            }
        }
    }
    let expected: String = (0..TOKENS)
        .map(|n| format!("{}{} 界😀\r\n", token(n), marks[n].concat()))
        .collect();
    prop_assert_eq!(&store.read_target("t").unwrap().content, &expected);
    // replay_to_end asserts every entry's hash and every saved version's bytes.
    prop_assert_eq!(&replay_to_end(&store, "t").1, &expected);
    drop(store);
    let reopened = scratch.open();
    prop_assert_eq!(&reopened.read_target("t").unwrap().content, &expected);
    prop_assert_eq!(&replay_to_end(&reopened, "t").1, &expected);
    Ok(())
}

backend_tests!(store_agrees_with_ot_model_and_replay_reproduces_every_saved_version);
