//! The Redis gateway of a real front-end node, driven by a plain RESP
//! client over TCP: MULTI/EXEC is one atomic transaction, INCR from many
//! connections at once loses no increment, malformed input gets an error
//! reply and a closed connection, and the handshake clients open with
//! (`HELLO 3`, `CLIENT SETINFO`) switches the connection to RESP3.

mod support;

use std::io::{Read, Write};
use support::cluster::{Shape, TestCluster};
use support::resp::{R, Resp, bulk};

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
    assert_eq!(c.call(&["DEL", "b"]), R::Int(0), "deleted already");
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

    // Keys are byte strings: these two names have one 64-bit FNV-1a hash
    // (found by a cycle search) and still hold different values.
    let (k1, k2) = ("k10a5707cdf7dfdc@", "k1d0bda4a88ca5d7i");
    assert_eq!(meridian_core::ids::fnv1a(k1.as_bytes()), meridian_core::ids::fnv1a(k2.as_bytes()));
    assert_eq!(c.call(&["SET", k1, "first"]), R::Simple("OK".into()));
    assert_eq!(c.call(&["GET", k2]), R::Bulk(None), "a colliding name is not set");
    assert_eq!(c.call(&["MSET", k2, "second", "plain", "p"]), R::Simple("OK".into()));
    assert_eq!(c.call(&["MGET", k1, k2]), R::Array(vec![bulk("first"), bulk("second")]));
    assert_eq!(c.call(&["INCR", k1]), R::Error("ERR value is not an integer or out of range".into()));
    assert_eq!(c.call(&["DEL", k1]), R::Int(1));
    assert_eq!(c.call(&["MGET", k1, k2]), R::Array(vec![R::Bulk(None), bulk("second")]), "DEL of one leaves the other");
    // The same names through the Rust client and `meridian client` are the same data.
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let client = rt.block_on(meridian_runtime::client::Client::connect(cluster.client_addr())).expect("connect");
    assert_eq!(rt.block_on(client.get(k2.as_bytes())).unwrap(), Ok(Some(b"second".to_vec())));
    assert_eq!(rt.block_on(client.get(k1.as_bytes())).unwrap(), Ok(None));
    assert!(matches!(
        rt.block_on(client.put(k1.as_bytes(), b"from rust")).unwrap(),
        meridian_core::Outcome::Committed { .. }
    ));
    assert_eq!(c.call(&["GET", k1]), bulk("from rust"));
    let cli = std::process::Command::new(env!("CARGO_BIN_EXE_meridian"))
        .args(["client", "--cluster"])
        .arg(&cluster.file)
        .args(["txn", &format!("get {k2}; \"{k1}\" = cli; plain += 1")])
        .output()
        .expect("meridian client runs");
    let out = String::from_utf8_lossy(&cli.stdout);
    assert!(cli.status.success(), "{out}{}", String::from_utf8_lossy(&cli.stderr));
    assert!(out.contains(&format!("get {k2} -> second")), "{out}");
    assert!(out.contains("plain += 1 -> ERR value is not an integer or out of range"), "{out}");
    assert_eq!(c.call(&["GET", k1]), bulk("cli"));

    // Malformed RESP: an error, then the connection closes.
    let mut bad = Resp::connect(addr);
    bad.r.get_mut().write_all(b"*2\r\n$3\r\nGET\r\n:5\r\n").unwrap();
    assert!(matches!(bad.read(), R::Error(e) if e.contains("Protocol error")));
    let mut rest = Vec::new();
    assert_eq!(bad.r.read_to_end(&mut rest).unwrap(), 0, "closed after a protocol error");
}

#[test]
fn clients_open_with_hello_3_and_get_resp3_and_redis_s_errors() {
    let shape = Shape { protocol: "tiga", shards: 2, replicas: 3, wan_scale: None, params: Vec::new() };
    let cluster = TestCluster::start("redis-resp3", shape);
    let mut c = Resp::connect(cluster.redis_addr());
    // RESP2 until HELLO: a missing key is a null bulk string.
    assert_eq!(c.call(&["GET", "missing"]), R::Bulk(None));
    let R::Map(hello) = c.call(&["HELLO", "3", "SETNAME", "tester"]) else { panic!("HELLO 3 answers a map") };
    assert!(hello.contains(&(bulk("proto"), R::Int(3))));
    assert!(hello.contains(&(bulk("server"), bulk("redis"))));
    assert_eq!(c.call(&["GET", "missing"]), R::Null, "RESP3's null");
    assert_eq!(c.call(&["CLIENT", "GETNAME"]), bulk("tester"));
    assert_eq!(c.call(&["CLIENT", "SETINFO", "LIB-NAME", "resp-test"]), R::Simple("OK".into()));
    assert!(matches!(c.call(&["CLIENT", "ID"]), R::Int(id) if id > 0));
    assert_eq!(c.call(&["HELLO", "4"]), R::Error("NOPROTO unsupported protocol version".into()));

    // Data commands beyond GET/SET.
    assert_eq!(c.call(&["SET", "s", "This is a string"]), R::Simple("OK".into()));
    assert_eq!(c.call(&["EXISTS", "s", "s", "missing"]), R::Int(2));
    assert_eq!(c.call(&["STRLEN", "s"]), R::Int(16));
    assert_eq!(c.call(&["GETRANGE", "s", "-3", "-1"]), bulk("ing"));
    assert_eq!(c.call(&["TYPE", "s"]), R::Simple("string".into()));
    assert_eq!(c.call(&["TYPE", "missing"]), R::Simple("none".into()));

    // Redis's error texts.
    assert_eq!(c.call(&["GET"]), R::Error("ERR wrong number of arguments for 'get' command".into()));
    // (The reader trims the line; Redis ends the text with a space.)
    assert_eq!(c.call(&["FLY", "me"]), R::Error("ERR unknown command 'FLY', with args beginning with: 'me'".into()));
    assert_eq!(c.call(&["INCRBY", "n", "x"]), R::Error("ERR value is not an integer or out of range".into()));
    assert_eq!(c.call(&["SELECT", "1"]), R::Error("ERR DB index is out of range".into()));
    assert!(matches!(c.call(&["COMMAND", "COUNT"]), R::Int(n) if n > 20));

    // Strings with Redis's semantics: conditional writes, types, errors.
    assert_eq!(c.call(&["SETNX", "nx", "first"]), R::Int(1));
    assert_eq!(c.call(&["SETNX", "nx", "second"]), R::Int(0));
    assert_eq!(c.call(&["SET", "nx", "third", "NX"]), R::Null);
    assert_eq!(c.call(&["SET", "nx", "fourth", "XX", "GET"]), bulk("first"));
    assert_eq!(c.call(&["GETSET", "nx", "fifth"]), bulk("fourth"));
    assert_eq!(c.call(&["GETDEL", "nx"]), bulk("fifth"));
    assert_eq!(c.call(&["GET", "nx"]), R::Null, "a deleted key is absent");
    assert_eq!(c.call(&["SET", "empty", ""]), R::Simple("OK".into()));
    assert_eq!(c.call(&["EXISTS", "empty"]), R::Int(1), "an empty string is a value");
    assert_eq!(c.call(&["APPEND", "ap", "Hello"]), R::Int(5));
    assert_eq!(c.call(&["APPEND", "ap", " World"]), R::Int(11));
    assert_eq!(c.call(&["SETRANGE", "ap", "6", "Redis"]), R::Int(11));
    assert_eq!(c.call(&["GET", "ap"]), bulk("Hello Redis"));
    assert_eq!(c.call(&["INCR", "ap"]), R::Error("ERR value is not an integer or out of range".into()));
    assert_eq!(c.call(&["GET", "ap"]), bulk("Hello Redis"), "a failed INCR writes nothing");
    assert_eq!(c.call(&["SET", "big", &i64::MAX.to_string()]), R::Simple("OK".into()));
    assert_eq!(c.call(&["INCR", "big"]), R::Error("ERR increment or decrement would overflow".into()));
    assert_eq!(c.call(&["INCRBYFLOAT", "fl", "10.5"]), bulk("10.5"));
    assert_eq!(c.call(&["INCRBYFLOAT", "fl", "0.1"]), bulk("10.6"));
    assert!(matches!(c.call(&["SET", "k", "v", "EX", "10"]), R::Error(e) if e.contains("expire")));

    // MULTI: a command failing at EXEC reports its error in its slot and
    // the others still apply, as in Redis.
    assert_eq!(c.call(&["MULTI"]), R::Simple("OK".into()));
    assert_eq!(c.call(&["SET", "mx", "1"]), R::Simple("QUEUED".into()));
    assert_eq!(c.call(&["INCR", "ap"]), R::Simple("QUEUED".into()));
    assert_eq!(c.call(&["INCR", "mx"]), R::Simple("QUEUED".into()));
    let R::Array(slots) = c.call(&["EXEC"]) else { panic!("EXEC answers an array") };
    assert_eq!(slots[0], R::Simple("OK".into()));
    assert!(matches!(&slots[1], R::Error(e) if e.contains("not an integer")));
    assert_eq!(slots[2], R::Int(2));

    // A wrong command inside MULTI discards the transaction, as in Redis.
    assert_eq!(c.call(&["MULTI"]), R::Simple("OK".into()));
    assert_eq!(c.call(&["SET", "m", "1"]), R::Simple("QUEUED".into()));
    assert!(matches!(c.call(&["GET"]), R::Error(_)));
    assert!(matches!(c.call(&["EXEC"]), R::Error(e) if e.starts_with("EXECABORT")));
    assert_eq!(c.call(&["EXISTS", "m"]), R::Int(0));

    // RESET: back to RESP2 and no name.
    assert_eq!(c.call(&["RESET"]), R::Simple("RESET".into()));
    assert_eq!(c.call(&["CLIENT", "GETNAME"]), R::Bulk(None));
}

/// WATCH a key, read it, write it in MULTI/EXEC; retry on a nil EXEC.
fn check_and_set_increment(c: &mut Resp, key: &str) -> usize {
    for attempt in 1.. {
        assert_eq!(c.call(&["WATCH", key]), R::Simple("OK".into()));
        let now = match c.call(&["GET", key]) {
            R::Bulk(Some(b)) => String::from_utf8(b).unwrap().parse::<i64>().unwrap(),
            R::Bulk(None) => 0,
            other => panic!("GET answered {other:?}"),
        };
        assert_eq!(c.call(&["MULTI"]), R::Simple("OK".into()));
        assert_eq!(c.call(&["SET", key, &(now + 1).to_string()]), R::Simple("QUEUED".into()));
        match c.call(&["EXEC"]) {
            R::Array(r) => {
                assert_eq!(r, vec![R::Simple("OK".into())]);
                return attempt;
            }
            R::NullArray => continue,
            other => panic!("EXEC answered {other:?}"),
        }
    }
    unreachable!()
}

#[test]
fn watch_check_and_set_loops_from_concurrent_clients_lose_no_increment_and_msetnx_is_all_or_nothing() {
    for protocol in ["2pl-paxos", "tiga"] {
        let shape = Shape { protocol, shards: 2, replicas: 3, wan_scale: None, params: Vec::new() };
        let cluster = TestCluster::start(&format!("redis-watch-{protocol}"), shape);
        let addr = cluster.redis_addr();
        let (clients, each) = (8, 10);
        let workers: Vec<_> = (0..clients)
            .map(|_| {
                std::thread::spawn(move || {
                    let mut c = Resp::connect(addr);
                    (0..each).map(|_| check_and_set_increment(&mut c, "cas")).sum::<usize>()
                })
            })
            .collect();
        let attempts: usize = workers.into_iter().map(|w| w.join().unwrap()).sum();
        let mut c = Resp::connect(addr);
        assert_eq!(c.call(&["GET", "cas"]), bulk(&(clients * each).to_string()), "{protocol}: every increment once");
        assert!(attempts >= clients * each, "{protocol}: {attempts} attempts");

        // A watched key written by another connection: EXEC answers nil
        // and runs nothing; UNWATCH forgets.
        let mut other = Resp::connect(addr);
        assert_eq!(c.call(&["WATCH", "w"]), R::Simple("OK".into()));
        assert_eq!(other.call(&["SET", "w", "theirs"]), R::Simple("OK".into()));
        assert_eq!(c.call(&["MULTI"]), R::Simple("OK".into()));
        assert_eq!(c.call(&["SET", "w", "mine"]), R::Simple("QUEUED".into()));
        assert_eq!(c.call(&["EXEC"]), R::NullArray, "{protocol}");
        assert_eq!(c.call(&["GET", "w"]), bulk("theirs"));
        assert_eq!(c.call(&["WATCH", "w"]), R::Simple("OK".into()));
        assert_eq!(other.call(&["SET", "w", "again"]), R::Simple("OK".into()));
        assert_eq!(c.call(&["UNWATCH"]), R::Simple("OK".into()));
        assert_eq!(c.call(&["MULTI"]), R::Simple("OK".into()));
        assert_eq!(c.call(&["SET", "w", "mine"]), R::Simple("QUEUED".into()));
        assert_eq!(c.call(&["EXEC"]), R::Array(vec![R::Simple("OK".into())]));
        assert_eq!(c.call(&["MULTI"]), R::Simple("OK".into()));
        assert!(matches!(c.call(&["WATCH", "w"]), R::Error(e) if e.contains("inside MULTI")));
        assert_eq!(c.call(&["DISCARD"]), R::Simple("OK".into()));

        // Keys on both shards under WATCH: an interactive protocol runs
        // it; a one-shot one refuses with a clear error, writing nothing.
        let keys = ["s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"];
        let mut watch = vec!["WATCH"];
        watch.extend(keys);
        assert_eq!(c.call(&watch), R::Simple("OK".into()));
        assert_eq!(c.call(&["MULTI"]), R::Simple("OK".into()));
        assert_eq!(c.call(&["SET", "s0", "x"]), R::Simple("QUEUED".into()));
        match (protocol, c.call(&["EXEC"])) {
            ("2pl-paxos", reply) => assert_eq!(reply, R::Array(vec![R::Simple("OK".into())])),
            (_, R::Error(e)) => {
                assert!(e.contains("one shard"), "{e}");
                assert_eq!(c.call(&["GET", "s0"]), R::Bulk(None), "nothing written");
            }
            (_, other) => panic!("{protocol}: a multi-shard WATCH answered {other:?}"),
        }

        // MSETNX: all or nothing; on a one-shot protocol only within a shard.
        assert_eq!(c.call(&["MSETNX", "nx1", "a"]), R::Int(1));
        assert_eq!(c.call(&["MSETNX", "nx1", "b"]), R::Int(0));
        assert_eq!(c.call(&["GET", "nx1"]), bulk("a"));
        let spread = ["m0", "1", "m1", "1", "m2", "1", "m3", "1", "m4", "1", "m5", "1"];
        let mut cmd = vec!["MSETNX"];
        cmd.extend(spread);
        match (protocol, c.call(&cmd)) {
            ("2pl-paxos", reply) => {
                assert_eq!(reply, R::Int(1));
                assert_eq!(c.call(&["MSETNX", "m5", "2", "m6", "2"]), R::Int(0));
                assert_eq!(c.call(&["EXISTS", "m6"]), R::Int(0), "none written when one exists");
            }
            (_, R::Error(e)) => assert!(e.contains("one shard"), "{e}"),
            (_, other) => panic!("{protocol}: a multi-shard MSETNX answered {other:?}"),
        }
        // Inside MULTI, MSETNX sees the commands queued before it. Two
        // names on one shard, so a one-shot protocol runs it too.
        let shard_of = |name: &str| meridian_core::Key::named(name.as_bytes()).0 % 2;
        let q2 = (0..).map(|i| format!("q{i}")).find(|n| n != "q1" && shard_of(n) == shard_of("q1")).unwrap();
        assert_eq!(c.call(&["MULTI"]), R::Simple("OK".into()));
        for cmd in [&["SET", "q1", "x"][..], &["MSETNX", "q1", "1", &q2, "1"], &["DEL", "q1"], &["MSETNX", "q1", "2"]] {
            assert_eq!(c.call(cmd), R::Simple("QUEUED".into()));
        }
        let answers = vec![R::Simple("OK".into()), R::Int(0), R::Int(1), R::Int(1)];
        assert_eq!(c.call(&["EXEC"]), R::Array(answers), "{protocol}");
        assert_eq!(c.call(&["MGET", "q1", &q2]), R::Array(vec![bulk("2"), R::Bulk(None)]));
    }
}
