//! The messages, durable records and timers of `tiga`, and the small types
//! they carry (Tiga §3, Figure 4; Appendix A, Algorithms 2-3; Appendix B,
//! Algorithms 4-6).

use super::hash::FoldedHashes;
use meridian_core::{Key, NodeId, OpResult, Program, ShardId, TxnId};
use meridian_mechanisms::cow_map::CowMap;
use meridian_mechanisms::mvstore::MvStore;
use meridian_mechanisms::paxos::{PaxosMsg, PaxosRecord, PaxosTimer};
use serde::ser::SerializeSeq;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use smallvec::SmallVec;
use std::collections::VecDeque;
use std::sync::Arc;

/// A transaction as the coordinator multicasts it: the whole program (any
/// participant can hand it to another, Appendix B) and its shards.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TxnBody {
    pub id: TxnId,
    pub coordinator: NodeId,
    pub program: Program,
    /// Participating shards, sorted.
    pub shards: Vec<ShardId>,
}

impl TxnBody {
    pub fn is_multi_shard(&self) -> bool {
        self.shards.len() > 1
    }
}

/// A timestamp with the transaction id as tie-breaker: a total order.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Stamp {
    pub t: u64,
    pub id: TxnId,
}

/// A log entry: a transaction and the timestamp it holds there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LogEntry {
    pub body: Arc<TxnBody>,
    pub t: u64,
}

impl LogEntry {
    pub fn stamp(&self) -> Stamp {
        Stamp { t: self.t, id: self.body.id }
    }
}

/// How leaders coordinate (§3.8): agree on timestamps before executing
/// (leaders co-located) or execute first and detect disagreement after.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mode {
    Preventive,
    Detective,
}

/// The global view (§4, Appendix A): its number, each shard's local view
/// (the shard's leader is replica `l_view % replicas`) and the mode.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    pub g_view: u64,
    pub g_vec: Vec<u64>,
    pub mode: Mode,
}

impl View {
    pub fn l_view(&self, shard: ShardId) -> u64 {
        self.g_vec[shard.index()]
    }

    /// The replica index that leads `shard` in this view.
    pub fn leader_index(&self, shard: ShardId, replicas: u32) -> u32 {
        (self.g_vec[shard.index()] % u64::from(replicas)) as u32
    }

    /// Every shard's leader, by shard index: for a node that asks for
    /// leaders on every message (each `leader_index` divides).
    pub fn leaders(&self, replicas: u32) -> Vec<u32> {
        (0..self.g_vec.len()).map(|s| self.leader_index(ShardId(s as u32), replicas)).collect()
    }
}

/// A server's checkpoint (§4, "Checkpoints to accelerate recovery"): the
/// state after executing its log below `upto` — a position at or below the
/// commit-point, so the same entries at every server in every later view —
/// and what later entries are checked and hashed against.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Log positions below this are folded in.
    pub upto: u64,
    /// The shard's data after executing them.
    pub state: MvStore,
    /// Appendix D's per-key hashes of the folded entries.
    pub hashes: FoldedHashes,
    /// §3.2's rMap and wMap over the folded entries. Like the state and
    /// the hashes, copied on write: the next checkpoint updates only the
    /// keys its entries touch.
    pub rmap: CowMap<Key, Stamp>,
    pub wmap: CowMap<Key, Stamp>,
    /// Folded transactions still remembered for at-most-once answers.
    /// Shared with the server's memory: a checkpoint copies a pointer per
    /// chunk.
    pub done: DoneList,
    /// Folded transactions past their coordinator's watermark, still
    /// remembered by timestamp (shared likewise).
    pub settled: SettledList,
    /// Coordinators' low watermarks (one per epoch of their identifiers):
    /// a coordinator never submits an id below it.
    pub watermarks: Vec<(NodeId, u64)>,
}

/// The hash a fast reply carries from a server that never computed one for
/// its transaction (it took the entry from another server's log, or
/// replayed it as a new leader): it matches no follower's.
pub const NO_HASH: u128 = 0;

/// A folded transaction: enough to answer a resubmission (Appendix B's
/// at-most-once execution) or a late announcement.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Done {
    pub id: TxnId,
    /// Multi-shard transactions keep their body: a participant shard that
    /// lost the transaction in a view change takes it from here.
    pub body: Option<Arc<TxnBody>>,
    pub t: u64,
    /// The hash this server's fast reply carried ([`NO_HASH`] if it sent
    /// none).
    pub hash: u128,
    /// This shard's results (the leader's, or re-computed by execution).
    pub result: Option<Vec<OpResult>>,
    /// The server's clock when it folded the entry.
    pub folded_ns: u64,
}

/// Items in the order they were added, in chunks (one per checkpoint)
/// shared between a server's memory and its checkpoints, so a checkpoint
/// costs a pointer per chunk rather than one per item. Serialized as the
/// flat sequence.
#[derive(Clone, Debug)]
pub struct ChunkList<T> {
    chunks: VecDeque<Arc<[T]>>,
    /// Items at the front of the first chunk already dropped.
    skip: usize,
    len: usize,
}

impl<T> Default for ChunkList<T> {
    fn default() -> Self {
        ChunkList { chunks: VecDeque::new(), skip: 0, len: 0 }
    }
}

impl<T: Clone> ChunkList<T> {
    /// Appends one chunk (an empty one is not kept).
    pub fn push_chunk(&mut self, chunk: Vec<T>) {
        if chunk.is_empty() {
            return;
        }
        self.len += chunk.len();
        self.chunks.push_back(chunk.into());
    }

    pub fn front(&self) -> Option<&T> {
        self.chunks.front().map(|c| &c[self.skip])
    }

    pub fn pop_front(&mut self) -> Option<T> {
        let chunk = self.chunks.front()?;
        let d = chunk[self.skip].clone();
        self.skip += 1;
        if self.skip == chunk.len() {
            self.chunks.pop_front();
            self.skip = 0;
        }
        self.len -= 1;
        Some(d)
    }

    /// Oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        let skip = self.skip;
        self.chunks.iter().enumerate().flat_map(move |(i, c)| c[if i == 0 { skip } else { 0 }..].iter())
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<T: Serialize + Clone> Serialize for ChunkList<T> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        // The length up front: postcard (the wire and the log) needs it.
        let mut seq = serializer.serialize_seq(Some(self.len))?;
        for d in self.iter() {
            seq.serialize_element(d)?;
        }
        seq.end()
    }
}

impl<'de, T: Deserialize<'de> + Clone> Deserialize<'de> for ChunkList<T> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<ChunkList<T>, D::Error> {
        let mut list = ChunkList::default();
        list.push_chunk(Vec::deserialize(deserializer)?);
        Ok(list)
    }
}

/// Folded transactions, in the order they were folded.
pub type DoneList = ChunkList<Arc<Done>>;

/// A folded transaction its coordinator's watermark has passed: it is never
/// submitted again, so its results, hash and body are dropped; its
/// timestamp still answers other leaders' late announcements and sync
/// inquiries for a while (`checkpoint.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Settled {
    pub id: TxnId,
    pub t: u64,
    /// The server's clock when the watermark was seen past it.
    pub settled_ns: u64,
}

/// Settled transactions, in the order they settled.
pub type SettledList = ChunkList<Settled>;

/// Everything a server keeps durable, as of a compaction of its durable log.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Snapshot {
    pub checkpoint: Arc<Checkpoint>,
    /// The log from `checkpoint.upto` on.
    pub log: Vec<LogEntry>,
    pub sync_point: u64,
    pub commit_point: u64,
    pub view: View,
    pub last_normal_view: u64,
    pub led: bool,
    /// Optimistic executions it replied to as a leader and has not logged.
    pub tentative: Vec<LogEntry>,
}

/// How a server stands, as its heartbeat tells the view manager.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum Standing {
    /// Fit to lead.
    #[default]
    Serving,
    /// Restarted and not rejoined yet (Algorithm 6): it has lost its state.
    Recovering,
    /// A leader that has heard from fewer than `f` of its shard's other
    /// replicas for `leader_timeout_ms`: it reaches the view manager but
    /// cannot make its log durable, and only a new view can (`reach.rs`).
    CutOff,
}

/// A view-manager command, replicated through its Paxos group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum VmCmd {
    /// Install this view (its number is one past the current).
    NewView(View),
}

/// The view manager's checkpoint: the current view.
pub type VmState = Option<View>;

#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Msg {
    // ---- coordinator → servers (§3.1) ----
    /// The transaction with its proposed timestamp; `send_clock_ns` lets the
    /// receiver report the one-way delay it saw.
    /// `low_watermark`: the coordinator never submits an id below it again
    /// (it completed or gave up on them), so servers can forget those.
    /// `g_view`: the global view the coordinator chose `t` in; servers of
    /// another view answer from their log but admit nothing (see
    /// `Server::on_submit`).
    Submit(Submit),
    /// One-way-delay probe (§3.1), carrying the watermark too.
    Probe {
        send_clock_ns: u64,
        low_watermark: u64,
    },

    // ---- servers → coordinator (§3.4, §3.7, Appendix E) ----
    /// A server's fast reply: the timestamp it released the transaction
    /// with, the hash of its log on the transaction's keys, and (leaders
    /// only) the execution result. `owd_ns` is the one-way delay this
    /// server measured for the submission, when it has one. Boxed: at 112
    /// bytes (a 128-bit hash) it made every message of the protocol that
    /// large, and every message is moved several times on its way through
    /// the simulator's queue.
    FastReply(Box<FastReply>),
    ProbeReply {
        send_clock_ns: u64,
        recv_clock_ns: u64,
    },
    /// Coordinator → followers: which of these are in your synced log?
    SyncInquiry {
        shard: ShardId,
        ids: Vec<TxnId>,
    },
    /// The answer: those at or before the follower's sync-point, with the
    /// timestamp the log holds.
    SyncReply(SyncReply),

    // ---- leader ↔ leader (§3.5-3.6) ----
    /// A participant leader's timestamp for a transaction: proposed on
    /// arrival, or (`released`) the one it released it at; `echo` marks the
    /// answer of a leader that already logged it (never answered again).
    TsNotify(TsNotify),
    /// A leader asks another for a transaction it was notified of but never
    /// received (Appendix B, coordinator failure).
    FetchTxn {
        id: TxnId,
    },
    /// The answer, with the sender's timestamp; a leader that admitted a
    /// transaction so passes it on to its followers at its own timestamp.
    TxnFound {
        body: Arc<TxnBody>,
        t: u64,
    },

    // ---- leader ↔ followers (§3.7) ----
    /// The leader's log from `from_pos` on (entries in log order), and its
    /// commit-point.
    LogSync(LogSync),
    /// A follower's sync-point (and what it misses).
    SyncReport(SyncReport),
    /// Bodies a follower asked for.
    Bodies {
        bodies: Vec<Arc<TxnBody>>,
    },
    /// A checkpoint: from a leader to a follower whose log lags behind what
    /// the leader folded (§4), or answering `FetchCheckpoint`.
    CheckpointState {
        g_view: u64,
        checkpoint: Arc<Checkpoint>,
    },
    /// A new leader asks the server whose log it rebuilds from for its
    /// checkpoint, when that server folded entries it lacks.
    FetchCheckpoint {
        g_view: u64,
    },

    // ---- servers ↔ view manager (§4, Algorithm 4) ----
    Vm(PaxosMsg<VmCmd, VmState>),
    /// A server's periodic liveness report, with its view and how it
    /// stands (restarted and not rejoined yet, Algorithm 6; or a leader cut
    /// off from its followers). `delays`: its one-way-delay estimates to
    /// the other shards' servers (the probe mesh of §3.8).
    Heartbeat {
        g_view: u64,
        standing: Standing,
        delays: Vec<(NodeId, u64)>,
    },
    /// Anyone → view manager: what is the current view?
    GetView,
    /// View manager → everyone: the current view (a newer one starts a view
    /// change at servers, Algorithm 5 line 1).
    CurrentView(View),

    // ---- view change (Algorithm 5) and rejoin (Algorithm 6) ----
    /// Server → its shard's new leader: its log and sync-point (also a
    /// restarted server's request for the log, Algorithm 6). Every vote a
    /// server gave is durable, so a restarted one contributes too.
    /// `log` is the part from `base` (what it folded lies below), and
    /// `commit_point` says how far its log is known committed (the same at
    /// every server).
    ViewChange(ViewChange),
    /// New leader → other shards' new leaders (Algorithm 5 lines 64-78):
    /// round 1 carries the multi-shard entries of its rebuilt log that
    /// involve the receiver's shard, round 2 the ones it proved uncommitted,
    /// round 3 that its installed log is durable at `f + 1` servers.
    TsVerify(TsVerify),
    /// New leader → followers: the recovered log.
    /// Also the answer to a late or restarted server (Algorithm 6's state
    /// transfer).
    /// The log from `base` on, with the leader's checkpoint at `base` for a
    /// server that cannot supply the positions below it.
    StartView(StartView),
}

/// One new leader's part of the cross-shard verification of recovered
/// entries (Tiga §4 step ④).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyInfo {
    /// Round 1: recovered multi-shard entries with their timestamps;
    /// `pinned` marks the ones in part (a), synced by `f + 1` servers and
    /// so possibly committed at exactly that (agreed) timestamp.
    pub entries: Vec<VerifyEntry>,
    /// Round 2: transactions that cannot have committed anywhere (placing
    /// them at their largest timestamp would put them before a conflicting
    /// synced entry of this shard); every participant drops them.
    pub doomed: Vec<TxnId>,
    /// Round 2: transactions this shard lacked and had to place after the
    /// conflicting entries it recovered, with the timestamp that does; every
    /// participant takes the largest.
    pub raised: Vec<(TxnId, u64)>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VerifyEntry {
    pub body: Arc<TxnBody>,
    pub t: u64,
    pub pinned: bool,
}

impl From<PaxosMsg<VmCmd, VmState>> for Msg {
    fn from(m: PaxosMsg<VmCmd, VmState>) -> Msg {
        Msg::Vm(m)
    }
}

/// Durable records. Servers persist every change to their log before the
/// reply that depends on it leaves; the view manager persists its Paxos
/// state; coordinators their epoch.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Record {
    /// The log from `pos` on is replaced by `entries`.
    Log {
        pos: u64,
        entries: LoggedEntries,
    },
    SyncPoint(u64),
    /// A leader's optimistic execution it replied to (detective mode):
    /// its vote, kept until a view change or a restart moves it into the
    /// log (a later view's record forgets it).
    Tentative(LogEntry),
    /// A compaction's snapshot of the whole server (replaces every record
    /// before it).
    Snapshot(Arc<Snapshot>),
    /// The view this server is in and the last one it was normal in.
    View {
        view: View,
        last_normal_view: u64,
        led: bool,
    },
    Vm(PaxosRecord<VmCmd, VmState>),
    Epoch(u64),
}

/// The entries of a [`Record::Log`]: one, held in the record, for every
/// append of a released transaction — no allocation beside the record, and
/// none to read again when a compaction drops it — more after a view change
/// or a log synchronization. Encoded as a vector is.
pub type LoggedEntries = SmallVec<[LogEntry; 1]>;

impl From<PaxosRecord<VmCmd, VmState>> for Record {
    fn from(r: PaxosRecord<VmCmd, VmState>) -> Record {
        Record::Vm(r)
    }
}

#[derive(Clone, Debug)]
pub enum Timer {
    /// Server: the clock may have passed the head of the queue.
    Release,
    /// Server: log-sync retransmission, sync reports, fetches.
    ServerTick,
    /// Server: a heartbeat to the view manager (`heartbeat_ms`).
    Heartbeat,
    /// Server or coordinator: one-way-delay probes (`probe_interval_ms`).
    Probe,
    /// Server: resend what a view change or an agreement waits for.
    Resend,
    /// Coordinator: inquiries and retries.
    CoordinatorTick,
    /// View manager: failure detection.
    VmTick,
    Vm(PaxosTimer),
}

impl From<PaxosTimer> for Timer {
    fn from(t: PaxosTimer) -> Timer {
        Timer::Vm(t)
    }
}

/// The transaction with its proposed timestamp; `send_clock_ns` lets the
/// receiver report the one-way delay it saw.
/// `low_watermark`: the coordinator never submits an id below it again
/// (it completed or gave up on them), so servers can forget those.
/// `g_view`: the global view the coordinator chose `t` in; servers of
/// another view answer from their log but admit nothing (see
/// `Server::on_submit`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Submit {
    pub body: Arc<TxnBody>,
    pub g_view: u64,
    pub t: u64,
    pub send_clock_ns: u64,
    pub low_watermark: u64,
}

/// A server's fast reply: the timestamp it released the transaction
/// with, the hash of its log on the transaction's keys, and (leaders
/// only) the execution result. `owd_ns` is the one-way delay this
/// server measured for the submission, when it has one.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FastReply {
    pub id: TxnId,
    pub shard: ShardId,
    pub g_view: u64,
    pub l_view: u64,
    pub t: u64,
    pub hash: u128,
    pub result: Option<Vec<OpResult>>,
    pub owd_ns: Option<u64>,
}

/// Follower → coordinator, answering a `SyncInquiry` (Appendix E): the
/// asked transactions at or before the follower's sync-point, with the
/// timestamp its log holds for each, in the follower's view.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SyncReply {
    pub shard: ShardId,
    pub g_view: u64,
    pub l_view: u64,
    pub synced: Vec<(TxnId, u64)>,
}

/// A participant leader's timestamp for a transaction: proposed on
/// arrival, or (`released`) the one it released it at; `echo` marks the
/// answer of a leader that already logged it (never answered again).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TsNotify {
    pub id: TxnId,
    pub shard: ShardId,
    pub g_view: u64,
    pub t: u64,
    pub released: bool,
    pub echo: bool,
}

/// The leader's log from `from_pos` on (entries in log order), and its
/// commit-point.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LogSync {
    pub g_view: u64,
    pub l_view: u64,
    pub from_pos: u64,
    pub entries: Vec<(TxnId, u64)>,
    pub commit_point: u64,
}

/// A follower's sync-point (and what it misses).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SyncReport {
    pub g_view: u64,
    pub l_view: u64,
    pub sync_point: u64,
    pub missing: Vec<TxnId>,
}

/// Server → its shard's new leader: its log and sync-point (also a
/// restarted server's request for the log, Algorithm 6). Every vote a
/// server gave is durable, so a restarted one contributes too.
/// `log` is the part from `base` (what it folded lies below), and
/// `commit_point` says how far its log is known committed (the same at
/// every server).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ViewChange {
    pub g_view: u64,
    pub l_view: u64,
    pub last_normal_view: u64,
    pub sync_point: u64,
    pub commit_point: u64,
    pub base: u64,
    pub log: Arc<Vec<LogEntry>>,
}

/// New leader → other shards' new leaders (Algorithm 5 lines 64-78):
/// round 1 carries the multi-shard entries of its rebuilt log that
/// involve the receiver's shard, round 2 the ones it proved uncommitted;
/// round 3 (empty) says its installed log is durable at `f + 1` servers.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TsVerify {
    pub g_view: u64,
    pub round: u8,
    pub shard: ShardId,
    pub info: Arc<VerifyInfo>,
    /// An answer to a leader still waiting for this round: it is never
    /// answered in turn, or two leaders past the round would bounce
    /// their messages forever.
    pub echo: bool,
}

/// New leader → followers: the recovered log.
/// Also the answer to a late or restarted server (Algorithm 6's state
/// transfer).
/// The log from `base` on, with the leader's checkpoint at `base` for a
/// server that cannot supply the positions below it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StartView {
    pub g_view: u64,
    pub l_view: u64,
    pub base: u64,
    pub log: Arc<Vec<LogEntry>>,
    pub checkpoint: Option<Arc<Checkpoint>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn done(seq: u64) -> Arc<Done> {
        let id = TxnId { node: NodeId(1), seq };
        Arc::new(Done { id, body: None, t: seq, hash: 0, result: None, folded_ns: seq })
    }

    fn seqs(list: &DoneList) -> Vec<u64> {
        list.iter().map(|d| d.id.seq).collect()
    }

    #[test]
    fn a_done_list_forgets_oldest_first_across_chunks_and_a_copy_keeps_its_contents() {
        let mut list = DoneList::default();
        list.push_chunk((0..3).map(done).collect());
        list.push_chunk(Vec::new());
        list.push_chunk((3..5).map(done).collect());
        let copy = list.clone();
        assert_eq!(list.pop_front().map(|d| d.id.seq), Some(0));
        assert_eq!(list.front().map(|d| d.id.seq), Some(1));
        assert_eq!((seqs(&list), list.len()), (vec![1, 2, 3, 4], 4));
        list.pop_front();
        list.pop_front();
        assert_eq!((seqs(&list), list.len()), (vec![3, 4], 2), "a chunk emptied is dropped");
        assert_eq!(seqs(&copy), vec![0, 1, 2, 3, 4]);
        while list.pop_front().is_some() {}
        assert!(list.is_empty() && list.front().is_none());
    }

    #[test]
    fn a_done_list_is_serialized_as_the_flat_sequence_it_holds() {
        let mut list = DoneList::default();
        list.push_chunk((0..3).map(done).collect());
        list.push_chunk((3..5).map(done).collect());
        list.pop_front();
        let flat: Vec<Arc<Done>> = list.iter().cloned().collect();
        let bytes = postcard::to_allocvec(&list).expect("encodes");
        assert_eq!(bytes, postcard::to_allocvec(&flat).expect("encodes"));
        let back: DoneList = postcard::from_bytes(&bytes).expect("decodes");
        assert_eq!(seqs(&back), vec![1, 2, 3, 4]);
    }

    #[test]
    fn a_log_record_encodes_as_the_one_with_a_vector_it_replaced() {
        #[derive(Serialize)]
        enum RecordWithVec {
            Log { pos: u64, entries: Vec<LogEntry> },
        }
        let entry = |seq: u64| {
            let body = TxnBody {
                id: TxnId { node: NodeId(2), seq },
                coordinator: NodeId(2),
                program: Program::default(),
                shards: vec![ShardId(0)],
            };
            LogEntry { body: Arc::new(body), t: 10 * seq }
        };
        for entries in [vec![entry(1)], vec![entry(1), entry(2), entry(3)], Vec::new()] {
            let old = postcard::to_allocvec(&RecordWithVec::Log { pos: 7, entries: entries.clone() }).expect("encodes");
            let record = Record::Log { pos: 7, entries: LoggedEntries::from_vec(entries.clone()) };
            assert_eq!(postcard::to_allocvec(&record).expect("encodes"), old, "the same bytes");
            let Record::Log { pos, entries: back } = postcard::from_bytes(&old).expect("decodes") else {
                panic!("decoded another record")
            };
            assert_eq!((pos, back.to_vec()), (7, entries));
        }
        let one: LoggedEntries = smallvec::smallvec![entry(1)];
        assert!(!one.spilled(), "an append's one entry is held in the record");
    }
}
