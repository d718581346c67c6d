//! History recording and consistency checking.
//!
//! [`history`] reads and writes histories in the CONTRACT's JSON-lines
//! shape. [`check`] decides whether a history satisfies a consistency
//! [`Model`] and explains every violation in the vocabulary of Adya and Elle
//! ([`AnomalyKind`]), naming the transactions involved:
//!
//! ```
//! use meridian_checker::{AnomalyKind, Model, check, parse_jsonl};
//!
//! // Two transactions each read both keys' initial state and write one:
//! // write skew, fine for read atomicity, not serializable.
//! let h = parse_jsonl(r#"{"index":0,"type":"invoke","process":1,"time":0,"value":[["r",1,null],["r",2,null],["w",1,10]]}
//! {"index":1,"type":"invoke","process":2,"time":1,"value":[["r",1,null],["r",2,null],["w",2,20]]}
//! {"index":2,"type":"ok","process":1,"time":2,"value":[["r",1,null],["r",2,null],["w",1,10]]}
//! {"index":3,"type":"ok","process":2,"time":3,"value":[["r",1,null],["r",2,null],["w",2,20]]}"#).unwrap();
//! let report = check(&h, Model::Serializable);
//! assert!(!report.valid);
//! assert_eq!(report.kinds(), [AnomalyKind::G2]);
//! assert!(check(&h, Model::ReadAtomic).valid);
//! ```
//!
//! Each transaction is held to its own read mode (a line's `mode`): a
//! `snapshot` transaction gets no real-time order into it (serializable,
//! possibly stale), a `process-ordered` one only its own session's. A
//! `process` is one session: read-your-writes and causal session order are
//! checked per process. A procedure that committed lists what its replay
//! executed; one without an outcome lists nothing but names the block of
//! values it may have written (`tags`), and a committed read of a value in
//! that block is attributed to it (`blocks`).
//!
//! How a check proceeds: invocations are paired with completions
//! (`txns`); keys, versions, reads and writes are interned (`index`);
//! direct anomalies are found without any graph (`direct`); each key's
//! version order is inferred (`order`); then the model's own check runs:
//! the dependency graph and its cycles for the serializable models
//! (`serial`), fractured reads and read-your-writes for read atomicity
//! (`atomic`), causal pasts and convergence for causal consistency
//! (`causal`), the latter two sharing version-order requirements
//! (`constraints`). Everything is deterministic: the same history always
//! gives the same report.

pub mod history;
pub mod model;
pub mod report;

mod atomic;
mod blocks;
mod causal;
mod constraints;
mod direct;
mod explain;
mod fxhash;
mod graph;
mod index;
mod order;
mod serial;
mod txns;

pub use history::{
    HistoryOp, Mop, OpType, ParseError, ReadMode, ReadValue, TxnMeta, WellFormedError, parse_jsonl, to_jsonl, validate,
};
pub use model::{AnomalyKind, Model};
pub use report::{Anomaly, CheckReport, CheckStats, EXAMPLES_PER_KIND, TxnRef};

use index::Index;
use order::VersionOrder;
use report::Findings;
use txns::Status;

/// Checks a history against a consistency model.
///
/// Never fails: problems with the history itself (an operation completing
/// nothing, a value written twice) are worked around and listed in the
/// report's warnings; use [`validate`] to reject such histories instead.
pub fn check(ops: &[HistoryOp], model: Model) -> CheckReport {
    let attributed = blocks::attribute(ops);
    let ops = attributed.as_deref().unwrap_or(ops);
    let pairing = txns::pair(ops);
    // Snapshot reads (SLOG's, K2's) are serializable, not strict: the whole
    // history is checked serializable, and the rest of it (they only read,
    // so removing them changes no other transaction's reads) strictly.
    let snapshot =
        |t: &txns::Txn<'_>| t.mode == ReadMode::Snapshot && t.mops.iter().all(|m| matches!(m, Mop::Read { .. }));
    let strict_part = (model == Model::StrictSerializable && pairing.txns.iter().any(snapshot))
        .then(|| pairing.txns.iter().filter(|t| !snapshot(t)).cloned().collect::<Vec<_>>());
    let ix = Index::build(pairing.txns, pairing.warnings);
    let mut f = Findings::new(model);
    direct::check(&ix, &mut f);
    let ord = order::infer(&ix);
    order_anomalies(&ix, &ord, model, &mut f);
    let mut warnings = ix.warnings.clone();
    let edges = match (model, strict_part) {
        (Model::StrictSerializable, Some(strict)) => {
            let edges = serial::check(&ix, &ord, false, &mut f, &mut warnings);
            let strict_ix = Index::build(strict, Vec::new());
            let strict_ord = order::infer(&strict_ix);
            let mut strict_f = Findings::new(model);
            serial::check(&strict_ix, &strict_ord, true, &mut strict_f, &mut Vec::new());
            f.absorb_real_time(strict_f);
            edges
        }
        (Model::StrictSerializable, None) => serial::check(&ix, &ord, true, &mut f, &mut warnings),
        (Model::Serializable, _) => serial::check(&ix, &ord, false, &mut f, &mut warnings),
        (Model::ReadAtomic, _) => atomic::check(&ix, &ord, true, &mut f),
        (Model::ReadAtomicNoRyw, _) => atomic::check(&ix, &ord, false, &mut f),
        (Model::Causal, _) => causal::check(&ix, &ord, true, &mut f),
        (Model::CausalNoConvergence, _) => causal::check(&ix, &ord, false, &mut f),
    };
    f.finish(stats(&ix, edges), warnings)
}

/// List reads no single order explains, and cyclic inferred orders. For
/// causal consistency both mean replicas never converged (divergence); the
/// serializable models report incompatible list orders as such (a cyclic
/// register order shows up as a G0 cycle there).
fn order_anomalies(ix: &Index<'_>, ord: &VersionOrder, model: Model, f: &mut Findings) {
    let diverged = if model == Model::Causal { AnomalyKind::Divergence } else { AnomalyKind::IncompatibleOrder };
    for &(a, b) in &ord.incompatible {
        f.add(diverged, || {
            let (ra, rb) = (&ix.reads[a as usize], &ix.reads[b as usize]);
            let text = format!(
                "{} was read as {} by {} and as {} by {}; neither is a prefix of the other, \
                 so no single order of appends explains both",
                explain::key(ix, ra.key),
                list_text(ix, ix.elems_of(ra)),
                explain::txn(ix, ra.txn),
                list_text(ix, ix.elems_of(rb)),
                explain::txn(ix, rb.txn)
            );
            (explain::refs(ix, [ra.txn, rb.txn]), text)
        });
    }
    if model != Model::Causal {
        return;
    }
    for &v in &ord.cyclic {
        f.add(AnomalyKind::Divergence, || {
            let mut cycle = vec![v];
            let mut x = ord.parent[v as usize];
            while x != v && x != index::NONE && cycle.len() <= ix.versions.len() {
                cycle.push(x);
                x = ord.parent[x as usize];
            }
            cycle.reverse();
            let writers = cycle.iter().map(|&c| ix.versions.writer[c as usize]).filter(|&w| w != index::NONE);
            let names: Vec<String> = cycle.iter().map(|&c| explain::version(ix, c)).collect();
            let text = format!(
                "the versions of {} are ordered in a cycle ({}), each written after reading \
                 the one before",
                explain::key(ix, ix.versions.key[v as usize]),
                names.join(" < ")
            );
            (explain::refs(ix, writers), text)
        });
    }
}

/// `[1, 2, 3]`, shortened in the middle when long.
fn list_text(ix: &Index<'_>, elems: &[u32]) -> String {
    let show = |v: &u32| ix.versions.value[*v as usize].map_or("?".into(), |x| x.to_string());
    if elems.len() <= 12 {
        let all: Vec<String> = elems.iter().map(show).collect();
        return format!("[{}]", all.join(", "));
    }
    let head: Vec<String> = elems[..5].iter().map(show).collect();
    let tail: Vec<String> = elems[elems.len() - 5..].iter().map(show).collect();
    format!("[{}, ... {} more ..., {}]", head.join(", "), elems.len() - 10, tail.join(", "))
}

fn stats(ix: &Index<'_>, edges: u64) -> CheckStats {
    let count = |s: Status| ix.txns.iter().filter(|t| t.status == s).count() as u64;
    CheckStats {
        txns_ok: count(Status::Ok),
        txns_fail: count(Status::Fail),
        txns_info: count(Status::Info),
        keys: ix.keys.len() as u64,
        edges,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Vec<HistoryOp> {
        parse_jsonl(text).unwrap()
    }

    #[test]
    fn empty_and_never_completed_histories_are_valid() {
        let open = parse(
            r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,1],["append",2,3]]}
{"index":1,"type":"invoke","process":2,"value":[["r",1,null]]}"#,
        );
        for m in Model::ALL {
            let r = check(&[], m);
            assert!(r.valid && r.anomalies.is_empty(), "{m}");
            let r = check(&open, m);
            assert!(r.valid, "{m}: {}", r.summary());
            assert_eq!(r.stats.txns_info, 2);
        }
    }

    #[test]
    fn malformed_histories_are_checked_with_warnings_not_panics() {
        let h = parse(
            r#"{"index":0,"type":"ok","process":1,"value":[["r",1,5]]}
{"index":1,"type":"invoke","process":2,"value":[["w",1,5]]}
{"index":2,"type":"invoke","process":2,"value":[["w",1,5],["append",1,6]]}
{"index":3,"type":"ok","process":2,"value":[["w",1,5],["append",1,6],["r",1,7]]}"#,
        );
        assert!(validate(&h).is_err());
        for m in Model::ALL {
            let r = check(&h, m);
            assert!(r.warnings.len() >= 2, "{m}: {:?}", r.warnings);
            assert!(!r.valid, "{m}: reading a list key as a register is garbage");
        }
    }

    #[test]
    fn json_report_has_the_contract_fields() {
        let h = parse(
            r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,5]]}
{"index":1,"type":"fail","process":1,"value":[["w",1,5]]}
{"index":2,"type":"invoke","process":2,"value":[["r",1,null]]}
{"index":3,"type":"ok","process":2,"value":[["r",1,5]]}"#,
        );
        let j = check(&h, Model::StrictSerializable).to_json();
        assert_eq!(j["model"], "strict-serializable");
        assert_eq!(j["valid"], false);
        assert_eq!(j["anomalies"][0]["kind"], "G1a");
        assert_eq!(j["anomalies"][0]["txns"][0]["index"], 3);
        assert_eq!(j["anomalies"][0]["txns"][1]["process"], 1);
        assert_eq!(j["anomaly_counts"]["G1a"], 1);
        assert_eq!(j["stats"]["txns"]["fail"], 1);
    }
}
