//! The write-ahead log behind `Env::append_to` and `Env::compact_stream`:
//! segment files of length- and CRC-framed records, group commit on one
//! writer thread, recovery that stops cleanly at a torn tail, and
//! compaction that replaces one stream's durable records by a snapshot.
//!
//! On disk, a node's `wal/` directory holds `seg-<first lsn>.log` files and
//! at most one live `snap-<stream>-<upto lsn>.snap` per stream. Every record
//! (and every snapshot) is framed as `len u32 | crc32 u32 | lsn u64 |
//! stream u16 | payload` (little endian; `len` counts what follows it, the
//! CRC covers it). LSNs are one sequence over every stream; a segment is
//! removed once each stream's records in it are covered by that stream's
//! snapshot. A crash in the
//! middle of a batch leaves a truncated or corrupt last record: recovery
//! keeps every record before it, cuts the file there and goes on after it.
//!
//! This module knows bytes, not protocols: the node loop encodes records.
//! It must never report an LSN durable before the fsync that covers it has
//! returned, and never delete a segment before the snapshot that replaces
//! it is durable.

use meridian_core::{Lsn, Stream};
use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread::JoinHandle;

/// Largest record (or snapshot) the log accepts: a length past it is
/// corruption, not an allocation to attempt.
pub const MAX_RECORD_BYTES: usize = 256 << 20;
/// A segment is rolled once it grows past this.
pub const SEGMENT_MAX_BYTES: u64 = 64 << 20;
/// Most commands one group commit takes (bounds a batch's memory).
pub const BATCH_MAX_COMMANDS: usize = 4096;
/// Submissions (one per handled event) that may wait for the writer: a
/// node that outruns its disk blocks on the next one (backpressure).
pub const QUEUE_MAX_SUBMISSIONS: usize = 1024;

const HEADER_BYTES: usize = 18;
/// What `len` counts besides the payload: the LSN and the stream.
const LEN_FIXED: usize = 10;

/// What a node's log held when it was opened.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Each stream's latest durable snapshot and the LSN it covers, in
    /// stream order.
    pub snapshots: Vec<(Stream, Lsn, Vec<u8>)>,
    /// Durable records after their stream's snapshot, in LSN order.
    pub records: Vec<(Lsn, Stream, Vec<u8>)>,
    /// The LSN the next append gets.
    pub next_lsn: Lsn,
    /// Bytes cut off a torn tail (0 after a clean shutdown).
    pub torn_bytes: u64,
}

/// An open log: the segment being written and what recovery found.
pub struct Wal {
    dir: PathBuf,
    /// First LSN of every segment, oldest first; the last is being written.
    segments: Vec<u64>,
    /// Per segment (same order): the largest LSN of each stream in it.
    seg_streams: Vec<BTreeMap<Stream, u64>>,
    /// Each stream's durable snapshot: the LSN it covers.
    snap_upto: BTreeMap<Stream, u64>,
    current: File,
    current_len: u64,
    buffer: Vec<u8>,
    last_lsn: u64,
    /// False only for throwaway clusters: `sync` then writes without
    /// fsync, and a machine crash (not a process kill) may lose records.
    fsync: bool,
}

/// Frames one record: `len | crc | lsn | stream | payload`.
pub fn encode_record(lsn: Lsn, stream: Stream, payload: &[u8], out: &mut Vec<u8>) {
    assert!(payload.len() <= MAX_RECORD_BYTES, "a record of {} bytes exceeds the log's bound", payload.len());
    let len = (LEN_FIXED + payload.len()) as u32;
    let mut crc = crc32fast::Hasher::new();
    crc.update(&lsn.0.to_le_bytes());
    crc.update(&stream.0.to_le_bytes());
    crc.update(payload);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&lsn.0.to_le_bytes());
    out.extend_from_slice(&stream.0.to_le_bytes());
    out.extend_from_slice(payload);
}

/// A decoded record: LSN, stream, payload, and the bytes its frame took.
pub type Decoded<'a> = (Lsn, Stream, &'a [u8], usize);

/// Decodes the record at the start of `bytes`, or `None` when it is torn
/// or corrupt (short, absurd length, CRC mismatch). Never panics, whatever
/// the bytes.
pub fn decode_record(bytes: &[u8]) -> Option<Decoded<'_>> {
    if bytes.len() < HEADER_BYTES {
        return None;
    }
    let len = u32::from_le_bytes(bytes[0..4].try_into().ok()?) as usize;
    if !(LEN_FIXED..=LEN_FIXED + MAX_RECORD_BYTES).contains(&len) || bytes.len() < 8 + len {
        return None;
    }
    let crc = u32::from_le_bytes(bytes[4..8].try_into().ok()?);
    let body = &bytes[8..8 + len];
    if crc32fast::hash(body) != crc {
        return None;
    }
    let lsn = u64::from_le_bytes(body[0..8].try_into().ok()?);
    let stream = u16::from_le_bytes(body[8..10].try_into().ok()?);
    Some((Lsn(lsn), Stream(stream), &body[LEN_FIXED..], 8 + len))
}

fn segment_path(dir: &Path, first_lsn: u64) -> PathBuf {
    dir.join(format!("seg-{first_lsn:020}.log"))
}

fn snapshot_path(dir: &Path, stream: Stream, upto: u64) -> PathBuf {
    dir.join(format!("snap-{:05}-{upto:020}.snap", stream.0))
}

/// The `(stream, upto)` of every snapshot file, sorted.
fn snapshot_files(dir: &Path) -> io::Result<Vec<(Stream, u64)>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        let Some(rest) = name.strip_prefix("snap-").and_then(|r| r.strip_suffix(".snap")) else { continue };
        let Some((stream, upto)) = rest.split_once('-') else { continue };
        if let (Ok(stream), Ok(upto)) = (stream.parse(), upto.parse()) {
            out.push((Stream(stream), upto));
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The numbers in `<prefix><n><suffix>` file names of a directory, sorted.
fn numbered(dir: &Path, prefix: &str, suffix: &str) -> io::Result<Vec<u64>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let name = entry?.file_name();
        let name = name.to_string_lossy();
        if let Some(n) = name.strip_prefix(prefix).and_then(|r| r.strip_suffix(suffix)).and_then(|n| n.parse().ok()) {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

fn read_all(path: &Path) -> io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    File::open(path)?.read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// Writes `stream`'s snapshot of `upto` durably: a temporary file, fsynced,
/// then renamed into place (a crash leaves either no new snapshot or a
/// whole one).
fn write_snapshot(dir: &Path, stream: Stream, upto: Lsn, snapshot: &[u8]) -> io::Result<()> {
    let mut frame = Vec::with_capacity(snapshot.len() + HEADER_BYTES);
    encode_record(upto, stream, snapshot, &mut frame);
    let tmp = dir.join(format!("snap-{:05}.tmp", stream.0));
    let mut file = File::create(&tmp)?;
    file.write_all(&frame)?;
    file.sync_all()?;
    fs::rename(&tmp, snapshot_path(dir, stream, upto.0))?;
    sync_dir(dir)
}

/// Each stream's newest snapshot whose frame is intact; older ones are
/// removed.
fn recover_snapshots(dir: &Path) -> io::Result<BTreeMap<Stream, (Lsn, Vec<u8>)>> {
    let mut found: BTreeMap<Stream, (Lsn, Vec<u8>)> = BTreeMap::new();
    for (stream, upto) in snapshot_files(dir)?.into_iter().rev() {
        let path = snapshot_path(dir, stream, upto);
        if found.contains_key(&stream) {
            fs::remove_file(&path)?;
            continue;
        }
        let bytes = read_all(&path)?;
        match decode_record(&bytes) {
            Some((lsn, s, payload, _)) if lsn.0 == upto && s == stream => {
                found.insert(stream, (lsn, payload.to_vec()));
            }
            // A snapshot torn before its rename cannot exist; one corrupted
            // since is skipped in favour of an older one.
            _ => tracing::warn!(path = %path.display(), "ignoring a corrupt snapshot"),
        }
    }
    Ok(found)
}

/// Reads one segment's records into `out`, leaving out those their
/// stream's snapshot covers (`snap_upto`), and notes each stream's largest
/// LSN in `streams`; `prev` is the last LSN seen in the log so far (they
/// only grow). Returns where the intact prefix ends.
fn scan_segment(
    bytes: &[u8],
    snap_upto: &BTreeMap<Stream, u64>,
    prev: &mut u64,
    out: &mut Vec<(Lsn, Stream, Vec<u8>)>,
    streams: &mut BTreeMap<Stream, u64>,
) -> usize {
    let mut at = 0;
    while at < bytes.len() {
        let Some((lsn, stream, payload, used)) = decode_record(&bytes[at..]) else { break };
        if lsn.0 <= *prev {
            break; // an LSN that does not grow is garbage after a tear
        }
        *prev = lsn.0;
        streams.insert(stream, lsn.0);
        if snap_upto.get(&stream).is_none_or(|u| lsn.0 > *u) {
            out.push((lsn, stream, payload.to_vec()));
        }
        at += used;
    }
    at
}

impl Wal {
    /// Opens (creating) the log in `dir` and recovers what it holds: the
    /// snapshot, the records after it, and where the next append goes.
    pub fn open(dir: &Path) -> io::Result<(Wal, Recovered)> {
        fs::create_dir_all(dir)?;
        let snapshots = recover_snapshots(dir)?;
        let snap_upto: BTreeMap<Stream, u64> = snapshots.iter().map(|(s, (l, _))| (*s, l.0)).collect();
        let after = snap_upto.values().copied().max().unwrap_or(0);
        let mut segments = numbered(dir, "seg-", ".log")?;
        let (mut records, mut prev, mut torn_bytes) = (Vec::new(), 0, 0);
        let mut seg_streams = Vec::new();
        let mut keep = segments.len();
        for (i, first) in segments.iter().enumerate() {
            let path = segment_path(dir, *first);
            let bytes = read_all(&path)?;
            let mut streams = BTreeMap::new();
            let intact = scan_segment(&bytes, &snap_upto, &mut prev, &mut records, &mut streams);
            seg_streams.push(streams);
            if intact < bytes.len() {
                torn_bytes = (bytes.len() - intact) as u64;
                OpenOptions::new().write(true).open(&path)?.set_len(intact as u64)?;
                keep = i + 1;
                break;
            }
        }
        for first in segments.drain(keep..) {
            // Segments after a torn one were never acknowledged.
            fs::remove_file(segment_path(dir, first))?;
        }
        seg_streams.truncate(segments.len());
        let last = prev.max(after);
        if segments.is_empty() {
            segments.push(last + 1);
            seg_streams.push(BTreeMap::new());
        }
        let current_first = *segments.last().expect("at least one segment");
        let path = segment_path(dir, current_first);
        let current = OpenOptions::new().create(true).append(true).open(&path)?;
        let current_len = current.metadata()?.len();
        current.sync_all()?;
        sync_dir(dir)?;
        let wal = Wal {
            dir: dir.to_path_buf(),
            segments,
            seg_streams,
            snap_upto,
            current,
            current_len,
            buffer: Vec::new(),
            last_lsn: last,
            fsync: true,
        };
        let snapshots = snapshots.into_iter().map(|(s, (l, b))| (s, l, b)).collect();
        let recovered = Recovered { snapshots, records, next_lsn: Lsn(last + 1), torn_bytes };
        Ok((wal, recovered))
    }

    /// Writes without fsync from now on (see the field's doc).
    pub fn set_fsync(&mut self, fsync: bool) {
        self.fsync = fsync;
    }

    /// The last LSN appended (durable once synced).
    pub fn last_lsn(&self) -> Lsn {
        Lsn(self.last_lsn)
    }

    /// Buffers a record of `stream`; durable after the next [`Wal::sync`].
    pub fn append(&mut self, lsn: Lsn, stream: Stream, payload: &[u8]) {
        assert!(lsn.0 > self.last_lsn, "LSN {} appended after {}", lsn.0, self.last_lsn);
        encode_record(lsn, stream, payload, &mut self.buffer);
        self.last_lsn = lsn.0;
        self.seg_streams.last_mut().expect("a segment is being written").insert(stream, lsn.0);
    }

    /// Writes the buffered records and fsyncs them.
    pub fn sync(&mut self) -> io::Result<()> {
        if !self.buffer.is_empty() {
            self.current.write_all(&self.buffer)?;
            self.current_len += self.buffer.len() as u64;
            self.buffer.clear();
        }
        if self.fsync {
            let started = std::time::Instant::now();
            self.current.sync_data()?;
            metrics::histogram!("meridian_wal_fsync_seconds").record(started.elapsed().as_secs_f64());
        }
        if self.current_len > SEGMENT_MAX_BYTES {
            self.roll()?;
        }
        Ok(())
    }

    /// Starts a new segment after the last appended record.
    fn roll(&mut self) -> io::Result<()> {
        if self.current_len == 0 {
            return Ok(());
        }
        let first = self.last_lsn + 1;
        self.current = OpenOptions::new().create(true).append(true).open(segment_path(&self.dir, first))?;
        self.current_len = 0;
        self.segments.push(first);
        self.seg_streams.push(BTreeMap::new());
        sync_dir(&self.dir)
    }

    /// Makes `snapshot` stand for every record of `stream` up to `upto`:
    /// syncs what is buffered, writes the snapshot durably, then drops the
    /// segments and snapshots no longer needed. (The writer thread does the
    /// same in three steps, writing the snapshot on a thread of its own.)
    pub fn compact(&mut self, stream: Stream, upto: Lsn, snapshot: &[u8]) -> io::Result<()> {
        self.begin_compaction(upto)?;
        write_snapshot(&self.dir, stream, upto, snapshot)?;
        self.finish_compaction(stream, upto)
    }

    /// First step of a compaction: what is buffered is written and synced,
    /// and later records go to a new segment, so that the segments the
    /// snapshot covers can be removed whole once it is durable.
    fn begin_compaction(&mut self, upto: Lsn) -> io::Result<()> {
        assert!(upto.0 <= self.last_lsn, "compaction past the last appended record");
        self.sync()?;
        self.roll()
    }

    /// Last step, once `stream`'s snapshot of `upto` is durable.
    fn finish_compaction(&mut self, stream: Stream, upto: Lsn) -> io::Result<()> {
        let u = self.snap_upto.entry(stream).or_insert(0);
        *u = (*u).max(upto.0);
        self.drop_covered(stream)
    }

    /// Removes `stream`'s older snapshots, and the oldest segments whose
    /// every stream's records their stream's snapshot covers (the one being
    /// written is kept).
    fn drop_covered(&mut self, stream: Stream) -> io::Result<()> {
        let upto = self.snap_upto[&stream];
        for (s, old) in snapshot_files(&self.dir)? {
            if s == stream && old < upto {
                fs::remove_file(snapshot_path(&self.dir, s, old))?;
            }
        }
        let covered = |streams: &BTreeMap<Stream, u64>, snap: &BTreeMap<Stream, u64>| {
            streams.iter().all(|(s, last)| snap.get(s).is_some_and(|u| last <= u))
        };
        while self.segments.len() > 1 && covered(&self.seg_streams[0], &self.snap_upto) {
            fs::remove_file(segment_path(&self.dir, self.segments[0]))?;
            self.segments.remove(0);
            self.seg_streams.remove(0);
        }
        sync_dir(&self.dir)
    }

    /// Segment files on disk (for tests and status).
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }
}

/// Encodes a snapshot: run on the snapshot thread, so that a large state
/// is not serialized on the node loop.
pub type EncodeSnapshot = Box<dyn FnOnce() -> Vec<u8> + Send>;

/// A command for the writer thread.
pub enum WalCmd {
    Append(Lsn, Stream, Vec<u8>),
    Compact { stream: Stream, upto: Lsn, snapshot: EncodeSnapshot },
}

/// The handle a node loop submits appends through; dropping it lets the
/// writer finish what is queued and stop.
pub struct WalWriter {
    tx: Option<mpsc::SyncSender<Vec<WalCmd>>>,
    thread: Option<JoinHandle<()>>,
}

/// Called by the writer thread after each group commit with the highest
/// LSN now durable, and the number of commands the batch held.
pub type OnDurable = Box<dyn FnMut(Lsn, usize) + Send>;

/// How often an idle writer looks whether a snapshot has become durable
/// (to remove the segments it covers).
const IDLE_POLL: std::time::Duration = std::time::Duration::from_millis(100);

impl WalWriter {
    /// Starts the group-commit thread. An I/O error on the log is fatal:
    /// the process stops rather than acknowledge what it cannot persist.
    pub fn spawn(mut wal: Wal, mut on_durable: OnDurable) -> WalWriter {
        let (tx, rx) = mpsc::sync_channel::<Vec<WalCmd>>(QUEUE_MAX_SUBMISSIONS);
        let thread = std::thread::Builder::new()
            .name("wal-writer".into())
            .spawn(move || {
                let mut snapshots = Snapshots::start(wal.dir.clone());
                loop {
                    let first = match rx.recv_timeout(IDLE_POLL) {
                        Ok(first) => first,
                        Err(mpsc::RecvTimeoutError::Timeout) => {
                            or_stop(snapshots.poll(&mut wal, false));
                            continue;
                        }
                        Err(mpsc::RecvTimeoutError::Disconnected) => break,
                    };
                    let batch = gather(first, &rx);
                    let n = batch.len();
                    if let Some(upto) = or_stop(commit(&mut wal, &mut snapshots, batch)) {
                        on_durable(upto, n);
                    }
                    or_stop(snapshots.poll(&mut wal, false));
                }
                // Shutting down: the snapshot being written (and one
                // waiting) finish, so a clean stop leaves a compacted log.
                or_stop(snapshots.poll(&mut wal, true));
            })
            .expect("spawn the WAL writer thread");
        WalWriter { tx: Some(tx), thread: Some(thread) }
    }

    /// Queues commands for the next group commit; blocks while the writer
    /// is [`QUEUE_MAX_SUBMISSIONS`] behind.
    pub fn submit(&self, cmds: Vec<WalCmd>) {
        if cmds.is_empty() {
            return;
        }
        if let Some(tx) = &self.tx {
            // The writer only stops when this handle drops.
            let _ = tx.send(cmds);
        }
    }

    /// Waits until everything submitted is durable and the thread is done.
    pub fn close(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.tx.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for WalWriter {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// An I/O error on the log stops the process (see [`WalWriter::spawn`]).
fn or_stop<T>(r: io::Result<T>) -> T {
    r.unwrap_or_else(|e| {
        tracing::error!(error = %e, "write-ahead log failed; stopping the process");
        eprintln!("meridian: write-ahead log failed: {e}");
        std::process::exit(70);
    })
}

/// Snapshots written on a thread of their own, so that appends keep being
/// made durable while a large state is encoded and fsynced (a node's
/// commits would otherwise stall for the whole write). At most one is
/// being written and one per stream waits; a newer one replaces its
/// stream's waiting one, since it covers more.
struct Snapshots {
    dir: PathBuf,
    jobs: Option<mpsc::SyncSender<(Stream, Lsn, EncodeSnapshot)>>,
    done: mpsc::Receiver<io::Result<(Stream, Lsn)>>,
    thread: Option<JoinHandle<()>>,
    writing: Option<(Stream, Lsn)>,
    waiting: BTreeMap<Stream, (Lsn, EncodeSnapshot)>,
}

impl Snapshots {
    fn start(dir: PathBuf) -> Snapshots {
        let (jobs, job_rx) = mpsc::sync_channel::<(Stream, Lsn, EncodeSnapshot)>(1);
        let (done_tx, done) = mpsc::channel();
        let at = dir.clone();
        let thread = std::thread::Builder::new()
            .name("wal-snapshot".into())
            .spawn(move || {
                while let Ok((stream, upto, encode)) = job_rx.recv() {
                    let started = std::time::Instant::now();
                    let bytes = encode();
                    let written = write_snapshot(&at, stream, upto, &bytes).map(|()| (stream, upto));
                    metrics::histogram!("meridian_wal_snapshot_seconds").record(started.elapsed().as_secs_f64());
                    metrics::histogram!("meridian_wal_snapshot_bytes").record(bytes.len() as f64);
                    if done_tx.send(written).is_err() {
                        return;
                    }
                }
            })
            .expect("spawn the snapshot thread");
        Snapshots { dir, jobs: Some(jobs), done, thread: Some(thread), writing: None, waiting: BTreeMap::new() }
    }

    /// A compaction of `stream` up to `upto` (its log already synced and
    /// rolled).
    fn submit(&mut self, stream: Stream, upto: Lsn, encode: EncodeSnapshot) {
        let later = self.waiting.get(&stream).is_none_or(|(w, _)| *w <= upto);
        assert!(later, "a stream's compactions come in LSN order");
        self.waiting.insert(stream, (upto, encode));
        self.dispatch();
    }

    fn dispatch(&mut self) {
        if self.writing.is_some() || self.jobs.is_none() {
            return;
        }
        if let Some((stream, (upto, encode))) = self.waiting.pop_first() {
            self.writing = Some((stream, upto));
            let jobs = self.jobs.as_ref().expect("checked");
            jobs.send((stream, upto, encode)).expect("the snapshot thread runs while the writer does");
        }
    }

    /// Removes what a durable snapshot covers; with `finish`, waits for
    /// every snapshot submitted and stops the thread.
    fn poll(&mut self, wal: &mut Wal, finish: bool) -> io::Result<()> {
        loop {
            let got = match (self.writing, finish) {
                (None, _) => return self.stop_if(finish),
                (Some(_), false) => match self.done.try_recv() {
                    Ok(r) => r,
                    Err(_) => return Ok(()),
                },
                (Some(_), true) => self.done.recv().map_err(|_| io::Error::other("snapshot thread stopped"))?,
            };
            let (stream, upto) = got?;
            assert_eq!(Some((stream, upto)), self.writing.take(), "snapshots complete in order");
            debug_assert_eq!(self.dir, wal.dir);
            wal.finish_compaction(stream, upto)?;
            self.dispatch();
        }
    }

    fn stop_if(&mut self, finish: bool) -> io::Result<()> {
        if finish {
            self.jobs.take();
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
        Ok(())
    }
}

/// A group: `first` and every submission already queued behind it, up to
/// [`BATCH_MAX_COMMANDS`] commands.
fn gather(first: Vec<WalCmd>, rx: &mpsc::Receiver<Vec<WalCmd>>) -> Vec<WalCmd> {
    let mut batch = first;
    while batch.len() < BATCH_MAX_COMMANDS {
        match rx.try_recv() {
            Ok(more) => batch.extend(more),
            Err(_) => break,
        }
    }
    batch
}

/// One group commit: every append written, one fsync (and one more before
/// each compaction, whose snapshot goes to the snapshot thread with later
/// records in a new segment). Returns the highest LSN now durable (a batch
/// of compactions only reports it too, as the simulator's disk does).
fn commit(wal: &mut Wal, snapshots: &mut Snapshots, batch: Vec<WalCmd>) -> io::Result<Option<Lsn>> {
    for cmd in batch {
        match cmd {
            WalCmd::Append(lsn, stream, bytes) => wal.append(lsn, stream, &bytes),
            WalCmd::Compact { stream, upto, snapshot } => {
                wal.begin_compaction(upto)?;
                snapshots.submit(stream, upto, snapshot);
            }
        }
    }
    wal.sync()?;
    Ok((wal.last_lsn > 0).then_some(Lsn(wal.last_lsn)))
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: Stream = Stream::MAIN;

    /// A directory of the test's own, removed when the test ends (kept if
    /// it fails, to look at).
    struct TempDir(PathBuf);

    impl std::ops::Deref for TempDir {
        type Target = Path;
        fn deref(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            if !std::thread::panicking() {
                let _ = fs::remove_dir_all(&self.0);
            }
        }
    }

    fn temp_dir(name: &str) -> TempDir {
        let dir = std::env::temp_dir().join(format!("meridian-wal-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        TempDir(dir)
    }

    #[test]
    fn records_survive_a_reopen_and_lsns_continue() {
        let dir = temp_dir("reopen");
        let (mut wal, rec) = Wal::open(&dir).unwrap();
        assert_eq!(rec.next_lsn, Lsn(1));
        wal.append(Lsn(1), M, b"a");
        wal.append(Lsn(2), M, b"bb");
        wal.sync().unwrap();
        drop(wal);
        let (_, rec) = Wal::open(&dir).unwrap();
        assert_eq!(rec.records, vec![(Lsn(1), M, b"a".to_vec()), (Lsn(2), M, b"bb".to_vec())]);
        assert_eq!(rec.next_lsn, Lsn(3));
        assert_eq!(rec.torn_bytes, 0);
    }

    #[test]
    fn a_batch_cut_in_the_middle_keeps_the_intact_prefix() {
        let dir = temp_dir("torn");
        let (mut wal, _) = Wal::open(&dir).unwrap();
        for i in 1..=5u64 {
            wal.append(Lsn(i), M, &[i as u8; 100]);
        }
        wal.sync().unwrap();
        drop(wal);
        let seg = segment_path(&dir, 1);
        let len = fs::metadata(&seg).unwrap().len();
        // A crash while the last record was being written.
        OpenOptions::new().write(true).open(&seg).unwrap().set_len(len - 30).unwrap();
        let (mut wal, rec) = Wal::open(&dir).unwrap();
        assert_eq!(rec.records.len(), 4);
        assert_eq!(rec.next_lsn, Lsn(5));
        assert!(rec.torn_bytes > 0);
        wal.append(Lsn(5), M, b"again");
        wal.sync().unwrap();
        drop(wal);
        let (_, rec) = Wal::open(&dir).unwrap();
        assert_eq!(rec.records.last().unwrap(), &(Lsn(5), M, b"again".to_vec()));
        assert_eq!(rec.torn_bytes, 0);
    }

    #[test]
    fn a_flipped_bit_ends_recovery_at_the_damaged_record() {
        let dir = temp_dir("crc");
        let (mut wal, _) = Wal::open(&dir).unwrap();
        for i in 1..=3u64 {
            wal.append(Lsn(i), M, b"payload");
        }
        wal.sync().unwrap();
        drop(wal);
        let seg = segment_path(&dir, 1);
        let mut bytes = fs::read(&seg).unwrap();
        let second = HEADER_BYTES + 7 + 10;
        bytes[second] ^= 0x40;
        fs::write(&seg, &bytes).unwrap();
        let (_, rec) = Wal::open(&dir).unwrap();
        assert_eq!(rec.records.len(), 1, "only the record before the damage is trusted");
    }

    #[test]
    fn compaction_replaces_the_prefix_and_drops_covered_segments() {
        let dir = temp_dir("compact");
        let (mut wal, _) = Wal::open(&dir).unwrap();
        for i in 1..=4u64 {
            wal.append(Lsn(i), M, b"r");
        }
        wal.compact(M, Lsn(3), b"snap").unwrap();
        wal.append(Lsn(5), M, b"after");
        wal.sync().unwrap();
        wal.compact(M, Lsn(5), b"snap2").unwrap();
        assert_eq!(wal.segment_count(), 1);
        wal.append(Lsn(6), M, b"tail");
        wal.sync().unwrap();
        drop(wal);
        let (_, rec) = Wal::open(&dir).unwrap();
        assert_eq!(rec.snapshots, vec![(M, Lsn(5), b"snap2".to_vec())]);
        assert_eq!(rec.records, vec![(Lsn(6), M, b"tail".to_vec())]);
        assert_eq!(rec.next_lsn, Lsn(7));
        assert_eq!(snapshot_files(&dir).unwrap(), vec![(M, 5)]);
    }

    #[test]
    fn compacting_one_stream_keeps_the_others_records_and_their_segments() {
        let dir = temp_dir("streams");
        let other = Stream(7);
        let (mut wal, _) = Wal::open(&dir).unwrap();
        wal.append(Lsn(1), M, b"m1");
        wal.append(Lsn(2), other, b"o1");
        wal.append(Lsn(3), M, b"m2");
        wal.compact(M, Lsn(3), b"m-snap").unwrap();
        assert_eq!(wal.segment_count(), 2, "the first segment holds o1, which no snapshot covers");
        wal.append(Lsn(4), other, b"o2");
        wal.append(Lsn(5), M, b"m3");
        wal.sync().unwrap();
        drop(wal);
        let (mut wal, rec) = Wal::open(&dir).unwrap();
        assert_eq!(rec.snapshots, vec![(M, Lsn(3), b"m-snap".to_vec())]);
        assert_eq!(
            rec.records,
            vec![(Lsn(2), other, b"o1".to_vec()), (Lsn(4), other, b"o2".to_vec()), (Lsn(5), M, b"m3".to_vec())]
        );
        wal.compact(other, Lsn(4), b"o-snap").unwrap();
        assert_eq!(wal.segment_count(), 2, "m3 in the second segment is not covered yet");
        wal.compact(M, Lsn(5), b"m-snap2").unwrap();
        assert_eq!(wal.segment_count(), 1, "every stream covered: only the live segment is left");
        wal.append(Lsn(6), other, b"o3");
        wal.sync().unwrap();
        drop(wal);
        let (_, rec) = Wal::open(&dir).unwrap();
        assert_eq!(rec.snapshots, vec![(M, Lsn(5), b"m-snap2".to_vec()), (other, Lsn(4), b"o-snap".to_vec())]);
        assert_eq!(rec.records, vec![(Lsn(6), other, b"o3".to_vec())]);
        assert_eq!(rec.next_lsn, Lsn(7));
        assert_eq!(snapshot_files(&dir).unwrap(), vec![(M, 5), (other, 4)]);
    }

    #[test]
    fn the_writer_reports_an_lsn_only_after_it_is_on_disk() {
        let dir = temp_dir("writer");
        let (wal, _) = Wal::open(&dir).unwrap();
        let (tx, rx) = mpsc::channel();
        let writer = WalWriter::spawn(
            wal,
            Box::new(move |lsn, _| {
                tx.send(lsn).unwrap();
            }),
        );
        writer.submit(vec![WalCmd::Append(Lsn(1), M, b"x".to_vec()), WalCmd::Append(Lsn(2), M, b"y".to_vec())]);
        let upto = rx.recv().unwrap();
        assert_eq!(upto, Lsn(2));
        let (_, rec) = Wal::open(&dir).unwrap();
        assert_eq!(rec.records.len(), 2, "acknowledged records are readable by a fresh open");
        writer.close();
    }

    #[test]
    fn queued_submissions_share_one_group_commit() {
        let (tx, rx) = mpsc::sync_channel(16);
        for i in 1..=5u64 {
            tx.send(vec![WalCmd::Append(Lsn(i), M, vec![1])]).unwrap();
        }
        let first = rx.recv().unwrap();
        assert_eq!(gather(first, &rx).len(), 5, "one fsync for everything queued");
        assert!(rx.try_recv().is_err());
    }

    #[test]
    fn the_writer_acknowledges_every_submission_in_order() {
        let dir = temp_dir("group");
        let (wal, _) = Wal::open(&dir).unwrap();
        let (tx, rx) = mpsc::channel();
        let writer = WalWriter::spawn(
            wal,
            Box::new(move |lsn, batch| {
                tx.send((lsn, batch)).unwrap();
            }),
        );
        let submissions = 500u64;
        for i in 1..=submissions {
            writer.submit(vec![WalCmd::Append(Lsn(i), M, vec![i as u8; 64])]);
        }
        writer.close();
        let acks: Vec<(Lsn, usize)> = rx.iter().collect();
        assert_eq!(acks.last().unwrap().0, Lsn(submissions), "the last ack covers everything");
        assert!(acks.windows(2).all(|w| w[0].0 < w[1].0), "acks only grow");
        assert_eq!(acks.iter().map(|(_, n)| *n as u64).sum::<u64>(), submissions);
        let (_, rec) = Wal::open(&dir).unwrap();
        assert_eq!(rec.records.len() as u64, submissions);
    }

    /// A large snapshot is written off the group-commit path: appends made
    /// after a compaction become durable while the snapshot is still being
    /// encoded, and once it is durable the log recovers it and every later
    /// record.
    #[test]
    fn appends_stay_durable_on_time_while_a_snapshot_is_written() {
        let dir = temp_dir("snapshot-aside");
        let (wal, _) = Wal::open(&dir).unwrap();
        let (durable_tx, durable) = mpsc::channel();
        let writer = WalWriter::spawn(wal, Box::new(move |lsn, _| durable_tx.send(lsn).unwrap()));
        writer.submit((1..=3).map(|i| WalCmd::Append(Lsn(i), M, vec![i as u8])).collect());
        let (release, encoding) = mpsc::channel::<()>();
        let encode: EncodeSnapshot = Box::new(move || {
            encoding.recv().unwrap(); // held until the appends below are durable
            b"state after 3".to_vec()
        });
        writer.submit(vec![WalCmd::Compact { stream: M, upto: Lsn(3), snapshot: encode }]);
        writer.submit(vec![WalCmd::Append(Lsn(4), M, b"four".to_vec())]);
        let wait = std::time::Duration::from_secs(10);
        while durable.recv_timeout(wait).expect("appends are acknowledged while the snapshot waits") < Lsn(4) {}
        assert!(snapshot_files(&dir).unwrap().is_empty(), "the snapshot is not written yet");
        release.send(()).unwrap();
        writer.submit(vec![WalCmd::Append(Lsn(5), M, b"five".to_vec())]);
        writer.close();
        let (_, rec) = Wal::open(&dir).unwrap();
        assert_eq!(rec.snapshots, vec![(M, Lsn(3), b"state after 3".to_vec())]);
        assert_eq!(rec.records, vec![(Lsn(4), M, b"four".to_vec()), (Lsn(5), M, b"five".to_vec())]);
        assert_eq!(numbered(&dir, "seg-", ".log").unwrap(), vec![4], "the covered segment is gone");
    }

    #[test]
    fn a_torn_tail_in_an_older_segment_drops_the_later_ones() {
        let dir = temp_dir("segments");
        let (mut wal, _) = Wal::open(&dir).unwrap();
        wal.append(Lsn(1), M, b"one");
        wal.append(Lsn(2), M, b"two");
        wal.sync().unwrap();
        wal.roll().unwrap();
        wal.append(Lsn(3), M, b"three");
        wal.sync().unwrap();
        drop(wal);
        let first = segment_path(&dir, 1);
        let len = fs::metadata(&first).unwrap().len();
        OpenOptions::new().write(true).open(&first).unwrap().set_len(len - 1).unwrap();
        let (_, rec) = Wal::open(&dir).unwrap();
        assert_eq!(rec.records, vec![(Lsn(1), M, b"one".to_vec())]);
        assert_eq!(rec.next_lsn, Lsn(2));
        assert!(!segment_path(&dir, 3).exists(), "records after a tear were never acknowledged");
    }

    proptest::proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            if let Some((_, _, payload, used)) = decode_record(&bytes) {
                proptest::prop_assert!(used <= bytes.len() && payload.len() + HEADER_BYTES == used);
            }
        }

        #[test]
        fn a_cut_anywhere_keeps_exactly_the_whole_records(cut in 0usize..200) {
            let mut bytes = Vec::new();
            for i in 1..=5u64 {
                encode_record(Lsn(i), M, &[i as u8; 20], &mut bytes);
            }
            let cut = cut.min(bytes.len());
            let (mut prev, mut out, mut streams) = (0, Vec::new(), BTreeMap::new());
            let intact = scan_segment(&bytes[..cut], &BTreeMap::new(), &mut prev, &mut out, &mut streams);
            proptest::prop_assert_eq!(out.len(), cut / 38);
            proptest::prop_assert_eq!(intact, out.len() * 38);
        }
    }

    #[test]
    fn decode_rejects_absurd_lengths_without_allocating() {
        let mut bytes = vec![0xff; 32];
        bytes[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decode_record(&bytes).is_none());
        assert!(decode_record(&[]).is_none());
    }
}
