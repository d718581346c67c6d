//! A connection's own state and the commands that touch only it: the
//! handshake (`HELLO`, `AUTH`), `CLIENT`, `SELECT`, `PING`, `ECHO`,
//! `RESET`, `COMMAND` and `CONFIG` — what client libraries send when they
//! connect (redis-py 8 opens with `HELLO 3` and names itself with `CLIENT
//! SETINFO`; redis-cli asks `COMMAND DOCS`; redis-benchmark `CONFIG GET`).
//! Nothing here reaches the cluster.

use super::resp::{Proto, Reply};
use super::table::{self, COMMANDS};
use crate::security::Password;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};

/// The version `HELLO` and `INFO` report: the Redis whose commands and
/// replies the gateway follows.
pub const REDIS_VERSION: &str = "7.2.0";

/// Client names and library fields: Redis refuses spaces, newlines and
/// other characters outside `!`..=`~`, and so does the gateway.
const NAME_BYTES_MAX: usize = 512;

/// What a connection negotiated and was told.
#[derive(Debug)]
pub struct Connection {
    pub id: u64,
    pub proto: Proto,
    pub peer: Option<SocketAddr>,
    name: Option<Vec<u8>>,
    lib_name: Option<Vec<u8>>,
    lib_ver: Option<Vec<u8>>,
    /// The cluster's password (`requirepass`); `None`: the default user is
    /// `nopass`, as a Redis without one.
    password: Option<Password>,
    authenticated: bool,
}

/// What Redis answers a command before `AUTH` when a password is set.
pub const NOAUTH: &str = "NOAUTH Authentication required.";
/// What it answers a wrong password or an unknown user.
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// Commands a connection may send before it authenticates (Redis's
/// `no-auth` flag).
pub fn allowed_before_auth(name: &str) -> bool {
    ["AUTH", "HELLO", "QUIT", "RESET"].iter().any(|n| n.eq_ignore_ascii_case(name))
}

/// Connection ids, unique within the process and never 0.
fn next_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

fn valid_name(name: &[u8]) -> bool {
    name.len() <= NAME_BYTES_MAX && name.iter().all(|b| (b'!'..=b'~').contains(b))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn upper(bytes: &[u8]) -> String {
    text(bytes).to_ascii_uppercase()
}

impl Connection {
    pub fn new(peer: Option<SocketAddr>, password: Option<Password>) -> Connection {
        Connection {
            id: next_id(),
            proto: Proto::Resp2,
            peer,
            name: None,
            lib_name: None,
            lib_ver: None,
            authenticated: password.is_none(),
            password,
        }
    }

    /// Whether the connection may run commands other than
    /// [`allowed_before_auth`] ones.
    pub fn authenticated(&self) -> bool {
        self.authenticated
    }

    /// `RESET`: back to a fresh connection's state (its id stays); as in
    /// Redis, that includes authentication when a password is set.
    pub fn reset(&mut self) {
        self.proto = Proto::Resp2;
        self.name = None;
        self.authenticated = self.password.is_none();
    }

    /// `AUTH [username] password`. With a password set (`requirepass`),
    /// `AUTH password` and `AUTH default password` authenticate the
    /// connection and anything else is `WRONGPASS` (the connection stays as
    /// it was, as in Redis). Without one, as Redis's default user with
    /// `nopass`: `AUTH default <anything>` succeeds and a bare password is
    /// an error.
    pub fn auth(&mut self, args: &[Vec<u8>]) -> Reply {
        let Some(password) = &self.password else {
            return match args {
                [_password] => Reply::err(
                    "ERR AUTH <password> called without any password configured for the default user. Are you \
                     sure your configuration is correct?",
                ),
                [user, _password] if user.as_slice() == b"default" => Reply::ok(),
                [_, _] => Reply::err(WRONGPASS),
                _ => table::wrong_args("auth"),
            };
        };
        let given = match args {
            [given] => given,
            [user, given] if user.as_slice() == b"default" => given,
            [_, _] => return Reply::err(WRONGPASS),
            _ => return table::wrong_args("auth"),
        };
        if password.matches(given) {
            self.authenticated = true;
            Reply::ok()
        } else {
            Reply::err(WRONGPASS)
        }
    }

    /// `HELLO [protover [AUTH username password] [SETNAME clientname]]`:
    /// switches to RESP2 or RESP3 and describes the server.
    pub fn hello(&mut self, args: &[Vec<u8>]) -> Reply {
        let mut proto = self.proto;
        let mut rest = args;
        if let Some((version, tail)) = args.split_first() {
            proto = match text(version).parse::<i64>() {
                Ok(2) => Proto::Resp2,
                Ok(3) => Proto::Resp3,
                Ok(_) => return Reply::err("NOPROTO unsupported protocol version"),
                Err(_) => return Reply::err("ERR Protocol version is not an integer or out of range"),
            };
            rest = tail;
        }
        let mut name = None;
        let mut credentials = None;
        while let Some((option, tail)) = rest.split_first() {
            match (upper(option).as_str(), tail) {
                ("AUTH", [user, password, more @ ..]) => {
                    credentials = Some([user.clone(), password.clone()]);
                    rest = more;
                }
                ("SETNAME", [n, more @ ..]) => {
                    if !valid_name(n) {
                        return name_error("Client names");
                    }
                    name = Some(n.clone());
                    rest = more;
                }
                (o, _) => return Reply::err(format!("ERR Syntax error in HELLO option '{}'", o.to_ascii_lowercase())),
            }
        }
        if let Some(credentials) = credentials {
            if let Reply::Error(e) = self.auth(&credentials) {
                return Reply::Error(e);
            }
        }
        if !self.authenticated {
            return Reply::err(
                "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> \
                 AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol \
                 version at the same time",
            );
        }
        self.proto = proto;
        if name.is_some() {
            self.name = name;
        }
        Reply::Map(vec![
            (Reply::bulk("server"), Reply::bulk("redis")),
            (Reply::bulk("version"), Reply::bulk(REDIS_VERSION)),
            (Reply::bulk("proto"), Reply::Int(proto.number())),
            (Reply::bulk("id"), Reply::Int(self.id as i64)),
            (Reply::bulk("mode"), Reply::bulk("standalone")),
            (Reply::bulk("role"), Reply::bulk("master")),
            (Reply::bulk("modules"), Reply::Array(Vec::new())),
        ])
    }

    /// `CLIENT SETNAME|GETNAME|ID|INFO|SETINFO|LIST|NO-EVICT|NO-TOUCH`.
    pub fn client(&mut self, args: &[Vec<u8>], in_multi: bool) -> Reply {
        let sub = upper(&args[0]);
        match (sub.as_str(), &args[1..]) {
            ("SETNAME", [name]) if valid_name(name) => {
                self.name = (!name.is_empty()).then(|| name.clone());
                Reply::ok()
            }
            ("SETNAME", [_]) => name_error("Client names"),
            ("GETNAME", []) => Reply::Bulk(self.name.clone()),
            ("ID", []) => Reply::Int(self.id as i64),
            ("INFO", []) => Reply::bulk(format!("{}\n", self.info_line(in_multi))),
            ("LIST", []) => Reply::bulk(format!("{}\n", self.info_line(in_multi))),
            ("SETINFO", [attr, value]) => {
                let attr = upper(attr);
                let field = match attr.as_str() {
                    "LIB-NAME" => &mut self.lib_name,
                    "LIB-VER" => &mut self.lib_ver,
                    _ => return Reply::err(format!("ERR Unrecognized option '{}'", attr.to_ascii_lowercase())),
                };
                if !valid_name(value) {
                    return name_error(&attr.to_ascii_lowercase());
                }
                *field = Some(value.clone());
                Reply::ok()
            }
            ("NO-EVICT" | "NO-TOUCH", [on]) if matches!(upper(on).as_str(), "ON" | "OFF") => Reply::ok(),
            ("SETNAME" | "GETNAME" | "ID" | "INFO" | "LIST" | "SETINFO" | "NO-EVICT" | "NO-TOUCH", _) => {
                Reply::err(format!("ERR wrong number of arguments for 'client|{}' command", sub.to_ascii_lowercase()))
            }
            _ => Reply::err(format!("ERR unknown subcommand '{}'. Try CLIENT HELP.", text(&args[0]))),
        }
    }

    /// One line of `CLIENT INFO` / `CLIENT LIST`, fields as Redis names
    /// them.
    fn info_line(&self, in_multi: bool) -> String {
        let opt = |v: &Option<Vec<u8>>| v.as_deref().map(text).unwrap_or_default();
        let addr = self.peer.map(|p| p.to_string()).unwrap_or_default();
        format!(
            "id={} addr={addr} name={} db=0 multi={} resp={} lib-name={} lib-ver={}",
            self.id,
            opt(&self.name),
            if in_multi { 0 } else { -1 },
            self.proto.number(),
            opt(&self.lib_name),
            opt(&self.lib_ver)
        )
    }
}

fn name_error(what: &str) -> Reply {
    Reply::err(format!("ERR {what} cannot contain spaces, newlines or special characters."))
}

/// `SELECT index`: there is one database.
pub fn select(args: &[Vec<u8>]) -> Reply {
    match text(&args[0]).parse::<i64>() {
        Ok(0) => Reply::ok(),
        Ok(_) => Reply::err("ERR DB index is out of range"),
        Err(_) => Reply::err("ERR value is not an integer or out of range"),
    }
}

/// `PING [message]`.
pub fn ping(args: &[Vec<u8>]) -> Reply {
    match args {
        [] => Reply::Simple("PONG".into()),
        [message] => Reply::bulk(message.clone()),
        _ => table::wrong_args("ping"),
    }
}

/// `COMMAND`, `COMMAND COUNT|INFO|LIST|DOCS`.
pub fn command(args: &[Vec<u8>]) -> Reply {
    let Some((sub, rest)) = args.split_first() else {
        return Reply::Array(COMMANDS.iter().map(table::Spec::info).collect());
    };
    match upper(sub).as_str() {
        "COUNT" => Reply::Int(COMMANDS.len() as i64),
        "LIST" => Reply::Array(COMMANDS.iter().map(|s| Reply::bulk(s.name)).collect()),
        "INFO" if rest.is_empty() => Reply::Array(COMMANDS.iter().map(table::Spec::info).collect()),
        "INFO" => Reply::Array(
            rest.iter().map(|n| table::lookup(&text(n)).map_or(Reply::Bulk(None), table::Spec::info)).collect(),
        ),
        // Documentation is optional to clients (redis-cli uses it for
        // hints): none is given.
        "DOCS" => Reply::Map(Vec::new()),
        _ => Reply::err(format!("ERR unknown subcommand '{}'. Try COMMAND HELP.", text(sub))),
    }
}

/// `CONFIG GET pattern`: no configuration is exposed (redis-benchmark
/// asks for `save` and `appendonly` and copes with an empty answer).
pub fn config(args: &[Vec<u8>]) -> Reply {
    match upper(&args[0]).as_str() {
        "GET" => Reply::Map(Vec::new()),
        "SET" | "RESETSTAT" | "REWRITE" => Reply::err("ERR CONFIG changes are not supported by Meridian's gateway"),
        _ => Reply::err(format!("ERR unknown subcommand '{}'. Try CONFIG HELP.", text(&args[0]))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(v: &[&str]) -> Vec<Vec<u8>> {
        v.iter().map(|s| s.as_bytes().to_vec()).collect()
    }

    fn field<'r>(reply: &'r Reply, name: &str) -> Option<&'r Reply> {
        let Reply::Map(pairs) = reply else { return None };
        pairs.iter().find(|(k, _)| *k == Reply::bulk(name)).map(|(_, v)| v)
    }

    #[test]
    fn hello_switches_the_protocol_and_describes_the_server() {
        let mut c = Connection::new(None, None);
        let r = c.hello(&a(&["3"]));
        assert_eq!(c.proto, Proto::Resp3);
        assert_eq!(field(&r, "proto"), Some(&Reply::Int(3)));
        assert_eq!(field(&r, "id"), Some(&Reply::Int(c.id as i64)));
        let r = c.hello(&a(&[]));
        assert_eq!(field(&r, "proto"), Some(&Reply::Int(3)), "no version keeps the protocol");
        assert_eq!(c.hello(&a(&["4"])), Reply::err("NOPROTO unsupported protocol version"));
        assert_eq!(c.proto, Proto::Resp3, "a refused HELLO changes nothing");
        c.hello(&a(&["2", "AUTH", "default", "x", "SETNAME", "app"]));
        assert_eq!((c.proto, c.name.as_deref()), (Proto::Resp2, Some(&b"app"[..])));
        assert!(matches!(c.hello(&a(&["3", "AUTH", "alice", "x"])), Reply::Error(e) if e.starts_with("WRONGPASS")));
        assert!(matches!(c.hello(&a(&["3", "BOGUS"])), Reply::Error(_)));
        assert_eq!(c.proto, Proto::Resp2);
    }

    #[test]
    fn client_names_and_library_info_are_kept_and_validated() {
        let mut c = Connection::new(None, None);
        assert_eq!(c.client(&a(&["GETNAME"]), false), Reply::Bulk(None));
        assert_eq!(c.client(&a(&["SETNAME", "worker-1"]), false), Reply::ok());
        assert_eq!(c.client(&a(&["GETNAME"]), false), Reply::bulk("worker-1"));
        assert!(matches!(c.client(&a(&["SETNAME", "a b"]), false), Reply::Error(_)));
        assert_eq!(c.client(&a(&["SETINFO", "LIB-NAME", "redis-py"]), false), Reply::ok());
        assert_eq!(c.client(&a(&["SETINFO", "lib-ver", "8.1.0"]), false), Reply::ok());
        assert!(matches!(c.client(&a(&["SETINFO", "color", "red"]), false), Reply::Error(_)));
        assert_eq!(c.client(&a(&["ID"]), false), Reply::Int(c.id as i64));
        let Reply::Bulk(Some(info)) = c.client(&a(&["INFO"]), false) else { panic!("CLIENT INFO is a bulk string") };
        let info = String::from_utf8(info).unwrap();
        assert!(info.contains("name=worker-1") && info.contains("lib-name=redis-py") && info.contains("resp=2"));
        assert!(matches!(c.client(&a(&["KILL"]), false), Reply::Error(e) if e.contains("unknown subcommand")));
        c.reset();
        assert_eq!(c.client(&a(&["GETNAME"]), false), Reply::Bulk(None));
    }

    #[test]
    fn auth_without_a_configured_password_behaves_as_redis_default_user() {
        let mut c = Connection::new(None, None);
        assert!(matches!(c.auth(&a(&["secret"])), Reply::Error(e) if e.contains("without any password configured")));
        assert_eq!(c.auth(&a(&["default", "anything"])), Reply::ok());
        assert!(matches!(c.auth(&a(&["bob", "x"])), Reply::Error(e) if e.starts_with("WRONGPASS")));
    }

    #[test]
    fn with_a_password_only_the_password_authenticates() {
        let mut c = Connection::new(None, Some(Password::new(b"s3cret")));
        assert!(!c.authenticated());
        let wrong = Reply::err(WRONGPASS);
        assert_eq!(c.auth(&a(&["nope"])), wrong);
        assert_eq!(c.auth(&a(&["default", "nope"])), wrong);
        assert_eq!(c.auth(&a(&["alice", "s3cret"])), wrong, "only the default user exists");
        assert!(matches!(c.auth(&a(&["a", "b", "c"])), Reply::Error(e) if e.contains("wrong number")));
        assert!(!c.authenticated(), "a refused AUTH leaves the connection locked");
        assert_eq!(c.auth(&a(&["s3cret"])), Reply::ok());
        assert!(c.authenticated());
        assert_eq!(c.auth(&a(&["nope"])), wrong);
        assert!(c.authenticated(), "a later wrong AUTH keeps the earlier one, as in Redis");
        c.reset();
        assert!(!c.authenticated(), "RESET forgets the password");
        assert_eq!(c.auth(&a(&["default", "s3cret"])), Reply::ok());
        assert!(c.authenticated());
    }

    #[test]
    fn hello_needs_the_password_first_or_in_its_auth_option() {
        let mut c = Connection::new(None, Some(Password::new(b"s3cret")));
        assert!(matches!(c.hello(&a(&["3"])), Reply::Error(e) if e.starts_with("NOAUTH HELLO must be called")));
        assert_eq!(c.proto, Proto::Resp2, "a refused HELLO changes nothing");
        assert!(
            matches!(c.hello(&a(&["3", "AUTH", "default", "nope"])), Reply::Error(e) if e.starts_with("WRONGPASS"))
        );
        assert!(matches!(c.hello(&a(&["3", "AUTH", "default", "s3cret", "BOGUS"])), Reply::Error(_)));
        assert!(!c.authenticated(), "a HELLO with a syntax error authenticates nobody");
        let r = c.hello(&a(&["3", "AUTH", "default", "s3cret", "SETNAME", "app"]));
        assert_eq!(field(&r, "proto"), Some(&Reply::Int(3)));
        assert!(c.authenticated());
        let mut c = Connection::new(None, Some(Password::new(b"s3cret")));
        assert_eq!(c.auth(&a(&["s3cret"])), Reply::ok());
        assert!(matches!(c.hello(&a(&["3"])), Reply::Map(_)), "HELLO after AUTH");
        assert!(allowed_before_auth("auth") && allowed_before_auth("Hello") && allowed_before_auth("QUIT"));
        assert!(allowed_before_auth("reset") && !allowed_before_auth("GET") && !allowed_before_auth("PING"));
    }

    #[test]
    fn command_describes_every_command_the_gateway_runs() {
        let Reply::Array(all) = command(&[]) else { panic!("COMMAND is an array") };
        assert_eq!(all.len(), COMMANDS.len());
        assert_eq!(command(&a(&["COUNT"])), Reply::Int(COMMANDS.len() as i64));
        let Reply::Array(info) = command(&a(&["INFO", "get", "nope"])) else { panic!("an array") };
        assert!(matches!(&info[0], Reply::Array(f) if f[0] == Reply::bulk("get") && f[1] == Reply::Int(2)));
        assert_eq!(info[1], Reply::Bulk(None));
        assert_eq!(command(&a(&["DOCS"])), Reply::Map(Vec::new()));
    }

    #[test]
    fn a_map_is_a_flat_array_in_resp2_and_a_map_in_resp3() {
        let m = Reply::Map(vec![(Reply::bulk("a"), Reply::Int(1))]);
        let (mut two, mut three) = (Vec::new(), Vec::new());
        m.encode(Proto::Resp2, &mut two);
        m.encode(Proto::Resp3, &mut three);
        assert_eq!(two, b"*2\r\n$1\r\na\r\n:1\r\n");
        assert_eq!(three, b"%1\r\n$1\r\na\r\n:1\r\n");
        let (mut two, mut three) = (Vec::new(), Vec::new());
        Reply::Array(vec![Reply::Bulk(None), Reply::NullArray]).encode(Proto::Resp2, &mut two);
        Reply::Array(vec![Reply::Bulk(None), Reply::NullArray]).encode(Proto::Resp3, &mut three);
        assert_eq!(two, b"*2\r\n$-1\r\n*-1\r\n");
        assert_eq!(three, b"*2\r\n_\r\n_\r\n");
    }
}
