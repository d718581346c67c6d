//! The commands the gateway knows, as Redis describes them to `COMMAND`:
//! arity (the argument count including the name; negative means "at
//! least"), flags and where the keys are. Every command is looked up here
//! first, so an unknown name or a wrong argument count gets Redis's own
//! error text before anything runs.

use super::resp::Reply;

/// One command as `COMMAND INFO` reports it.
#[derive(Debug)]
pub struct Spec {
    pub name: &'static str,
    pub arity: i64,
    pub flags: &'static [&'static str],
    pub first_key: i64,
    pub last_key: i64,
    pub step: i64,
}

const fn spec(name: &'static str, arity: i64, flags: &'static [&'static str], keys: (i64, i64, i64)) -> Spec {
    Spec { name, arity, flags, first_key: keys.0, last_key: keys.1, step: keys.2 }
}

const NO_KEYS: (i64, i64, i64) = (0, 0, 0);
const ONE_KEY: (i64, i64, i64) = (1, 1, 1);
const ALL_KEYS: (i64, i64, i64) = (1, -1, 1);
const READ: &[&str] = &["readonly", "fast"];
const WRITE: &[&str] = &["write", "denyoom"];
const WRITE_FAST: &[&str] = &["write", "denyoom", "fast"];
const CONNECTION: &[&str] = &["noscript", "loading", "stale", "fast"];
const HANDSHAKE: &[&str] = &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"];
const TRANSACTION: &[&str] = &["noscript", "loading", "stale", "fast", "allow_busy"];

/// Sorted by name.
pub const COMMANDS: &[Spec] = &[
    spec("append", 3, WRITE, ONE_KEY),
    spec("auth", -2, HANDSHAKE, NO_KEYS),
    spec("client", -2, CONNECTION, NO_KEYS),
    spec("command", -1, &["loading", "stale"], NO_KEYS),
    spec("config", -2, &["admin", "noscript", "loading", "stale"], NO_KEYS),
    spec("decr", 2, WRITE_FAST, ONE_KEY),
    spec("decrby", 3, WRITE_FAST, ONE_KEY),
    spec("del", -2, &["write"], ALL_KEYS),
    spec("discard", 1, TRANSACTION, NO_KEYS),
    spec("echo", 2, &["fast"], NO_KEYS),
    spec("exec", 1, &["noscript", "loading", "stale", "skip_slowlog"], NO_KEYS),
    spec("exists", -2, READ, ALL_KEYS),
    spec("get", 2, READ, ONE_KEY),
    spec("getdel", 2, &["write", "fast"], ONE_KEY),
    spec("getrange", 4, &["readonly"], ONE_KEY),
    spec("getset", 3, WRITE_FAST, ONE_KEY),
    spec("hello", -1, HANDSHAKE, NO_KEYS),
    spec("incr", 2, WRITE_FAST, ONE_KEY),
    spec("incrby", 3, WRITE_FAST, ONE_KEY),
    spec("incrbyfloat", 3, WRITE_FAST, ONE_KEY),
    spec("info", -1, &["loading", "stale"], NO_KEYS),
    spec("mget", -2, READ, ALL_KEYS),
    spec("mset", -3, WRITE, (1, -1, 2)),
    spec("msetnx", -3, WRITE, (1, -1, 2)),
    spec("multi", 1, TRANSACTION, NO_KEYS),
    spec("ping", -1, &["fast"], NO_KEYS),
    spec("quit", -1, &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], NO_KEYS),
    spec("reset", 1, &["noscript", "loading", "stale", "fast", "no_auth", "allow_busy"], NO_KEYS),
    spec("select", 2, &["loading", "stale", "fast"], NO_KEYS),
    spec("set", -3, WRITE, ONE_KEY),
    spec("setnx", 3, WRITE_FAST, ONE_KEY),
    spec("setrange", 4, WRITE, ONE_KEY),
    spec("strlen", 2, READ, ONE_KEY),
    spec("substr", 4, &["readonly"], ONE_KEY),
    spec("type", 2, READ, ONE_KEY),
    spec("unwatch", 1, TRANSACTION, NO_KEYS),
    spec("watch", -2, TRANSACTION, ALL_KEYS),
];

/// The command `name` (any case).
pub fn lookup(name: &str) -> Option<&'static Spec> {
    let lower = name.to_ascii_lowercase();
    COMMANDS.binary_search_by(|s| s.name.cmp(lower.as_str())).ok().map(|i| &COMMANDS[i])
}

/// The command, or Redis's error for an unknown name or a wrong argument
/// count (`args` excludes the name).
pub fn check(name: &str, args: &[Vec<u8>]) -> Result<&'static Spec, Reply> {
    let Some(spec) = lookup(name) else { return Err(unknown_command(name, args)) };
    let argc = args.len() as i64 + 1;
    let fits = if spec.arity >= 0 { argc == spec.arity } else { argc >= -spec.arity };
    if fits { Ok(spec) } else { Err(wrong_args(spec.name)) }
}

/// Redis's text, which quotes the name as given and the first arguments.
pub fn unknown_command(name: &str, args: &[Vec<u8>]) -> Reply {
    let quoted: String = args.iter().take(20).map(|a| format!("'{}' ", String::from_utf8_lossy(a))).collect();
    Reply::err(format!("ERR unknown command '{name}', with args beginning with: {quoted}"))
}

pub fn wrong_args(name: &str) -> Reply {
    Reply::err(format!("ERR wrong number of arguments for '{}' command", name.to_ascii_lowercase()))
}

impl Spec {
    /// The entry `COMMAND` and `COMMAND INFO` return (Redis 7's ten
    /// fields; ACL categories, tips, key specs and subcommands empty).
    pub fn info(&self) -> Reply {
        let flags = self.flags.iter().map(|f| Reply::Simple((*f).into())).collect();
        Reply::Array(vec![
            Reply::bulk(self.name),
            Reply::Int(self.arity),
            Reply::Array(flags),
            Reply::Int(self.first_key),
            Reply::Int(self.last_key),
            Reply::Int(self.step),
            Reply::Array(Vec::new()),
            Reply::Array(Vec::new()),
            Reply::Array(Vec::new()),
            Reply::Array(Vec::new()),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_so_every_command_is_found() {
        assert!(COMMANDS.windows(2).all(|w| w[0].name < w[1].name), "sorted, no duplicates");
        for s in COMMANDS {
            assert_eq!(lookup(&s.name.to_ascii_uppercase()).map(|f| f.name), Some(s.name));
        }
    }

    #[test]
    fn arity_and_unknown_names_get_redis_s_errors() {
        let a = |v: &[&str]| v.iter().map(|s| s.as_bytes().to_vec()).collect::<Vec<_>>();
        assert!(check("GET", &a(&["k"])).is_ok());
        assert_eq!(check("GET", &a(&[])).unwrap_err(), Reply::err("ERR wrong number of arguments for 'get' command"));
        assert!(check("mset", &a(&["k"])).is_err(), "at least three with the name");
        assert!(check("MSET", &a(&["k", "v"])).is_ok());
        assert_eq!(
            check("FOO", &a(&["a", "b"])).unwrap_err(),
            Reply::err("ERR unknown command 'FOO', with args beginning with: 'a' 'b' ")
        );
    }
}
