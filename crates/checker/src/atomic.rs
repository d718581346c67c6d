//! Read atomicity with read-your-writes.
//!
//! No fractured reads: if a committed transaction `T` observed any write of
//! `Tw` (for lists: any element `Tw` appended), then wherever `T` also read
//! (before writing) a key `Tw` wrote, it must see `Tw`'s last write of that
//! key or a later version. Read-your-writes: a transaction must see, or see
//! past, what earlier transactions of its own session wrote; violations are
//! reported as causality violations; `read-atomic-no-ryw` leaves that out
//! (RAMP-OPW). Serializability cycles are allowed.

use crate::constraints::{Constraints, Why};
use crate::fxhash::FxMap;
use crate::index::{Index, KeyId, NONE, VersionId};
use crate::model::AnomalyKind;
use crate::order::VersionOrder;
use crate::report::Findings;
use crate::txns::TxnId;

/// Checks read atomicity, with read-your-writes when `ryw`; returns how
/// many undecided order requirements were derived.
pub(crate) fn check(ix: &Index<'_>, ord: &VersionOrder, ryw: bool, f: &mut Findings) -> u64 {
    let mut cons = Constraints::default();
    fractured_reads(ix, ord, &mut cons, f);
    if ryw {
        read_your_writes(ix, ord, &mut cons, f);
    }
    cons.cycles(ix, ord, f, |whys| {
        if whys.iter().any(|w| matches!(w, Why::Fractured { .. })) {
            AnomalyKind::FracturedRead
        } else {
            AnomalyKind::Causality
        }
    });
    cons.len() as u64
}

fn fractured_reads(ix: &Index<'_>, ord: &VersionOrder, cons: &mut Constraints, f: &mut Findings) {
    let mut first_reads: Vec<(KeyId, VersionId)> = Vec::new();
    let mut sources: Vec<(TxnId, VersionId)> = Vec::new();
    for t in ix.oks() {
        first_reads.clear();
        sources.clear();
        for r in ix.reads_of(t) {
            if !r.external || r.version == NONE {
                continue;
            }
            first_reads.push((r.key, r.version));
            // An intermediate read is a G1b already; don't report it twice.
            if ix.versions.intermediate[r.version as usize] {
                continue;
            }
            for &v in ix.seen_versions(r) {
                match ix.graph_writer(v) {
                    Some(w) if w != t => sources.push((w, v)),
                    _ => {}
                }
            }
        }
        // Stable: the first read of each key stays first.
        first_reads.sort_by_key(|r| r.0);
        first_reads.dedup_by_key(|r| r.0);
        sources.sort_unstable();
        sources.dedup_by_key(|s| s.0);
        for &(writer, seen) in &sources {
            for w in ix.writes_of(writer).iter().filter(|w| w.last) {
                let Ok(i) = first_reads.binary_search_by_key(&w.key, |r| r.0) else {
                    continue;
                };
                let why = Why::Fractured { reader: t, writer, seen };
                cons.require(ix, ord, w.version, first_reads[i].1, why, f);
            }
        }
    }
}

fn read_your_writes(ix: &Index<'_>, ord: &VersionOrder, cons: &mut Constraints, f: &mut Findings) {
    let mut sessions: Vec<(u64, TxnId)> = ix.oks().map(|t| (ix.txns[t as usize].process, t)).collect();
    sessions.sort_unstable();
    let mut written: FxMap<KeyId, (VersionId, TxnId)> = FxMap::default();
    for session in sessions.chunk_by(|a, b| a.0 == b.0) {
        written.clear();
        for &(_, t) in session {
            for r in ix.reads_of(t) {
                if !r.external || r.version == NONE {
                    continue;
                }
                if let Some(&(v, writer)) = written.get(&r.key) {
                    let why = Why::Session { reader: t, writer };
                    cons.require(ix, ord, v, r.version, why, f);
                }
            }
            for w in ix.writes_of(t).iter().filter(|w| w.last) {
                written.insert(w.key, (w.version, t));
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
        check(&parse_jsonl(text).unwrap(), Model::ReadAtomic)
    }

    #[test]
    fn seeing_half_of_a_multi_key_write_is_fractured() {
        let h = r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,10],["w",2,20]]}
{"index":1,"type":"ok","process":1,"value":[["w",1,10],["w",2,20]]}
{"index":2,"type":"invoke","process":2,"value":[["r",1,null],["r",2,null]]}
{"index":3,"type":"ok","process":2,"value":[["r",1,10],["r",2,null]]}"#;
        let r = run(h);
        assert_eq!(r.kinds(), [AnomalyKind::FracturedRead], "{}", r.summary());
        assert_eq!(r.anomalies[0].txns.len(), 2);
        let no_ryw = check(&parse_jsonl(h).unwrap(), Model::ReadAtomicNoRyw);
        assert_eq!(no_ryw.kinds(), [AnomalyKind::FracturedRead], "fractured without read-your-writes too");
        assert!(run(&h.replace(r#"["r",2,null]]}"#, r#"["r",2,20]]}"#)).valid);
    }

    #[test]
    fn fractured_list_reads_use_the_observed_order() {
        let h = r#"{"index":0,"type":"invoke","process":1,"value":[["append",1,10],["append",2,20]]}
{"index":1,"type":"ok","process":1,"value":[["append",1,10],["append",2,20]]}
{"index":2,"type":"invoke","process":3,"value":[["append",2,30]]}
{"index":3,"type":"ok","process":3,"value":[["append",2,30]]}
{"index":4,"type":"invoke","process":2,"value":[["r",1,null],["r",2,null]]}
{"index":5,"type":"ok","process":2,"value":[["r",1,[10]],["r",2,[30]]]}
{"index":6,"type":"invoke","process":2,"value":[["r",2,null]]}
{"index":7,"type":"ok","process":2,"value":[["r",2,[30,20]]]}"#;
        let r = run(h);
        assert_eq!(r.kinds(), [AnomalyKind::FracturedRead], "{}", r.summary());
    }

    #[test]
    fn contradictory_requirements_on_unordered_versions_are_fractured() {
        // W1 and W2 blindly write both keys. R1 needs W2's y no older than
        // W1's; R2 needs the opposite: no order of y satisfies both.
        let h = r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,11],["w",2,21]]}
{"index":1,"type":"ok","process":1,"value":[["w",1,11],["w",2,21]]}
{"index":2,"type":"invoke","process":2,"value":[["w",1,12],["w",2,22]]}
{"index":3,"type":"ok","process":2,"value":[["w",1,12],["w",2,22]]}
{"index":4,"type":"invoke","process":3,"value":[["r",1,null],["r",2,null]]}
{"index":5,"type":"ok","process":3,"value":[["r",1,11],["r",2,22]]}
{"index":6,"type":"invoke","process":4,"value":[["r",1,null],["r",2,null]]}
{"index":7,"type":"ok","process":4,"value":[["r",1,12],["r",2,21]]}"#;
        let r = run(h);
        assert!(r.has(AnomalyKind::FracturedRead), "{}", r.summary());
        assert!(r.anomalies[0].explanation.contains("no order of k"), "{}", r.summary());
        // Each read alone is fine.
        let one = h.lines().take(6).collect::<Vec<_>>().join("\n");
        assert!(run(&one).valid);
    }

    /// Every reader of W1's x and W2's y requires W1's y no newer than
    /// W2's: a requirement ten readers repeat is kept once (it used to be
    /// kept per read, gigabytes on long causal runs), and the history is
    /// still valid.
    #[test]
    fn a_requirement_many_readers_repeat_is_kept_once() {
        let mut h = String::from(
            r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,11],["w",2,21]]}
{"index":1,"type":"ok","process":1,"value":[["w",1,11],["w",2,21]]}
{"index":2,"type":"invoke","process":2,"value":[["w",2,22]]}
{"index":3,"type":"ok","process":2,"value":[["w",2,22]]}"#,
        );
        for reader in 0..10 {
            let (i, p) = (4 + 2 * reader, 3 + reader);
            h.push_str(&format!(
                "\n{{\"index\":{i},\"type\":\"invoke\",\"process\":{p},\"value\":[[\"r\",1,null],[\"r\",2,null]]}}\n{{\"index\":{},\"type\":\"ok\",\"process\":{p},\"value\":[[\"r\",1,11],[\"r\",2,22]]}}",
                i + 1
            ));
        }
        let r = run(&h);
        assert!(r.valid, "{}", r.summary());
        assert_eq!(r.stats.edges, 1, "one requirement: W1's y before W2's");
    }

    #[test]
    fn missing_your_own_write_is_a_causality_violation() {
        let h = r#"{"index":0,"type":"invoke","process":1,"value":[["w",1,10]]}
{"index":1,"type":"ok","process":1,"value":[["w",1,10]]}
{"index":2,"type":"invoke","process":1,"value":[["r",1,null]]}
{"index":3,"type":"ok","process":1,"value":[["r",1,null]]}"#;
        let r = run(h);
        assert_eq!(r.kinds(), [AnomalyKind::Causality], "{}", r.summary());
        assert!(r.anomalies[0].explanation.contains("read-your-writes"));
        assert!(check(&parse_jsonl(h).unwrap(), Model::ReadAtomicNoRyw).valid, "allowed without read-your-writes");
        // Another session may read the old value.
        assert!(run(&h.replace(r#""process":1,"value":[["r"#, r#""process":2,"value":[["r"#)).valid);
    }

    /// Sessions are processes: a client node running many sessions is
    /// checked session by session. Session 1 writes k; session 2 (another
    /// session, perhaps of the same node) writes it later; session 1 then
    /// reads the initial state: it missed its own write, whatever session 2
    /// did. Reading session 2's later write is fine.
    #[test]
    fn a_session_that_misses_its_own_write_is_caught_even_after_another_session_wrote() {
        let h = r#"{"index":0,"type":"invoke","process":1,"time":1,"value":[["w",1,10]]}
{"index":1,"type":"ok","process":1,"time":2,"value":[["w",1,10]]}
{"index":2,"type":"invoke","process":2,"time":3,"value":[["r",1,null],["w",1,20]]}
{"index":3,"type":"ok","process":2,"time":4,"value":[["r",1,10],["w",1,20]]}
{"index":4,"type":"invoke","process":1,"time":5,"value":[["r",1,null]]}
{"index":5,"type":"ok","process":1,"time":6,"value":[["r",1,null]]}"#;
        for model in [Model::ReadAtomic, Model::Causal] {
            let r = check(&parse_jsonl(h).unwrap(), model);
            assert!(r.has(AnomalyKind::Causality), "{model:?}: {}", r.summary());
        }
        let fine = h.replace(r#""time":6,"value":[["r",1,null]]"#, r#""time":6,"value":[["r",1,20]]"#);
        assert!(run(&fine).valid, "{}", run(&fine).summary());
    }

    #[test]
    fn serializability_cycles_are_allowed() {
        let write_skew = r#"{"index":0,"type":"invoke","process":1,"value":[["r",1,null],["r",2,null],["w",1,1]]}
{"index":1,"type":"invoke","process":2,"value":[["r",1,null],["r",2,null],["w",2,2]]}
{"index":2,"type":"ok","process":1,"value":[["r",1,null],["r",2,null],["w",1,1]]}
{"index":3,"type":"ok","process":2,"value":[["r",1,null],["r",2,null],["w",2,2]]}"#;
        assert!(run(write_skew).valid);
        assert!(!check(&parse_jsonl(write_skew).unwrap(), Model::Serializable).valid);
    }
}
