//! Infers each key's version order from what transactions observed.
//!
//! The result is a forest per key, rooted at the key's initial version:
//! `parent[v]` is the version known to come immediately before `v`.
//!
//! * List keys: the longest read gives the order of the appends it shows.
//!   Appends no read shows come after everything shown (any read containing
//!   an element after them would contain them too), unordered among
//!   themselves. Reads that are not prefixes of one another are reported.
//! * Register keys: the initial version precedes everything; a transaction
//!   that read (or wrote) `v1` and then wrote `v2` installed `v2` right after
//!   `v1` ("writes follow reads"). Blind writes hang off the initial
//!   version, position unknown. Two transactions that both read `v1` and
//!   wrote successors (a lost update) give `v1` two children; the dependency
//!   graph then has the cycle that proves it.
//!
//! Inference can produce cycles from garbage (two transactions each reading
//! the other's write before writing): those keys are reported, and for
//! ancestry queries the cycle is cut. Ancestry ("does `a` precede `b`?") is
//! answered in O(1) from Euler-tour intervals.

use crate::fxhash::FxMap;
use crate::history::Mop;
use crate::index::{Index, KeyId, KeyKind, NONE, VersionId};
use crate::txns::Status;

pub(crate) struct VersionOrder {
    /// Inferred immediate predecessor; `NONE` for initial versions. May be cyclic.
    pub parent: Vec<VersionId>,
    /// `parent` with cycles cut; a forest rooted at the initial versions.
    pub forest: Vec<VersionId>,
    tin: Vec<u32>,
    tout: Vec<u32>,
    /// One version on each cycle of the inferred order.
    pub cyclic: Vec<VersionId>,
    /// Per list key at most one pair of incompatible reads (`Index::reads` ids).
    pub incompatible: Vec<(u32, u32)>,
}

impl VersionOrder {
    /// `a` comes strictly before `b` in the inferred order.
    pub fn precedes(&self, a: VersionId, b: VersionId) -> bool {
        let (a, b) = (a as usize, b as usize);
        a != b && self.tin[a] < self.tin[b] && self.tout[b] <= self.tout[a]
    }
}

pub(crate) fn infer(ix: &Index<'_>) -> VersionOrder {
    let n = ix.versions.len();
    let mut parent = vec![NONE; n];
    // Until something better is known, every version follows the initial one.
    parent[ix.keys.len()..].copy_from_slice(&ix.versions.key[ix.keys.len()..]);
    let incompatible = list_orders(ix, &mut parent);
    register_orders(ix, &mut parent);
    let mut forest = parent.clone();
    let mut cyclic = Vec::new();
    let (tin, tout) = loop {
        let (tin, tout, unreached) = euler_tour(ix, &forest);
        if unreached.is_empty() {
            break (tin, tout);
        }
        for v in cut_cycles(ix, &mut forest, &unreached) {
            cyclic.push(v);
        }
    };
    VersionOrder { parent, forest, tin, tout, cyclic, incompatible }
}

/// Chains each list key along its longest read; returns incompatible pairs.
fn list_orders(ix: &Index<'_>, parent: &mut [VersionId]) -> Vec<(u32, u32)> {
    let mut by_key: Vec<(KeyId, u32)> = ix
        .reads
        .iter()
        .enumerate()
        .filter(|(_, r)| ix.key_kind[r.key as usize] == KeyKind::List && r.version != NONE && r.elems_len > 0)
        .map(|(i, r)| (r.key, i as u32))
        .collect();
    by_key.sort_unstable();
    let mut positioned = vec![false; parent.len()];
    let mut last = (0..ix.keys.len() as VersionId).collect::<Vec<_>>();
    let mut incompatible = Vec::new();
    for group in by_key.chunk_by(|a, b| a.0 == b.0) {
        let key = group[0].0;
        let elems = |i: u32| ix.elems_of(&ix.reads[i as usize]);
        let mut rs: Vec<u32> = group.iter().map(|&(_, i)| i).collect();
        rs.sort_by(|&a, &b| {
            let (x, y) = (elems(a), elems(b));
            x.len().cmp(&y.len()).then_with(|| x.cmp(y))
        });
        rs.dedup_by(|b, a| elems(*a) == elems(*b));
        if let Some(w) = rs.windows(2).find(|w| !elems(w[1]).starts_with(elems(w[0]))) {
            incompatible.push((w[0], w[1]));
        }
        let Some(&longest) = rs.last() else { continue };
        let mut prev = ix.nil(key);
        for &v in elems(longest) {
            // A duplicated element keeps its first position.
            if !positioned[v as usize] {
                positioned[v as usize] = true;
                parent[v as usize] = prev;
                prev = v;
            }
        }
        last[key as usize] = prev;
    }
    for v in ix.keys.len()..parent.len() {
        let key = ix.versions.key[v];
        if ix.key_kind[key as usize] != KeyKind::List || positioned[v] {
            continue;
        }
        let w = ix.versions.writer[v];
        if w != NONE && ix.status(w) != Status::Fail {
            parent[v] = last[key as usize];
        }
    }
    incompatible
}

/// Writes follow reads: each register write comes right after what its
/// transaction last read or wrote of that key.
fn register_orders(ix: &Index<'_>, parent: &mut [VersionId]) {
    let mut known: FxMap<KeyId, VersionId> = FxMap::default();
    for t in 0..ix.txn_count() as u32 {
        known.clear();
        let mut reads = ix.reads_of(t).iter().peekable();
        let mut writes = ix.writes_of(t).iter().peekable();
        for (i, m) in ix.txns[t as usize].mops.iter().enumerate() {
            let i = i as u32;
            if let Mop::Read { .. } = m {
                // Only committed transactions have reads on record.
                if let Some(r) = reads.next_if(|r| r.mop == i) {
                    let register = ix.key_kind[r.key as usize] == KeyKind::Register;
                    if register && r.version != NONE {
                        known.entry(r.key).or_insert(r.version);
                    }
                }
                continue;
            }
            let Some(w) = writes.next_if(|w| w.mop == i) else {
                continue;
            };
            if ix.key_kind[w.key as usize] != KeyKind::Register || ix.versions.writer[w.version as usize] != t {
                continue;
            }
            if let Some(&prev) = known.get(&w.key) {
                parent[w.version as usize] = prev;
            }
            known.insert(w.key, w.version);
        }
    }
}

/// Entry/exit times of a DFS from every initial version, and the versions
/// not reached (they sit on or below a cycle).
fn euler_tour(ix: &Index<'_>, forest: &[VersionId]) -> (Vec<u32>, Vec<u32>, Vec<VersionId>) {
    let n = forest.len();
    let mut off = vec![0u32; n + 1];
    for &p in forest {
        if p != NONE {
            off[p as usize + 1] += 1;
        }
    }
    for i in 0..n {
        off[i + 1] += off[i];
    }
    let mut fill = off.clone();
    let mut children = vec![0u32; off[n] as usize];
    for (v, &p) in forest.iter().enumerate() {
        if p != NONE {
            children[fill[p as usize] as usize] = v as u32;
            fill[p as usize] += 1;
        }
    }
    let mut tin = vec![u32::MAX; n];
    let mut tout = vec![0u32; n];
    let mut clock = 0u32;
    let mut stack: Vec<(u32, u32)> = Vec::new();
    for root in 0..ix.keys.len() as u32 {
        tin[root as usize] = clock;
        clock += 1;
        stack.push((root, off[root as usize]));
        while let Some(top) = stack.last_mut() {
            let (v, pos) = *top;
            if pos < off[v as usize + 1] {
                top.1 += 1;
                let c = children[pos as usize];
                tin[c as usize] = clock;
                clock += 1;
                stack.push((c, off[c as usize]));
            } else {
                tout[v as usize] = clock;
                clock += 1;
                stack.pop();
            }
        }
    }
    let unreached = (0..n as u32).filter(|&v| tin[v as usize] == u32::MAX).collect();
    (tin, tout, unreached)
}

/// Cuts one edge of each cycle among `unreached`, re-rooting the cut
/// version at its key's initial version; returns the cut versions.
fn cut_cycles(ix: &Index<'_>, forest: &mut [VersionId], unreached: &[VersionId]) -> Vec<VersionId> {
    let mut walk = vec![0u32; forest.len()];
    let mut cuts = Vec::new();
    for (w, &start) in unreached.iter().enumerate() {
        let id = w as u32 + 1;
        let mut v = start;
        while v != NONE && walk[v as usize] == 0 {
            walk[v as usize] = id;
            v = forest[v as usize];
        }
        if v != NONE && walk[v as usize] == id {
            forest[v as usize] = ix.nil(ix.versions.key[v as usize]);
            cuts.push(v);
        }
    }
    cuts
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::parse_jsonl;
    use crate::txns::pair;

    fn index(text: &str) -> Index<'static> {
        let ops = Box::leak(Box::new(parse_jsonl(text).unwrap()));
        let p = pair(ops);
        Index::build(p.txns, p.warnings)
    }

    fn ver(ix: &Index<'_>, key: u64, value: u64) -> VersionId {
        (0..ix.versions.len() as u32)
            .find(|&v| {
                ix.keys[ix.versions.key[v as usize] as usize] == key && ix.versions.value[v as usize] == Some(value)
            })
            .unwrap()
    }

    #[test]
    fn longest_list_read_orders_appends_and_unread_appends_come_last() {
        let ix = index(
            r#"{"index":0,"type":"invoke","process":1,"value":[["append",1,10]]}
{"index":1,"type":"ok","process":1,"value":[["append",1,10]]}
{"index":2,"type":"invoke","process":1,"value":[["append",1,20]]}
{"index":3,"type":"ok","process":1,"value":[["append",1,20]]}
{"index":4,"type":"invoke","process":1,"value":[["r",1,null]]}
{"index":5,"type":"ok","process":1,"value":[["r",1,[10,20]]]}
{"index":6,"type":"invoke","process":1,"value":[["append",1,30]]}
{"index":7,"type":"ok","process":1,"value":[["append",1,30]]}"#,
        );
        let o = infer(&ix);
        let (a, b, c) = (ver(&ix, 1, 10), ver(&ix, 1, 20), ver(&ix, 1, 30));
        assert_eq!(o.parent[a as usize], ix.nil(0));
        assert_eq!(o.parent[b as usize], a);
        assert_eq!(o.parent[c as usize], b);
        assert!(o.precedes(ix.nil(0), a) && o.precedes(a, c) && !o.precedes(c, a));
        assert!(o.incompatible.is_empty() && o.cyclic.is_empty());
    }

    #[test]
    fn non_prefix_list_reads_are_incompatible() {
        let ix = index(
            r#"{"index":0,"type":"invoke","process":1,"value":[["append",1,10],["append",1,20]]}
{"index":1,"type":"ok","process":1,"value":[["append",1,10],["append",1,20]]}
{"index":2,"type":"invoke","process":1,"value":[["r",1,null]]}
{"index":3,"type":"ok","process":1,"value":[["r",1,[10,20]]]}
{"index":4,"type":"invoke","process":2,"value":[["r",1,null]]}
{"index":5,"type":"ok","process":2,"value":[["r",1,[20]]]}"#,
        );
        assert_eq!(infer(&ix).incompatible.len(), 1);
    }

    #[test]
    fn registers_follow_reads_and_blind_writes_stay_unordered() {
        let ix = index(
            r#"{"index":0,"type":"invoke","process":1,"value":[["r",1,null],["w",1,10]]}
{"index":1,"type":"ok","process":1,"value":[["r",1,null],["w",1,10]]}
{"index":2,"type":"invoke","process":1,"value":[["r",1,null],["w",1,20]]}
{"index":3,"type":"ok","process":1,"value":[["r",1,10],["w",1,20]]}
{"index":4,"type":"invoke","process":2,"value":[["w",1,30]]}
{"index":5,"type":"ok","process":2,"value":[["w",1,30]]}"#,
        );
        let o = infer(&ix);
        let (a, b, c) = (ver(&ix, 1, 10), ver(&ix, 1, 20), ver(&ix, 1, 30));
        assert_eq!(o.parent[b as usize], a);
        assert!(o.precedes(a, b) && o.precedes(ix.nil(0), c));
        assert!(!o.precedes(a, c) && !o.precedes(c, b));
    }

    #[test]
    fn cyclic_register_orders_are_cut_and_reported() {
        let ix = index(
            r#"{"index":0,"type":"invoke","process":1,"value":[["r",1,null],["w",1,10]]}
{"index":1,"type":"invoke","process":2,"value":[["r",1,null],["w",1,20]]}
{"index":2,"type":"ok","process":1,"value":[["r",1,20],["w",1,10]]}
{"index":3,"type":"ok","process":2,"value":[["r",1,10],["w",1,20]]}"#,
        );
        let o = infer(&ix);
        assert_eq!(o.cyclic.len(), 1);
        let (a, b) = (ver(&ix, 1, 10), ver(&ix, 1, 20));
        assert_eq!(o.parent[a as usize], b);
        assert_eq!(o.parent[b as usize], a);
        assert!(o.precedes(a, b) ^ o.precedes(b, a));
    }
}
