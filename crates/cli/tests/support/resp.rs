//! A plain RESP client for tests, over any stream (TCP, TLS): it sends
//! commands as arrays of bulk strings and reads RESP2 and RESP3 replies.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A RESP reply as a test reads it.
#[derive(Debug, PartialEq)]
pub enum R {
    Simple(String),
    Error(String),
    Int(i64),
    Bulk(Option<Vec<u8>>),
    Array(Vec<R>),
    /// RESP3's null.
    Null,
    /// RESP2's null array (`*-1`).
    NullArray,
    /// RESP3's map.
    Map(Vec<(R, R)>),
}

pub fn bulk(s: &str) -> R {
    R::Bulk(Some(s.as_bytes().to_vec()))
}

pub struct Resp<S: Read + Write = TcpStream> {
    pub r: BufReader<S>,
}

impl Resp<TcpStream> {
    /// Connects over plain TCP, with a 20-s read timeout.
    pub fn connect(addr: SocketAddr) -> Resp {
        let s = TcpStream::connect(addr).expect("connect to the gateway");
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        Resp { r: BufReader::new(s) }
    }
}

impl<S: Read + Write> Resp<S> {
    pub fn over(stream: S) -> Resp<S> {
        Resp { r: BufReader::new(stream) }
    }

    pub fn send(&mut self, args: &[&str]) {
        let mut out = format!("*{}\r\n", args.len());
        for a in args {
            out.push_str(&format!("${}\r\n{a}\r\n", a.len()));
        }
        self.r.get_mut().write_all(out.as_bytes()).unwrap();
        self.r.get_mut().flush().unwrap();
    }

    fn line(&mut self) -> String {
        let mut l = String::new();
        self.r.read_line(&mut l).unwrap();
        l.trim_end().to_string()
    }

    pub fn read(&mut self) -> R {
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
            "*" if rest == "-1" => R::NullArray,
            "*" => R::Array((0..rest.parse::<usize>().unwrap()).map(|_| self.read()).collect()),
            "_" => R::Null,
            "%" => R::Map((0..rest.parse::<usize>().unwrap()).map(|_| (self.read(), self.read())).collect()),
            _ => panic!("not RESP: {l}"),
        }
    }

    pub fn call(&mut self, args: &[&str]) -> R {
        self.send(args);
        self.read()
    }
}
