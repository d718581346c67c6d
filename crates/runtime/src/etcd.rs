//! etcd as a benchmark backend, for comparison on the same workload: each
//! transaction program runs as etcd transactions through the v3 JSON
//! gateway (`POST /v3/kv/txn`, base64 keys and values) over a small
//! keep-alive HTTP/1.1 client.
//!
//! A program reads every key it touches in one transaction (a consistent,
//! linearizable snapshot with each key's mod revision), computes its writes
//! with the same [`Program::execute`] Meridian's replicas use, then commits
//! them in a second transaction guarded by `mod_revision == seen` on every
//! key; a failed guard retries from the read, at most
//! [`MAX_ATTEMPTS`] times, then reports an abort. Keys are `k<u64>`;
//! values are postcard-encoded Meridian values. This module must never
//! report a commit etcd did not confirm.

use crate::bench::{Backend, Completion};
use crate::http::HttpConn;
use meridian_core::{AbortReason, Key, NodeId, Outcome, Program, RequestId, Value};
use serde_json::{Value as Json, json};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

/// Read-validate-write rounds before a program counts as aborted.
pub const MAX_ATTEMPTS: u32 = 64;
/// Idle connections kept per endpoint.
const POOL_MAX: usize = 256;

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(B64[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.bytes() {
        let v = B64.iter().position(|&x| x == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

fn etcd_key(key: Key) -> String {
    base64_encode(format!("k{}", key.0).as_bytes())
}

/// An endpoint `http://host:port` or `host:port`.
pub fn parse_endpoint(text: &str) -> Result<SocketAddr, String> {
    let bare = text.trim().trim_start_matches("http://").trim_end_matches('/');
    bare.parse().map_err(|_| format!("endpoint `{text}` is not `http://ip:port`"))
}

/// Idle connections to one endpoint.
#[derive(Clone)]
struct Pool {
    addr: SocketAddr,
    idle: Arc<Mutex<Vec<HttpConn>>>,
}

impl Pool {
    async fn post(&self, body: &Json) -> std::io::Result<Json> {
        let conn = self.idle.lock().expect("pool lock").pop();
        let mut conn = match conn {
            Some(c) => c,
            None => HttpConn::connect(self.addr).await?,
        };
        let (status, reply) = conn.post("/v3/kv/txn", body.to_string().as_bytes()).await?;
        let mut idle = self.idle.lock().expect("pool lock");
        if idle.len() < POOL_MAX {
            idle.push(conn);
        }
        drop(idle);
        let json: Json = serde_json::from_slice(&reply)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("etcd reply: {e}")))?;
        if status != 200 {
            return Err(std::io::Error::other(format!("etcd answered {status}: {json}")));
        }
        Ok(json)
    }
}

/// What a read transaction saw of each key: value and mod revision.
type Snapshot = BTreeMap<Key, (Option<Value>, i64)>;

fn int_field(v: &Json, name: &str) -> i64 {
    match v.get(name) {
        Some(Json::String(s)) => s.parse().unwrap_or(0),
        Some(Json::Number(n)) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

async fn read_snapshot(pool: &Pool, keys: &[Key]) -> std::io::Result<Snapshot> {
    let ranges: Vec<Json> = keys.iter().map(|k| json!({"request_range": {"key": etcd_key(*k)}})).collect();
    let reply = pool.post(&json!({ "success": ranges })).await?;
    let responses = reply.get("responses").and_then(Json::as_array).cloned().unwrap_or_default();
    let mut snap = Snapshot::new();
    for (key, resp) in keys.iter().zip(responses.iter().chain(std::iter::repeat(&Json::Null))) {
        let kv = resp.get("response_range").and_then(|r| r.get("kvs")).and_then(|k| k.get(0));
        let entry = match kv {
            None => (None, 0),
            Some(kv) => {
                let bytes = kv.get("value").and_then(Json::as_str).and_then(base64_decode).unwrap_or_default();
                (postcard::from_bytes(&bytes).ok(), int_field(kv, "mod_revision"))
            }
        };
        snap.insert(*key, entry);
    }
    Ok(snap)
}

/// One read-compute-write attempt: `Some(outcome)` when decided, `None`
/// when a guard failed (retry).
async fn attempt(pool: &Pool, program: &Program) -> Result<Option<Outcome>, Outcome> {
    let mut keys: Vec<Key> = program.ops.iter().map(|op| op.key()).collect();
    keys.sort_unstable();
    keys.dedup();
    let abort = Outcome::Aborted { reason: AbortReason::Timeout };
    let snap = read_snapshot(pool, &keys).await.map_err(|_| abort)?;
    let exec = program.execute(|k| snap.get(&k).and_then(|(v, _)| v.clone()));
    if exec.writes.is_empty() {
        return Ok(Some(Outcome::Committed { results: exec.results }));
    }
    let compare: Vec<Json> = keys
        .iter()
        .map(|k| {
            let rev = snap.get(k).map_or(0, |(_, r)| *r);
            json!({"key": etcd_key(*k), "target": "MOD", "result": "EQUAL", "mod_revision": rev.to_string()})
        })
        .collect();
    let puts: Vec<Json> = exec
        .writes
        .iter()
        .map(|(k, v)| {
            let bytes = postcard::to_allocvec(v).expect("values encode");
            json!({"request_put": {"key": etcd_key(*k), "value": base64_encode(&bytes)}})
        })
        .collect();
    // The commit may or may not have been applied if the reply is lost.
    let reply = pool.post(&json!({"compare": compare, "success": puts})).await.map_err(|_| Outcome::Unknown)?;
    let succeeded = reply.get("succeeded").and_then(Json::as_bool).unwrap_or(false);
    Ok(succeeded.then_some(Outcome::Committed { results: exec.results }))
}

async fn run_program(pool: Pool, program: Program) -> Outcome {
    for n in 0..MAX_ATTEMPTS {
        match attempt(&pool, &program).await {
            Ok(Some(outcome)) | Err(outcome) => return outcome,
            Ok(None) => {
                metrics::counter!("meridian_etcd_conflicts_total").increment(1);
                if n > 4 {
                    tokio::time::sleep(std::time::Duration::from_millis(u64::from(n.min(20)))).await;
                }
            }
        }
    }
    Outcome::Aborted { reason: AbortReason::Conflict }
}

/// etcd endpoints as a bench backend; client `i` uses endpoint `i % n`.
pub struct EtcdBackend {
    pools: Vec<Pool>,
    completions: mpsc::UnboundedSender<Completion>,
}

impl EtcdBackend {
    pub fn new(endpoints: &[SocketAddr], completions: mpsc::UnboundedSender<Completion>) -> EtcdBackend {
        assert!(!endpoints.is_empty(), "at least one etcd endpoint");
        let pools = endpoints.iter().map(|a| Pool { addr: *a, idle: Arc::default() }).collect();
        EtcdBackend { pools, completions }
    }

    /// Checks that the first endpoint answers a transaction.
    pub async fn probe(&self) -> Result<(), String> {
        read_snapshot(&self.pools[0], &[Key(0)])
            .await
            .map(|_| ())
            .map_err(|e| format!("etcd at {} does not answer: {e}", self.pools[0].addr))
    }
}

impl Backend for EtcdBackend {
    fn submit(&mut self, client: NodeId, request: RequestId, program: Program) {
        let pool = self.pools[client.index() % self.pools.len()].clone();
        let out = self.completions.clone();
        tokio::spawn(async move {
            let outcome = run_program(pool, program).await;
            let _ = out.send(Completion { client, request, outcome });
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn base64_matches_the_standard_alphabet() {
        assert_eq!(base64_encode(b"k42"), "azQy");
        assert_eq!(base64_encode(b"ab"), "YWI=");
        assert_eq!(base64_encode(b"a"), "YQ==");
        assert_eq!(base64_decode("YWI=").unwrap(), b"ab");
        assert!(base64_decode("!!").is_none());
    }

    #[test]
    fn endpoints_parse_with_or_without_scheme() {
        assert_eq!(parse_endpoint("http://127.0.0.1:2379").unwrap().port(), 2379);
        assert_eq!(parse_endpoint("127.0.0.1:22379/").unwrap().port(), 22379);
        assert!(parse_endpoint("localhost").is_err());
    }

    proptest! {
        #[test]
        fn base64_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            prop_assert_eq!(base64_decode(&base64_encode(&bytes)).unwrap(), bytes);
        }
    }
}
