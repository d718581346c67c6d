//! Actions held until an append is durable: "reply only once the vote is
//! on disk", the rule every replicated protocol keeps (a Paxos acceptor's
//! Accepted, a Tiga server's fast reply, a checkpoint's acknowledgement).
//!
//! The host notes each append's LSN and every persistence acknowledgement;
//! an action asked for after the last append waits in a queue until that
//! append is durable, and leaves in the order it was asked for. A crash
//! loses the queue with the process, as it loses the appends.

use meridian_core::Lsn;
use std::collections::VecDeque;

#[derive(Clone, Debug)]
pub struct AfterDurable<T> {
    last_appended: Lsn,
    durable: Lsn,
    held: VecDeque<(Lsn, T)>,
}

impl<T> Default for AfterDurable<T> {
    fn default() -> Self {
        AfterDurable { last_appended: Lsn(0), durable: Lsn(0), held: VecDeque::new() }
    }
}

impl<T> AfterDurable<T> {
    pub fn new() -> Self {
        Self::default()
    }

    /// Notes an append: actions asked for from now on wait for it.
    pub fn appended(&mut self, lsn: Lsn) {
        debug_assert!(lsn > self.last_appended, "LSNs grow");
        self.last_appended = lsn;
    }

    /// `action` back if everything appended so far is durable (do it now);
    /// otherwise it is held until the last append is.
    #[must_use]
    pub fn after_last(&mut self, action: T) -> Option<T> {
        self.after(self.last_appended, action)
    }

    /// `action` back if `lsn` is durable (do it now); otherwise it is held
    /// until it is. `lsn` is an append already noted.
    #[must_use]
    pub fn after(&mut self, lsn: Lsn, action: T) -> Option<T> {
        assert!(lsn <= self.last_appended, "waiting for an append not made");
        if lsn <= self.durable {
            return Some(action);
        }
        debug_assert!(self.held.back().is_none_or(|(l, _)| *l <= lsn), "actions wait in append order");
        self.held.push_back((lsn, action));
        None
    }

    /// Persistence acknowledged up to `upto`: the next action it freed, in
    /// the order they were asked for. Call until `None`.
    pub fn next_freed(&mut self, upto: Lsn) -> Option<T> {
        // After a restart nothing is noted as appended yet, and a
        // persistence acknowledgement may name an append of the earlier
        // incarnation (a compaction flushed before any new append): it
        // makes durable nothing this one appended.
        self.durable = self.durable.max(upto.min(self.last_appended));
        if self.held.front().is_some_and(|(lsn, _)| *lsn <= self.durable) {
            return self.held.pop_front().map(|(_, action)| action);
        }
        None
    }

    /// The last append noted.
    pub fn last_appended(&self) -> Lsn {
        self.last_appended
    }

    /// The durable prefix of the log.
    pub fn durable(&self) -> Lsn {
        self.durable
    }

    /// Actions held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// Nothing durable past the last append; nothing held for an append
    /// already durable.
    pub fn check_invariants(&self) {
        assert!(self.durable <= self.last_appended, "durable past the last append");
        if let Some((lsn, _)) = self.held.front() {
            assert!(*lsn > self.durable, "an action held for an append already durable");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_action_waits_for_every_append_before_it_and_leaves_in_order() {
        let mut d = AfterDurable::new();
        assert_eq!(d.after_last("nothing appended"), Some("nothing appended"));
        d.appended(Lsn(1));
        assert_eq!(d.after_last("a"), None);
        d.appended(Lsn(2));
        assert_eq!(d.after_last("b"), None);
        assert_eq!(d.after(Lsn(2), "c"), None);
        assert_eq!(d.next_freed(Lsn(1)), Some("a"));
        assert_eq!(d.next_freed(Lsn(1)), None, "b waits for append 2");
        d.check_invariants();
        assert_eq!(d.next_freed(Lsn(2)), Some("b"));
        assert_eq!(d.next_freed(Lsn(2)), Some("c"));
        assert!(d.is_empty());
        assert_eq!(d.after_last("d"), Some("d"), "everything is durable");
    }

    #[test]
    fn an_acknowledgement_from_before_a_restart_makes_nothing_of_this_incarnation_durable() {
        let mut d: AfterDurable<&str> = AfterDurable::new();
        assert_eq!(d.next_freed(Lsn(36)), None, "an append of the earlier incarnation");
        d.check_invariants();
        d.appended(Lsn(37));
        assert_eq!(d.after_last("vote"), None, "waits for its own append");
        assert_eq!(d.next_freed(Lsn(37)), Some("vote"));
        d.check_invariants();
    }

    #[test]
    #[should_panic(expected = "an append not made")]
    fn waiting_for_an_append_not_made_is_a_bug() {
        let mut d = AfterDurable::new();
        let _ = d.after(Lsn(3), ());
    }
}
