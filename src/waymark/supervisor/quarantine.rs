//! A pathological file costs only itself (W4, W10): content whose discovery killed its
//! generation (the worker died on it, outgrew the RSS limit parsing it, or did not answer within
//! the active timeout — [`RetirementReason::is_caused_by_content`]) is quarantined by its
//! language and SHA-256, and never sent to a worker again while this supervisor lives. Asking
//! again answers at once with [`DomainFailure::Quarantined`], naming the cause.
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

/// Why content was quarantined.
#[derive(Debug, Clone)]
struct Verdict {
    generation: u64,
    reason: RetirementReason,
    detail: String,
}

#[derive(Default)]
pub(super) struct Quarantine {
    entries: Mutex<VecDeque<(ContentKey, Verdict)>>,
}

impl Quarantine {
    /// Quarantines `key` after it retired `generation` for `reason`; false when the reason is
    /// not one content causes, or the key is already quarantined.
    pub(super) fn admit(
        &self,
        key: &ContentKey,
        generation: u64,
        reason: RetirementReason,
        detail: &str,
    ) -> bool {
        if !reason.is_caused_by_content() {
            return false;
        }
        let mut entries = lock(&self.entries);
        if entries.iter().any(|(k, _)| k == key) {
            return false;
        }
        if entries.len() >= CAPACITY {
            entries.pop_front();
        }
        entries.push_back((
            key.clone(),
            Verdict {
                generation,
                reason,
                detail: detail.to_owned(),
            },
        ));
        true
    }

    /// The domain failure for quarantined `key`, `None` when it may be sent to a worker.
    pub(super) fn check(&self, key: &ContentKey) -> Option<DomainFailure> {
        let entries = lock(&self.entries);
        let (_, v) = entries.iter().find(|(k, _)| k == key)?;
        Some(DomainFailure::Quarantined {
            sha256: key.sha256.clone(),
            cause: format!(
                "this {} content ({} bytes, sha256 {}) retired worker generation {} ({}: {}); \
                 it is not sent to the Waymark worker again while this process runs",
                key.language, key.bytes, key.sha256, v.generation, v.reason, v.detail
            ),
        })
    }

    pub(super) fn len(&self) -> usize {
        lock(&self.entries).len()
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
    fn only_content_caused_retirements_quarantine_and_each_key_once() {
        let q = Quarantine::default();
        for r in RetirementReason::ALL {
            let admitted = q.admit(&key(1), 1, r, "x");
            if r.is_caused_by_content() {
                assert!(admitted || q.check(&key(1)).is_some(), "{r}");
            } else {
                assert!(!admitted, "{r} is not the content's doing");
            }
        }
        assert_eq!(q.len(), 1, "a key is quarantined once");
        let failure = q.check(&key(1)).expect("quarantined");
        assert_eq!(failure.code(), "quarantined");
        let text = failure.to_string();
        assert!(text.contains("retired worker generation 1 (worker_exited: x)"), "{text}");
        assert!(q.check(&key(2)).is_none());
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
