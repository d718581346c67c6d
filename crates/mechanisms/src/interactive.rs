//! The interactive coordinator's protocol-independent part: which keys an
//! execute round reads and locks, the rounds of a procedure until it has
//! its reads, the writes buffered per shard until commit, which replica a
//! read goes to, and bounded retries that keep a transaction's priority.
//! Participants are shards unless the protocol locks at a finer unit
//! (2pl-paxos with `lock_at = "home"`: a shard's keys homed at one region).
//!
//! Shared by the protocols whose coordinator executes a transaction before
//! committing it (2pl-paxos today; occ-paxos, d2pl-ttc, mvto-hlc, K2,
//! STARRY, TAPIR and raft-occ). The commit itself — prepare, validate,
//! decide — is the protocol's: it takes the read set and the buffered
//! writes from here. Sans-IO: nothing here sends, reads a clock or keeps a
//! timer; the protocol turns rounds into its own messages.

use crate::small_map::SmallMap;
use meridian_core::{Deployment, Execution, Key, NodeId, Op, Program, RegionId, ShardId, Step, Value};
use std::collections::BTreeMap;

/// Execute rounds an attempt may take: a bound against a procedure that
/// keeps asking.
pub const ROUNDS_MAX: u32 = 256;

/// A key an execute round needs: read it (its value comes back), and hold
/// it for writing or only for reading.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct RoundKey {
    pub key: Key,
    pub write: bool,
    pub read: bool,
}

/// The keys of the next execute round given what was read so far: for the
/// first round the operations' keys (written ones for writing; read if the
/// operation reads or appends), then whatever the procedure's parts ask for
/// that has not been read. Empty when the program is done reading.
pub fn round_keys(program: &Program, reads: &BTreeMap<Key, Option<Value>>, first: bool) -> Vec<RoundKey> {
    let mut keys: Vec<RoundKey> = Vec::new();
    if first {
        for op in &program.ops {
            let read = op.reads() || matches!(op, Op::Append { .. });
            keys.push(RoundKey { key: op.key(), write: op.writes(), read });
        }
    }
    if let Some(p) = &program.procedure {
        for part in 0..p.parts() {
            if let Step::Read(needs) = p.step(part, reads) {
                let unread = needs.iter().filter(|n| !reads.contains_key(&n.key));
                keys.extend(unread.map(|n| RoundKey { key: n.key, write: n.write, read: true }));
            }
        }
    }
    keys
}

/// What an answer to an execute round did.
#[derive(Debug, PartialEq)]
pub enum Progress {
    /// Other shards of the round have yet to answer.
    Waiting,
    /// An answer to an earlier round, or a second one from the same shard.
    Duplicate,
    /// The procedure asks for more: run this round next.
    NextRound(Vec<RoundKey>),
    /// Everything is read: the writes are computed.
    Done(Execution),
    /// The procedure kept asking past [`ROUNDS_MAX`] rounds.
    TooManyRounds,
}

/// One attempt's execution: the rounds in flight and the read set. Rounds
/// are answered by participants `P`: shards, or whatever unit the protocol
/// locks at (2pl-paxos's `lock_at = "home"`: a shard's home partition).
#[derive(Debug)]
pub struct Execute<P = ShardId> {
    round: u32,
    /// The few participants yet to answer: a sorted vector, not a B-tree.
    waiting: SmallMap<P, ()>,
    reads: BTreeMap<Key, Option<Value>>,
}

impl<P: Copy + Ord> Execute<P> {
    /// Starts round 0, which the given participants answer.
    pub fn start(shards: impl IntoIterator<Item = P>) -> Execute<P> {
        Execute { round: 0, waiting: shards.into_iter().map(|p| (p, ())).collect(), reads: BTreeMap::new() }
    }

    pub fn round(&self) -> u32 {
        self.round
    }

    /// What was read so far (`None`: the key's initial state).
    pub fn reads(&self) -> &BTreeMap<Key, Option<Value>> {
        &self.reads
    }

    /// Whether `shard` still owes an answer to the current round.
    pub fn waiting_for(&self, shard: P) -> bool {
        self.waiting.contains_key(&shard)
    }

    pub fn waiting(&self) -> impl Iterator<Item = P> + '_ {
        self.waiting.keys().copied()
    }

    /// `shard`'s answer to `round`: what it read.
    pub fn on_reads(
        &mut self,
        program: &Program,
        shard: P,
        round: u32,
        reads: impl IntoIterator<Item = (Key, Option<Value>)>,
    ) -> Progress {
        if round != self.round || self.waiting.remove(&shard).is_none() {
            return Progress::Duplicate;
        }
        self.reads.extend(reads);
        if !self.waiting.is_empty() {
            return Progress::Waiting;
        }
        let more = round_keys(program, &self.reads, false);
        if more.is_empty() {
            return Progress::Done(program.execute(|k| self.reads.get(&k).cloned().flatten()));
        }
        if self.round + 1 >= ROUNDS_MAX {
            return Progress::TooManyRounds;
        }
        Progress::NextRound(more)
    }

    /// Starts the next round, answered by `shards`.
    pub fn next_round(&mut self, shards: impl IntoIterator<Item = P>) -> u32 {
        assert!(self.waiting.is_empty(), "round {} still has answers to come", self.round);
        self.round += 1;
        self.waiting = shards.into_iter().map(|p| (p, ())).collect();
        self.round
    }
}

/// The writes an execution buffered, by the participant (the shard, or the
/// unit the protocol locks at) that installs them.
pub fn writes_by_participant<P: Ord>(
    exec: &Execution,
    participant_of: impl Fn(Key) -> P,
) -> SmallMap<P, Vec<(Key, Value)>> {
    let mut by: SmallMap<P, Vec<(Key, Value)>> = SmallMap::new();
    for (key, value) in &exec.writes {
        by.get_or_insert_with(participant_of(*key), Vec::new).push((*key, value.clone()));
    }
    by
}

/// Which replica of a shard a read goes to.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ReadFrom {
    /// The shard's leader (as last heard).
    Leader,
    /// The replica with the shortest nominal round trip from the reader.
    Nearest,
}

/// The replica `shard`'s reads go to from a coordinator in `region`.
pub fn read_target(
    from: ReadFrom,
    deployment: &Deployment,
    shard: ShardId,
    region: RegionId,
    leader_hint: NodeId,
) -> NodeId {
    match from {
        ReadFrom::Leader => leader_hint,
        ReadFrom::Nearest => deployment.nearest_replica(shard, region),
    }
}

/// How often and how soon an aborted transaction runs again.
#[derive(Copy, Clone, Debug)]
pub struct RetryPolicy {
    pub max_attempts: u32,
    /// Backoff before attempt `n + 1` is `n × backoff_ns` plus jitter
    /// below `backoff_ns`.
    pub backoff_ns: u64,
}

/// A request's attempts: how many so far, and the priority the first one
/// took (kept by every retry, so an old transaction ages into the oldest
/// and cannot starve under wound-wait or wait-die).
#[derive(Debug)]
pub struct Attempts<P> {
    count: u32,
    priority: Option<P>,
}

/// What to do after an attempt aborted.
#[derive(Debug, PartialEq, Eq)]
pub enum Retry {
    /// Run the next attempt after this long.
    After { backoff_ns: u64 },
    /// `max_attempts` attempts ran: report the abort.
    GiveUp,
}

impl<P: Copy> Default for Attempts<P> {
    fn default() -> Self {
        Attempts { count: 0, priority: None }
    }
}

impl<P: Copy> Attempts<P> {
    /// Starts an attempt; the first one's priority is `first` and every
    /// later one keeps it.
    pub fn begin(&mut self, first: impl FnOnce() -> P) -> P {
        self.count += 1;
        *self.priority.get_or_insert_with(first)
    }

    pub fn count(&self) -> u32 {
        self.count
    }

    /// The priority every attempt keeps (once one began).
    pub fn priority(&self) -> Option<P> {
        self.priority
    }

    /// After an abort: retry after a backoff plus `jitter_ns()` (below the
    /// base, from the caller's seeded randomness; drawn only when retrying),
    /// or give up.
    pub fn after_abort(&self, policy: &RetryPolicy, jitter_ns: impl FnOnce() -> u64) -> Retry {
        if self.count >= policy.max_attempts {
            return Retry::GiveUp;
        }
        let backoff_ns = policy.backoff_ns.saturating_mul(u64::from(self.count)) + jitter_ns();
        Retry::After { backoff_ns }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use meridian_core::procedure::{Procedure, Transfer};

    fn int(v: i64) -> Option<Value> {
        Some(Value::int(0, v))
    }

    #[test]
    fn a_transaction_reads_then_computes_its_writes_from_what_it_read() {
        let p = Program::new(vec![Op::Increment { key: Key(1), delta: 5, tag: 1 }, Op::Read { key: Key(2) }]);
        let first = round_keys(&p, &BTreeMap::new(), true);
        assert_eq!(
            first,
            [RoundKey { key: Key(1), write: true, read: true }, RoundKey { key: Key(2), write: false, read: true }]
        );
        let mut ex = Execute::start([ShardId(0), ShardId(1)]);
        assert_eq!(ex.on_reads(&p, ShardId(1), 0, [(Key(2), int(7))]), Progress::Waiting);
        assert_eq!(ex.on_reads(&p, ShardId(1), 0, [(Key(2), int(7))]), Progress::Duplicate);
        let Progress::Done(exec) = ex.on_reads(&p, ShardId(0), 0, [(Key(1), int(10))]) else { panic!("done") };
        assert_eq!(exec.writes, vec![(Key(1), Value::int(1, 15))]);
    }

    #[test]
    fn a_procedure_runs_round_after_round_until_it_has_its_reads() {
        // A transfer needs both accounts and the key holding the amount;
        // a first round that brought back only the accounts is followed
        // by one for the amount, and then the writes are computed.
        let t = Transfer { from: Key(1), to: Key(2), amount: Key(3), tag: 9 };
        let p = Program::procedure(Procedure::Transfer(t));
        let first = round_keys(&p, &BTreeMap::new(), true);
        assert_eq!(first.iter().map(|k| k.key).collect::<Vec<_>>(), [Key(1), Key(2), Key(3)]);
        assert!(first[0].write && first[1].write && !first[2].write, "the accounts are held for writing");
        let mut ex = Execute::start([ShardId(0)]);
        let Progress::NextRound(more) = ex.on_reads(&p, ShardId(0), 0, [(Key(1), int(50)), (Key(2), int(5))]) else {
            panic!("the amount is still unread")
        };
        assert_eq!(more, [RoundKey { key: Key(3), write: false, read: true }]);
        assert_eq!(ex.next_round([ShardId(0)]), 1);
        let Progress::Done(exec) = ex.on_reads(&p, ShardId(0), 1, [(Key(3), int(20))]) else { panic!("done") };
        assert_eq!(exec.writes, vec![(Key(1), Value::int(9, 30)), (Key(2), Value::int(10, 25))]);
    }

    #[test]
    fn rounds_are_bounded() {
        let t = Transfer { from: Key(1), to: Key(2), amount: Key(3), tag: 9 };
        let p = Program::procedure(Procedure::Transfer(t));
        let mut ex = Execute::start([ShardId(0)]);
        for _ in 0..ROUNDS_MAX - 1 {
            // Answers that never bring the amount back.
            assert!(matches!(ex.on_reads(&p, ShardId(0), ex.round(), []), Progress::NextRound(_)));
            ex.next_round([ShardId(0)]);
        }
        assert_eq!(ex.on_reads(&p, ShardId(0), ex.round(), []), Progress::TooManyRounds);
    }

    #[test]
    fn an_answer_to_an_old_round_changes_nothing() {
        let p = Program::new(vec![Op::Read { key: Key(1) }]);
        let mut ex = Execute::start([ShardId(0)]);
        assert_eq!(ex.on_reads(&p, ShardId(0), 3, [(Key(1), int(1))]), Progress::Duplicate);
        assert!(ex.waiting_for(ShardId(0)));
        assert!(ex.reads().is_empty());
    }

    #[test]
    fn retries_stop_after_max_attempts_and_keep_the_first_priority() {
        let policy = RetryPolicy { max_attempts: 3, backoff_ns: 100 };
        let mut a: Attempts<u64> = Attempts::default();
        assert_eq!(a.begin(|| 7), 7);
        assert_eq!(a.after_abort(&policy, || 5), Retry::After { backoff_ns: 105 });
        assert_eq!(a.begin(|| 99), 7, "a retry keeps its priority");
        assert_eq!(a.after_abort(&policy, || 0), Retry::After { backoff_ns: 200 }, "backoff grows per attempt");
        a.begin(|| 99);
        assert_eq!(a.after_abort(&policy, || panic!("no jitter drawn to give up")), Retry::GiveUp);
        assert_eq!(a.count(), 3);
    }

    #[test]
    fn buffered_writes_go_to_the_shard_of_their_key() {
        let writes = vec![(Key(2), Value::int(1, 1)), (Key(3), Value::int(1, 2)), (Key(4), Value::int(1, 3))];
        let exec = Execution { writes, results: vec![] };
        let by = writes_by_participant(&exec, |k| ShardId((k.0 % 2) as u32));
        assert_eq!(by.get(&ShardId(0)), Some(&vec![(Key(2), Value::int(1, 1)), (Key(4), Value::int(1, 3))]));
        assert_eq!(by.get(&ShardId(1)), Some(&vec![(Key(3), Value::int(1, 2))]));
        assert_eq!(by.len(), 2);
    }
}
