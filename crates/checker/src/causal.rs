//! Transactional causal consistency with convergence.
//!
//! Causal order is the transitive closure of session order (each process's
//! committed transactions, in order) and write-read edges. It must be
//! acyclic. Every transaction must observe, for each key it reads before
//! writing, a version no older than any version of that key written by a
//! transaction causally before it; and a transaction's own write must not
//! be ordered before such a version. Convergence: one version order per key
//! must explain every observation (see [`crate::constraints`]).
//!
//! Causal pasts are vector clocks over sessions: entry `c` of a
//! transaction's clock is how many transactions of session `c` causally
//! precede it (indeterminate transactions that were observed form
//! one-transaction sessions of their own, since nothing orders them before
//! their process's next transaction). Clocks are kept sparse, since a
//! writer's clock is needed for as long as its write may be read: each
//! session keeps one dense running clock, and each transaction stores only
//! the entries it raised over its session predecessor's clock. Including a
//! transaction's past in another clock replays those deltas for the part of
//! its session not included yet, so each session's clock absorbs each delta
//! at most once. The latest write of a key by a session within a clock is
//! found by binary search, so each read costs one lookup per session that
//! wrote its key.

use crate::constraints::{Constraints, Why};
use crate::explain;
use crate::fxhash::FxMap;
use crate::graph::{Bfs, Csr, Edge, Tarjan};
use crate::index::{Index, KeyId, NONE, VersionId};
use crate::model::AnomalyKind;
use crate::order::VersionOrder;
use crate::report::Findings;
use crate::txns::{Status, TxnId};

const SESSION: u8 = 1;
const WR: u8 = 2;

/// Checks causal consistency, with convergence when `convergent` (one
/// version order per key for every session; without it, one per session,
/// so a contradiction among one session's requirements is a causality
/// violation and one across sessions is allowed); returns the number of
/// causal edges.
pub(crate) fn check(ix: &Index<'_>, ord: &VersionOrder, convergent: bool, f: &mut Findings) -> u64 {
    let g = Graph::new(ix);
    let csr = Csr::build(g.txn.len(), causal_edges(ix, &g));
    let mut tarjan = Tarjan::new(g.txn.len());
    let comps = tarjan.run(&csr, 0..g.txn.len() as u32, |_| true);
    for comp in comps.nontrivial() {
        report_cycle(ix, &g, &csr, comp, f);
    }
    let comp_of = tarjan.comp.clone();
    let writers = KeyWriters::new(ix, &g);
    // One set of requirements for every session together, or one per session.
    let mut cons: Vec<Constraints> =
        (0..if convergent { 1 } else { g.sessions }).map(|_| Constraints::default()).collect();
    let mut checker = Checker { ix, ord, g: &g, writers: &writers, cons: &mut cons };
    let rev = csr.reversed();
    let mut clocks = Clocks::new(&g);
    // Tarjan lists components sinks first; walk them sources first.
    for c in (0..comps.len()).rev() {
        let comp = comps.get(c);
        let s = g.session[comp[0] as usize] as usize;
        if comp.len() == 1 && s < g.processes {
            let clock = clocks.advance(&g, &rev, comp[0]);
            checker.txn(comp[0], &clock, f);
            clocks.done(&g, comp[0], clock);
        } else {
            let clock = clocks.advance_all(&g, &rev, comp, &comp_of);
            for &m in comp {
                checker.txn(m, &clock, f);
            }
        }
    }
    let kind = if convergent { AnomalyKind::Divergence } else { AnomalyKind::Causality };
    for c in &cons {
        c.cycles(ix, ord, f, |_| kind);
    }
    csr.edge_count() as u64
}

/// Vertices (committed and observed indeterminate transactions) with their
/// session and position in it.
struct Graph {
    txn: Vec<TxnId>,
    of_txn: Vec<u32>,
    session: Vec<u32>,
    /// 1-based position in the session.
    seq: Vec<u32>,
    /// Sessions `0..processes` are processes; the rest hold one observed
    /// indeterminate transaction each.
    processes: usize,
    sessions: usize,
}

impl Graph {
    fn new(ix: &Index<'_>) -> Graph {
        let txn: Vec<TxnId> = (0..ix.txn_count() as TxnId).filter(|&t| ix.in_graph[t as usize]).collect();
        let mut of_txn = vec![NONE; ix.txn_count()];
        for (v, &t) in txn.iter().enumerate() {
            of_txn[t as usize] = v as u32;
        }
        let mut processes: Vec<u64> =
            txn.iter().filter(|&&t| ix.status(t) == Status::Ok).map(|&t| ix.txns[t as usize].process).collect();
        processes.sort_unstable();
        processes.dedup();
        let mut next_seq = vec![0u32; processes.len()];
        let mut sessions = processes.len();
        let (mut session, mut seq) = (Vec::with_capacity(txn.len()), Vec::with_capacity(txn.len()));
        for &t in &txn {
            if ix.status(t) == Status::Ok {
                let p = ix.txns[t as usize].process;
                let s = processes.binary_search(&p).unwrap_or(0);
                next_seq[s] += 1;
                session.push(s as u32);
                seq.push(next_seq[s]);
            } else {
                session.push(sessions as u32);
                seq.push(1);
                sessions += 1;
            }
        }
        Graph { txn, of_txn, session, seq, processes: processes.len(), sessions }
    }
}

/// Session order (into an observed indeterminate transaction too, from its
/// process's previous commit) and write-read edges.
fn causal_edges(ix: &Index<'_>, g: &Graph) -> Vec<Edge> {
    let mut edges = Vec::new();
    let mut last_ok: FxMap<u64, u32> = FxMap::default();
    for (v, &t) in g.txn.iter().enumerate() {
        let p = ix.txns[t as usize].process;
        if let Some(&prev) = last_ok.get(&p) {
            edges.push(Edge { from: prev, to: v as u32, rel: SESSION, tag: NONE });
        }
        if ix.status(t) == Status::Ok {
            last_ok.insert(p, v as u32);
        }
    }
    for r in &ix.reads {
        for &version in ix.seen_versions(r) {
            if let Some(w) = ix.graph_writer(version) {
                edges.push(Edge { from: g.of_txn[w as usize], to: g.of_txn[r.txn as usize], rel: WR, tag: version });
            }
        }
    }
    edges
}

fn report_cycle(ix: &Index<'_>, g: &Graph, csr: &Csr, comp: &[u32], f: &mut Findings) {
    f.add(AnomalyKind::Causality, || {
        let mut bfs = Bfs::new(g.txn.len());
        let inside = |e: usize| comp.binary_search(&csr.to[e]).is_ok();
        let mut unlimited = u64::MAX;
        let cycle = bfs.cycle_through(csr, comp[0], inside, &mut unlimited).unwrap_or_default();
        let mut text = String::from("causal order is cyclic: ");
        for &e in &cycle {
            let from = g.txn[csr.from[e] as usize];
            let rel = if csr.rel[e] == SESSION {
                "session".to_string()
            } else {
                let k = explain::key(ix, ix.versions.key[csr.tag[e] as usize]);
                format!("wr({k})")
            };
            text.push_str(&format!("{} -{rel}-> ", explain::txn(ix, from)));
        }
        text.push_str(&explain::txn(ix, g.txn[comp[0] as usize]));
        let txns = cycle.iter().map(|&e| g.txn[csr.from[e] as usize]);
        (explain::refs(ix, txns), text)
    });
}

/// Sparse vector clocks (see the module documentation).
struct Clocks {
    /// The clock of the latest transaction processed, per process session;
    /// allocated at the session's first transaction, freed after its last.
    running: Vec<Vec<u32>>,
    /// Transactions of each session not processed yet.
    left: Vec<u32>,
    /// Each session's vertices, in session order.
    members: Vec<Vec<u32>>,
    /// Vertex -> its entries above its session predecessor's clock, as a
    /// range of `arena` (its own session's entry excluded).
    delta: Vec<(u32, u32)>,
    arena: Vec<(u32, u32)>,
    raised: Vec<u32>,
}

impl Clocks {
    fn new(g: &Graph) -> Clocks {
        let mut members = vec![Vec::new(); g.sessions];
        for v in 0..g.txn.len() {
            members[g.session[v] as usize].push(v as u32);
        }
        Clocks {
            running: vec![Vec::new(); g.processes],
            left: members.iter().map(|m| m.len() as u32).collect(),
            members,
            delta: vec![(0, 0); g.txn.len()],
            arena: Vec::new(),
            raised: Vec::new(),
        }
    }

    /// Raises `clock` to include `p` and its causal past, noting the raised
    /// entries in `raised`. Everything of `p`'s session already included
    /// brought its own past along, so only the rest is replayed.
    fn include(&self, clock: &mut [u32], g: &Graph, p: u32, raised: &mut Vec<u32>) {
        let s = g.session[p as usize] as usize;
        let (from, upto) = (clock[s], g.seq[p as usize]);
        if from >= upto {
            return;
        }
        for &x in &self.members[s][from as usize..upto as usize] {
            let (start, len) = self.delta[x as usize];
            for &(q, v) in &self.arena[start as usize..(start + len) as usize] {
                if clock[q as usize] < v {
                    clock[q as usize] = v;
                    raised.push(q);
                }
            }
        }
        clock[s] = upto;
        raised.push(s as u32);
    }

    /// Records `v`'s delta: the `raised` entries of `clock` but its own.
    fn record(&mut self, v: u32, clock: &[u32], own: usize, raised: &mut Vec<u32>) {
        raised.sort_unstable();
        raised.dedup();
        let start = self.arena.len() as u32;
        for &q in raised.iter().filter(|&&q| q as usize != own) {
            self.arena.push((q, clock[q as usize]));
        }
        self.delta[v as usize] = (start, self.arena.len() as u32 - start);
        raised.clear();
    }

    /// Processes a lone committed transaction in place on its session's
    /// running clock (which is its session predecessor's clock); returns
    /// its clock.
    fn advance(&mut self, g: &Graph, rev: &Csr, v: u32) -> Vec<u32> {
        let s = g.session[v as usize] as usize;
        let mut clock = self.take_running(g, s);
        let mut raised = std::mem::take(&mut self.raised);
        // Latest predecessors first: their pasts tend to contain the rest.
        for e in rev.out(v).rev() {
            self.include(&mut clock, g, rev.to[e], &mut raised);
        }
        clock[s] = g.seq[v as usize];
        self.record(v, &clock, s, &mut raised);
        self.raised = raised;
        clock
    }

    /// Hands a clock taken by [`Clocks::advance`] back to its session.
    fn done(&mut self, g: &Graph, v: u32, clock: Vec<u32>) {
        self.put_running(g.session[v as usize] as usize, clock);
    }

    /// The running clock of process session `s`, taken out for updating.
    fn take_running(&mut self, g: &Graph, s: usize) -> Vec<u32> {
        let clock = std::mem::take(&mut self.running[s]);
        if clock.is_empty() { vec![0; g.sessions] } else { clock }
    }

    /// Puts back session `s`'s running clock, unless it just processed its
    /// last transaction.
    fn put_running(&mut self, s: usize, clock: Vec<u32>) {
        self.left[s] -= 1;
        if self.left[s] > 0 {
            self.running[s] = clock;
        }
    }

    /// Processes a component with several transactions (a causal cycle) or
    /// an indeterminate one; returns their common clock.
    fn advance_all(&mut self, g: &Graph, rev: &Csr, comp: &[u32], comp_of: &[u32]) -> Vec<u32> {
        let mut clock = vec![0u32; g.sessions];
        for &m in comp {
            if let Some(run) = self.running.get(g.session[m as usize] as usize) {
                clock.iter_mut().zip(run).for_each(|(a, b)| *a = (*a).max(*b));
            }
        }
        let mut raised = std::mem::take(&mut self.raised);
        for &m in comp {
            for e in rev.out(m).rev() {
                let p = rev.to[e];
                if comp_of[p as usize] != comp_of[m as usize] {
                    self.include(&mut clock, g, p, &mut raised);
                }
            }
        }
        for &m in comp {
            let s = g.session[m as usize] as usize;
            clock[s] = clock[s].max(g.seq[m as usize]);
        }
        for &m in comp {
            let s = g.session[m as usize] as usize;
            raised.clear();
            let base = self.running.get(s).map_or(&[][..], |r| &r[..]);
            let above = |q: usize| clock[q] > base.get(q).copied().unwrap_or(0);
            raised.extend((0..clock.len() as u32).filter(|&q| above(q as usize)));
            self.record(m, &clock, s, &mut raised);
            if s < g.processes {
                self.put_running(s, clock.clone());
            }
        }
        self.raised = raised;
        clock
    }
}

/// For each key, the last writes of each session's transactions, by session
/// and position: `entries[groups[g].1..groups[g].2]` belong to session
/// `groups[g].0`, and key `k`'s groups are `groups[key_off[k]..key_off[k+1]]`.
struct KeyWriters {
    entries: Vec<(u32, VersionId, TxnId)>,
    groups: Vec<(u32, u32, u32)>,
    key_off: Vec<u32>,
}

impl KeyWriters {
    fn new(ix: &Index<'_>, g: &Graph) -> KeyWriters {
        let mut all: Vec<(KeyId, u32, u32, VersionId, TxnId)> = Vec::new();
        for (v, &t) in g.txn.iter().enumerate() {
            for w in ix.writes_of(t).iter().filter(|w| w.last) {
                all.push((w.key, g.session[v], g.seq[v], w.version, t));
            }
        }
        all.sort_unstable();
        let mut key_off = vec![0u32; ix.keys.len() + 1];
        let mut groups = Vec::new();
        for (i, e) in all.iter().enumerate() {
            if i == 0 || (all[i - 1].0, all[i - 1].1) != (e.0, e.1) {
                groups.push((e.1, i as u32, i as u32));
                key_off[e.0 as usize + 1] += 1;
            }
            if let Some(last) = groups.last_mut() {
                last.2 = i as u32 + 1;
            }
        }
        for k in 0..ix.keys.len() {
            key_off[k + 1] += key_off[k];
        }
        KeyWriters { entries: all.into_iter().map(|(_, _, s, v, t)| (s, v, t)).collect(), groups, key_off }
    }

    /// The latest write of `key` by each session within `clock`, other than
    /// `me`'s own.
    fn latest<'s>(&'s self, key: KeyId, clock: &'s [u32], me: TxnId) -> impl Iterator<Item = (VersionId, TxnId)> + 's {
        let groups = &self.groups[self.key_off[key as usize] as usize..self.key_off[key as usize + 1] as usize];
        groups.iter().filter_map(move |&(session, start, end)| {
            let limit = clock[session as usize];
            let entries = &self.entries[start as usize..end as usize];
            let upto = entries.partition_point(|e| e.0 <= limit);
            let mut i = upto.checked_sub(1)?;
            if entries[i].2 == me {
                i = i.checked_sub(1)?;
            }
            Some((entries[i].1, entries[i].2))
        })
    }
}

struct Checker<'c, 'a> {
    ix: &'c Index<'a>,
    ord: &'c VersionOrder,
    g: &'c Graph,
    writers: &'c KeyWriters,
    /// One entry (every session's), or one per session.
    cons: &'c mut [Constraints],
}

impl Checker<'_, '_> {
    /// Checks one transaction's reads and writes against its causal past.
    fn txn(&mut self, v: u32, clock: &[u32], f: &mut Findings) {
        let (ix, t) = (self.ix, self.g.txn[v as usize]);
        let session = if self.cons.len() == 1 { 0 } else { self.g.session[v as usize] as usize };
        let cons = &mut self.cons[session];
        for r in ix.reads_of(t) {
            // Reads of aborted, garbage or intermediate values are reported
            // already (G1a, garbage-read, G1b).
            let known = r.version != NONE
                && (ix.is_nil(r.version)
                    || (ix.graph_writer(r.version).is_some() && !ix.versions.intermediate[r.version as usize]));
            if !r.external || !known {
                continue;
            }
            for (w, writer) in self.writers.latest(r.key, clock, t) {
                let why = Why::CausalRead { reader: t, writer };
                cons.require(ix, self.ord, w, r.version, why, f);
            }
        }
        for x in ix.writes_of(t).iter().filter(|x| x.last) {
            for (w, writer) in self.writers.latest(x.key, clock, t) {
                let why = Why::CausalWrite { txn: t, writer };
                cons.require(ix, self.ord, w, x.version, why, f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::history::parse_jsonl;
    use crate::model::{AnomalyKind, Model};
    use crate::{CheckReport, check};

    fn run(text: &str) -> CheckReport {
        check(&parse_jsonl(text).unwrap(), Model::Causal)
    }

    #[test]
    fn missing_your_own_earlier_write_is_a_causality_violation() {
        let h = r#"{"index":0,"type":"invoke","process":1,"value":[["append",1,10]]}
{"index":1,"type":"ok","process":1,"value":[["append",1,10]]}
{"index":2,"type":"invoke","process":1,"value":[["r",1,null]]}
{"index":3,"type":"ok","process":1,"value":[["r",1,[]]]}"#;
        let r = run(h);
        assert_eq!(r.kinds(), [AnomalyKind::Causality], "{}", r.summary());
        assert!(r.anomalies[0].explanation.contains("read-your-writes"), "{}", r.summary());
    }

    #[test]
    fn seeing_an_effect_without_its_cause_is_a_causality_violation() {
        // P1 writes x; P2 reads it and writes y; P3 sees y but the old x.
        let h = r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,10]]}
{"index":1,"type":"ok","process":1,"value":[["w",1,10]]}
{"index":2,"type":"invoke","process":2,"value":[["r",1,null],["w",2,20]]}
{"index":3,"type":"ok","process":2,"value":[["r",1,10],["w",2,20]]}
{"index":4,"type":"invoke","process":3,"value":[["r",2,null],["r",1,null]]}
{"index":5,"type":"ok","process":3,"value":[["r",2,20],["r",1,null]]}"#;
        let r = run(h);
        assert_eq!(r.kinds(), [AnomalyKind::Causality], "{}", r.summary());
        // Seeing neither is fine, and so is seeing both.
        assert!(run(&h.replace(r#"["r",2,20],["r",1,null]"#, r#"["r",2,null],["r",1,null]"#)).valid);
        assert!(run(&h.replace(r#"["r",2,20],["r",1,null]"#, r#"["r",2,20],["r",1,10]"#)).valid);
        // Read atomicity does not require transitive visibility.
        assert!(check(&parse_jsonl(h).unwrap(), Model::ReadAtomic).valid);
    }

    #[test]
    fn circular_information_flow_is_a_causality_violation() {
        let h = r#"{"index":0,"type":"invoke","process":1,"value":[["append",1,1],["r",2,null]]}
{"index":1,"type":"invoke","process":2,"value":[["append",2,2],["r",1,null]]}
{"index":2,"type":"ok","process":1,"value":[["append",1,1],["r",2,[2]]]}
{"index":3,"type":"ok","process":2,"value":[["append",2,2],["r",1,[1]]]}"#;
        let r = run(h);
        assert!(r.has(AnomalyKind::Causality), "{}", r.summary());
        assert!(r.anomalies[0].explanation.contains("cyclic"), "{}", r.summary());
    }

    #[test]
    fn replicas_disagreeing_on_order_diverge() {
        let h = r#"{"index":0,"type":"invoke","process":1,"value":[["append",1,1]]}
{"index":1,"type":"invoke","process":2,"value":[["append",1,2]]}
{"index":2,"type":"ok","process":1,"value":[["append",1,1]]}
{"index":3,"type":"ok","process":2,"value":[["append",1,2]]}
{"index":4,"type":"invoke","process":3,"value":[["r",1,null]]}
{"index":5,"type":"invoke","process":4,"value":[["r",1,null]]}
{"index":6,"type":"ok","process":3,"value":[["r",1,[1,2]]]}
{"index":7,"type":"ok","process":4,"value":[["r",1,[2,1]]]}"#;
        let r = run(h);
        assert!(r.has(AnomalyKind::Divergence), "{}", r.summary());
        let s = check(&parse_jsonl(h).unwrap(), Model::Serializable);
        assert!(s.has(AnomalyKind::IncompatibleOrder));
    }

    /// Two blind writes; session 3 sees 1 then 2, session 4 sees 2 then 1.
    const OPPOSITE_ORDERS: &str = r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,1]]}
{"index":1,"type":"invoke","process":2,"value":[["w",1,2]]}
{"index":2,"type":"ok","process":1,"value":[["w",1,1]]}
{"index":3,"type":"ok","process":2,"value":[["w",1,2]]}
{"index":4,"type":"invoke","process":3,"value":[["r",1,null]]}
{"index":5,"type":"ok","process":3,"value":[["r",1,1]]}
{"index":6,"type":"invoke","process":3,"value":[["r",1,null]]}
{"index":7,"type":"ok","process":3,"value":[["r",1,2]]}
{"index":8,"type":"invoke","process":4,"value":[["r",1,null]]}
{"index":9,"type":"ok","process":4,"value":[["r",1,2]]}
{"index":10,"type":"invoke","process":4,"value":[["r",1,null]]}
{"index":11,"type":"ok","process":4,"value":[["r",1,1]]}"#;

    #[test]
    fn sessions_observing_register_versions_in_opposite_orders_diverge() {
        let h = OPPOSITE_ORDERS;
        let r = run(h);
        assert_eq!(r.kinds(), [AnomalyKind::Divergence], "{}", r.summary());
        // Either session alone is fine.
        let one: String = h.lines().take(8).map(|l| format!("{l}\n")).collect();
        assert!(run(&one).valid);
    }

    /// Two sessions ordering two blind writes differently: a divergence,
    /// allowed without convergence (Eiger-PORT, NOC-NOC Figure 8b); one
    /// session going back on its own order is a causality violation at
    /// both levels.
    #[test]
    fn without_convergence_sessions_may_order_versions_differently_but_not_each_go_back() {
        let h = OPPOSITE_ORDERS;
        let weak = |h: &str| check(&parse_jsonl(h).unwrap(), Model::CausalNoConvergence);
        assert_eq!(run(h).kinds(), [AnomalyKind::Divergence]);
        assert!(weak(h).valid, "{}", weak(h).summary());
        let back = format!(
            "{h}\n{}\n{}",
            r#"{"index":12,"type":"invoke","process":3,"value":[["r",1,null]]}"#,
            r#"{"index":13,"type":"ok","process":3,"value":[["r",1,1]]}"#
        );
        let r = weak(&back);
        assert_eq!(r.kinds(), [AnomalyKind::Causality], "session 3 read 1, 2, then 1: {}", r.summary());
    }

    #[test]
    fn without_convergence_missing_your_own_write_or_a_cause_is_still_a_causality_violation() {
        let own = r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,10]]}
{"index":1,"type":"ok","process":1,"value":[["w",1,10]]}
{"index":2,"type":"invoke","process":1,"value":[["r",1,null]]}
{"index":3,"type":"ok","process":1,"value":[["r",1,null]]}"#;
        let cause = r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,10]]}
{"index":1,"type":"ok","process":1,"value":[["w",1,10]]}
{"index":2,"type":"invoke","process":2,"value":[["r",1,null],["w",2,20]]}
{"index":3,"type":"ok","process":2,"value":[["r",1,10],["w",2,20]]}
{"index":4,"type":"invoke","process":3,"value":[["r",2,null],["r",1,null]]}
{"index":5,"type":"ok","process":3,"value":[["r",2,20],["r",1,null]]}"#;
        for h in [own, cause] {
            let r = check(&parse_jsonl(h).unwrap(), Model::CausalNoConvergence);
            assert_eq!(r.kinds(), [AnomalyKind::Causality], "{}", r.summary());
        }
    }

    #[test]
    fn concurrent_writes_are_allowed() {
        // Lost update and write skew are causal.
        let h = r#"{"index":0,"type":"invoke","process":1,"value":[["r",1,null],["w",1,1]]}
{"index":1,"type":"invoke","process":2,"value":[["r",1,null],["w",1,2]]}
{"index":2,"type":"ok","process":1,"value":[["r",1,null],["w",1,1]]}
{"index":3,"type":"ok","process":2,"value":[["r",1,null],["w",1,2]]}
{"index":4,"type":"invoke","process":1,"value":[["r",1,null]]}
{"index":5,"type":"ok","process":1,"value":[["r",1,2]]}"#;
        let r = run(h);
        assert!(r.valid, "{}", r.summary());
    }
}
