//! Version-order requirements of the weak models, and their contradictions.
//!
//! Read atomicity and causality both say "this transaction must observe a
//! version of `k` no older than that one". When the inferred order already
//! decides the question, a requirement is either satisfied or directly
//! violated. When it does not (two blind register writes, say), the
//! requirement becomes an edge `before -> after` between versions; the model
//! holds only if some order of each key satisfies every requirement at once,
//! so a cycle among the inferred order and these edges is a violation too
//! (for causal consistency, a divergence: no single order of the key
//! explains what every session saw).

use crate::explain;
use crate::fxhash::FxMap;
use crate::graph::{Bfs, Csr, Edge, Tarjan};
use crate::index::{Index, NONE, VersionId};
use crate::model::AnomalyKind;
use crate::order::VersionOrder;
use crate::report::{Findings, TxnRef};
use crate::txns::TxnId;

/// Why a version must not be older than another.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Why {
    /// `reader` saw `seen`, a write of `writer`, which also wrote the key.
    Fractured { reader: TxnId, writer: TxnId, seen: VersionId },
    /// `writer`, earlier in `reader`'s session, wrote the key.
    Session { reader: TxnId, writer: TxnId },
    /// `writer` causally precedes `reader`, which read the key.
    CausalRead { reader: TxnId, writer: TxnId },
    /// `writer` causally precedes `txn`, which wrote the key too.
    CausalWrite { txn: TxnId, writer: TxnId },
}

impl Why {
    pub fn txns(&self) -> [TxnId; 2] {
        match *self {
            Why::Fractured { reader, writer, .. }
            | Why::Session { reader, writer }
            | Why::CausalRead { reader, writer } => [reader, writer],
            Why::CausalWrite { txn, writer } => [txn, writer],
        }
    }

    /// The anomaly a direct violation of this requirement is.
    pub fn kind(&self) -> AnomalyKind {
        match self {
            Why::Fractured { .. } => AnomalyKind::FracturedRead,
            _ => AnomalyKind::Causality,
        }
    }

    /// Explains the requirement that `after` be no older than `before`, or,
    /// when `violated`, how the inferred order breaks it.
    pub fn describe(&self, ix: &Index<'_>, before: VersionId, after: VersionId, violated: bool) -> String {
        let t = |x: TxnId| explain::txn(ix, x);
        let (b, a) = (explain::write(ix, before), explain::version(ix, after));
        let preceded = |reader: TxnId, writer: TxnId| {
            if ix.txns[reader as usize].process == ix.txns[writer as usize].process {
                format!("{}, earlier in the same session", t(writer))
            } else {
                format!("{}, which causally precedes it", t(writer))
            }
        };
        match (*self, violated) {
            (Why::Fractured { reader, writer, seen }, true) => {
                format!("{} saw {}'s {} but not its {}: it read {a}", t(reader), t(writer), explain::write(ix, seen), b)
            }
            (Why::Fractured { reader, writer, seen }, false) => format!(
                "{} saw {}'s {}, so its read {a} must not be older than {}'s {b}",
                t(reader),
                t(writer),
                explain::write(ix, seen),
                t(writer)
            ),
            (Why::Session { reader, writer }, true) => format!(
                "read-your-writes violation: {} read {a}, older than the {b} by {}",
                t(reader),
                preceded(reader, writer)
            ),
            (Why::CausalRead { reader, writer }, true) => format!(
                "{} read {a}, older than the {b} by {}{}",
                t(reader),
                preceded(reader, writer),
                if ix.txns[reader as usize].process == ix.txns[writer as usize].process {
                    " (read-your-writes violation)"
                } else {
                    ""
                }
            ),
            (Why::Session { reader, writer } | Why::CausalRead { reader, writer }, false) => {
                format!(
                    "{} read {a} after the {b} by {}, so {a} must not be older",
                    t(reader),
                    preceded(reader, writer)
                )
            }
            (Why::CausalWrite { txn, writer }, true) => format!(
                "{}'s {} is ordered before the {b} by {}",
                t(txn),
                explain::write(ix, after),
                preceded(txn, writer)
            ),
            (Why::CausalWrite { txn, writer }, false) => format!(
                "{}'s {} must come after the {b} by {}",
                t(txn),
                explain::write(ix, after),
                preceded(txn, writer)
            ),
        }
    }
}

struct Requirement {
    before: VersionId,
    after: VersionId,
    why: Why,
}

#[derive(Default)]
pub(crate) struct Constraints {
    open: Vec<Requirement>,
    /// The `(before, after)` pairs in `open`: a pair required again (every
    /// reader of one version, after the same writes of its causal past)
    /// adds nothing to the cycles, so only its first reason is kept. Without
    /// this a causal check held one requirement per read and session that
    /// wrote the key — gigabytes for a few hundred thousand transactions.
    pairs: FxMap<(VersionId, VersionId), ()>,
}

const BASE: u8 = 1;
const DERIVED: u8 = 2;

impl Constraints {
    /// Requires `before` to be `after` or older. Reports a direct violation
    /// (the inferred order puts `after` first) as `why.kind()`; keeps
    /// undecided requirements for [`Constraints::cycles`].
    pub fn require(
        &mut self,
        ix: &Index<'_>,
        ord: &VersionOrder,
        before: VersionId,
        after: VersionId,
        why: Why,
        f: &mut Findings,
    ) {
        if before == after || ord.precedes(before, after) {
            return;
        }
        if ord.precedes(after, before) {
            f.add(why.kind(), || {
                let text = why.describe(ix, before, after, true);
                (explain::refs(ix, why.txns()), text)
            });
            return;
        }
        if self.pairs.insert((before, after), ()).is_none() {
            self.open.push(Requirement { before, after, why });
        }
    }

    pub fn len(&self) -> usize {
        self.open.len()
    }

    /// Reports each set of requirements no version order can satisfy
    /// together with the inferred one, named by `kind_of` its reasons.
    pub fn cycles(
        &self,
        ix: &Index<'_>,
        ord: &VersionOrder,
        f: &mut Findings,
        kind_of: impl Fn(&[Why]) -> AnomalyKind,
    ) {
        if self.open.is_empty() {
            return;
        }
        let n = ix.versions.len();
        let mut edges: Vec<Edge> = (ix.keys.len()..n)
            .filter(|&v| !ix.is_nil(ord.forest[v]))
            .map(|v| Edge { from: ord.forest[v], to: v as VersionId, rel: BASE, tag: NONE })
            .collect();
        edges.extend(self.open.iter().enumerate().map(|(i, r)| Edge {
            from: r.before,
            to: r.after,
            rel: DERIVED,
            tag: i as u32,
        }));
        let g = Csr::build(n, edges);
        let mut tarjan = Tarjan::new(n);
        // Every cycle uses a requirement, so starting from them suffices.
        let comps = tarjan.run(&g, self.open.iter().map(|r| r.before), |_| true);
        let mut bfs = Bfs::new(n);
        for comp in comps.nontrivial() {
            let c = tarjan.comp[comp[0] as usize];
            let keep = |e: usize| tarjan.comp[g.to[e] as usize] == c;
            let start =
                comp.iter().copied().find(|&v| g.out(v).any(|e| g.rel[e] == DERIVED && keep(e))).unwrap_or(comp[0]);
            let mut unlimited = u64::MAX;
            let Some(cycle) = bfs.cycle_through(&g, start, keep, &mut unlimited) else {
                continue;
            };
            let whys: Vec<Why> =
                cycle.iter().filter(|&&e| g.rel[e] == DERIVED).map(|&e| self.open[g.tag[e] as usize].why).collect();
            f.add(kind_of(&whys), || self.render(ix, &g, &cycle));
        }
    }

    fn render(&self, ix: &Index<'_>, g: &Csr, cycle: &[usize]) -> (Vec<TxnRef>, String) {
        let mut chain: Vec<String> = cycle.iter().map(|&e| explain::version(ix, g.from[e])).collect();
        chain.push(explain::version(ix, g.from[cycle[0]]));
        let mut txns = Vec::new();
        let mut reasons = Vec::new();
        for &e in cycle {
            let (a, b) = (g.from[e], g.to[e]);
            if g.rel[e] == DERIVED {
                let r = &self.open[g.tag[e] as usize];
                txns.extend(r.why.txns());
                reasons.push(r.why.describe(ix, a, b, false));
            } else {
                let w = ix.versions.writer[b as usize];
                if w != NONE {
                    txns.push(w);
                }
                reasons.push(format!(
                    "{} comes right after {} in the observed order",
                    explain::version(ix, b),
                    explain::version(ix, a)
                ));
            }
        }
        let text = format!(
            "no order of {} satisfies {}: {}",
            explain::key(ix, ix.versions.key[g.from[cycle[0]] as usize]),
            chain.join(" < "),
            reasons.join("; ")
        );
        (explain::refs(ix, txns), text)
    }
}
