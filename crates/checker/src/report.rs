//! What a check found: the verdict, example anomalies with the transactions
//! involved, counts of every anomaly, and a few statistics; rendered as JSON
//! (the report's `check` field) or as text for people.

use crate::model::{AnomalyKind, Model};
use serde_json::{Value as Json, json};
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// How many examples of each kind a report keeps; every one is still counted.
pub const EXAMPLES_PER_KIND: usize = 8;

/// A transaction named by the history line that completed it.
#[derive(Copy, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub struct TxnRef {
    /// `index` of the completion line (of the invocation if it never completed).
    pub index: u64,
    pub process: u64,
}

impl TxnRef {
    fn to_json(self) -> Json {
        json!({"index": self.index, "process": self.process})
    }
}

/// One example of an anomaly.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Anomaly {
    pub kind: AnomalyKind,
    /// The transactions involved (for cycles, in cycle order).
    pub txns: Vec<TxnRef>,
    pub explanation: String,
}

/// Sizes of what was checked.
#[derive(Clone, Default, PartialEq, Eq, Debug)]
pub struct CheckStats {
    pub txns_ok: u64,
    pub txns_fail: u64,
    /// Indeterminate transactions, including invocations never completed.
    pub txns_info: u64,
    pub keys: u64,
    /// Edges of the graph the model's check built: dependency edges
    /// (ww/wr/rw) for the serializable models, session and write-read edges
    /// for causal, version-order constraints for read-atomic.
    pub edges: u64,
}

/// The verdict of [`crate::check`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct CheckReport {
    pub model: Model,
    /// No anomaly the model forbids was found.
    pub valid: bool,
    /// At most [`EXAMPLES_PER_KIND`] examples per kind, ordered by kind.
    pub anomalies: Vec<Anomaly>,
    /// Every anomaly found, by kind, including those not kept as examples.
    pub counts: BTreeMap<AnomalyKind, u64>,
    pub stats: CheckStats,
    /// Problems with the history itself that the check worked around.
    pub warnings: Vec<String>,
}

impl CheckReport {
    /// How many anomalies of `kind` were found.
    pub fn count(&self, kind: AnomalyKind) -> u64 {
        self.counts.get(&kind).copied().unwrap_or(0)
    }

    /// Whether any anomaly of `kind` was found.
    pub fn has(&self, kind: AnomalyKind) -> bool {
        self.count(kind) > 0
    }

    /// The anomaly kinds found, in report order.
    pub fn kinds(&self) -> Vec<AnomalyKind> {
        self.counts.keys().copied().collect()
    }

    pub fn to_json(&self) -> Json {
        let anomalies: Vec<Json> = self
            .anomalies
            .iter()
            .map(|a| {
                json!({
                    "kind": a.kind.name(),
                    "txns": a.txns.iter().map(|t| t.to_json()).collect::<Vec<_>>(),
                    "explanation": a.explanation,
                })
            })
            .collect();
        let counts: serde_json::Map<String, Json> =
            self.counts.iter().map(|(k, n)| (k.name().to_string(), json!(n))).collect();
        json!({
            "model": self.model.name(),
            "valid": self.valid,
            "anomalies": anomalies,
            "anomaly_counts": counts,
            "stats": {
                "txns": {
                    "ok": self.stats.txns_ok,
                    "fail": self.stats.txns_fail,
                    "info": self.stats.txns_info,
                },
                "keys": self.stats.keys,
                "edges": self.stats.edges,
            },
            "warnings": self.warnings,
        })
    }

    /// A human summary: the verdict, then each example anomaly with the
    /// transactions involved.
    pub fn summary(&self) -> String {
        let s = &self.stats;
        let mut out = String::new();
        let total: u64 = self.counts.values().sum();
        if self.valid {
            let _ = writeln!(out, "{}: valid", self.model);
        } else {
            let by_kind: Vec<String> = self.counts.iter().map(|(k, n)| format!("{k} {n}")).collect();
            let _ = writeln!(out, "{}: NOT valid, {total} anomalies ({})", self.model, by_kind.join(", "));
        }
        let _ = writeln!(
            out,
            "checked {} transactions ({} ok, {} fail, {} info) over {} keys, {} edges",
            s.txns_ok + s.txns_fail + s.txns_info,
            s.txns_ok,
            s.txns_fail,
            s.txns_info,
            s.keys,
            s.edges
        );
        for w in &self.warnings {
            let _ = writeln!(out, "warning: {w}");
        }
        let mut shown: BTreeMap<AnomalyKind, u64> = BTreeMap::new();
        for a in &self.anomalies {
            let n = shown.entry(a.kind).or_default();
            *n += 1;
            let txns: Vec<String> = a.txns.iter().map(|t| format!("T{} (process {})", t.index, t.process)).collect();
            let _ = writeln!(out, "{} #{}: {}", a.kind, n, txns.join(", "));
            let _ = writeln!(out, "  {}", a.explanation);
        }
        for (kind, n) in &self.counts {
            let kept = shown.get(kind).copied().unwrap_or(0);
            if *n > kept {
                let _ = writeln!(out, "... and {} more {kind} not shown", n - kept);
            }
        }
        out
    }
}

/// Collects anomalies while a check runs, keeping a few examples per kind.
pub(crate) struct Findings {
    model: Model,
    examples: Vec<Anomaly>,
    counts: BTreeMap<AnomalyKind, u64>,
}

impl Findings {
    pub fn new(model: Model) -> Findings {
        Findings { model, examples: Vec::new(), counts: BTreeMap::new() }
    }

    /// Records one anomaly; `describe` (which may be costly) runs only when
    /// the example is kept. Kinds the model allows are ignored.
    pub fn add(&mut self, kind: AnomalyKind, describe: impl FnOnce() -> (Vec<TxnRef>, String)) {
        if !self.model.forbids(kind) {
            return;
        }
        let n = self.counts.entry(kind).or_default();
        *n += 1;
        if *n as usize <= EXAMPLES_PER_KIND {
            let (txns, explanation) = describe();
            self.examples.push(Anomaly { kind, txns, explanation });
        }
    }

    /// Takes `other`'s real-time violations (a second pass over part of
    /// the history, whose other findings this pass already has).
    pub fn absorb_real_time(&mut self, other: Findings) {
        let kind = AnomalyKind::RealTime;
        let Some(n) = other.counts.get(&kind) else { return };
        let mine = self.counts.entry(kind).or_default();
        let room = EXAMPLES_PER_KIND.saturating_sub(*mine as usize);
        *mine += n;
        self.examples.extend(other.examples.into_iter().filter(|a| a.kind == kind).take(room));
    }

    pub fn finish(mut self, stats: CheckStats, warnings: Vec<String>) -> CheckReport {
        // Stable: examples of one kind stay in the order they were found.
        self.examples.sort_by_key(|a| a.kind);
        CheckReport {
            model: self.model,
            valid: self.counts.is_empty(),
            anomalies: self.examples,
            counts: self.counts,
            stats,
            warnings,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(index: u64) -> TxnRef {
        TxnRef { index, process: 1 }
    }

    #[test]
    fn keeps_a_few_examples_but_counts_all() {
        let mut f = Findings::new(Model::Serializable);
        for i in 0..20 {
            f.add(AnomalyKind::G2, || (vec![t(i)], format!("g2 {i}")));
        }
        f.add(AnomalyKind::G0, || (vec![t(99)], "g0".into()));
        // Allowed by the model: neither counted nor shown.
        f.add(AnomalyKind::Causality, || panic!("not described"));
        let r = f.finish(CheckStats::default(), vec![]);
        assert!(!r.valid);
        assert_eq!(r.count(AnomalyKind::G2), 20);
        assert_eq!(r.anomalies.len(), EXAMPLES_PER_KIND + 1);
        assert_eq!(r.anomalies[0].kind, AnomalyKind::G0);
        let j = r.to_json();
        assert_eq!(j["anomaly_counts"]["G2"], 20);
        assert_eq!(j["anomalies"][1]["txns"][0]["index"], 0);
        assert!(!r.has(AnomalyKind::Causality));
        let text = r.summary();
        assert!(text.contains("NOT valid, 21 anomalies"), "{text}");
        assert!(text.contains("12 more G2"), "{text}");
    }

    #[test]
    fn empty_findings_are_valid() {
        let r = Findings::new(Model::Causal).finish(CheckStats::default(), vec![]);
        assert!(r.valid);
        assert_eq!(r.to_json()["valid"], true);
        assert!(r.summary().starts_with("causal: valid"));
    }
}
