//! The benchmark loop: the simulator's workload driver (sans-IO) run on
//! real time against a backend — a Meridian cluster's front-end nodes, or
//! etcd for comparison — so a real run records the same history and
//! measures the same figures as a simulated one.
//!
//! Time is the bench process's monotonic clock from the start of the run.
//! Every submission is bounded by the driver (open-loop clients drop
//! arrivals past `max_outstanding`; closed-loop ones have one in flight).
//! This module must never judge outcomes: it only carries programs out and
//! outcomes back.

use crate::client::Connection;
use crate::security::Credentials;
use meridian_core::{ClientIo, Clients, NodeId, Op, Outcome, Program, RequestId};
use meridian_workload::Driver;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// An outcome for a bench client's request.
#[derive(Debug)]
pub struct Completion {
    pub client: NodeId,
    pub request: RequestId,
    pub outcome: Outcome,
}

/// Where programs run. `submit` must not block; the outcome arrives later
/// on the completion channel the backend was built with.
pub trait Backend {
    fn submit(&mut self, client: NodeId, request: RequestId, program: Program);
}

struct Io<'a> {
    now_ns: u64,
    key_offset: u64,
    backend: &'a mut dyn Backend,
    wakes: &'a mut BinaryHeap<Reverse<(u64, u32)>>,
}

impl ClientIo for Io<'_> {
    fn now_ns(&self) -> u64 {
        self.now_ns
    }

    fn submit(&mut self, client: NodeId, request: RequestId, program: Program) {
        self.backend.submit(client, request, shift_keys(program, self.key_offset));
    }

    fn wake_at(&mut self, client: NodeId, at_ns: u64) {
        self.wakes.push(Reverse((at_ns.max(self.now_ns), client.0)));
    }
}

/// How long a run lasts, and where its keys live.
#[derive(Clone, Copy, Debug)]
pub struct Span {
    /// Clients start transactions during this long.
    pub duration_ns: u64,
    /// Then this long at most for the ones in flight to finish.
    pub drain_ns: u64,
    /// Added to every key on the way out (see [`key_offset`]); the history
    /// keeps the workload's own keys.
    pub key_offset: u64,
}

/// A fresh key range for one run on `shards` shards: a multiple of the
/// shard count (keys stay on their shards) far above any workload's keys,
/// drawn from `nonce`. Runs against a cluster that earlier runs wrote to
/// then never read those writes, whose tags their histories would share.
pub fn key_offset(shards: u32, nonce: u64) -> u64 {
    let slot = 1 + nonce % 0xF_FFFF;
    u64::from(shards.max(1)) * (slot << 32)
}

fn shift_keys(mut program: Program, offset: u64) -> Program {
    if offset == 0 {
        return program;
    }
    for op in &mut program.ops {
        let key = match op {
            Op::Read { key } | Op::Write { key, .. } | Op::Increment { key, .. } | Op::Append { key, .. } => key,
        };
        key.0 = key.0.wrapping_add(offset);
    }
    program
}

/// Runs the driver until its clients stop and drain (or the drain time
/// runs out); returns the end time in ns. `progress(now_ns, end_ns)` is
/// called about five times a second.
pub async fn drive(
    driver: &mut Driver,
    backend: &mut dyn Backend,
    completions: &mut mpsc::UnboundedReceiver<Completion>,
    span: Span,
    progress: &mut dyn FnMut(u64, u64),
) -> u64 {
    let start = Instant::now();
    let elapsed = || start.elapsed().as_nanos() as u64;
    let end_ns = span.duration_ns + span.drain_ns;
    let mut wakes = BinaryHeap::new();
    driver.start(&mut Io { now_ns: elapsed(), key_offset: span.key_offset, backend, wakes: &mut wakes });
    let mut last_progress = 0;
    let mut due = Vec::new();
    loop {
        let now = elapsed();
        // Take the wake-ups due now as one batch: one a handler asks for
        // while the batch runs waits for the next pass, so a wake-up at or
        // before `now` can never keep this loop from reaching its end.
        while let Some(Reverse((at, client))) = wakes.peek().copied() {
            if at > now {
                break;
            }
            wakes.pop();
            due.push(client);
        }
        for client in due.drain(..) {
            driver.on_wake(
                NodeId(client),
                &mut Io { now_ns: now, key_offset: span.key_offset, backend, wakes: &mut wakes },
            );
        }
        if now >= last_progress + 200_000_000 {
            last_progress = now;
            progress(now.min(end_ns), end_ns);
        }
        if (now >= span.duration_ns && driver.outstanding() == 0) || now >= end_ns {
            driver.finish(now);
            return now;
        }
        let next_ns = wakes.peek().map_or(end_ns, |Reverse((at, _))| *at).min(end_ns).min(last_progress + 200_000_000);
        let sleep = tokio::time::sleep_until(start + Duration::from_nanos(next_ns));
        tokio::select! {
            got = completions.recv() => {
                let Some(first) = got else { continue };
                let now = elapsed();
                let mut io = Io { now_ns: now, key_offset: span.key_offset, backend, wakes: &mut wakes };
                driver.on_complete(first.client, first.request, first.outcome, &mut io);
                while let Ok(c) = completions.try_recv() {
                    driver.on_complete(c.client, c.request, c.outcome, &mut io);
                }
            }
            _ = sleep => {}
        }
    }
}

/// CPU time (user + system) this process has used so far, in ns: the
/// bench reports its own share of the machine, which on a small machine
/// it takes from the servers it measures.
pub fn process_cpu_ns() -> u64 {
    // SAFETY: getrusage writes into the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return 0;
    }
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1_000;
    ns(usage.ru_utime) + ns(usage.ru_stime)
}

/// Meridian front-end nodes as a backend: one connection per bench client.
pub struct MeridianBackend {
    conns: Vec<Option<Connection>>,
    completions: mpsc::UnboundedSender<Completion>,
}

impl MeridianBackend {
    /// Connects bench client `i` (node id `clients[i].0`) to `clients[i].1`
    /// with credentials `clients[i].2`.
    pub async fn connect(
        clients: &[(NodeId, SocketAddr, Credentials)],
        completions: mpsc::UnboundedSender<Completion>,
    ) -> std::io::Result<MeridianBackend> {
        let size = clients.iter().map(|(n, _, _)| n.index() + 1).max().unwrap_or(0);
        let mut conns = vec![None; size];
        for (node, addr, creds) in clients {
            let (tx, mut rx) = mpsc::unbounded_channel::<(u64, Outcome)>();
            let conn = Connection::open_with(*addr, creds, tx).await?;
            let (client, out) = (*node, completions.clone());
            tokio::spawn(async move {
                while let Some((id, outcome)) = rx.recv().await {
                    let _ = out.send(Completion { client, request: RequestId(id), outcome });
                }
            });
            conns[node.index()] = Some(conn);
        }
        Ok(MeridianBackend { conns, completions })
    }
}

impl Backend for MeridianBackend {
    fn submit(&mut self, client: NodeId, request: RequestId, program: Program) {
        let sent =
            self.conns.get(client.index()).and_then(Option::as_ref).is_some_and(|c| c.submit(request.0, program));
        if !sent {
            // Never sent: certainly not committed.
            let outcome = Outcome::Aborted { reason: meridian_core::AbortReason::Rejected };
            let _ = self.completions.send(Completion { client, request, outcome });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::Key;

    #[test]
    fn shifted_keys_stay_on_their_shards() {
        for shards in [1u32, 3, 7, 64] {
            let offset = key_offset(shards, 0xdead_beef);
            let p = shift_keys(Program::new(vec![Op::Read { key: Key(5) }]), offset);
            assert_eq!(p.ops[0].key().0 % u64::from(shards), 5 % u64::from(shards));
            assert!(p.ops[0].key().0 > 1 << 32);
        }
    }
}
