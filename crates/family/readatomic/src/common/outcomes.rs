//! What a partition decided about transactions it no longer holds
//! pending: committed here, or refused (aborted) for good. The
//! cooperative termination protocol asks a partition about a transaction
//! by timestamp alone (RA-NOC2's prepares carry no sibling keys to look
//! versions up by), and a prepare sent again after its commit must be
//! acknowledged, not refused.
//!
//! Bounded: the `outcomes_remembered` newest timestamps; forgetting one
//! raises `forgotten_upto`, and a question about a timestamp at or below
//! it is answered `Held::Forgotten`: decided long ago, never prepared here
//! again. The asking partition resolves it (`Pending::answer`) rather than
//! keep it pending, and its safe time below it, for good.
//!
//! Generic over what is remembered of a decision (`Decision` for RA-NOC2;
//! Eiger-NOC2's partitions also keep the commit timestamp). RAMP's
//! partitions keep their commits here too (their refusals stay in
//! `Pending`).

use crate::ramp::Ts;
use meridian_mechanisms::twopc::Decision;
use std::collections::BTreeMap;

/// What a partition knows of a transaction it does not hold pending.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Known<D = Decision> {
    Decided(D),
    /// Decided long ago and no longer remembered.
    Forgotten,
    /// Never decided here.
    Unknown,
}

pub struct Outcomes<D = Decision> {
    decided: BTreeMap<Ts, D>,
    forgotten_upto: Option<Ts>,
    max: usize,
}

impl<D: Copy + PartialEq + std::fmt::Debug> Outcomes<D> {
    pub fn new(max: usize) -> Outcomes<D> {
        assert!(max > 0, "at least one outcome is remembered");
        Outcomes { decided: BTreeMap::new(), forgotten_upto: None, max }
    }

    /// Restores a checkpoint's.
    pub fn restore(&mut self, decided: &[(Ts, D)], forgotten_upto: Option<Ts>) {
        self.decided = decided.iter().copied().collect();
        self.forgotten_upto = forgotten_upto;
    }

    /// `ts` was committed or aborted here; the oldest go beyond the bound.
    pub fn record(&mut self, ts: Ts, decision: D) {
        if self.forgotten_upto >= Some(ts) {
            return; // it stays forgotten
        }
        let before = self.decided.insert(ts, decision);
        debug_assert!(before.is_none_or(|b| b == decision), "a transaction is decided once");
        while self.decided.len() > self.max {
            let (old, _) = self.decided.pop_first().expect("over the bound");
            self.forgotten_upto = self.forgotten_upto.max(Some(old));
        }
    }

    pub fn lookup(&self, ts: Ts) -> Known<D> {
        match self.decided.get(&ts) {
            Some(d) => Known::Decided(*d),
            None if self.forgotten_upto >= Some(ts) => Known::Forgotten,
            None => Known::Unknown,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.decided.is_empty()
    }

    pub fn len(&self) -> usize {
        self.decided.len()
    }

    /// For a checkpoint.
    pub fn snapshot(&self) -> (Vec<(Ts, D)>, Option<Ts>) {
        (self.decided.iter().map(|(t, d)| (*t, *d)).collect(), self.forgotten_upto)
    }

    pub fn check_invariants(&self) {
        assert!(self.decided.len() <= self.max, "outcomes within their bound");
        if let Some((oldest, _)) = self.decided.first_key_value() {
            assert!(self.forgotten_upto < Some(*oldest), "only the oldest are forgotten");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_outcomes_are_forgotten_and_never_guessed() {
        let mut o = Outcomes::new(2);
        o.record(Ts(5), Decision::Commit);
        o.record(Ts(9), Decision::Abort);
        assert_eq!(o.lookup(Ts(5)), Known::Decided(Decision::Commit));
        o.record(Ts(7), Decision::Commit);
        assert_eq!(o.lookup(Ts(5)), Known::Forgotten, "the oldest went");
        assert_eq!(o.lookup(Ts(4)), Known::Forgotten, "below the forgotten one: unknowable");
        assert_eq!(o.lookup(Ts(6)), Known::Unknown, "above it and not remembered: never decided");
        assert_eq!(o.lookup(Ts(9)), Known::Decided(Decision::Abort));
        o.record(Ts(3), Decision::Abort);
        assert_eq!(o.lookup(Ts(3)), Known::Forgotten, "a decision below the forgotten stays forgotten");
        assert_eq!(o.len(), 2);
    }
}
