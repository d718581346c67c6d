//! Toy transactional stores driven by simulated clients, producing
//! histories in the CONTRACT's format to test the checker end to end.
//!
//! Everything is deterministic: a seeded splitmix64 generator picks which
//! client moves next, what it asks for, and what the store does, so a seed
//! always yields the same history. Each client process runs one transaction
//! at a time; a store advances a transaction one *step* at a time, and other
//! clients' steps interleave between them, which is where concurrency (and
//! each broken store's bug) comes from. Time advances 1 µs per history line.
//!
//! Keys below [`REGISTER_BASE`] are lists (append / read the whole list);
//! keys from it up are registers (write / read one value). Every written
//! value and appended element is unique.

#![allow(dead_code)] // each test binary uses a different subset

use meridian_checker::{HistoryOp, Mop, OpType, ReadValue};
use std::collections::BTreeMap;

/// splitmix64: tiny, fast, and good enough to drive a simulation.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p && p > 0.0
    }
}

pub const REGISTER_BASE: u64 = 1_000_000;

pub fn is_list(key: u64) -> bool {
    key < REGISTER_BASE
}

/// A key-value state: lists and registers.
#[derive(Clone, Default, Debug)]
pub struct Db {
    lists: BTreeMap<u64, Vec<u64>>,
    regs: BTreeMap<u64, u64>,
}

impl Db {
    pub fn read(&self, key: u64) -> ReadValue {
        if is_list(key) {
            ReadValue::List(self.lists.get(&key).cloned().unwrap_or_default())
        } else {
            self.regs.get(&key).map_or(ReadValue::Nil, |&v| ReadValue::Register(v))
        }
    }

    /// Reads `key` as a transaction that has buffered `own` writes sees it.
    pub fn view(&self, key: u64, own: &[Mop]) -> ReadValue {
        let mut value = self.read(key);
        for m in own {
            match (m, &mut value) {
                (Mop::Append { key: k, element }, ReadValue::List(xs)) if *k == key => xs.push(*element),
                (Mop::Write { key: k, value: v }, _) if *k == key => value = ReadValue::Register(*v),
                _ => {}
            }
        }
        value
    }

    /// Applies a write or append; returns the register's previous value.
    pub fn apply(&mut self, m: &Mop) -> Option<u64> {
        match *m {
            Mop::Append { key, element } => {
                self.lists.entry(key).or_default().push(element);
                None
            }
            Mop::Write { key, value } => self.regs.insert(key, value),
            Mop::Read { .. } => None,
        }
    }

    /// Takes back a write made by [`Db::apply`] (for rollbacks).
    pub fn undo(&mut self, m: &Mop, previous: Option<u64>) {
        match *m {
            Mop::Append { key, element } => {
                if let Some(xs) = self.lists.get_mut(&key) {
                    xs.retain(|&x| x != element);
                }
            }
            Mop::Write { key, value } => {
                if self.regs.get(&key) == Some(&value) {
                    match previous {
                        Some(p) => self.regs.insert(key, p),
                        None => self.regs.remove(&key),
                    };
                }
            }
            Mop::Read { .. } => {}
        }
    }

    /// Runs a whole transaction at once; returns its results.
    pub fn run(&mut self, mops: &[Mop]) -> Vec<Mop> {
        mops.iter().map(|m| self.step(m)).collect()
    }

    /// Runs one operation against this state directly.
    pub fn step(&mut self, m: &Mop) -> Mop {
        match *m {
            Mop::Read { key, .. } => Mop::Read { key, value: self.read(key) },
            _ => {
                self.apply(m);
                m.clone()
            }
        }
    }
}

#[derive(Copy, Clone, PartialEq, Eq, Debug)]
pub enum Outcome {
    Ok,
    Fail,
    Info,
}

/// A transaction in flight, with scratch space for whatever the store needs.
#[derive(Default)]
pub struct Active {
    pub process: u64,
    /// As invoked.
    pub mops: Vec<Mop>,
    /// Results so far (what an `ok` completion reports).
    pub done: Vec<Mop>,
    /// Next operation to run.
    pub pc: usize,
    pub started: bool,
    pub verdict: Option<Outcome>,
    pub snapshot: Option<Db>,
    pub start_version: u64,
    /// Buffered writes.
    pub buffer: Vec<Mop>,
    /// Applied writes with the register values they replaced.
    pub undo: Vec<(Mop, Option<u64>)>,
    pub replica: usize,
    /// (key, log length) the transaction waits to see on its replica.
    pub waits: Vec<(u64, usize)>,
}

impl Active {
    pub fn writes(&self) -> impl Iterator<Item = &Mop> {
        self.mops.iter().filter(|m| !matches!(m, Mop::Read { .. }))
    }

    pub fn read_only(&self) -> bool {
        self.writes().next().is_none()
    }
}

/// A transactional store (correct or not).
pub trait Store {
    /// Advances `txn` by one step; returns how it ended once it has. An
    /// `Ok` transaction's results are in `txn.done`.
    fn step(&mut self, txn: &mut Active, rng: &mut Rng) -> Option<Outcome>;

    /// Background work between client steps (replication, say).
    fn tick(&mut self, _rng: &mut Rng) {}
}

/// What clients ask for.
#[derive(Copy, Clone, Debug)]
pub enum Workload {
    /// 1-4 appends and reads over `keys` list keys.
    ListAppend { keys: u64 },
    /// Read-modify-writes of 1-2 registers, or reads of 2-3.
    Registers { keys: u64 },
    /// Appends to 2-3 list keys, or reads of 2-3 (RAMP-style).
    ReadOrWrite { keys: u64 },
    /// Read both registers of a pair, write one of them.
    WriteSkew { pairs: u64 },
    /// Append to one list key and read another.
    CrossFlow { keys: u64 },
    /// Write one key twice, or read it (lists when `list`).
    DoubleWrite { keys: u64, list: bool },
    /// Many keys: register read-modify-writes, appends and reads.
    Mixed { keys: u64 },
}

/// Unique values for writes and appends.
pub struct Values(u64);

impl Values {
    fn next(&mut self) -> u64 {
        self.0 += 1;
        self.0
    }
}

fn read(key: u64) -> Mop {
    Mop::Read { key, value: ReadValue::Nil }
}

fn distinct(rng: &mut Rng, n: usize, keys: u64, base: u64) -> Vec<u64> {
    let mut out: Vec<u64> = Vec::new();
    while out.len() < n.min(keys as usize) {
        let k = base + rng.below(keys);
        if !out.contains(&k) {
            out.push(k);
        }
    }
    out
}

impl Workload {
    pub fn generate(self, rng: &mut Rng, values: &mut Values) -> Vec<Mop> {
        match self {
            Workload::ListAppend { keys } => (0..1 + rng.below(4))
                .map(|_| {
                    let key = rng.below(keys);
                    if rng.chance(0.5) { Mop::Append { key, element: values.next() } } else { read(key) }
                })
                .collect(),
            Workload::Registers { keys } => {
                if rng.chance(0.4) {
                    let n = 2 + rng.below(2) as usize;
                    distinct(rng, n, keys, REGISTER_BASE).into_iter().map(read).collect()
                } else {
                    let n = 1 + rng.below(2) as usize;
                    let ks = distinct(rng, n, keys, REGISTER_BASE);
                    let mut mops: Vec<Mop> = ks.iter().map(|&k| read(k)).collect();
                    mops.extend(ks.iter().map(|&key| Mop::Write { key, value: values.next() }));
                    mops
                }
            }
            Workload::ReadOrWrite { keys } => {
                let n = 2 + rng.below(2) as usize;
                let ks = distinct(rng, n, keys, 0);
                if rng.chance(0.5) {
                    ks.into_iter().map(read).collect()
                } else {
                    ks.into_iter().map(|key| Mop::Append { key, element: values.next() }).collect()
                }
            }
            Workload::WriteSkew { pairs } => {
                let x = REGISTER_BASE + 2 * rng.below(pairs);
                let target = x + rng.below(2);
                vec![read(x), read(x + 1), Mop::Write { key: target, value: values.next() }]
            }
            Workload::CrossFlow { keys } => {
                let ks = distinct(rng, 2, keys, 0);
                vec![Mop::Append { key: ks[0], element: values.next() }, read(ks[1])]
            }
            Workload::DoubleWrite { keys, list } => {
                let key = rng.below(keys) + if list { 0 } else { REGISTER_BASE };
                if rng.chance(0.5) {
                    return vec![read(key)];
                }
                let write = |element| {
                    if list { Mop::Append { key, element } } else { Mop::Write { key, value: element } }
                };
                vec![write(values.next()), write(values.next())]
            }
            Workload::Mixed { keys } => {
                let n = 1 + rng.below(3) as usize;
                let ks = distinct(rng, n, keys, 0);
                let mut mops = Vec::new();
                for k in ks {
                    match rng.below(3) {
                        0 => {
                            let key = REGISTER_BASE + k;
                            mops.push(read(key));
                            mops.push(Mop::Write { key, value: values.next() });
                        }
                        1 => mops.push(Mop::Append { key: k, element: values.next() }),
                        _ => mops.push(read(if rng.chance(0.5) { k } else { REGISTER_BASE + k })),
                    }
                }
                mops
            }
        }
    }
}

/// How big a simulation is.
#[derive(Copy, Clone, Debug)]
pub struct Run {
    pub processes: u64,
    pub txns: usize,
    pub seed: u64,
}

fn record(history: &mut Vec<HistoryOp>, kind: OpType, process: u64, value: Vec<Mop>) {
    let index = history.len() as u64;
    history.push(HistoryOp { index, kind, process, time_ns: (index + 1) * 1_000, value, meta: Default::default() });
}

/// Drives `store` with `run.processes` clients until `run.txns`
/// transactions have finished; every invocation gets a completion.
pub fn simulate(store: &mut dyn Store, workload: Workload, run: Run) -> Vec<HistoryOp> {
    let mut rng = Rng::new(run.seed);
    let mut values = Values(0);
    let mut active: Vec<Option<Active>> = (0..run.processes).map(|_| None).collect();
    let mut history: Vec<HistoryOp> = Vec::new();
    let mut issued = 0;
    loop {
        store.tick(&mut rng);
        let p = rng.below(run.processes);
        match &mut active[p as usize] {
            None if issued < run.txns => {
                let mops = workload.generate(&mut rng, &mut values);
                record(&mut history, OpType::Invoke, p, mops.clone());
                active[p as usize] = Some(Active { process: p, mops, ..Active::default() });
                issued += 1;
            }
            None => {
                if active.iter().all(Option::is_none) {
                    return history;
                }
            }
            Some(txn) => {
                if let Some(outcome) = store.step(txn, &mut rng) {
                    let (kind, value) = match outcome {
                        Outcome::Ok => (OpType::Ok, std::mem::take(&mut txn.done)),
                        Outcome::Fail => (OpType::Fail, txn.mops.clone()),
                        Outcome::Info => (OpType::Info, txn.mops.clone()),
                    };
                    record(&mut history, kind, p, value);
                    active[p as usize] = None;
                }
            }
        }
    }
}

// ---------------------------------------------------------------- stores

/// Correct: each transaction runs atomically at a single step between its
/// invocation and completion (so the history is strict serializable). Some
/// transactions fail without effect; some end indeterminate (`info`), having
/// taken effect or not.
pub struct Serial {
    db: Db,
    fail: f64,
    info: f64,
}

impl Serial {
    pub fn new(fail: f64, info: f64) -> Serial {
        Serial { db: Db::default(), fail, info }
    }
}

impl Store for Serial {
    fn step(&mut self, t: &mut Active, rng: &mut Rng) -> Option<Outcome> {
        if t.started {
            return t.verdict;
        }
        t.started = true;
        t.verdict = Some(if rng.chance(self.fail) {
            Outcome::Fail
        } else if rng.chance(self.info) {
            if rng.chance(0.5) {
                self.db.run(&t.mops);
            }
            Outcome::Info
        } else {
            t.done = self.db.run(&t.mops);
            Outcome::Ok
        });
        None
    }
}

/// No isolation at all: each operation runs against shared state when it is
/// stepped, and writes are visible at once (dirty). With `abort` > 0 some
/// transactions roll back at the end, after others may have seen them.
pub struct Uncommitted {
    db: Db,
    abort: f64,
}

impl Uncommitted {
    pub fn new(abort: f64) -> Uncommitted {
        Uncommitted { db: Db::default(), abort }
    }
}

impl Store for Uncommitted {
    fn step(&mut self, t: &mut Active, rng: &mut Rng) -> Option<Outcome> {
        if let Some(m) = t.mops.get(t.pc).cloned() {
            t.pc += 1;
            if let Mop::Read { .. } = m {
                t.done.push(self.db.step(&m));
            } else {
                let previous = self.db.apply(&m);
                t.undo.push((m.clone(), previous));
                t.done.push(m);
            }
            return None;
        }
        if rng.chance(self.abort) {
            for (m, previous) in t.undo.iter().rev() {
                self.db.undo(m, *previous);
            }
            return Some(Outcome::Fail);
        }
        Some(Outcome::Ok)
    }
}

/// Read committed: writes are buffered and installed together at commit;
/// each read sees the latest committed state at the moment it runs.
#[derive(Default)]
pub struct ReadCommitted {
    db: Db,
}

impl Store for ReadCommitted {
    fn step(&mut self, t: &mut Active, _rng: &mut Rng) -> Option<Outcome> {
        if let Some(m) = t.mops.get(t.pc).cloned() {
            t.pc += 1;
            buffered_step(&self.db, t, m);
            return None;
        }
        for m in &t.buffer {
            self.db.apply(m);
        }
        Some(Outcome::Ok)
    }
}

/// One operation against `base` plus the transaction's buffered writes.
fn buffered_step(base: &Db, t: &mut Active, m: Mop) {
    if let Mop::Read { key, .. } = m {
        let value = base.view(key, &t.buffer);
        t.done.push(Mop::Read { key, value });
    } else {
        t.buffer.push(m.clone());
        t.done.push(m);
    }
}

/// Snapshot isolation: reads come from a snapshot taken when the
/// transaction starts; at commit it fails if another transaction committed
/// a write to a key it writes since then (first committer wins).
#[derive(Default)]
pub struct Snapshot {
    db: Db,
    version: u64,
    last_write: BTreeMap<u64, u64>,
}

impl Store for Snapshot {
    fn step(&mut self, t: &mut Active, _rng: &mut Rng) -> Option<Outcome> {
        if t.snapshot.is_none() {
            t.snapshot = Some(self.db.clone());
            t.start_version = self.version;
            return None;
        }
        if let Some(m) = t.mops.get(t.pc).cloned() {
            t.pc += 1;
            let snapshot = t.snapshot.take().unwrap_or_default();
            buffered_step(&snapshot, t, m);
            t.snapshot = Some(snapshot);
            return None;
        }
        let conflict = t.buffer.iter().any(|m| self.last_write.get(&m.key()).is_some_and(|&v| v > t.start_version));
        if conflict {
            return Some(Outcome::Fail);
        }
        self.version += 1;
        for m in &t.buffer {
            self.db.apply(m);
            self.last_write.insert(m.key(), self.version);
        }
        Some(Outcome::Ok)
    }
}

/// Serializable but not strict: updates run atomically at one step, like
/// [`Serial`], but read-only transactions read a replica that is refreshed
/// only every `every` commits, so they can miss writes that completed
/// before they started.
pub struct StaleReplica {
    db: Db,
    replica: Db,
    commits: u64,
    every: u64,
}

impl StaleReplica {
    pub fn new(every: u64) -> StaleReplica {
        StaleReplica { db: Db::default(), replica: Db::default(), commits: 0, every }
    }
}

impl Store for StaleReplica {
    fn step(&mut self, t: &mut Active, _rng: &mut Rng) -> Option<Outcome> {
        if t.started {
            return Some(Outcome::Ok);
        }
        t.started = true;
        if t.read_only() {
            t.done = self.replica.clone().run(&t.mops);
        } else {
            t.done = self.db.run(&t.mops);
            self.commits += 1;
            if self.commits % self.every == 0 {
                self.replica = self.db.clone();
            }
        }
        None
    }
}

/// Writes become visible one at a time, each at its own step, with no
/// isolation between writers; reads run atomically at a single step. Two
/// writers can install their writes to two keys in opposite orders, and a
/// reader can see part of a transaction's writes.
#[derive(Default)]
pub struct PiecemealWrites {
    db: Db,
}

impl Store for PiecemealWrites {
    fn step(&mut self, t: &mut Active, _rng: &mut Rng) -> Option<Outcome> {
        if t.read_only() {
            if t.started {
                return Some(Outcome::Ok);
            }
            t.started = true;
            t.done = self.db.run(&t.mops);
            return None;
        }
        match t.mops.get(t.pc).cloned() {
            Some(m) => {
                t.pc += 1;
                t.done.push(self.db.step(&m));
                None
            }
            None => Some(Outcome::Ok),
        }
    }
}

/// Asynchronous replication with per-key lag: writes go to one log per key;
/// each replica applies each key's log at its own pace. A transaction runs
/// at one step against one replica (its reads see that replica plus its own
/// writes). Non-sticky clients pick a random replica per transaction, so
/// they can miss their own earlier writes; sticky clients keep one replica
/// and wait until it shows their writes, so they read their writes, yet can
/// still see a write without what caused it (keys lag independently).
pub struct LaggingReplicas {
    logs: BTreeMap<u64, Vec<Mop>>,
    /// applied[r][key]: how much of key's log replica r has applied.
    applied: Vec<BTreeMap<u64, usize>>,
    sticky: bool,
}

impl LaggingReplicas {
    pub fn new(replicas: usize, sticky: bool) -> LaggingReplicas {
        LaggingReplicas { logs: BTreeMap::new(), applied: vec![BTreeMap::new(); replicas], sticky }
    }

    fn state(&self, r: usize) -> Db {
        let mut db = Db::default();
        for (key, log) in &self.logs {
            let n = self.applied[r].get(key).copied().unwrap_or(0);
            for m in &log[..n] {
                db.apply(m);
            }
        }
        db
    }

    fn advance(&mut self, r: usize, key: u64) {
        let len = self.logs.get(&key).map_or(0, Vec::len);
        let n = self.applied[r].entry(key).or_insert(0);
        if *n < len {
            *n += 1;
        }
    }
}

impl Store for LaggingReplicas {
    fn tick(&mut self, rng: &mut Rng) {
        if self.logs.is_empty() || !rng.chance(0.5) {
            return;
        }
        let r = rng.below(self.applied.len() as u64) as usize;
        let keys: Vec<u64> = self.logs.keys().copied().collect();
        let key = keys[rng.below(keys.len() as u64) as usize];
        self.advance(r, key);
    }

    fn step(&mut self, t: &mut Active, rng: &mut Rng) -> Option<Outcome> {
        if t.started {
            // Sticky clients wait for their replica to show their writes.
            let r = t.replica;
            let pending = t.waits.iter().find(|&&(key, upto)| self.applied[r].get(&key).copied().unwrap_or(0) < upto);
            return match pending.copied() {
                Some((key, _)) => {
                    self.advance(r, key);
                    None
                }
                None => Some(Outcome::Ok),
            };
        }
        t.started = true;
        t.replica = if self.sticky {
            t.process as usize % self.applied.len()
        } else {
            rng.below(self.applied.len() as u64) as usize
        };
        let view = self.state(t.replica);
        for m in t.mops.clone() {
            buffered_step(&view, t, m);
        }
        for m in std::mem::take(&mut t.buffer) {
            let log = self.logs.entry(m.key()).or_default();
            log.push(m.clone());
            if self.sticky {
                t.waits.push((m.key(), log.len()));
            }
        }
        None
    }
}

/// Replicas that never converge: a transaction runs at one step on its
/// client's replica, which applies its appends at once; the other replicas
/// get them later, in random order, so replicas order concurrent appends
/// differently.
pub struct DivergentReplicas {
    replicas: Vec<Db>,
    pending: Vec<Vec<Mop>>,
}

impl DivergentReplicas {
    pub fn new(replicas: usize) -> DivergentReplicas {
        DivergentReplicas { replicas: vec![Db::default(); replicas], pending: vec![Vec::new(); replicas] }
    }
}

impl Store for DivergentReplicas {
    fn tick(&mut self, rng: &mut Rng) {
        let r = rng.below(self.replicas.len() as u64) as usize;
        if !self.pending[r].is_empty() && rng.chance(0.3) {
            let i = rng.below(self.pending[r].len() as u64) as usize;
            let m = self.pending[r].swap_remove(i);
            self.replicas[r].apply(&m);
        }
    }

    fn step(&mut self, t: &mut Active, _rng: &mut Rng) -> Option<Outcome> {
        if t.started {
            return Some(Outcome::Ok);
        }
        t.started = true;
        let r = t.process as usize % self.replicas.len();
        t.done = self.replicas[r].run(&t.mops);
        for m in t.writes() {
            for (other, queue) in self.pending.iter_mut().enumerate() {
                if other != r {
                    queue.push(m.clone());
                }
            }
        }
        None
    }
}
