//! A partition's prepared, uncommitted transactions and the cooperative
//! termination protocol over them ("Scalable Atomic Visibility with RAMP
//! Transactions" §4.6, "RAMP and failures": a writer that stops between
//! PREPARE and COMMIT must not leave its versions pending forever; a
//! partition holding one for `ctp_ms` asks the other participants).
//!
//! The rule, as the paper's implementation applies it: a transaction
//! every participant has prepared may commit — no participant can refuse
//! it any more, and readers that see one of its versions find the others
//! by timestamp — and one that a participant never prepared is refused
//! there for good (`aborted`, durable before the answer leaves) and
//! aborted everywhere. The two cannot both happen: a client commits only
//! once every participant acknowledged its prepare, and a participant
//! that refused never acknowledges it.
//!
//! Bounds: at most `pending_max` transactions pending (further prepares
//! are ignored and retried by their client) and the `aborted_remembered`
//! newest refusals (a prepare older than every remembered refusal that
//! arrives again is pending again, and the protocol refuses it again).

use super::messages::{Held, PendingTxn, Ts};
use meridian_core::{Key, ShardId};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

struct Entry {
    txn: PendingTxn,
    since_ns: u64,
    asked_ns: Option<u64>,
    /// Other participants that answered `Held::Prepared` or
    /// `Held::Forgotten`.
    holders: BTreeSet<ShardId>,
}

/// What the termination protocol's answers decide about a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Every other participant holds it: commit, and tell these others.
    Commit { others: Vec<ShardId> },
    /// A participant refused it: abort.
    Abort,
    /// Not yet (or it is not pending here).
    Undecided,
}

/// A question the protocol asks now.
pub struct Question {
    pub ts: Ts,
    pub keys: Arc<[Key]>,
    pub ask: Vec<ShardId>,
}

pub struct Pending {
    me: ShardId,
    txns: BTreeMap<Ts, Entry>,
    aborted: BTreeSet<Ts>,
    pending_max: usize,
    aborted_max: usize,
}

impl Pending {
    pub fn new(me: ShardId, pending_max: usize, aborted_max: usize) -> Pending {
        Pending { me, txns: BTreeMap::new(), aborted: BTreeSet::new(), pending_max, aborted_max }
    }

    pub fn is_full(&self) -> bool {
        self.txns.len() >= self.pending_max
    }

    pub fn contains(&self, ts: Ts) -> bool {
        self.txns.contains_key(&ts)
    }

    pub fn is_aborted(&self, ts: Ts) -> bool {
        self.aborted.contains(&ts)
    }

    /// The oldest transaction pending (NOC-NOC Algorithm 1 line 48).
    pub fn oldest(&self) -> Option<Ts> {
        self.txns.keys().next().copied()
    }

    /// A transaction prepared here at `now_ns`.
    pub fn add(&mut self, ts: Ts, txn: PendingTxn, now_ns: u64) {
        assert!(!self.aborted.contains(&ts), "an aborted transaction is never prepared again");
        assert!(txn.participants.contains(&self.me), "a pending transaction writes here");
        self.txns.entry(ts).or_insert(Entry { txn, since_ns: now_ns, asked_ns: None, holders: BTreeSet::new() });
    }

    /// The transaction committed (or aborted) here: no longer pending.
    pub fn remove(&mut self, ts: Ts) -> Option<PendingTxn> {
        self.txns.remove(&ts).map(|e| e.txn)
    }

    /// Refuses `ts` for good (its pending entry, if any, is removed).
    pub fn abort(&mut self, ts: Ts) -> Option<PendingTxn> {
        self.aborted.insert(ts);
        while self.aborted.len() > self.aborted_max {
            self.aborted.pop_first();
        }
        self.remove(ts)
    }

    /// The transactions pending for `ctp_ns` or more and not asked about
    /// for as long: ask their other participants now.
    pub fn due(&mut self, now_ns: u64, ctp_ns: u64) -> Vec<Question> {
        let me = self.me;
        let mut due = Vec::new();
        for (ts, e) in &mut self.txns {
            let since = e.asked_ns.unwrap_or(e.since_ns);
            if since.saturating_add(ctp_ns) > now_ns {
                continue;
            }
            e.asked_ns = Some(now_ns);
            let ask = e.txn.participants.iter().copied().filter(|s| *s != me && !e.holders.contains(s)).collect();
            due.push(Question { ts: *ts, keys: Arc::clone(&e.txn.keys), ask });
        }
        due
    }

    /// Participant `from` holds `ts`; true when every other participant
    /// does (the transaction may commit).
    fn held_by(&mut self, ts: Ts, from: ShardId) -> bool {
        let Some(e) = self.txns.get_mut(&ts) else { return false };
        if e.txn.participants.contains(&from) {
            e.holders.insert(from);
        }
        let me = self.me;
        e.txn.participants.iter().all(|s| *s == me || e.holders.contains(s))
    }

    /// §4.6, an answer: participant `from` holds `ts` or refused it.
    /// Commit once every other participant holds it, abort as soon as one
    /// refused it.
    ///
    /// A participant that forgot the outcome (`Held::Forgotten`) decided it
    /// long ago and will never prepare it again: it counts as holding it
    /// unless another participant refused it. Its answer cannot tell a
    /// commit from an abort; this side still holding the transaction
    /// prepared means it missed both the writer's COMMIT (or ABORT) and
    /// every termination run while that participant remembered — the
    /// resolution commits, because a writer's commit is the one decision
    /// that needs this side's prepare, and otherwise this side's safe time
    /// would stay below the transaction for good (docs/ra-noc2.md).
    pub fn answer(&mut self, ts: Ts, from: ShardId, held: Held) -> Verdict {
        if !self.contains(ts) {
            return Verdict::Undecided;
        }
        match held {
            Held::Aborted => Verdict::Abort,
            Held::Prepared | Held::Forgotten if self.held_by(ts, from) => {
                let me = self.me;
                let others = self.txns[&ts].txn.participants.iter().copied().filter(|s| *s != me).collect();
                Verdict::Commit { others }
            }
            Held::Prepared | Held::Forgotten => Verdict::Undecided,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> usize {
        self.txns.len()
    }

    pub fn aborted_len(&self) -> usize {
        self.aborted.len()
    }

    /// For a checkpoint.
    pub fn snapshot(&self) -> (Vec<(Ts, PendingTxn)>, Vec<Ts>) {
        let txns = self.txns.iter().map(|(ts, e)| (*ts, e.txn.clone())).collect();
        (txns, self.aborted.iter().copied().collect())
    }

    /// Restores a checkpoint's (the clocks of pending transactions start
    /// again at `now_ns`).
    pub fn restore(&mut self, txns: Vec<(Ts, PendingTxn)>, aborted: Vec<Ts>, now_ns: u64) {
        self.aborted = aborted.into_iter().collect();
        for (ts, txn) in txns {
            self.add(ts, txn, now_ns);
        }
    }

    pub fn check_invariants(&self) {
        assert!(self.txns.len() <= self.pending_max, "pending transactions within their bound");
        assert!(self.aborted.len() <= self.aborted_max, "refusals within their bound");
        for (ts, _) in self.txns.iter().take(meridian_core::process::CHECKED_MAX) {
            assert!(!self.aborted.contains(ts), "a pending transaction is not aborted");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn(shards: &[u32]) -> PendingTxn {
        PendingTxn { keys: Arc::from([Key(1), Key(2)]), participants: shards.iter().map(|s| ShardId(*s)).collect() }
    }

    #[test]
    fn a_transaction_pending_past_the_timeout_is_asked_about_once_per_timeout() {
        let mut p = Pending::new(ShardId(0), 10, 10);
        p.add(Ts(5), txn(&[0, 1, 2]), 100);
        assert!(p.due(150, 100).is_empty(), "not yet");
        let q = p.due(200, 100);
        assert_eq!(q.len(), 1);
        assert_eq!(q[0].ask, vec![ShardId(1), ShardId(2)], "the others, not itself");
        assert!(p.due(250, 100).is_empty(), "asked at 200");
        assert_eq!(p.answer(Ts(5), ShardId(1), Held::Prepared), Verdict::Undecided);
        let verdict = p.answer(Ts(5), ShardId(2), Held::Prepared);
        assert_eq!(
            verdict,
            Verdict::Commit { others: vec![ShardId(1), ShardId(2)] },
            "every other participant holds it"
        );
        assert_eq!(p.due(300, 100)[0].ask, Vec::<ShardId>::new(), "nobody left to ask");
    }

    #[test]
    fn one_refusal_aborts() {
        let mut p = Pending::new(ShardId(0), 10, 10);
        p.add(Ts(5), txn(&[0, 1, 2]), 100);
        assert_eq!(p.answer(Ts(5), ShardId(1), Held::Prepared), Verdict::Undecided);
        assert_eq!(p.answer(Ts(5), ShardId(2), Held::Aborted), Verdict::Abort);
        assert_eq!(p.answer(Ts(6), ShardId(2), Held::Aborted), Verdict::Undecided, "not pending here");
    }

    #[test]
    fn an_abort_is_remembered_within_its_bound() {
        let mut p = Pending::new(ShardId(0), 10, 2);
        p.add(Ts(5), txn(&[0, 1]), 0);
        assert!(p.abort(Ts(5)).is_some());
        assert!(!p.contains(Ts(5)) && p.is_aborted(Ts(5)));
        p.abort(Ts(6));
        p.abort(Ts(7));
        assert!(!p.is_aborted(Ts(5)), "the oldest refusal is forgotten first");
        assert_eq!(p.aborted_len(), 2);
    }
}
