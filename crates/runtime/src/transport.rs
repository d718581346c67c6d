//! Node-to-node transport: TCP with length-delimited postcard frames, one
//! outgoing connection per peer with reconnect and backoff, bounded
//! queues, and the delay injector that holds each message for the
//! configured one-way delay (plus jitter) between the two nodes' regions,
//! so that one machine emulates a wide-area deployment.
//!
//! Incoming frames go to the node loop through its bounded inbox: a reader
//! awaits room, so a slow node pushes back on its senders through TCP flow
//! control. Outgoing queues are bounded too, but a node never waits for a
//! peer: a message that finds its peer's queue full, or its peer
//! unreachable, is dropped, which is what the network may do to any
//! message and what every protocol already tolerates. So is a message that
//! waited in a queue longer than `network.stale_ms` past its due time
//! (here, or in the receiver's inbox, [`Inbound`]): under overload a
//! backlog of requests their clients have given up on (and sent again)
//! would otherwise keep a node busy with nothing but stale work. This
//! module must never block the node loop, and never deliver a message of another
//! cluster (the first frame of a connection names both).
//!
//! With the cluster's TLS on, every connection is mutual TLS: the dialler
//! checks that the certificate it is shown names the peer it dialled, and
//! the acceptor that the one it is shown (signed by the cluster's CA, or
//! the handshake fails) names the node the first frame claims to be.

use crate::frame::{self, Hello};
use crate::security::{PeerTls, Stream, names_node};
use meridian_core::{NodeId, Rng};
use serde::de::DeserializeOwned;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Backoff between connection attempts to an unreachable peer.
const BACKOFF_MIN: Duration = Duration::from_millis(5);
const BACKOFF_MAX: Duration = Duration::from_millis(500);
/// The timer wheel ticks in whole milliseconds and rounds deadlines up, so
/// a held message aims half a tick early: its departure error is then
/// centred on zero instead of adding up to a millisecond per hop.
const TIMER_SLACK: Duration = Duration::from_micros(500);

/// One encoded message and when the injector lets it leave.
struct Outgoing {
    due: Instant,
    frame: Vec<u8>,
}

/// The sending half: one bounded queue and writer task per peer.
pub struct Transport {
    me: NodeId,
    links: Vec<Option<mpsc::Sender<Outgoing>>>,
    /// Injected one-way delay to each peer, ns.
    delay_ns: Vec<u64>,
    /// Mean of the exponential jitter, ns (0: none).
    jitter_mean_ns: f64,
    /// Departure of the last message to each peer: links stay FIFO, as
    /// over one TCP connection, whatever the jitter.
    last_due: Vec<Instant>,
    rng: Rng,
}

/// What the transport needs to know about the cluster.
pub struct Peers {
    pub me: NodeId,
    pub cluster: u64,
    pub addrs: Vec<SocketAddr>,
    pub delay_ns: Vec<u64>,
    pub jitter_mean_ns: f64,
    pub queue_messages: usize,
    /// How long a message may wait past its due time before it is dropped.
    pub stale: Duration,
    pub seed: u64,
    /// Mutual TLS with the cluster's CA; `None`: plain TCP.
    pub tls: Option<PeerTls>,
}

impl Transport {
    /// Starts one writer task per peer (connections open on first use).
    pub fn start(peers: Peers) -> Transport {
        let hello = frame::to_frame(&Hello { cluster: peers.cluster, from: peers.me.0 });
        let links = peers
            .addrs
            .iter()
            .enumerate()
            .map(|(i, addr)| {
                if i == peers.me.index() {
                    return None;
                }
                let (tx, rx) = mpsc::channel(peers.queue_messages);
                let name = format!("n{i}");
                let tls = peers.tls.as_ref().map(|t| Dial { tls: t.clone(), node: i });
                let link = Link { addr: *addr, hello: hello.clone(), name, tls, stale: peers.stale };
                tokio::spawn(peer_writer(link, rx));
                Some(tx)
            })
            .collect();
        let now = Instant::now();
        Transport {
            me: peers.me,
            links,
            last_due: vec![now; peers.addrs.len()],
            delay_ns: peers.delay_ns,
            jitter_mean_ns: peers.jitter_mean_ns,
            rng: Rng::derive(peers.seed, 0x6e65_7400 + u64::from(peers.me.0)),
        }
    }

    /// Queues an encoded frame for `to` after the injected delay; false
    /// when it was dropped because the peer's queue is full.
    pub fn send(&mut self, to: NodeId, frame: Vec<u8>) -> bool {
        debug_assert_ne!(to, self.me, "self-sends are the node loop's");
        let Some(Some(link)) = self.links.get(to.index()) else { return false };
        let mut delay_ns = self.delay_ns[to.index()];
        if self.jitter_mean_ns > 0.0 {
            delay_ns += self.rng.exponential(self.jitter_mean_ns) as u64;
        }
        let due = (Instant::now() + Duration::from_nanos(delay_ns)).max(self.last_due[to.index()]);
        self.last_due[to.index()] = due;
        let ok = link.try_send(Outgoing { due, frame }).is_ok();
        if !ok {
            metrics::counter!("meridian_net_dropped_total", "reason" => "queue_full").increment(1);
        }
        ok
    }

    /// Messages waiting in every outgoing queue (held by the injector or
    /// not yet written).
    pub fn queued(&self) -> usize {
        self.links.iter().flatten().map(|l| l.max_capacity() - l.capacity()).sum()
    }
}

/// How to reach one peer over TLS: its node index names the certificate it
/// must show.
struct Dial {
    tls: PeerTls,
    node: usize,
}

/// One peer as its writer task reaches it.
struct Link {
    addr: SocketAddr,
    hello: Vec<u8>,
    name: String,
    tls: Option<Dial>,
    stale: Duration,
}

/// Writes one peer's queue, in order, each message no earlier than its due
/// time; reconnects with backoff, dropping what it cannot deliver.
async fn peer_writer(link: Link, mut rx: mpsc::Receiver<Outgoing>) {
    let Link { addr, hello, name, tls, stale } = link;
    let mut backoff = BACKOFF_MIN;
    let mut next_attempt = Instant::now();
    while let Some(first) = rx.recv().await {
        if Instant::now() < next_attempt {
            drop_unreachable(&mut rx, 1);
            continue;
        }
        let stream = match connect(addr, &hello, tls.as_ref()).await {
            Ok(s) => s,
            Err(e) => {
                if is_refusal(&e) {
                    // Not the cluster's node (or not a node at all): worth
                    // telling, unlike a peer that is merely down.
                    tracing::warn!(peer = %name, %addr, error = %e, "refused a peer: TLS handshake failed");
                } else {
                    tracing::debug!(peer = %name, %addr, error = %e, "peer unreachable");
                }
                next_attempt = Instant::now() + backoff;
                backoff = (backoff * 2).min(BACKOFF_MAX);
                drop_unreachable(&mut rx, 1);
                continue;
            }
        };
        backoff = BACKOFF_MIN;
        if let Err(e) = write_loop(stream, first, &mut rx, stale).await {
            tracing::debug!(peer = %name, error = %e, "peer connection lost");
            metrics::counter!("meridian_net_reconnects_total").increment(1);
        }
    }
}

/// Counts (and drops) what is queued for a peer that cannot be reached.
fn drop_unreachable(rx: &mut mpsc::Receiver<Outgoing>, already: u64) {
    let mut n = already;
    while rx.try_recv().is_ok() {
        n += 1;
    }
    metrics::counter!("meridian_net_dropped_total", "reason" => "unreachable").increment(n);
}

/// A failed TLS handshake (rustls reports it as invalid data), as opposed
/// to a peer that is not there.
fn is_refusal(e: &std::io::Error) -> bool {
    e.kind() == std::io::ErrorKind::InvalidData
        || e.get_ref().is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
}

async fn connect(addr: SocketAddr, hello: &[u8], tls: Option<&Dial>) -> std::io::Result<Stream> {
    let tcp = tokio::time::timeout(Duration::from_secs(1), TcpStream::connect(addr)).await??;
    let tls = tls.map(|d| (&d.tls.connector, &d.tls.names[d.node]));
    let mut stream = Stream::connect(tcp, tls).await?;
    stream.write_all(hello).await?;
    Ok(stream)
}

async fn write_loop<S: AsyncWrite + Unpin>(
    stream: S,
    first: Outgoing,
    rx: &mut mpsc::Receiver<Outgoing>,
    stale: Duration,
) -> std::io::Result<()> {
    let mut w = BufWriter::with_capacity(64 << 10, stream);
    let mut next = Some(first);
    loop {
        let msg = match next.take() {
            Some(m) => m,
            None => match rx.recv().await {
                Some(m) => m,
                None => return Ok(()),
            },
        };
        if msg.due > Instant::now() + TIMER_SLACK {
            tokio::time::sleep_until(msg.due - TIMER_SLACK).await;
        }
        write_unless_stale(&mut w, &msg, stale).await?;
        // Write whatever else is already due, then flush once.
        while let Ok(more) = rx.try_recv() {
            if more.due > Instant::now() + TIMER_SLACK {
                next = Some(more);
                break;
            }
            write_unless_stale(&mut w, &more, stale).await?;
        }
        w.flush().await?;
    }
}

async fn write_unless_stale<S: AsyncWrite + Unpin>(
    w: &mut BufWriter<S>,
    msg: &Outgoing,
    stale: Duration,
) -> std::io::Result<()> {
    if is_stale(msg.due, stale) {
        count_stale();
        return Ok(());
    }
    w.write_all(&msg.frame).await
}

/// Whether a message due at `due` has waited longer than `stale` since.
pub fn is_stale(due: Instant, stale: Duration) -> bool {
    Instant::now().saturating_duration_since(due) > stale
}

pub fn count_stale() {
    metrics::counter!("meridian_net_dropped_total", "reason" => "stale").increment(1);
}

/// A message from a peer as it waits in a node's inbox: who sent it, and
/// when it arrived (a node drops it unhandled once [`is_stale`]).
pub struct Inbound<M> {
    pub from: NodeId,
    pub msg: M,
    pub arrived: Instant,
}

/// Accepts peer connections and forwards each decoded message, with its
/// sender and arrival time, to `inbox` (awaiting room: backpressure). A frame that does not
/// decode closes its connection; with `tls`, so does a peer that is not
/// the cluster's node it claims to be.
pub async fn accept_peers<M: DeserializeOwned + Send + 'static>(
    listener: TcpListener,
    cluster: u64,
    nodes: usize,
    inbox: mpsc::Sender<Inbound<M>>,
    tls: Option<PeerTls>,
) {
    loop {
        let (stream, from_addr) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let inbox = inbox.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let stream = match Stream::accept(stream, tls.as_ref().map(|t| &t.acceptor)).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!(%from_addr, error = %e, "refused a peer: TLS handshake failed");
                    return;
                }
            };
            if let Err(e) = read_peer(stream, cluster, nodes, inbox, tls.as_ref()).await {
                if e.kind() == std::io::ErrorKind::PermissionDenied {
                    tracing::warn!(%from_addr, error = %e, "refused a peer");
                } else {
                    tracing::debug!(%from_addr, error = %e, "peer connection closed");
                }
            }
        });
    }
}

async fn read_peer<M: DeserializeOwned>(
    stream: Stream,
    cluster: u64,
    nodes: usize,
    inbox: mpsc::Sender<Inbound<M>>,
    tls: Option<&PeerTls>,
) -> std::io::Result<()> {
    let mut r = BufReader::with_capacity(64 << 10, stream);
    let mut buf = Vec::new();
    let Some(hello) = frame::read_value::<_, Hello>(&mut r, &mut buf).await? else { return Ok(()) };
    if hello.cluster != cluster || hello.from as usize >= nodes {
        tracing::warn!(?hello, "rejecting a connection from another cluster");
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "wrong cluster"));
    }
    if let Some(tls) = tls {
        // The handshake proved the CA signed the certificate; it must
        // also name the node the peer claims to be.
        let name = &tls.names[hello.from as usize];
        if !r.get_ref().peer_certificate().is_some_and(|cert| names_node(cert, name)) {
            let why = format!("its certificate does not name {}, the node it claims to be", name.to_str());
            return Err(std::io::Error::new(std::io::ErrorKind::PermissionDenied, why));
        }
    }
    let from = NodeId(hello.from);
    while frame::read_frame(&mut r, &mut buf, frame::MAX_PEER_FRAME_BYTES).await? {
        let msg = frame::decode::<M>(&buf).inspect_err(|_| {
            metrics::counter!("meridian_net_malformed_total").increment(1);
        })?;
        if inbox.send(Inbound { from, msg, arrived: Instant::now() }).await.is_err() {
            return Ok(()); // the node is stopping
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn outgoing(due: Instant, byte: u8) -> Outgoing {
        Outgoing { due, frame: vec![byte] }
    }

    #[tokio::test]
    async fn a_message_that_waited_past_the_stale_bound_is_dropped_and_the_rest_written_in_order() {
        let stale = Duration::from_millis(100);
        let now = Instant::now();
        let long_ago = now.checked_sub(Duration::from_secs(5)).expect("the clock is past 5 s");
        let (tx, mut rx) = mpsc::channel(8);
        tx.send(outgoing(long_ago, 2)).await.unwrap();
        tx.send(outgoing(now, 3)).await.unwrap();
        drop(tx);
        let (ours, mut theirs) = tokio::io::duplex(64);
        write_loop(ours, outgoing(now, 1), &mut rx, stale).await.unwrap();
        let mut got = Vec::new();
        theirs.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, [1, 3], "the message due 5 s ago is stale at a 100-ms bound");
    }

    #[test]
    fn staleness_counts_from_the_due_time_not_from_the_send() {
        let stale = Duration::from_millis(100);
        let now = Instant::now();
        assert!(!is_stale(now + Duration::from_secs(1), stale), "a message held for the WAN is not stale");
        assert!(!is_stale(now, stale));
        let long_ago = now.checked_sub(Duration::from_secs(1)).expect("the clock is past 1 s");
        assert!(is_stale(long_ago, stale));
    }
}
