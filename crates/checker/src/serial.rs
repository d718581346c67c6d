//! (Strict) serializability: Adya's dependency graph and its cycles.
//!
//! Vertices are committed transactions and indeterminate ones whose writes
//! were observed. Edges come from the inferred version orders: `ww` (the
//! target installed the version right after the source's), `wr` (the target
//! read the source's version) and `rw` (the source read a version the
//! target's write came right after: an anti-dependency).
//!
//! For strict serializability, real-time order is added without its
//! quadratic closure: one chain node per commit, in commit-time order; a
//! transaction links to the chain node of its own commit, and the last chain
//! node committed strictly before a transaction's invocation links to it.
//! A path through the chain from `T1` to `T2` exists exactly when `T1`
//! committed before `T2` was invoked, with two edges per transaction.
//!
//! Strongly connected components of the data edges are searched for the
//! shortest cycle of each class, most specific first (G0: only `ww`; G1c:
//! `ww`/`wr` with a `wr`; G-single: exactly one `rw`; G2 when nothing less
//! severe explains the component). Each class is counted once per component.
//! A component that only exists with real-time edges (it contains a chain
//! node) is a real-time violation.

use crate::explain;
use crate::fxhash::FxMap;
use crate::graph::{Bfs, Csr, Edge, Tarjan};
use crate::history::ReadMode;
use crate::index::{Index, NONE, VersionId};
use crate::model::AnomalyKind;
use crate::order::VersionOrder;
use crate::report::Findings;
use crate::txns::{Status, TxnId};

pub(crate) const WW: u8 = 1;
pub(crate) const WR: u8 = 2;
pub(crate) const RW: u8 = 4;
pub(crate) const RT: u8 = 8;
const DATA: u8 = WW | WR | RW;

/// Edges examined per cycle search in one component before giving up on
/// finding the most specific cycle (a less specific one is still reported).
const SEARCH_BUDGET: u64 = 20_000_000;
/// Readers x successors of one version above which its rw edges are skipped
/// (hundreds of readers of a key's initial state and as many blind writes).
const RW_FANOUT_LIMIT: usize = 1 << 22;

/// One hop of a cycle between transactions.
#[derive(Copy, Clone, Debug)]
struct Step {
    from: TxnId,
    rel: u8,
    /// The version behind a data edge.
    tag: VersionId,
}

/// Checks serializability (and real-time order when `strict`); returns the
/// number of data edges.
pub(crate) fn check(
    ix: &Index<'_>,
    ord: &VersionOrder,
    strict: bool,
    f: &mut Findings,
    warnings: &mut Vec<String>,
) -> u64 {
    let vx = Vertices::new(ix);
    let mut edges = data_edges(ix, ord, &vx, warnings);
    let nodes = if strict { realtime_edges(ix, &vx, &mut edges) } else { vx.txn.len() };
    let g = Csr::build(nodes, edges);
    let mut s = Searcher {
        ix,
        ord,
        vx: &vx,
        g: &g,
        tarjan: Tarjan::new(nodes),
        bfs: Bfs::new(nodes),
        mark: vec![0; nodes],
        marker: 0,
    };
    let comps = s.tarjan.run(&g, 0..vx.txn.len() as u32, |e| g.rel[e] & DATA != 0);
    for comp in comps.nontrivial() {
        s.data_cycles(comp, f);
    }
    if strict {
        let comps = s.tarjan.run(&g, 0..nodes as u32, |_| true);
        for comp in comps.nontrivial() {
            if comp.iter().any(|&v| v as usize >= vx.txn.len()) {
                s.realtime_cycle(comp, f);
            }
        }
    }
    g.rel.iter().filter(|&&r| r & DATA != 0).count() as u64
}

/// Graph vertices: transactions in the graph get `0..n`, in history order.
struct Vertices {
    of_txn: Vec<u32>,
    txn: Vec<TxnId>,
}

impl Vertices {
    fn new(ix: &Index<'_>) -> Vertices {
        let txn: Vec<TxnId> = (0..ix.txn_count() as TxnId).filter(|&t| ix.in_graph[t as usize]).collect();
        let mut of_txn = vec![NONE; ix.txn_count()];
        for (v, &t) in txn.iter().enumerate() {
            of_txn[t as usize] = v as u32;
        }
        Vertices { of_txn, txn }
    }
}

fn data_edges(ix: &Index<'_>, ord: &VersionOrder, vx: &Vertices, warnings: &mut Vec<String>) -> Vec<Edge> {
    let mut edges = Vec::new();
    let mut link = |from: TxnId, to: TxnId, rel: u8, tag: VersionId| {
        edges.push(Edge { from: vx.of_txn[from as usize], to: vx.of_txn[to as usize], rel, tag });
    };
    for r in &ix.reads {
        if r.version == NONE || ix.is_nil(r.version) {
            continue;
        }
        if let Some(w) = ix.graph_writer(r.version) {
            link(w, r.txn, WR, r.version);
        }
    }
    let (off, readers) = readers_by_version(ix);
    let readers_of = |v: VersionId| &readers[off[v as usize] as usize..off[v as usize + 1] as usize];
    let mut successors = vec![0usize; ix.versions.len()];
    for v in ix.keys.len()..ix.versions.len() {
        if ix.graph_writer(v as VersionId).is_some() {
            successors[ord.parent[v] as usize] += 1;
        }
    }
    let mut skipped = 0usize;
    for v in ix.keys.len() as VersionId..ix.versions.len() as VersionId {
        let Some(w) = ix.graph_writer(v) else {
            continue;
        };
        let p = ord.parent[v as usize];
        if let Some(pw) = ix.graph_writer(p) {
            link(pw, w, WW, v);
        }
        let rs = readers_of(p);
        if rs.len().saturating_mul(successors[p as usize]) > RW_FANOUT_LIMIT {
            skipped += 1;
            continue;
        }
        for &r in rs {
            link(r, w, RW, v);
        }
    }
    if skipped > 0 {
        warnings.push(format!(
            "skipped the anti-dependency edges of {skipped} versions read by too many \
             transactions and followed by too many writes; cycles through them may be missed"
        ));
    }
    edges
}

/// For each version, the committed transactions that read it (for lists:
/// read a state ending with it), as (offsets, readers).
fn readers_by_version(ix: &Index<'_>) -> (Vec<u32>, Vec<TxnId>) {
    let mut pairs: Vec<(VersionId, TxnId)> =
        ix.reads.iter().filter(|r| r.version != NONE).map(|r| (r.version, r.txn)).collect();
    pairs.sort_unstable();
    pairs.dedup();
    let mut off = vec![0u32; ix.versions.len() + 1];
    for &(v, _) in &pairs {
        off[v as usize + 1] += 1;
    }
    for i in 0..ix.versions.len() {
        off[i + 1] += off[i];
    }
    (off, pairs.into_iter().map(|(_, t)| t).collect())
}

/// Adds the real-time chain; returns the number of nodes including it.
fn realtime_edges(ix: &Index<'_>, vx: &Vertices, edges: &mut Vec<Edge>) -> usize {
    let n = vx.txn.len() as u32;
    let mut commits: Vec<(u64, u32)> = (0..n)
        .filter(|&v| ix.status(vx.txn[v as usize]) == Status::Ok)
        .map(|v| (ix.txns[vx.txn[v as usize] as usize].complete_ns, v))
        .collect();
    commits.sort_unstable();
    let rt = |from: u32, to: u32| Edge { from, to, rel: RT, tag: NONE };
    for (i, &(_, v)) in commits.iter().enumerate() {
        let chain = n + i as u32;
        edges.push(rt(v, chain));
        if i + 1 < commits.len() {
            edges.push(rt(chain, chain + 1));
        }
    }
    // Sessions' committed transactions by completion, for process-ordered
    // transactions, which follow only their own session's.
    let mut by_session: FxMap<u64, Vec<(u64, u32)>> = FxMap::default();
    for &(at, v) in &commits {
        by_session.entry(ix.txns[vx.txn[v as usize] as usize].process).or_default().push((at, v));
    }
    let mut extra = 0u32;
    for v in 0..n {
        let t = &ix.txns[vx.txn[v as usize] as usize];
        match t.mode {
            // Serializable but possibly stale: nothing before it in real
            // time must precede it.
            ReadMode::Snapshot => {}
            ReadMode::ProcessOrdered => {
                let own = by_session.get(&t.process).map_or(&[][..], Vec::as_slice);
                let before = own.partition_point(|&(at, _)| at < t.invoke_ns);
                if before > 0 {
                    // Through a node of its own, as the chain's, so that a
                    // cycle using it reads as a real-time violation.
                    let hop = n + commits.len() as u32 + extra;
                    extra += 1;
                    edges.push(rt(own[before - 1].1, hop));
                    edges.push(rt(hop, v));
                }
            }
            ReadMode::Strict => {
                let before = commits.partition_point(|&(at, _)| at < t.invoke_ns);
                if before > 0 {
                    edges.push(rt(n + before as u32 - 1, v));
                }
            }
        }
    }
    n as usize + commits.len() + extra as usize
}

struct Searcher<'s, 'a> {
    ix: &'s Index<'a>,
    ord: &'s VersionOrder,
    vx: &'s Vertices,
    g: &'s Csr,
    tarjan: Tarjan,
    bfs: Bfs,
    /// `mark[v] == marker`: `v` is in the component being searched.
    mark: Vec<u32>,
    marker: u32,
}

impl Searcher<'_, '_> {
    fn enter(&mut self, comp: &[u32]) {
        self.marker += 1;
        for &v in comp {
            self.mark[v as usize] = self.marker;
        }
    }

    /// Reports the cycles of one component of data edges.
    fn data_cycles(&mut self, comp: &[u32], f: &mut Findings) {
        self.enter(comp);
        let mut found = false;
        for cycle in [self.g0(comp), self.g1c(comp)].into_iter().flatten() {
            self.report(&cycle, f);
            found = true;
        }
        if let Some(cycle) = self.g_single(comp) {
            self.report(&cycle, f);
            found = true;
        }
        if !found {
            // Every cycle here has two or more anti-dependencies (or the
            // searches above ran out of budget; the cycle is classified by
            // what it contains either way).
            let (g, mark, m) = (self.g, &self.mark, self.marker);
            let keep = |e: usize| g.rel[e] & DATA != 0 && mark[g.to[e] as usize] == m;
            let mut budget = u64::MAX;
            if let Some(c) = self.bfs.cycle_through(g, comp[0], keep, &mut budget) {
                let steps = self.steps(&c);
                self.report(&steps, f);
            }
        }
    }

    /// A shortest cycle of `ww` edges, if the component has one.
    fn g0(&mut self, comp: &[u32]) -> Option<Vec<Step>> {
        let (g, mark, m) = (self.g, &self.mark, self.marker);
        let subs = self.tarjan.run(g, comp.iter().copied(), |e| g.rel[e] == WW && mark[g.to[e] as usize] == m);
        let sub = subs.nontrivial().next()?;
        let c = self.tarjan.comp[sub[0] as usize];
        let sub_comp = &self.tarjan.comp;
        let keep = |e: usize| g.rel[e] == WW && sub_comp[g.to[e] as usize] == c;
        let mut unlimited = u64::MAX;
        let cycle = self.bfs.cycle_through(g, sub[0], keep, &mut unlimited)?;
        Some(self.steps(&cycle))
    }

    /// A shortest cycle of `ww`/`wr` edges through a `wr` edge. Leaves the
    /// `ww`/`wr` components in `tarjan.comp` for [`Self::g_single`].
    fn g1c(&mut self, comp: &[u32]) -> Option<Vec<Step>> {
        let (g, mark, m) = (self.g, &self.mark, self.marker);
        let subs =
            self.tarjan.run(g, comp.iter().copied(), |e| g.rel[e] & (WW | WR) != 0 && mark[g.to[e] as usize] == m);
        let sub_comp = &self.tarjan.comp;
        for sub in subs.nontrivial() {
            let c = sub_comp[sub[0] as usize];
            let wr = sub.iter().find_map(|&u| g.out(u).find(|&e| g.rel[e] == WR && sub_comp[g.to[e] as usize] == c));
            let Some(e) = wr else { continue };
            let (u, v) = (g.from[e], g.to[e]);
            let keep = |e: usize| g.rel[e] & (WW | WR) != 0 && sub_comp[g.to[e] as usize] == c;
            let close = |x: u32| (x == u).then_some(e);
            let mut unlimited = u64::MAX;
            let path = self.bfs.search(g, v, keep, close, &mut unlimited)?;
            return Some(self.steps(&path));
        }
        None
    }

    /// A shortest cycle with exactly one `rw` edge: an `rw` edge `u -> v`
    /// closed by a `ww`/`wr` path from `v` back to `u`.
    fn g_single(&mut self, comp: &[u32]) -> Option<Vec<Step>> {
        let (g, mark, m) = (self.g, &self.mark, self.marker);
        let sub_comp = &self.tarjan.comp;
        let inside = |e: usize| mark[g.to[e] as usize] == m;
        let rw_edges: Vec<usize> =
            comp.iter().flat_map(|&u| g.out(u)).filter(|&e| g.rel[e] == RW && inside(e)).collect();
        // Both ends in one ww/wr component: a path back surely exists there.
        let same = rw_edges.iter().copied().find(|&e| sub_comp[g.from[e] as usize] == sub_comp[g.to[e] as usize]);
        if let Some(e) = same {
            let c = sub_comp[g.to[e] as usize];
            let keep = |x: usize| g.rel[x] & (WW | WR) != 0 && sub_comp[g.to[x] as usize] == c;
            let close = |x: u32| (x == g.from[e]).then_some(e);
            let mut unlimited = u64::MAX;
            let path = self.bfs.search(g, g.to[e], keep, close, &mut unlimited)?;
            return Some(self.steps(&path));
        }
        // Otherwise search from each rw target for a way back to any rw
        // edge into it, within a budget.
        let mut targets: Vec<u32> = rw_edges.iter().map(|&e| g.to[e]).collect();
        targets.sort_unstable();
        targets.dedup();
        let mut budget = SEARCH_BUDGET;
        for v in targets {
            let keep = |e: usize| g.rel[e] & (WW | WR) != 0 && inside(e);
            let close = |x: u32| g.out(x).find(|&e| g.rel[e] == RW && g.to[e] == v);
            if let Some(path) = self.bfs.search(g, v, keep, close, &mut budget) {
                return Some(self.steps(&path));
            }
            if budget == 0 {
                break;
            }
        }
        None
    }

    /// Reports a component that only exists with real-time edges.
    fn realtime_cycle(&mut self, comp: &[u32], f: &mut Findings) {
        self.enter(comp);
        let steps = self.backward_edge(comp).or_else(|| {
            let (g, mark, m) = (self.g, &self.mark, self.marker);
            let start = *comp.iter().find(|&&v| v as usize >= self.vx.txn.len())?;
            let keep = |e: usize| mark[g.to[e] as usize] == m;
            let mut unlimited = u64::MAX;
            let cycle = self.bfs.cycle_through(g, start, keep, &mut unlimited)?;
            Some(self.steps(&cycle))
        });
        if let Some(steps) = steps {
            self.report(&steps, f);
        }
    }

    /// The simplest real-time cycle: a data edge `u -> v` where `v`
    /// committed before `u` was even invoked.
    fn backward_edge(&self, comp: &[u32]) -> Option<Vec<Step>> {
        let (g, ix, n) = (self.g, self.ix, self.vx.txn.len() as u32);
        comp.iter().filter(|&&u| u < n).find_map(|&u| {
            let tu = self.vx.txn[u as usize];
            g.out(u).find_map(|e| {
                let v = g.to[e];
                if g.rel[e] & DATA == 0 || v >= n || self.mark[v as usize] != self.marker {
                    return None;
                }
                let tv = self.vx.txn[v as usize];
                let (u_txn, v_txn) = (&ix.txns[tu as usize], &ix.txns[tv as usize]);
                let bound = match u_txn.mode {
                    ReadMode::Strict => true,
                    ReadMode::Snapshot => false,
                    ReadMode::ProcessOrdered => u_txn.process == v_txn.process,
                };
                let early = bound && ix.status(tv) == Status::Ok && v_txn.complete_ns < u_txn.invoke_ns;
                early.then(|| {
                    vec![Step { from: tu, rel: g.rel[e], tag: g.tag[e] }, Step { from: tv, rel: RT, tag: NONE }]
                })
            })
        })
    }

    /// Turns a cycle of edge ids into steps between transactions, folding
    /// runs through the real-time chain into one `rt` step.
    fn steps(&self, cycle: &[usize]) -> Vec<Step> {
        let n = self.vx.txn.len() as u32;
        let g = self.g;
        let first = cycle.iter().position(|&e| g.from[e] < n).unwrap_or(0);
        cycle[first..]
            .iter()
            .chain(&cycle[..first])
            .filter(|&&e| g.from[e] < n)
            .map(|&e| Step { from: self.vx.txn[g.from[e] as usize], rel: g.rel[e], tag: g.tag[e] })
            .collect()
    }

    fn report(&self, steps: &[Step], f: &mut Findings) {
        let kind = classify(steps);
        f.add(kind, || render(self.ix, self.ord, steps));
    }
}

/// Names a cycle by the edges it contains, as Adya does.
fn classify(steps: &[Step]) -> AnomalyKind {
    let count = |rel: u8| steps.iter().filter(|s| s.rel == rel).count();
    if count(RT) > 0 {
        AnomalyKind::RealTime
    } else if count(RW) == 1 {
        AnomalyKind::GSingle
    } else if count(RW) > 1 {
        AnomalyKind::G2
    } else if count(WR) > 0 {
        AnomalyKind::G1c
    } else {
        AnomalyKind::G0
    }
}

/// `T12 -ww(k7)-> T40 -rw(k3)-> T12`, then why each edge exists.
fn render(ix: &Index<'_>, ord: &VersionOrder, steps: &[Step]) -> (Vec<crate::TxnRef>, String) {
    let mut chain = String::new();
    let mut reasons = Vec::new();
    for (i, s) in steps.iter().enumerate() {
        let to = steps[(i + 1) % steps.len()].from;
        let a = explain::txn(ix, s.from);
        let rel = match s.rel {
            WW => "ww",
            WR => "wr",
            RW => "rw",
            _ => "rt",
        };
        if s.rel == RT {
            chain.push_str(&format!("{a} -{rel}-> "));
        } else {
            let k = explain::key(ix, ix.versions.key[s.tag as usize]);
            chain.push_str(&format!("{a} -{rel}({k})-> "));
        }
        reasons.push(reason(ix, ord, s, to));
    }
    chain.push_str(&explain::txn(ix, steps[0].from));
    let refs = explain::refs(ix, steps.iter().map(|s| s.from));
    (refs, format!("{chain}: {}", reasons.join("; ")))
}

fn reason(ix: &Index<'_>, ord: &VersionOrder, s: &Step, to: TxnId) -> String {
    let (a, b) = (explain::txn(ix, s.from), explain::txn(ix, to));
    let v = s.tag;
    match s.rel {
        WW => {
            let p = ord.parent[v as usize];
            format!("{b}'s {} follows {a}'s {}", explain::write(ix, v), explain::write(ix, p))
        }
        WR => format!("{b} read {}, written by {a}", explain::version(ix, v)),
        RW => {
            let p = ord.parent[v as usize];
            format!("{a} read {}, which {b}'s {} follows", explain::version(ix, p), explain::write(ix, v))
        }
        _ => format!(
            "{a} completed at {} before {b} was invoked at {}",
            explain::ms(ix.txns[s.from as usize].complete_ns),
            explain::ms(ix.txns[to as usize].invoke_ns)
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::history::parse_jsonl;
    use crate::model::{AnomalyKind, Model};
    use crate::{CheckReport, check};

    /// Expands the read shorthand: `R` is an unknown (invocation) or
    /// initial result, `R5` a register value, `R[1,2]` a list.
    fn expand(mops: &str, invoke: bool) -> String {
        let mut out = String::new();
        let mut chars = mops.chars().peekable();
        while let Some(c) = chars.next() {
            if c != 'R' {
                out.push(c);
                continue;
            }
            let mut result = String::new();
            if chars.peek() == Some(&'[') {
                for c in chars.by_ref() {
                    result.push(c);
                    if c == ']' {
                        break;
                    }
                }
            } else {
                while let Some(c) = chars.next_if(|c| c.is_ascii_digit()) {
                    result.push(c);
                }
            }
            if invoke || result.is_empty() {
                result = "null".into();
            }
            out.push_str(&result);
        }
        out
    }

    /// Builds a history from `(process, invoke time, complete time, type, mops)`.
    fn history(txns: &[(u64, u64, u64, &str, &str)]) -> String {
        let mut events: Vec<(u64, String)> = Vec::new();
        for &(p, start, end, ty, mops) in txns {
            let invoked = expand(mops, true);
            events.push((start, format!(r#""type":"invoke","process":{p},"time":{start},"value":[{invoked}]"#)));
            let done = expand(mops, false);
            events.push((end, format!(r#""type":"{ty}","process":{p},"time":{end},"value":[{done}]"#)));
        }
        events.sort_by_key(|e| e.0);
        events.iter().enumerate().map(|(i, (_, e))| format!("{{\"index\":{i},{e}}}\n")).collect()
    }

    fn run(txns: &[(u64, u64, u64, &str, &str)], model: Model) -> CheckReport {
        check(&parse_jsonl(&history(txns)).unwrap(), model)
    }

    #[test]
    fn serial_register_history_is_valid_everywhere() {
        let h = [
            (1, 0, 10, "ok", r#"["r",1,R],["w",1,1]"#),
            (2, 20, 30, "ok", r#"["r",1,R1],["w",1,2],["r",2,R],["w",2,3]"#),
            (1, 40, 50, "ok", r#"["r",1,R2],["r",2,R3]"#),
        ];
        for m in Model::ALL {
            let r = run(&h, m);
            assert!(r.valid, "{m}: {}", r.summary());
        }
        // T1 -ww,wr-> T2 -wr-> T3 (one wr edge per pair, whatever the key).
        assert_eq!(run(&h, Model::Serializable).stats.edges, 3);
    }

    #[test]
    fn conflicting_write_orders_are_g0() {
        // Both keys are read by later txns, showing x: T1 then T2, y: T2 then T1.
        let h = [
            (1, 0, 10, "ok", r#"["append",1,1],["append",2,1]"#),
            (2, 0, 10, "ok", r#"["append",1,2],["append",2,2]"#),
            (3, 20, 30, "ok", r#"["r",1,R[1,2]],["r",2,R[2,1]]"#),
        ];
        let r = run(&h, Model::Serializable);
        assert!(r.has(AnomalyKind::G0), "{}", r.summary());
        let g0 = r.anomalies.iter().find(|a| a.kind == AnomalyKind::G0).unwrap();
        assert!(g0.explanation.contains("-ww(k1)->"), "{}", g0.explanation);
        assert_eq!(g0.txns.len(), 2);
        // Weak models do not mind the write cycle.
        assert!(run(&h, Model::ReadAtomic).valid);
    }

    #[test]
    fn reading_each_others_writes_is_g1c() {
        let h =
            [(1, 0, 10, "ok", r#"["append",1,1],["r",2,R[2]]"#), (2, 0, 10, "ok", r#"["append",2,2],["r",1,R[1]]"#)];
        let r = run(&h, Model::Serializable);
        assert_eq!(r.kinds(), [AnomalyKind::G1c], "{}", r.summary());
        assert!(r.anomalies[0].explanation.contains("-wr(k"));
    }

    #[test]
    fn read_skew_is_g_single() {
        // T1 reads x before T2's update and y after it.
        let h = [
            (1, 0, 30, "ok", r#"["r",1,R],["r",2,R2]"#),
            (2, 5, 10, "ok", r#"["r",1,R],["w",1,1],["r",2,R],["w",2,2]"#),
        ];
        let r = run(&h, Model::Serializable);
        assert_eq!(r.kinds(), [AnomalyKind::GSingle], "{}", r.summary());
        let text = &r.anomalies[0].explanation;
        assert!(text.contains("-rw(k1)->") && text.contains("-wr(k2)->"), "{text}");
    }

    #[test]
    fn lost_update_is_a_cycle() {
        let h = [(1, 0, 10, "ok", r#"["r",1,R],["w",1,1]"#), (2, 0, 10, "ok", r#"["r",1,R],["w",1,2]"#)];
        let r = run(&h, Model::Serializable);
        assert_eq!(r.kinds(), [AnomalyKind::G2], "{}", r.summary());
        assert!(run(&h, Model::Causal).valid);
    }

    #[test]
    fn write_skew_is_g2() {
        let h = [
            (1, 0, 10, "ok", r#"["r",1,R],["r",2,R],["w",1,1]"#),
            (2, 0, 10, "ok", r#"["r",1,R],["r",2,R],["w",2,2]"#),
        ];
        let r = run(&h, Model::StrictSerializable);
        assert_eq!(r.kinds(), [AnomalyKind::G2], "{}", r.summary());
    }

    /// A write commits at time 2; a read-only transaction invoked at 3 sees
    /// the state before it. `mode` is spliced into the reader's lines.
    fn stale_reader(process: u64, mode: &str) -> Vec<crate::HistoryOp> {
        let text = format!(
            r#"{{"index":0,"type":"invoke","process":1,"time":1,"value":[["w",1,10]]}}
{{"index":1,"type":"ok","process":1,"time":2,"value":[["w",1,10]]}}
{{"index":2,"type":"invoke","process":{process},"time":3,"value":[["r",1,null]]{mode}}}
{{"index":3,"type":"ok","process":{process},"time":4,"value":[["r",1,null]]{mode}}}"#
        );
        parse_jsonl(&text).unwrap()
    }

    #[test]
    fn a_stale_snapshot_read_passes_at_its_mode_and_fails_when_strict() {
        let snapshot = stale_reader(2, r#","mode":"snapshot""#);
        let r = check(&snapshot, Model::StrictSerializable);
        assert!(r.valid, "{}", r.summary());
        let strict = stale_reader(2, "");
        assert_eq!(check(&strict, Model::StrictSerializable).kinds(), [AnomalyKind::RealTime]);
    }

    /// Three transactions as JSON lines `(process, invoke, complete, mode,
    /// value)`, each its own session.
    fn lines(txns: &[(u64, u64, u64, &str, &str)]) -> Vec<crate::HistoryOp> {
        let mut text = String::new();
        for (i, (p, t0, t1, mode, value)) in txns.iter().enumerate() {
            let mode = if mode.is_empty() { String::new() } else { format!(r#","mode":"{mode}""#) };
            text += &format!(
                "{{\"index\":{},\"type\":\"invoke\",\"process\":{p},\"time\":{t0},\"value\":[{value}]{mode}}}\n",
                2 * i
            );
            text += &format!(
                "{{\"index\":{},\"type\":\"ok\",\"process\":{p},\"time\":{t1},\"value\":[{value}]{mode}}}\n",
                2 * i + 1
            );
        }
        parse_jsonl(&text).unwrap()
    }

    #[test]
    fn a_snapshot_read_may_see_a_later_transaction_without_an_earlier_one_of_another_log() {
        // SLOG: a region's copy may have applied T2's local log and not yet
        // T1's, though T1 finished before T2 began. Serializable (T2, the
        // read, T1), and T1 and T2 keep their real-time order.
        let h = lines(&[
            (1, 1, 2, "", r#"["w",1,10]"#),
            (2, 3, 4, "", r#"["w",2,20]"#),
            (3, 5, 6, "snapshot", r#"["r",2,20],["r",1,null]"#),
        ]);
        let r = check(&h, Model::StrictSerializable);
        assert!(r.valid, "{}", r.summary());
        // The same read made strict violates real time.
        let strict: Vec<_> = h
            .iter()
            .cloned()
            .map(|mut op| {
                op.meta.mode = crate::ReadMode::Strict;
                op
            })
            .collect();
        assert_eq!(check(&strict, Model::StrictSerializable).kinds(), [AnomalyKind::RealTime]);
    }

    #[test]
    fn snapshot_reads_leave_the_other_transactions_strict_and_themselves_serializable() {
        // A strict reader misses a write that finished before it began: still
        // a real-time violation, snapshot reads or not.
        let h = lines(&[
            (1, 1, 2, "", r#"["w",1,10]"#),
            (2, 3, 4, "", r#"["r",1,null]"#),
            (3, 5, 6, "snapshot", r#"["r",1,null]"#),
        ]);
        assert_eq!(check(&h, Model::StrictSerializable).kinds(), [AnomalyKind::RealTime]);
        // A snapshot read seeing half of one transaction is no snapshot.
        let h =
            lines(&[(1, 1, 2, "", r#"["w",1,10],["w",2,20]"#), (3, 5, 6, "snapshot", r#"["r",1,10],["r",2,null]"#)]);
        let r = check(&h, Model::StrictSerializable);
        assert!(!r.valid && !r.kinds().contains(&AnomalyKind::RealTime), "{}", r.summary());
    }

    #[test]
    fn a_process_ordered_read_follows_its_own_session_only() {
        let other_session = stale_reader(2, r#","mode":"process-ordered""#);
        let r = check(&other_session, Model::StrictSerializable);
        assert!(r.valid, "another session's earlier write need not be seen: {}", r.summary());
        let own_session = stale_reader(1, r#","mode":"process-ordered""#);
        let r = check(&own_session, Model::StrictSerializable);
        assert_eq!(r.kinds(), [AnomalyKind::RealTime], "its own session's write must be: {}", r.summary());
    }

    #[test]
    fn stale_read_after_commit_is_only_a_real_time_violation() {
        let h = [(1, 0, 10, "ok", r#"["r",1,R],["w",1,1]"#), (2, 20, 30, "ok", r#"["r",1,R]"#)];
        assert!(run(&h, Model::Serializable).valid);
        let r = run(&h, Model::StrictSerializable);
        assert_eq!(r.kinds(), [AnomalyKind::RealTime], "{}", r.summary());
        let text = &r.anomalies[0].explanation;
        assert!(text.contains("-rt->") && text.contains("-rw(k1)->"), "{text}");
        // Overlapping in time, the same reads are fine.
        let concurrent = [h[0], (2, 5, 30, "ok", r#"["r",1,R]"#)];
        assert!(run(&concurrent, Model::StrictSerializable).valid);
    }

    #[test]
    fn real_time_cycles_through_several_txns_are_found() {
        // T1 (long) read k1 before T2 wrote it and read T3's k2; T2 ended
        // before T3 began. No single edge points back in time, but
        // T1 -rw-> T2 -rt-> T3 -wr-> T1 is a cycle.
        let h = [
            (1, 5, 40, "ok", r#"["r",1,R],["r",2,R3]"#),
            (2, 0, 10, "ok", r#"["r",1,R],["w",1,1]"#),
            (3, 20, 30, "ok", r#"["w",2,3]"#),
        ];
        assert!(run(&h, Model::Serializable).valid);
        let r = run(&h, Model::StrictSerializable);
        assert_eq!(r.kinds(), [AnomalyKind::RealTime], "{}", r.summary());
        assert_eq!(r.anomalies[0].txns.len(), 3, "{}", r.summary());
    }

    #[test]
    fn indeterminate_txns_join_the_graph_once_observed() {
        let h = [(1, 0, 10, "info", r#"["w",1,1],["w",2,2]"#), (2, 20, 30, "ok", r#"["r",1,R],["r",2,R]"#)];
        // Nothing shows the info txn committed: no cycle through it.
        assert!(run(&h, Model::StrictSerializable).valid);
        // T2 saw its write of k1 but not of k2: T1 -wr-> T2 -rw-> T1.
        let seen = [h[0], (2, 20, 30, "ok", r#"["r",1,R1],["r",2,R]"#)];
        let r = run(&seen, Model::Serializable);
        assert_eq!(r.kinds(), [AnomalyKind::GSingle], "{}", r.summary());
        // It never completed, so it may have committed any time: no
        // real-time order out of it.
        let late = [h[0], (2, 20, 30, "ok", r#"["r",1,R]"#), (3, 40, 50, "ok", r#"["r",1,R1]"#)];
        assert!(run(&late, Model::StrictSerializable).valid);
    }

    #[test]
    fn failed_txns_are_not_part_of_cycles() {
        let h = [(1, 0, 10, "fail", r#"["r",1,R],["w",1,1]"#), (2, 0, 10, "ok", r#"["r",1,R],["w",1,2]"#)];
        assert!(run(&h, Model::StrictSerializable).valid);
    }
}
