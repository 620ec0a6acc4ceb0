//! A loopback TCP proxy that delays each direction by a set time (the bench's stand-in for a
//! LAN between clients and PostgreSQL: this machine's kernel has no `netem`), and counts the
//! client's request bursts on the wire.
//!
//! Each accepted connection gets a connection to the upstream address and two forwarding
//! directions. A direction reads a chunk as soon as it arrives, stamps it with
//! `arrival + delay`, and a second thread writes it upstream when that time comes, so chunks
//! keep their order, a pipelined stream stays pipelined (the delay adds latency, not a
//! throughput cap) and a round trip costs `2 × delay` more. The writer waits with
//! `std::thread::sleep` (nanosleep, tens of microseconds of overshoot) rather than tokio
//! timers, whose 1 ms wheel would round a 0.5 ms delay up to 1 ms.
//!
//! `client_bursts` counts reads on the client side that follow a server answer (or start the
//! connection): a client that waits for each answer before sending again makes one burst per
//! round trip, so bursts per submission is the wire's count of round trips.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// A running proxy; stops accepting when dropped (open connections end with their peers).
pub struct DelayProxy {
    pub addr: SocketAddr,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
}

#[derive(Default)]
struct Stats {
    client_bursts: AtomicU64,
}

impl DelayProxy {
    /// Listens on a free loopback port and forwards to `upstream`, delaying each direction by
    /// `delay` (0.5 ms each way = 1 ms of added round-trip time).
    pub fn start(upstream: SocketAddr, delay: Duration) -> std::io::Result<DelayProxy> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stats = Arc::new(Stats::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (st, sp) = (stats.clone(), stop.clone());
        std::thread::Builder::new()
            .name("delay-proxy".into())
            .spawn(move || {
                for conn in listener.incoming() {
                    if sp.load(Ordering::Relaxed) {
                        break;
                    }
                    let Ok(client) = conn else { continue };
                    let Ok(server) = TcpStream::connect(upstream) else {
                        continue;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = server.set_nodelay(true);
                    // Shared between the two directions: set when the server answered since
                    // the client's last chunk.
                    let answered = Arc::new(AtomicBool::new(true));
                    let (stats, a) = (st.clone(), answered.clone());
                    forward(&client, &server, delay, move || {
                        if a.swap(false, Ordering::Relaxed) {
                            stats.client_bursts.fetch_add(1, Ordering::Relaxed);
                        }
                    });
                    forward(&server, &client, delay, move || {
                        answered.store(true, Ordering::Relaxed)
                    });
                }
            })?;
        Ok(DelayProxy { addr, stats, stop })
    }

    /// The client's request bursts so far (see the module docs).
    pub fn client_bursts(&self) -> u64 {
        self.stats.client_bursts.load(Ordering::Relaxed)
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wake the accept loop so it sees `stop`.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Copies `from` → `to`, each chunk delayed by `delay`; `on_chunk` runs as each chunk arrives.
fn forward(
    from: &TcpStream,
    to: &TcpStream,
    delay: Duration,
    on_chunk: impl Fn() + Send + 'static,
) {
    let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
        return;
    };
    let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::spawn(move || {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    on_chunk();
                    if tx
                        .send((Instant::now() + delay, buf[..n].to_vec()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    std::thread::spawn(move || {
        while let Ok((due, bytes)) = rx.recv() {
            let now = Instant::now();
            if due > now {
                std::thread::sleep(due - now);
            }
            if to.write_all(&bytes).is_err() {
                break;
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
