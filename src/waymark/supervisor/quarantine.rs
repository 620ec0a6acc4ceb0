//! A pathological file costs only itself (W4, W10): content whose discovery killed its
//! generation is quarantined by its language, size and SHA-256, and never sent to a worker again
//! while this supervisor lives. Asking again answers at once with
//! [`DomainFailure::Quarantined`], naming the cause. Outgrowing the RSS limit or the active
//! timeout on it quarantines it at once; a death of the worker (which may also come from
//! outside — a SIGKILL, the OOM killer) only the second time the same content is in flight
//! ([`RetirementReason::strikes_to_quarantine`]), so a content costs at most two launches.
//!
//! Why the supervisor's (the process's) life and not the generation's: the generation that met
//! the content is dead by then, and the next one would die the same way — the pinned engine and
//! limits do not change within a process. Retrying it would only spend a launch (three per
//! minute, W10) and so take discovery away from every other target. A restarted process (new
//! configuration, P3) may try again. The quarantine keeps at most [`CAPACITY`] entries, oldest
//! evicted first; the request-file digest (W3) is the key, so no extra hashing is done.

use std::collections::VecDeque;
use std::sync::Mutex;

use super::super::Language;
use super::super::error::DomainFailure;
use super::generation::lock;
use super::status::RetirementReason;

/// How many quarantined contents are remembered.
pub(super) const CAPACITY: usize = 256;

/// What identifies content to the worker: its language, byte count and SHA-256 (lowercase hex).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct ContentKey {
    pub language: Language,
    pub bytes: u64,
    pub sha256: String,
}

/// Why content was quarantined (or, below its strikes, is suspected).
#[derive(Debug, Clone)]
struct Verdict {
    generation: u64,
    reason: RetirementReason,
    detail: String,
    /// Retirements with this content in flight.
    strikes: u32,
    quarantined: bool,
}

#[derive(Default)]
pub(super) struct Quarantine {
    /// Quarantined and suspected contents, oldest first (at most [`CAPACITY`]).
    entries: Mutex<VecDeque<(ContentKey, Verdict)>>,
}

impl Quarantine {
    /// Counts a retirement of `generation` for `reason` with `key` in flight; true when that
    /// quarantines `key` now (false: not the content's doing, still below its strikes, or
    /// quarantined already).
    pub(super) fn admit(
        &self,
        key: &ContentKey,
        generation: u64,
        reason: RetirementReason,
        detail: &str,
    ) -> bool {
        let Some(needed) = reason.strikes_to_quarantine() else {
            return false;
        };
        let mut entries = lock(&self.entries);
        let strikes = match entries.iter().position(|(k, _)| k == key) {
            Some(i) => {
                let (_, v) = &entries[i];
                if v.quarantined {
                    return false;
                }
                let strikes = v.strikes + 1;
                entries.remove(i);
                strikes
            }
            None => 1,
        };
        if entries.len() >= CAPACITY {
            entries.pop_front();
        }
        let quarantined = strikes >= needed;
        entries.push_back((
            key.clone(),
            Verdict {
                generation,
                reason,
                detail: detail.to_owned(),
                strikes,
                quarantined,
            },
        ));
        quarantined
    }

    /// The domain failure for quarantined `key`, `None` when it may be sent to a worker.
    pub(super) fn check(&self, key: &ContentKey) -> Option<DomainFailure> {
        let entries = lock(&self.entries);
        let (_, v) = entries.iter().find(|(k, v)| k == key && v.quarantined)?;
        let times = if v.strikes > 1 {
            format!(" (the last of {} times)", v.strikes)
        } else {
            String::new()
        };
        Some(DomainFailure::Quarantined {
            sha256: key.sha256.clone(),
            cause: format!(
                "this {} content ({} bytes, sha256 {}) retired worker generation {}{times} ({}: \
                 {}); it is not sent to the Waymark worker again while this process runs",
                key.language, key.bytes, key.sha256, v.generation, v.reason, v.detail
            ),
        })
    }

    /// How many contents are quarantined.
    pub(super) fn len(&self) -> usize {
        lock(&self.entries)
            .iter()
            .filter(|(_, v)| v.quarantined)
            .count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(n: u64) -> ContentKey {
        ContentKey {
            language: Language::JavaScript,
            bytes: n,
            sha256: format!("{n:064x}"),
        }
    }

    #[test]
    fn limits_quarantine_at_once_deaths_the_second_time_and_policy_never() {
        for r in RetirementReason::ALL {
            let q = Quarantine::default();
            let first = q.admit(&key(1), 1, r, "x");
            let second = q.admit(&key(1), 2, r, "y");
            let third = q.admit(&key(1), 3, r, "z");
            let expected = match r.strikes_to_quarantine() {
                Some(1) => [true, false, false],
                Some(2) => [false, true, false],
                _ => [false, false, false],
            };
            assert_eq!([first, second, third], expected, "{r}");
            assert_eq!(q.len(), usize::from(expected.contains(&true)), "{r}");
        }
        let q = Quarantine::default();
        q.admit(&key(1), 1, RetirementReason::RssLimit, "x");
        let failure = q.check(&key(1)).expect("quarantined");
        assert_eq!(failure.code(), "quarantined");
        let text = failure.to_string();
        assert!(
            text.contains("retired worker generation 1 (rss_limit: x)"),
            "{text}"
        );
        assert!(q.check(&key(2)).is_none());
        q.admit(&key(2), 4, RetirementReason::WorkerExited, "died");
        assert!(
            q.check(&key(2)).is_none(),
            "one death is not yet the content's fault"
        );
        q.admit(&key(2), 5, RetirementReason::WorkerExited, "died again");
        let text = q.check(&key(2)).expect("twice").to_string();
        assert!(
            text.contains("generation 5 (the last of 2 times) (worker_exited: died again)"),
            "{text}"
        );
    }

    #[test]
    fn the_quarantine_is_bounded_oldest_first() {
        let q = Quarantine::default();
        for n in 0..(CAPACITY as u64 + 1) {
            q.admit(&key(n), 1, RetirementReason::RssLimit, "big");
        }
        assert_eq!(q.len(), CAPACITY);
        assert!(q.check(&key(0)).is_none(), "the oldest left");
        assert!(q.check(&key(CAPACITY as u64)).is_some());
    }
}
