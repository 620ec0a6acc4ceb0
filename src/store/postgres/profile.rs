//! Where a PostgreSQL submission's time goes: round trips to the server and the time spent in
//! each phase of `submit_validated`, counted by the store itself (never by the kernel).
//!
//! A *round trip* is one wait for the server's answer: requests pipelined on one connection
//! (sent together, answered together) count once. Counting costs two `Instant::now()` reads
//! and two relaxed atomic adds per round trip (well under a microsecond against a round trip of
//! tens of microseconds on loopback), so it is always compiled in; the backend bench
//! (`benches/backends.rs`) reads it through [`super::PostgresStore::submission_profile`].

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A phase of one submission on PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SubmissionPhase {
    /// K4: request-key recovery read before the boundary.
    Recovery,
    /// K5: taking the target's boundary (`BEGIN`, session limits, `pg_advisory_xact_lock`,
    /// including the wait for another submission of the target), with the plan's reads when
    /// they are pipelined behind the lock in the same round trip.
    Lock,
    /// K3: the plan's reads (target row, observations, transform steps, content rebuild)
    /// that needed their own round trips.
    PlanRead,
    /// W7: the caller's validator (no round trip: discovery runs in this process).
    Validation,
    /// K3: the attempt's writes and `COMMIT`, whose answer waits for the WAL flush (`fsync`,
    /// `synchronous_commit = on`).
    Commit,
    /// `ROLLBACK` of a transaction that recorded nothing (a recovered receipt, an error).
    Rollback,
    /// K3–K5 in one round trip (`one_trip.rs`): one statement in its own transaction —
    /// recovery, a try of the boundary, the row check and the attempt's writes — whose answer
    /// follows the commit and its WAL flush.
    OneTrip,
}

impl SubmissionPhase {
    /// Every phase, in submission order.
    pub const ALL: [SubmissionPhase; 7] = [
        SubmissionPhase::Recovery,
        SubmissionPhase::Lock,
        SubmissionPhase::PlanRead,
        SubmissionPhase::Validation,
        SubmissionPhase::Commit,
        SubmissionPhase::Rollback,
        SubmissionPhase::OneTrip,
    ];

    /// The phase's name as the bench prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            SubmissionPhase::Recovery => "recovery",
            SubmissionPhase::Lock => "lock (+ pipelined plan read)",
            SubmissionPhase::PlanRead => "plan read",
            SubmissionPhase::Validation => "validation",
            SubmissionPhase::Commit => "commit (+ fsync)",
            SubmissionPhase::Rollback => "rollback",
            SubmissionPhase::OneTrip => "one trip: lock + commit (+ fsync)",
        }
    }
}

/// One phase's totals over the counted submissions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseFigures {
    pub phase: SubmissionPhase,
    /// Round trips to the server in this phase.
    pub round_trips: u64,
    /// Wall time in this phase (including waits for locks and for the WAL flush).
    pub time: Duration,
}

/// Totals since the store was connected or the profile last reset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubmissionProfile {
    /// `submit_validated` calls that returned (a receipt or an error).
    pub submissions: u64,
    /// One entry per [`SubmissionPhase::ALL`], in that order.
    pub phases: Vec<PhaseFigures>,
}

impl SubmissionProfile {
    /// Round trips per submission (0 when nothing was counted).
    pub fn round_trips_per_submission(&self) -> f64 {
        let total: u64 = self.phases.iter().map(|p| p.round_trips).sum();
        total as f64 / self.submissions.max(1) as f64
    }

    /// Adds `other`'s totals (another client's store) to these.
    pub fn add(&mut self, other: &SubmissionProfile) {
        self.submissions += other.submissions;
        for (mine, theirs) in self.phases.iter_mut().zip(&other.phases) {
            mine.round_trips += theirs.round_trips;
            mine.time += theirs.time;
        }
    }
}

#[derive(Default)]
struct Cell {
    round_trips: AtomicU64,
    nanos: AtomicU64,
}

/// The counters one `PostgresStore` keeps.
#[derive(Default)]
pub(crate) struct Profiler {
    cells: [Cell; SubmissionPhase::ALL.len()],
    submissions: AtomicU64,
}

impl Profiler {
    fn cell(&self, phase: SubmissionPhase) -> &Cell {
        &self.cells[phase as usize]
    }

    /// Awaits one round trip (`fut` may pipeline several requests) and counts it in `phase`.
    pub(crate) async fn round_trip<T>(
        &self,
        phase: SubmissionPhase,
        fut: impl Future<Output = T>,
    ) -> T {
        let t0 = Instant::now();
        let out = fut.await;
        self.add(phase, 1, t0.elapsed());
        out
    }

    /// Counts `elapsed` in `phase` with `round_trips` round trips.
    pub(crate) fn add(&self, phase: SubmissionPhase, round_trips: u64, elapsed: Duration) {
        let cell = self.cell(phase);
        cell.round_trips.fetch_add(round_trips, Ordering::Relaxed);
        cell.nanos.fetch_add(
            u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
    }

    /// One more submission returned.
    pub(crate) fn submitted(&self) {
        self.submissions.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self) -> SubmissionProfile {
        SubmissionProfile {
            submissions: self.submissions.load(Ordering::Relaxed),
            phases: SubmissionPhase::ALL
                .iter()
                .map(|&phase| PhaseFigures {
                    phase,
                    round_trips: self.cell(phase).round_trips.load(Ordering::Relaxed),
                    time: Duration::from_nanos(self.cell(phase).nanos.load(Ordering::Relaxed)),
                })
                .collect(),
        }
    }

    pub(crate) fn reset(&self) {
        self.submissions.store(0, Ordering::Relaxed);
        for cell in &self.cells {
            cell.round_trips.store(0, Ordering::Relaxed);
            cell.nanos.store(0, Ordering::Relaxed);
        }
    }
}
