//! Reconnaissance (Calvin's OLLP; SLOG §1: "Calvin uses a combination of
//! static analysis and OLLP to determine read and write sets prior to
//! transaction execution, our implementation also uses these techniques")
//! for the deterministic protocols' clients: a procedure whose keys, or
//! whose writes, depend on what it reads cannot be ordered before its keys
//! are known. The client first runs it read-only against its region's
//! replicas, without locks ([`meridian_core::procedure::reconnoiter`]),
//! learning the keys it touches and the versions it read; the transaction
//! is then submitted with that [`Recon`], locked on those keys, and at its
//! turn runs only if, on the values read then, it touches exactly those
//! keys ([`Recon::covers`]) — a check every participant makes on the same
//! exchanged reads, so all of them run it or all abort it. An aborted one
//! comes back to the client, which makes a new pass (bounded by the
//! client's `max_attempts`).
//!
//! A pass reads in rounds, as the procedure asks: each round's missing
//! keys are fetched and the procedure is stepped again, until it asks for
//! nothing new. A round without an answer for `retry` ticks is asked again
//! of another copy.

use meridian_core::procedure::{self, ReadMap, Recon};
use meridian_core::{Key, NodeId, OpResult, Program, RegionId, RequestId, ShardId, Topology};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Most passes a client runs at once (one per request in flight; the
/// client's own bound on requests applies first).
pub const PASSES_MAX: usize = 65_536;

/// Most keys one pass may read: a procedure asking for more is refused.
pub const PASS_KEYS_MAX: usize = 4_096;

#[derive(Clone, Debug)]
struct Pass {
    program: Program,
    known: ReadMap,
    asked: BTreeSet<Key>,
    /// The tick the current round was asked, and how many times.
    asked_tick: u64,
    asks: u32,
    /// Attempts this request made before this pass (0: a new one).
    attempts: u32,
}

/// What a pass needs next.
#[derive(Clone, Debug, PartialEq)]
pub enum Next {
    /// Read these keys (not yet known) from the region's copy: `attempt`
    /// counts the asks of this round, so a retry can ask another copy.
    Read { keys: Vec<Key>, attempt: u32 },
    /// The pass is complete: submit the program with its reconnaissance.
    Done { program: Program, recon: Arc<Recon>, attempts: u32 },
    /// The procedure asks for more keys than a pass may read.
    TooLarge,
}

/// The passes a client is running.
pub struct Reconnaissance {
    passes: BTreeMap<RequestId, Pass>,
    ticks: u64,
    retry_ticks: u64,
}

/// Whether a program needs reconnaissance: a procedure part that does not
/// run where its anchor lives (its keys or writes depend on other shards'
/// reads).
pub fn needed(program: &Program) -> bool {
    !program.is_one_shot()
}

/// Whom a pass asks for `keys`: each key's copy in `region`, or after
/// `attempt` unanswered asks the copy that many regions further on.
pub fn readers(topo: &Topology, region: RegionId, keys: Vec<Key>, attempt: u32) -> BTreeMap<NodeId, Vec<Key>> {
    let mut by_replica: BTreeMap<NodeId, Vec<Key>> = BTreeMap::new();
    for k in keys {
        let copies = topo.replicas(topo.shard_of(k));
        let here = copies.iter().position(|r| topo.region_of(*r) == region).unwrap_or(0);
        by_replica.entry(copies[(here + attempt as usize) % copies.len()]).or_default().push(k);
    }
    by_replica
}

/// A copy's answer to a pass: the current values of the asked keys it
/// holds, read without locks (the check at execution makes up for that).
pub fn read_values(
    topo: &Topology,
    shard: ShardId,
    keys: Vec<Key>,
    read: impl Fn(Key) -> OpResult,
) -> Vec<(Key, OpResult)> {
    keys.into_iter().filter(|k| topo.shard_of(*k) == shard).take(PASS_KEYS_MAX).map(|k| (k, read(k))).collect()
}

impl Reconnaissance {
    pub fn new(retry_ns: u64, tick_ns: u64) -> Reconnaissance {
        Reconnaissance { passes: BTreeMap::new(), ticks: 0, retry_ticks: retry_ns.div_ceil(tick_ns).max(1) }
    }

    /// Passes in flight.
    pub fn len(&self) -> usize {
        self.passes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.passes.is_empty()
    }

    /// Starts a pass for `request`, which has made `attempts` before (its
    /// last one aborted at execution: its reconnaissance no longer held).
    pub fn begin(&mut self, request: RequestId, program: Program, attempts: u32) -> Option<Next> {
        if self.passes.len() >= PASSES_MAX {
            return None;
        }
        let pass =
            Pass { program, known: ReadMap::new(), asked: BTreeSet::new(), asked_tick: self.ticks, asks: 0, attempts };
        self.passes.insert(request, pass);
        Some(self.step(request))
    }

    /// Values read for a pass; what it needs next, if it is still running
    /// and this answer completed its round.
    pub fn values(&mut self, request: RequestId, values: Vec<(Key, OpResult)>) -> Option<Next> {
        let pass = self.passes.get_mut(&request)?;
        for (key, value) in values {
            if pass.asked.remove(&key) {
                pass.known.insert(key, value);
            }
        }
        if !pass.asked.is_empty() {
            return None;
        }
        Some(self.step(request))
    }

    /// Runs the procedure on what the pass knows: the keys it still needs,
    /// or the finished reconnaissance (the pass then ends).
    fn step(&mut self, request: RequestId) -> Next {
        let pass = self.passes.get_mut(&request).expect("a pass");
        let p = pass.program.procedure.as_ref().expect("reconnaissance is for procedures");
        let mut missing = BTreeSet::new();
        let recon = procedure::reconnoiter(p, |k| match pass.known.get(&k) {
            Some(v) => v.clone(),
            None => {
                missing.insert(k);
                None
            }
        });
        if pass.known.len() + missing.len() > PASS_KEYS_MAX {
            self.passes.remove(&request);
            return Next::TooLarge;
        }
        if missing.is_empty() {
            let pass = self.passes.remove(&request).expect("a pass");
            return Next::Done { program: pass.program, recon: Arc::new(recon), attempts: pass.attempts };
        }
        pass.asked = missing.clone();
        pass.asked_tick = self.ticks;
        pass.asks = 0;
        Next::Read { keys: missing.into_iter().collect(), attempt: 0 }
    }

    /// One tick: rounds unanswered for `retry` ticks are asked again.
    pub fn tick(&mut self) -> Vec<(RequestId, Vec<Key>, u32)> {
        self.ticks += 1;
        let (now, retry) = (self.ticks, self.retry_ticks);
        let mut again = Vec::new();
        for (request, pass) in self.passes.iter_mut().filter(|(_, p)| now >= p.asked_tick + retry) {
            pass.asked_tick = now;
            pass.asks += 1;
            again.push((*request, pass.asked.iter().copied().collect(), pass.asks));
        }
        again
    }

    pub fn check_invariants(&self) {
        assert!(self.passes.len() <= PASSES_MAX, "passes past their bound");
        for pass in self.passes.values().take(meridian_core::process::CHECKED_MAX) {
            assert!(!pass.asked.is_empty(), "a pass in flight waits for keys");
            assert!(pass.known.len() + pass.asked.len() <= PASS_KEYS_MAX, "a pass past its key bound");
            assert!(pass.asked.iter().all(|k| !pass.known.contains_key(k)), "a key asked is not known");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::Value;
    use meridian_core::procedure::{Procedure, Transfer};

    fn transfer() -> Program {
        Program::procedure(Procedure::Transfer(Transfer { from: Key(1), to: Key(2), amount: Key(3), tag: 40 }))
    }

    #[test]
    fn a_pass_reads_what_the_procedure_asks_and_ends_with_the_keys_and_versions_it_saw() {
        let mut r = Reconnaissance::new(300, 100);
        let Some(Next::Read { keys, attempt: 0 }) = r.begin(RequestId(1), transfer(), 0) else { panic!() };
        assert_eq!(keys, vec![Key(1), Key(2), Key(3)]);
        let partial = r.values(RequestId(1), vec![(Key(1), Some(Value::int(7, 50)))]);
        assert_eq!(partial, None, "the round waits for every key it asked");
        let done = r.values(RequestId(1), vec![(Key(2), None), (Key(3), Some(Value::int(9, 20)))]);
        let Some(Next::Done { recon, attempts: 0, .. }) = done else { panic!("{done:?}") };
        assert_eq!(recon.assumed, vec![(Key(1), 7), (Key(2), 0), (Key(3), 9)]);
        assert!(recon.keys.iter().any(|n| n.key == Key(1) && n.write), "what it writes is locked exclusively");
        assert!(r.is_empty(), "the pass ended");
    }

    #[test]
    fn an_unanswered_round_is_asked_again_after_the_retry_period() {
        let mut r = Reconnaissance::new(300, 100);
        r.begin(RequestId(1), transfer(), 0);
        assert!(r.tick().is_empty() && r.tick().is_empty(), "not before retry_ms");
        let again = r.tick();
        assert_eq!(again, vec![(RequestId(1), vec![Key(1), Key(2), Key(3)], 1)]);
        r.check_invariants();
    }
}
