//! The Redis gateway of a real front-end node, driven by a plain RESP
//! client over TCP: MULTI/EXEC is one atomic transaction, INCR from many
//! connections at once loses no increment, and malformed input gets an
//! error reply and a closed connection.

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;
use support::cluster::{Shape, TestCluster};

/// A RESP reply as the test reads it.
#[derive(Debug, PartialEq)]
enum R {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<R>),
}

struct Resp {
    r: BufReader<TcpStream>,
}

impl Resp {
    fn connect(addr: SocketAddr) -> Resp {
        let s = TcpStream::connect(addr).expect("connect to the gateway");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Resp { r: BufReader::new(s) }
    }

    fn send(&mut self, args: &[&str]) {
        let mut out = format!("*{}\r\n", args.len());
        for a in args {
            out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        self.r.get_mut().write_all(out.as_bytes()).unwrap();
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).unwrap();
        l.trim_end().to_string()
    }

    fn read(&mut self) -> R {
        let l = self.line();
        let (kind, rest) = l.split_at(1);
        match kind {
            "+" => R::Simple(rest.into()),
            "-" => R::Error(rest.into()),
            ":" => R::Int(rest.parse().unwrap()),
            "$" if rest == "-1" => R::Bulk(None),
            "$" => {
                let mut b = vec![0; rest.parse::<usize>().unwrap() + 2];
                self.r.read_exact(&mut b).unwrap();
                b.truncate(b.len() - 2);
                R::Bulk(Some(b))
            }
            "*" => R::Array((0..rest.parse::<usize>().unwrap()).map(|_| self.read()).collect()),
            _ => panic!("not RESP: {l}"),
        }
    }

    fn call(&mut self, args: &[&str]) -> R {
        self.send(args);
        self.read()
    }
}

fn bulk(s: &str) -> R {
    R::Bulk(Some(s.as_bytes().to_vec()))
}

#[test]
fn the_redis_gateway_runs_commands_as_transactions() {
    let shape = Shape { protocol: "2pl-paxos", shards: 2, replicas: 3, wan_scale: None, params: Vec::new() };
    let cluster = TestCluster::start("redis", shape);
    let addr = cluster.redis_addr();
    let mut c = Resp::connect(addr);
    assert_eq!(c.call(&["PING"]), R::Simple("PONG".into()));
    assert_eq!(c.call(&["SET", "a", "1"]), R::Simple("OK".into()));
    assert_eq!(c.call(&["GET", "a"]), bulk("1"));
    assert_eq!(c.call(&["INCRBY", "a", "41"]), R::Int(42));
    assert_eq!(c.call(&["MSET", "b", "x", "c", "y"]), R::Simple("OK".into()));
    assert_eq!(c.call(&["MGET", "a", "b", "nope"]), R::Array(vec![bulk("42"), bulk("x"), R::Bulk(None)]));
    assert_eq!(c.call(&["DEL", "b", "nope"]), R::Int(1));
    assert_eq!(c.call(&["GET", "b"]), R::Bulk(None));
    assert!(matches!(c.call(&["INFO"]), R::Bulk(Some(_))));

    // MULTI/EXEC: one transaction; reads inside see the writes before them.
    assert_eq!(c.call(&["MULTI"]), R::Simple("OK".into()));
    assert_eq!(c.call(&["SET", "from", "90"]), R::Simple("QUEUED".into()));
    assert_eq!(c.call(&["INCRBY", "to", "10"]), R::Simple("QUEUED".into()));
    assert_eq!(c.call(&["GET", "from"]), R::Simple("QUEUED".into()));
    assert_eq!(c.call(&["EXEC"]), R::Array(vec![R::Simple("OK".into()), R::Int(10), bulk("90")]));
    assert_eq!(c.call(&["MULTI"]), R::Simple("OK".into()));
    assert_eq!(c.call(&["SET", "gone", "1"]), R::Simple("QUEUED".into()));
    assert_eq!(c.call(&["DISCARD"]), R::Simple("OK".into()));
    assert_eq!(c.call(&["GET", "gone"]), R::Bulk(None), "a discarded MULTI writes nothing");
    assert!(matches!(c.call(&["EXEC"]), R::Error(_)));

    // Concurrent INCRs from many connections: exact.
    let (threads, each) = (8, 25);
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Resp::connect(addr);
                (0..each).filter(|_| matches!(c.call(&["INCR", "hot"]), R::Int(_))).count()
            })
        })
        .collect();
    let ok: usize = handles.into_iter().map(|h| h.join().unwrap()).sum();
    assert_eq!(ok, threads * each, "every INCR succeeded");
    assert_eq!(c.call(&["GET", "hot"]), bulk(&(threads * each).to_string()));

    // Atomic transfers under concurrency: the sum never changes.
    assert_eq!(c.call(&["MSET", "x", "500", "y", "500"]), R::Simple("OK".into()));
    let movers: Vec<_> = (0..4)
        .map(|_| {
            std::thread::spawn(move || {
                let mut c = Resp::connect(addr);
                for _ in 0..10 {
                    c.call(&["MULTI"]);
                    c.call(&["DECRBY", "x", "7"]);
                    c.call(&["INCRBY", "y", "7"]);
                    assert!(matches!(c.call(&["EXEC"]), R::Array(_)));
                }
            })
        })
        .collect();
    for m in movers {
        m.join().unwrap();
    }
    assert_eq!(c.call(&["MGET", "x", "y"]), R::Array(vec![bulk("220"), bulk("780")]));

    // Malformed RESP: an error, then the connection closes.
    let mut bad = Resp::connect(addr);
    bad.r.get_mut().write_all(b"*2\r\n$3\r\nGET\r\n:5\r\n").unwrap();
    assert!(matches!(bad.read(), R::Error(e) if e.contains("Protocol error")));
    let mut rest = Vec::new();
    assert_eq!(bad.r.read_to_end(&mut rest).unwrap(), 0, "closed after a protocol error");
}
