//! The admission queue (SPEC W5, W6, W7): one active request, at most eight waiting, strictly
//! FIFO. A waiter that is not admitted within its ceiling (2 s ordinary, 250 ms for lock holders)
//! leaves the queue with [`AdmissionError::Expired`]. A dropped waiter leaves the queue at once,
//! and a slot handed to a waiter that is already gone passes to the next one.
//!
//! Callers that waited for a *starting* worker did so holding no descriptor;
//! when it is ready they arrive together. [`AdmissionQueue::admit_after_startup`] puts them in a
//! backlog, in arrival order, from which the queue moves each into the FIFO as soon as one of its
//! eight waiting places frees up, so a start-up burst waits instead of being refused. The eight
//! places stay what W5 counts: requests for a ready worker. While a backlog exists every place is
//! spoken for, so an ordinary caller arriving then is refused `Full` as before.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::oneshot;

/// Queue depth after a change: `active` is 0 or 1, `waiting` 0..=max.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueDepth {
    pub active: usize,
    pub waiting: usize,
}

/// Why admission failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdmissionError {
    /// W5: `max_waiting` requests already wait.
    Full { waiting: usize },
    /// W6/W7: not admitted within the ceiling.
    Expired { ceiling: Duration },
    /// The queue was closed (supervisor shutdown).
    Closed,
}

type DepthListener = Arc<dyn Fn(QueueDepth) + Send + Sync>;

struct Inner {
    active: bool,
    closed: bool,
    waiting: VecDeque<(u64, oneshot::Sender<()>)>,
    /// Start-up callers not yet in `waiting`, in arrival order (see module docs).
    backlog: VecDeque<(u64, oneshot::Sender<()>)>,
    next_ticket: u64,
}

impl Inner {
    /// Moves backlogged callers into free waiting places, first come first.
    fn promote(&mut self, max_waiting: usize) {
        while self.waiting.len() < max_waiting {
            match self.backlog.pop_front() {
                Some(entry) => self.waiting.push_back(entry),
                None => break,
            }
        }
    }

    /// Removes `ticket` from the waiting places or the backlog; false when it is in neither
    /// (it was handed the slot).
    fn remove(&mut self, ticket: u64, max_waiting: usize) -> bool {
        let before = self.waiting.len() + self.backlog.len();
        self.waiting.retain(|(t, _)| *t != ticket);
        self.backlog.retain(|(t, _)| *t != ticket);
        let removed = self.waiting.len() + self.backlog.len() != before;
        self.promote(max_waiting);
        removed
    }
}

/// FIFO admission with one active slot (see module docs).
#[derive(Clone)]
pub struct AdmissionQueue {
    inner: Arc<Mutex<Inner>>,
    max_waiting: usize,
    listener: DepthListener,
}

/// The active slot. Dropping it admits the next waiter.
pub struct Permit {
    queue: AdmissionQueue,
}

impl Drop for Permit {
    fn drop(&mut self) {
        self.queue.release();
    }
}

/// Removes a waiter that gives up (expiry or cancellation); passes on a slot it was handed.
struct WaitGuard<'a> {
    queue: &'a AdmissionQueue,
    ticket: u64,
    armed: bool,
}

impl Drop for WaitGuard<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let removed = self
            .queue
            .lock()
            .remove(self.ticket, self.queue.max_waiting);
        if removed {
            self.queue.notify();
        } else {
            // The slot was handed to us just as we gave up: pass it on.
            self.queue.release();
        }
    }
}

impl AdmissionQueue {
    /// A queue with one active slot and `max_waiting` waiting places; `listener` is called after
    /// every depth change.
    pub fn new(max_waiting: usize, listener: DepthListener) -> Self {
        Self {
            inner: Arc::new(Mutex::new(Inner {
                active: false,
                closed: false,
                waiting: VecDeque::new(),
                backlog: VecDeque::new(),
                next_ticket: 0,
            })),
            max_waiting,
            listener,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Current depth.
    pub fn depth(&self) -> QueueDepth {
        let inner = self.lock();
        QueueDepth {
            active: usize::from(inner.active),
            waiting: inner.waiting.len(),
        }
    }

    fn notify(&self) {
        let depth = self.depth();
        (self.listener)(depth);
    }

    /// Waits (FIFO) for the active slot, at most `ceiling`. Errors: `Full` when eight already
    /// wait (or a start-up backlog has claimed every place), `Expired` after `ceiling`, `Closed`.
    pub async fn admit(&self, ceiling: Duration) -> Result<Permit, AdmissionError> {
        self.enter(ceiling, false).await
    }

    /// Admission for a caller that waited for a starting worker (holding no
    /// descriptor). Never `Full`: with every waiting place taken it waits in the backlog, in
    /// arrival order, and enters the FIFO when a place frees. `ceiling` counts from this call and
    /// covers backlog and FIFO (the supervisor passes the 2 s admission ceiling, W6); errors:
    /// `Expired`, `Closed`.
    pub async fn admit_after_startup(&self, ceiling: Duration) -> Result<Permit, AdmissionError> {
        self.enter(ceiling, true).await
    }

    async fn enter(&self, ceiling: Duration, backlog: bool) -> Result<Permit, AdmissionError> {
        let (ticket, rx) = {
            let mut inner = self.lock();
            if inner.closed {
                return Err(AdmissionError::Closed);
            }
            if !inner.active && inner.waiting.is_empty() {
                inner.active = true;
                drop(inner);
                self.notify();
                return Ok(Permit {
                    queue: self.clone(),
                });
            }
            let full = inner.waiting.len() >= self.max_waiting;
            if full && !backlog {
                return Err(AdmissionError::Full {
                    waiting: inner.waiting.len(),
                });
            }
            let (tx, rx) = oneshot::channel();
            let ticket = inner.next_ticket;
            inner.next_ticket += 1;
            if full {
                inner.backlog.push_back((ticket, tx));
            } else {
                inner.waiting.push_back((ticket, tx));
            }
            (ticket, rx)
        };
        self.notify();
        let mut guard = WaitGuard {
            queue: self,
            ticket,
            armed: true,
        };
        // W6: counted on running time, like every phase ceiling (a paused process is not a busy
        // worker).
        match super::ceiling::within(ceiling, rx).await.value {
            Some(Ok(())) => {
                guard.armed = false;
                Ok(Permit {
                    queue: self.clone(),
                })
            }
            Some(Err(_)) => {
                // Sender dropped without a handoff: the queue was closed.
                guard.armed = false;
                Err(AdmissionError::Closed)
            }
            None => {
                let handed = !self.lock().remove(ticket, self.max_waiting);
                guard.armed = false;
                if handed {
                    // Admitted at the deadline: the handoff happened before we looked.
                    return Ok(Permit {
                        queue: self.clone(),
                    });
                }
                self.notify();
                Err(AdmissionError::Expired { ceiling })
            }
        }
    }

    /// Releases the active slot to the first live waiter, or frees it.
    fn release(&self) {
        {
            let mut inner = self.lock();
            loop {
                inner.promote(self.max_waiting);
                match inner.waiting.pop_front() {
                    Some((_, tx)) => {
                        if tx.send(()).is_ok() {
                            break; // stays active, now held by that waiter
                        }
                    }
                    None => {
                        inner.active = false;
                        break;
                    }
                }
            }
            inner.promote(self.max_waiting);
        }
        self.notify();
    }

    /// Closes the queue: waiters get [`AdmissionError::Closed`], new admissions are refused. The
    /// current permit stays valid until dropped.
    pub fn close(&self) {
        let drained: Vec<_> = {
            let mut inner = self.lock();
            inner.closed = true;
            let mut drained: Vec<_> = inner.waiting.drain(..).collect();
            drained.extend(inner.backlog.drain(..));
            drained
        };
        drop(drained);
        self.notify();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    fn queue() -> AdmissionQueue {
        AdmissionQueue::new(8, Arc::new(|_| {}))
    }

    /// Queues `n` waiters one after another (each is waiting before the next is spawned); each
    /// records its index in the returned order once admitted, then leaves.
    async fn queue_waiters(
        q: &AdmissionQueue,
        n: usize,
    ) -> (Arc<Mutex<Vec<usize>>>, Vec<tokio::task::JoinHandle<()>>) {
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..n {
            let q2 = q.clone();
            let order = order.clone();
            tasks.push(tokio::spawn(async move {
                let p = q2.admit(Duration::from_secs(60)).await.expect("admitted");
                order.lock().expect("lock").push(i);
                drop(p);
            }));
            while q.depth().waiting < i + 1 {
                tokio::task::yield_now().await;
            }
        }
        (order, tasks)
    }

    /// W5: one active, eight waiting; the ninth is refused at once.
    #[tokio::test(start_paused = true)]
    async fn queue_rejects_ninth_waiting_request() {
        let q = queue();
        let _active = q.admit(Duration::from_secs(2)).await.expect("active");
        let mut waiters = Vec::new();
        for _ in 0..8 {
            let q2 = q.clone();
            waiters.push(tokio::spawn(async move {
                q2.admit(Duration::from_secs(2)).await
            }));
        }
        while q.depth().waiting < 8 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            q.admit(Duration::from_secs(2)).await.err(),
            Some(AdmissionError::Full { waiting: 8 })
        );
    }

    /// 40 callers that waited for a starting worker arrive at once; all are
    /// admitted, first come first, though only eight may wait in the FIFO. While their backlog
    /// lasts an ordinary caller is refused `Full`, and afterwards the queue is as W5 says.
    #[tokio::test(start_paused = true)]
    async fn a_startup_burst_of_forty_is_admitted_in_order_and_never_refused() {
        let q = queue();
        let active = q.admit(Duration::from_secs(2)).await.expect("active");
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..40 {
            let (q2, order) = (q.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let p = q2
                    .admit_after_startup(Duration::from_secs(2))
                    .await
                    .expect("a start-up caller is admitted");
                order.lock().expect("lock").push(i);
                // Each validation takes a few ms of the worker's time.
                tokio::time::sleep(Duration::from_millis(5)).await;
                drop(p);
            }));
            tokio::task::yield_now().await;
        }
        while q.depth().waiting < 8 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            q.depth(),
            QueueDepth {
                active: 1,
                waiting: 8
            },
            "the backlog holds no waiting place"
        );
        assert_eq!(
            q.admit(Duration::from_secs(2)).await.err(),
            Some(AdmissionError::Full { waiting: 8 })
        );
        drop(active);
        for t in tasks {
            t.await.expect("task");
        }
        assert_eq!(*order.lock().expect("lock"), (0..40).collect::<Vec<_>>());
        assert_eq!(
            q.depth(),
            QueueDepth {
                active: 0,
                waiting: 0
            }
        );
        assert!(q.admit(Duration::from_secs(2)).await.is_ok());
    }

    /// A backlogged start-up caller still expires at its ceiling and leaves no trace.
    #[tokio::test(start_paused = true)]
    async fn a_backlogged_caller_expires_at_its_ceiling() {
        let q = queue();
        let _active = q.admit(Duration::from_secs(2)).await.expect("active");
        let (_order, _waiters) = queue_waiters(&q, 8).await;
        let started = tokio::time::Instant::now();
        let err = q.admit_after_startup(Duration::from_secs(2)).await.err();
        assert_eq!(
            err,
            Some(AdmissionError::Expired {
                ceiling: Duration::from_secs(2)
            })
        );
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert_eq!(q.lock().backlog.len(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_request_expires_at_exactly_the_admission_ceiling() {
        let q = queue();
        let _active = q.admit(Duration::from_secs(2)).await.expect("active");
        let started = tokio::time::Instant::now();
        let err = q.admit(Duration::from_secs(2)).await.err();
        assert_eq!(
            err,
            Some(AdmissionError::Expired {
                ceiling: Duration::from_secs(2)
            })
        );
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert_eq!(
            q.depth(),
            QueueDepth {
                active: 1,
                waiting: 0
            }
        );
    }

    /// W6: the admission ceiling counts running time: a 20 s pause of the process while a
    /// request waits 300 ms into its 2 s is not an expiry.
    #[tokio::test(start_paused = true)]
    async fn a_paused_process_does_not_expire_a_waiting_admission() {
        let q = queue();
        let active = q.admit(Duration::from_secs(2)).await.expect("active");
        let waiter = tokio::spawn({
            let q = q.clone();
            async move { q.admit(Duration::from_secs(2)).await.map(drop) }
        });
        tokio::time::sleep(Duration::from_millis(300)).await;
        tokio::time::advance(Duration::from_secs(20)).await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(!waiter.is_finished(), "still waiting after the pause");
        drop(active);
        waiter
            .await
            .expect("join")
            .expect("admitted after the pause");
    }

    #[tokio::test(start_paused = true)]
    async fn admission_is_strictly_fifo() {
        let q = queue();
        let active = q.admit(Duration::from_secs(2)).await.expect("active");
        let (order, tasks) = queue_waiters(&q, 5).await;
        drop(active);
        for t in tasks {
            t.await.expect("task");
        }
        assert_eq!(*order.lock().expect("lock"), vec![0, 1, 2, 3, 4]);
        assert_eq!(
            q.depth(),
            QueueDepth {
                active: 0,
                waiting: 0
            }
        );
    }

    #[tokio::test(start_paused = true)]
    async fn cancelled_waiter_frees_its_place_and_never_strands_the_slot() {
        let q = queue();
        let active = q.admit(Duration::from_secs(2)).await.expect("active");
        let q2 = q.clone();
        let cancelled = tokio::spawn(async move { q2.admit(Duration::from_secs(60)).await });
        while q.depth().waiting < 1 {
            tokio::task::yield_now().await;
        }
        cancelled.abort();
        let _ = cancelled.await;
        assert_eq!(q.depth().waiting, 0);
        drop(active);
        assert_eq!(q.depth().active, 0);
        let _p = q.admit(Duration::from_millis(1)).await.expect("free slot");
    }

    #[tokio::test(start_paused = true)]
    async fn a_waiter_cancelled_between_others_leaves_them_queued_and_the_slot_held() {
        // Found by cargo-mutants (WaitGuard::drop): a waiter that gives up removes only itself,
        // and never releases a slot it was not handed.
        let q = queue();
        let active = q.admit(Duration::from_secs(2)).await.expect("active");
        let (order, mut tasks) = queue_waiters(&q, 3).await;
        let middle = tasks.remove(1);
        middle.abort();
        let _ = middle.await;
        assert_eq!(
            q.depth(),
            QueueDepth {
                active: 1,
                waiting: 2
            },
            "the other two still wait behind the active request"
        );
        assert!(
            order.lock().expect("lock").is_empty(),
            "nobody admitted yet"
        );
        drop(active);
        for t in tasks {
            t.await.expect("task");
        }
        assert_eq!(*order.lock().expect("lock"), vec![0, 2]);
    }

    #[tokio::test(start_paused = true)]
    async fn lock_holder_ceiling_is_250_ms_in_the_same_fifo() {
        let q = queue();
        let _active = q.admit(Duration::from_secs(2)).await.expect("active");
        let started = tokio::time::Instant::now();
        let err = q.admit(Duration::from_millis(250)).await.err();
        assert!(matches!(err, Some(AdmissionError::Expired { .. })));
        assert_eq!(started.elapsed(), Duration::from_millis(250));
    }

    #[tokio::test(start_paused = true)]
    async fn close_fails_waiters_and_refuses_new_admissions() {
        let q = queue();
        let _active = q.admit(Duration::from_secs(2)).await.expect("active");
        let q2 = q.clone();
        let waiter = tokio::spawn(async move { q2.admit(Duration::from_secs(60)).await });
        while q.depth().waiting < 1 {
            tokio::task::yield_now().await;
        }
        q.close();
        assert_eq!(
            waiter.await.expect("join").err(),
            Some(AdmissionError::Closed)
        );
        assert_eq!(
            q.admit(Duration::from_secs(1)).await.err(),
            Some(AdmissionError::Closed)
        );
    }

    #[tokio::test(start_paused = true)]
    async fn depth_changes_are_reported() {
        let seen = Arc::new(AtomicUsize::new(0));
        let s2 = seen.clone();
        let q = AdmissionQueue::new(
            8,
            Arc::new(move |_| {
                s2.fetch_add(1, Ordering::SeqCst);
            }),
        );
        let p = q.admit(Duration::from_secs(1)).await.expect("active");
        drop(p);
        assert_eq!(seen.load(Ordering::SeqCst), 2);
    }
}
