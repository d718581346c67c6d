//! Transactions as deterministic procedures (DESIGN.md "Transactions").
//!
//! A [`Procedure`] reads in rounds: each [`Procedure::step`] sees every
//! value read so far and either asks for more keys ([`Step::Read`]) or
//! finishes with its writes ([`Step::Done`]) or with a deterministic
//! rollback ([`Step::Rollback`], TPC-C's invalid item). Written values may
//! depend on anything read. A step never sees its own writes (they are only
//! produced at the end), so running a procedure is: read what it asks,
//! step again, until it is done.
//!
//! A procedure is made of *parts*. A part anchored at a key touches only
//! keys on that key's shard, and its steps depend only on its own reads and
//! the procedure's parameters: it can run where its data lives, without
//! hearing from the other parts (TPC-C's New-Order is the home warehouse's
//! part plus one part per remote supplying warehouse). A part without an
//! anchor may touch any key and depend on anything it read; only
//! interactive protocols (or ones that exchange reads, as Calvin does) can
//! run it. [`Procedure::footprint`] declares, from the parameters alone, a
//! set of keys that *covers* what a part touches: every key it may touch is
//! either declared or guarded by a declared key that every transaction
//! touching it also declares (TPC-C's order rows are guarded by their
//! district). One-shot protocols detect conflicts on footprints.
//!
//! Reconnaissance (SLOG §1, Calvin's OLLP): a one-shot protocol that needs
//! a transaction's keys before running it, for a procedure whose keys
//! depend on its reads, first runs it read-only against a snapshot
//! ([`reconnoiter`]); the transaction is then submitted with the keys that
//! pass found, locked on them, and at its turn it runs only if, on the
//! values it reads then, it still touches exactly those keys
//! ([`Recon::covers`]: the read/write set, not the values, must be what
//! the pass saw); otherwise it aborts and the client retries with a new
//! pass. The check is deterministic, so participants that all see every
//! key's value (Calvin and SLOG exchange their reads) abort alike; a
//! protocol whose participants each see only their own shard (Tiga) cannot
//! use it for sets that span shards, and runs anchored procedures instead.
//!
//! Results and replay: a procedure's results are the values it read, part
//! by part, in the order it asked for them (each key once per part). From
//! those values alone [`replay`] re-runs the procedure and recovers every
//! operation it executed — the history records exactly those. Every write
//! carries a tag from the block the client reserved for the transaction
//! ([`Procedure::tag_block`]), so written values stay unique per history.

use crate::ids::Key;
use crate::program::{OpResult, Value};
use crate::strings::StringTxn;
use crate::tpcc::TpccTxn;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Every value read so far, by key (`None`: the key's initial state).
pub type ReadMap = BTreeMap<Key, Option<Value>>;

/// A key a step asks for, and whether the transaction may write it (an
/// interactive protocol then locks it exclusively at once).
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Debug, Serialize, Deserialize)]
pub struct Need {
    pub key: Key,
    pub write: bool,
}

impl Need {
    pub fn read(key: Key) -> Need {
        Need { key, write: false }
    }
    pub fn write(key: Key) -> Need {
        Need { key, write: true }
    }
}

/// What a step decides.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Step {
    /// Read these keys (those not read yet), then step again.
    Read(Vec<Need>),
    /// Finished: install these writes (each key at most once).
    Done(Vec<(Key, Value)>),
    /// Finished without effect: the transaction rolls back. Every part of
    /// a procedure decides this alike (from the parameters, or from data
    /// every part reads).
    Rollback,
}

/// Steps a part may take before it must finish: a bound against a
/// procedure that never does.
pub const STEPS_MAX: usize = 64;
/// Tags each part may use for its writes; part `p`'s writes use tags
/// `first + p * TAGS_PER_PART ..`.
pub const TAGS_PER_PART: u64 = 256;

/// A transaction procedure. New kinds of transaction are new variants.
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub enum Procedure {
    /// Moves `amount`'s value from `from` to `to`: the amount is read from
    /// a third key, so the writes depend on a read (one unanchored part).
    Transfer(Transfer),
    /// One of TPC-C's five transactions.
    Tpcc(TpccTxn),
    /// Redis's string commands, one anchored part per key
    /// (`crate::strings`).
    Strings(StringTxn),
    /// Adds `delta` to the key that `index` names: which key it writes
    /// depends on a read, as an update through a secondary index — the
    /// case Calvin's reconnaissance (OLLP) is for.
    Indirect(Indirect),
}

/// See [`Procedure::Indirect`].
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Indirect {
    /// Holds the number of the key to update (an integer value; the
    /// initial state names key 0).
    pub index: Key,
    pub delta: i64,
    pub tag: u64,
}

/// See [`Procedure::Transfer`].
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Transfer {
    pub from: Key,
    pub to: Key,
    pub amount: Key,
    /// The first tag of the transaction's block.
    pub tag: u64,
}

impl Procedure {
    /// How many parts.
    pub fn parts(&self) -> u32 {
        match self {
            Procedure::Transfer(_) | Procedure::Indirect(_) => 1,
            Procedure::Tpcc(t) => t.parts(),
            Procedure::Strings(s) => s.parts(),
        }
    }

    /// The key whose shard holds every key part `part` touches, if any.
    pub fn anchor(&self, part: u32) -> Option<Key> {
        match self {
            Procedure::Transfer(_) | Procedure::Indirect(_) => None,
            Procedure::Tpcc(t) => Some(t.anchor(part)),
            Procedure::Strings(s) => s.anchor(part),
        }
    }

    /// The next step of part `part` given everything read so far.
    pub fn step(&self, part: u32, reads: &ReadMap) -> Step {
        debug_assert!(part < self.parts(), "part {part} of {}", self.parts());
        match self {
            Procedure::Transfer(t) => t.step(reads),
            Procedure::Indirect(t) => t.step(reads),
            Procedure::Tpcc(t) => t.step(part, reads),
            Procedure::Strings(s) => s.step(part, reads),
        }
    }

    /// Keys covering everything part `part` touches (see the module doc),
    /// from the parameters alone; `None` when they cannot be declared.
    pub fn footprint(&self, part: u32) -> Option<Vec<Need>> {
        match self {
            Procedure::Transfer(_) | Procedure::Indirect(_) => None,
            Procedure::Tpcc(t) => Some(t.footprint(part)),
            Procedure::Strings(s) => Some(s.footprint(part)),
        }
    }

    /// The first tag of the transaction's block and how many it holds.
    pub fn tag_block(&self) -> (u64, u64) {
        match self {
            Procedure::Transfer(t) => (t.tag, TAGS_PER_PART),
            Procedure::Indirect(t) => (t.tag, TAGS_PER_PART),
            Procedure::Tpcc(t) => (t.tag, u64::from(t.parts()) * TAGS_PER_PART),
            Procedure::Strings(s) => (s.tag, s.tags()),
        }
    }

    /// The same transaction writing tags from `first` on (a retry).
    pub fn with_tags(&self, first: u64) -> Procedure {
        let mut p = self.clone();
        match &mut p {
            Procedure::Transfer(t) => t.tag = first,
            Procedure::Indirect(t) => t.tag = first,
            Procedure::Tpcc(t) => t.tag = first,
            Procedure::Strings(s) => s.tag = first,
        }
        p
    }

    /// Whether every part can run where its anchor lives.
    pub fn is_anchored(&self) -> bool {
        (0..self.parts()).all(|p| self.anchor(p).is_some())
    }

    /// Whether the procedure never writes, whatever it reads.
    pub fn is_read_only(&self) -> bool {
        match self {
            Procedure::Transfer(_) | Procedure::Indirect(_) => false,
            Procedure::Tpcc(t) => t.is_read_only(),
            Procedure::Strings(s) => s.is_read_only(),
        }
    }
}

/// What running one part did.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct PartRun {
    /// Every key read, in the order asked, with its value.
    pub reads: Vec<(Key, OpResult)>,
    pub writes: Vec<(Key, Value)>,
    pub rolled_back: bool,
}

/// Runs part `part` to its end, fetching each key it asks for (once) from
/// `fetch`; `memo` holds values read before (by earlier rounds, or by other
/// parts run against the same snapshot) and gains the new ones.
pub fn run_part(
    procedure: &Procedure,
    part: u32,
    memo: &mut ReadMap,
    mut fetch: impl FnMut(Key) -> OpResult,
) -> PartRun {
    let mut run = PartRun::default();
    let mut own = ReadMap::new();
    for _ in 0..STEPS_MAX {
        match procedure.step(part, &own) {
            Step::Read(needs) => {
                let mut progressed = false;
                for need in needs {
                    if own.contains_key(&need.key) {
                        continue;
                    }
                    let value = match memo.get(&need.key) {
                        Some(v) => v.clone(),
                        None => {
                            let v = fetch(need.key);
                            memo.insert(need.key, v.clone());
                            v
                        }
                    };
                    own.insert(need.key, value.clone());
                    run.reads.push((need.key, value));
                    progressed = true;
                }
                assert!(progressed, "part {part} of {procedure:?} asks again for keys it has read");
            }
            Step::Done(writes) => {
                debug_assert!(distinct_keys(&writes), "a part writes each key once: {writes:?}");
                run.writes = writes;
                return run;
            }
            Step::Rollback => {
                run.rolled_back = true;
                return run;
            }
        }
    }
    panic!("part {part} of {procedure:?} did not finish in {STEPS_MAX} steps");
}

fn distinct_keys(writes: &[(Key, Value)]) -> bool {
    let mut keys: Vec<Key> = writes.iter().map(|(k, _)| *k).collect();
    keys.sort_unstable();
    keys.windows(2).all(|w| w[0] != w[1])
}

/// What a whole procedure did, recovered from its results.
#[derive(Clone, PartialEq, Eq, Debug, Default)]
pub struct Replay {
    pub parts: Vec<PartRun>,
}

impl Replay {
    pub fn rolled_back(&self) -> bool {
        self.parts.iter().any(|p| p.rolled_back)
    }
}

/// Re-runs a procedure from its results (the values each part read, part
/// by part, in order): `None` when the results do not fit the procedure
/// (too few or too many values).
pub fn replay(procedure: &Procedure, results: &[OpResult]) -> Option<Replay> {
    let mut next = 0usize;
    let mut out = Replay::default();
    for part in 0..procedure.parts() {
        let mut short = false;
        let mut memo = ReadMap::new();
        let run = run_part(procedure, part, &mut memo, |_| match results.get(next) {
            Some(v) => {
                next += 1;
                v.clone()
            }
            None => {
                short = true;
                None
            }
        });
        if short {
            return None;
        }
        out.parts.push(run);
    }
    (next == results.len()).then_some(out)
}

/// Every part run against one reader (a store, or the reads an
/// interactive protocol gathered): the results in replay order, and the
/// writes unless some part rolls back.
pub fn execute(procedure: &Procedure, mut read: impl FnMut(Key) -> OpResult) -> (Vec<OpResult>, Vec<(Key, Value)>) {
    let mut results = Vec::new();
    let mut writes = Vec::new();
    let mut rolled_back = false;
    for part in 0..procedure.parts() {
        let mut memo = ReadMap::new();
        let run = run_part(procedure, part, &mut memo, &mut read);
        results.extend(run.reads.into_iter().map(|(_, v)| v));
        rolled_back |= run.rolled_back;
        writes.extend(run.writes);
    }
    if rolled_back {
        writes.clear();
    }
    (results, writes)
}

/// What a reconnaissance pass found: every key the procedure touched
/// (reads and writes, as [`Need`]s) and the version (tag, 0 for the initial
/// state) of every key it read (what it saw; [`Recon::covers`] decides).
#[derive(Clone, PartialEq, Eq, Debug, Serialize, Deserialize)]
pub struct Recon {
    pub keys: Vec<Need>,
    pub assumed: Vec<(Key, u64)>,
}

impl Recon {
    /// Whether `procedure`, run on `read` (the state at the transaction's
    /// turn, every key of the pass read), touches exactly the keys the pass
    /// found: the deterministic check that decides whether it runs or
    /// aborts. A step asking for a key outside them fails it — that key is
    /// neither locked nor read.
    pub fn covers(&self, procedure: &Procedure, mut read: impl FnMut(Key) -> OpResult) -> bool {
        let mut outside = false;
        let again = reconnoiter(procedure, |k| {
            if self.keys.binary_search_by_key(&k, |n| n.key).is_ok() {
                read(k)
            } else {
                outside = true;
                None
            }
        });
        !outside && again.keys == self.keys
    }
}

/// Runs `procedure` read-only against `read` (a snapshot) and reports the
/// keys it would touch and the versions it read.
pub fn reconnoiter(procedure: &Procedure, mut read: impl FnMut(Key) -> OpResult) -> Recon {
    let mut keys: Vec<Need> = Vec::new();
    let mut assumed = Vec::new();
    for part in 0..procedure.parts() {
        let mut memo = ReadMap::new();
        let run = run_part(procedure, part, &mut memo, &mut read);
        for (key, value) in run.reads {
            assumed.push((key, value.map_or(0, |v| v.tag)));
            keys.push(Need::read(key));
        }
        keys.extend(run.writes.iter().map(|(k, _)| Need::write(*k)));
    }
    keys.sort_unstable();
    // A key both read and written is a write.
    keys.dedup_by(|later, earlier| {
        later.key == earlier.key && {
            earlier.write |= later.write;
            true
        }
    });
    assumed.sort_unstable();
    assumed.dedup();
    Recon { keys, assumed }
}

impl Indirect {
    fn step(&self, reads: &ReadMap) -> Step {
        let Some(index) = reads.get(&self.index) else { return Step::Read(vec![Need::read(self.index)]) };
        let target = Key(Value::as_int(index.as_ref()).unsigned_abs());
        let Some(value) = reads.get(&target) else { return Step::Read(vec![Need::write(target)]) };
        Step::Done(vec![(target, Value::int(self.tag, Value::as_int(value.as_ref()) + self.delta))])
    }
}

impl Transfer {
    fn step(&self, reads: &ReadMap) -> Step {
        let all = [self.from, self.to, self.amount];
        if !all.iter().all(|k| reads.contains_key(k)) {
            return Step::Read(vec![Need::write(self.from), Need::write(self.to), Need::read(self.amount)]);
        }
        let int = |k: &Key| Value::as_int(reads[k].as_ref());
        let amount = int(&self.amount);
        Step::Done(vec![
            (self.from, Value::int(self.tag, int(&self.from) - amount)),
            (self.to, Value::int(self.tag + 1, int(&self.to) + amount)),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transfer() -> Procedure {
        Procedure::Transfer(Transfer { from: Key(1), to: Key(2), amount: Key(3), tag: 100 })
    }

    #[test]
    fn a_transfer_moves_the_amount_read_from_a_third_key() {
        let store: BTreeMap<Key, Value> =
            [(Key(1), Value::int(7, 50)), (Key(2), Value::int(8, 5)), (Key(3), Value::int(9, 20))].into();
        let (results, writes) = execute(&transfer(), |k| store.get(&k).cloned());
        assert_eq!(writes, vec![(Key(1), Value::int(100, 30)), (Key(2), Value::int(101, 25))]);
        assert_eq!(results.len(), 3);
        let replayed = replay(&transfer(), &results).expect("the results fit");
        assert_eq!(replayed.parts[0].writes, writes, "replay recovers the writes");
        assert_eq!(replayed.parts[0].reads.iter().map(|(k, _)| *k).collect::<Vec<_>>(), vec![Key(1), Key(2), Key(3)]);
    }

    #[test]
    fn replay_refuses_results_that_do_not_fit() {
        assert_eq!(replay(&transfer(), &[None, None]), None);
        assert_eq!(replay(&transfer(), &[None, None, None, None]), None);
        assert!(replay(&transfer(), &[None, None, None]).is_some());
    }

    /// Calvin's OLLP: a transfer's keys are its parameters, so whatever
    /// the amount becomes, the pass still covers it and it runs with the
    /// amount at its turn.
    #[test]
    fn reconnaissance_of_a_transfer_finds_its_keys_and_covers_any_amount() {
        let mut store: BTreeMap<Key, Value> =
            [(Key(1), Value::int(7, 50)), (Key(2), Value::int(8, 5)), (Key(3), Value::int(9, 20))].into();
        let recon = reconnoiter(&transfer(), |k| store.get(&k).cloned());
        let keys: Vec<(u64, bool)> = recon.keys.iter().map(|n| (n.key.0, n.write)).collect();
        assert_eq!(keys, vec![(1, true), (2, true), (3, false)]);
        assert_eq!(recon.assumed, vec![(Key(1), 7), (Key(2), 8), (Key(3), 9)]);
        store.insert(Key(3), Value::int(10, 25));
        assert!(recon.covers(&transfer(), |k| store.get(&k).cloned()), "the same keys: it runs");
    }

    /// An update through an index: when the index names another key by
    /// the transaction's turn, every participant evaluating the check on
    /// the same values aborts alike, and a new pass finds the new key.
    #[test]
    fn an_index_that_names_another_key_by_the_turn_fails_the_pass_alike_everywhere() {
        let indirect = Procedure::Indirect(Indirect { index: Key(1), delta: 5, tag: 60 });
        let mut store: BTreeMap<Key, Value> = [(Key(1), Value::int(7, 4))].into();
        let recon = reconnoiter(&indirect, |k| store.get(&k).cloned());
        assert_eq!(recon.keys, vec![Need::read(Key(1)), Need::write(Key(4))]);
        assert!(recon.covers(&indirect, |k| store.get(&k).cloned()), "nothing changed: it runs");
        store.insert(Key(1), Value::int(8, 6));
        let decisions: Vec<bool> = (0..3).map(|_| recon.covers(&indirect, |k| store.get(&k).cloned())).collect();
        assert_eq!(decisions, vec![false; 3], "every participant aborts alike");
        let again = reconnoiter(&indirect, |k| store.get(&k).cloned());
        assert_eq!(again.keys, vec![Need::read(Key(1)), Need::write(Key(6))], "the retry's pass finds key 6");
        let (_, writes) = execute(&indirect, |k| store.get(&k).cloned());
        assert_eq!(writes, vec![(Key(6), Value::int(60, 5))]);
    }

    #[test]
    fn a_retry_writes_fresh_tags() {
        let p = transfer().with_tags(500);
        let (_, writes) = execute(&p, |_| None);
        assert_eq!(writes.iter().map(|(_, v)| v.tag).collect::<Vec<_>>(), vec![500, 501]);
        assert_eq!(p.tag_block(), (500, TAGS_PER_PART));
    }
}
