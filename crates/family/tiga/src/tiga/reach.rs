//! Whether a leader still reaches its followers (beyond the paper).
//!
//! Tiga's view manager replaces a shard leader that stops heartbeating
//! (§4, Algorithm 4 line 1). A leader can keep heartbeating while it
//! cannot reach its own followers — a partition that is not transitive.
//! Its fast path may still commit (followers hear the coordinators), but
//! nothing reaches `f + 1` durable copies through it: its commit-point,
//! checkpoints and slow path stop. A new leader cut off so never gathers
//! its view's logs, and since a view change's third round waits for every
//! participant's new log to be durable (`recovery.rs`), it holds every
//! shard's new view, not only its own.
//!
//! Each server notes when it last heard from each replica of its shard:
//! followers report their sync-point every tick in a normal view and
//! re-send their view-change message while a view change lasts, so a
//! leader that has heard from fewer than `f` of them for
//! `leader_timeout_ms` cannot gather `f + 1` durable copies of anything.
//! A report counts only when it shows the follower following the leader's
//! log — it holds all of it, or more than it last acknowledged — so a
//! leader whose followers do not hear it (a link cut in one direction)
//! is cut off too, though their reports still arrive: they repeat the
//! same sync-point while the log grows (`sync.rs`, `on_sync_report`).
//! Its heartbeat then says so ([`Standing::CutOff`]), and the view manager
//! replaces it by a replica it does hear from — as it would a silent one —
//! when there is such a replica (`vm.rs`, `must_replace`). Times are on
//! the server's monotonic clock; the timeout (at least three of the
//! followers' re-send periods) starts again with each view.
//!
//! [`Standing::CutOff`]: super::messages::Standing::CutOff

/// When this server last heard from each replica of its shard.
#[derive(Clone, Debug)]
pub(super) struct PeerReach {
    /// By replica index: the monotonic time of the last report.
    heard_ns: Vec<Option<u64>>,
    /// The global view and monotonic time at which this server started
    /// judging its reach in that view.
    since: Option<(u64, u64)>,
}

impl PeerReach {
    pub(super) fn new(replicas: u32) -> Self {
        PeerReach { heard_ns: vec![None; replicas as usize], since: None }
    }

    /// Replica `r` of this shard reported (a sync report or a view-change
    /// message) at monotonic time `now_ns`.
    pub(super) fn heard(&mut self, r: usize, now_ns: u64) {
        self.heard_ns[r] = Some(now_ns);
    }

    /// Whether replica `me`, leading view `g_view`, has heard from fewer
    /// than `f` other replicas within `timeout_ns` — judged only once it
    /// has led the view for `timeout_ns`.
    pub(super) fn cut_off(&mut self, me: usize, f: usize, g_view: u64, now_ns: u64, timeout_ns: u64) -> bool {
        let (view, since_ns) = *self.since.get_or_insert((g_view, now_ns));
        if view != g_view {
            self.since = Some((g_view, now_ns));
            return false;
        }
        if now_ns.saturating_sub(since_ns) < timeout_ns {
            return false;
        }
        let recent = |h: &Option<u64>| h.is_some_and(|h| now_ns.saturating_sub(h) < timeout_ns);
        let reached = self.heard_ns.iter().enumerate().filter(|(r, h)| *r != me && recent(h)).count();
        reached < f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TIMEOUT: u64 = 1_000;

    #[test]
    fn a_leader_is_cut_off_only_after_a_full_timeout_in_its_view_without_f_of_its_followers() {
        let mut reach = PeerReach::new(3);
        assert!(!reach.cut_off(0, 1, 1, 0, TIMEOUT), "judged only after a timeout in the view");
        assert!(!reach.cut_off(0, 1, 1, TIMEOUT - 1, TIMEOUT));
        assert!(reach.cut_off(0, 1, 1, TIMEOUT, TIMEOUT), "heard from no follower");
        reach.heard(2, TIMEOUT + 5);
        assert!(!reach.cut_off(0, 1, 1, TIMEOUT + 10, TIMEOUT), "one follower of f = 1 is enough");
        assert!(!reach.cut_off(0, 1, 1, 2 * TIMEOUT + 4, TIMEOUT));
        assert!(reach.cut_off(0, 1, 1, 2 * TIMEOUT + 5, TIMEOUT), "that follower fell silent");
    }

    #[test]
    fn a_new_view_starts_the_timeout_again_and_its_own_reports_count_as_well() {
        let mut reach = PeerReach::new(5);
        assert!(!reach.cut_off(1, 2, 1, 0, TIMEOUT));
        reach.heard(1, 3 * TIMEOUT); // its own index never counts
        reach.heard(4, 3 * TIMEOUT);
        assert!(reach.cut_off(1, 2, 1, 3 * TIMEOUT, TIMEOUT), "one of f = 2");
        assert!(!reach.cut_off(1, 2, 2, 3 * TIMEOUT, TIMEOUT), "view 2 starts the timeout again");
        assert!(!reach.cut_off(1, 2, 2, 4 * TIMEOUT - 1, TIMEOUT));
        reach.heard(0, 4 * TIMEOUT - 1);
        assert!(reach.cut_off(1, 2, 2, 4 * TIMEOUT, TIMEOUT), "replica 4's report is a timeout old");
        reach.heard(4, 4 * TIMEOUT);
        assert!(!reach.cut_off(1, 2, 2, 4 * TIMEOUT, TIMEOUT), "two of f = 2");
    }
}
