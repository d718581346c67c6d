//! A minimal HTTP/1.1 server (Prometheus `/metrics` and `/health`) and
//! client (etcd's JSON gateway), so that no web framework is needed.
//!
//! Both sides bound what they read: request heads, response heads and
//! bodies have size limits, and a malformed message is an error, never a
//! panic. The server must only ever be bound where the cluster file says
//! (loopback by default).

use std::io;
use std::net::SocketAddr;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// Largest request or response head accepted.
const HEAD_MAX_BYTES: usize = 16 << 10;
/// Largest response body accepted by the client.
const BODY_MAX_BYTES: usize = 64 << 20;

fn invalid(why: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why.into())
}

/// Reads header lines up to the blank line; returns them (first line
/// first).
async fn read_head<R: AsyncBufReadExt + Unpin>(r: &mut R) -> io::Result<Vec<String>> {
    let mut lines = Vec::new();
    let mut total = 0;
    loop {
        let mut line = String::new();
        let n = r.read_line(&mut line).await?;
        if n == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed in a message head"));
        }
        total += n;
        if total > HEAD_MAX_BYTES {
            return Err(invalid("message head too long"));
        }
        let line = line.trim_end_matches(['\r', '\n']).to_string();
        if line.is_empty() {
            return Ok(lines);
        }
        lines.push(line);
    }
}

fn header<'a>(lines: &'a [String], name: &str) -> Option<&'a str> {
    lines.iter().skip(1).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim().eq_ignore_ascii_case(name).then_some(v.trim())
    })
}

/// Serves GET requests with `route(path) -> Some((content type, body))`,
/// 404 otherwise; one request per connection.
pub async fn serve<F>(listener: TcpListener, route: F)
where
    F: Fn(&str) -> Option<(&'static str, String)> + Send + Sync + 'static,
{
    let route = std::sync::Arc::new(route);
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        let route = route.clone();
        tokio::spawn(async move {
            let _ = answer(stream, &*route).await;
        });
    }
}

async fn answer<F>(stream: TcpStream, route: &F) -> io::Result<()>
where
    F: Fn(&str) -> Option<(&'static str, String)>,
{
    let mut r = BufReader::new(stream);
    let head = read_head(&mut r).await?;
    let path = head.first().and_then(|l| l.split_whitespace().nth(1)).unwrap_or("/");
    let (status, kind, body) = match route(path) {
        Some((kind, body)) => ("200 OK", kind, body),
        None => ("404 Not Found", "text/plain", "not found\n".to_string()),
    };
    let reply = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let mut stream = r.into_inner();
    stream.write_all(reply.as_bytes()).await?;
    stream.shutdown().await
}

/// A keep-alive HTTP/1.1 connection for POSTing JSON.
pub struct HttpConn {
    host: String,
    r: BufReader<TcpStream>,
}

impl HttpConn {
    pub async fn connect(addr: SocketAddr) -> io::Result<HttpConn> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(HttpConn { host: addr.to_string(), r: BufReader::new(stream) })
    }

    /// POSTs `body` to `path`; returns the status code and response body.
    pub async fn post(&mut self, path: &str, body: &[u8]) -> io::Result<(u16, Vec<u8>)> {
        let head = format!(
            "POST {path} HTTP/1.1\r\nHost: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            self.host,
            body.len()
        );
        let w = self.r.get_mut();
        w.write_all(head.as_bytes()).await?;
        w.write_all(body).await?;
        w.flush().await?;
        self.read_response().await
    }

    async fn read_response(&mut self) -> io::Result<(u16, Vec<u8>)> {
        let head = read_head(&mut self.r).await?;
        let status = head
            .first()
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| invalid("no HTTP status line"))?;
        let chunked = header(&head, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked"));
        let body = if chunked {
            read_chunked(&mut self.r).await?
        } else {
            let len: usize = header(&head, "content-length")
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| invalid("response without a length"))?;
            if len > BODY_MAX_BYTES {
                return Err(invalid("response body too large"));
            }
            let mut body = vec![0; len];
            self.r.read_exact(&mut body).await?;
            body
        };
        Ok((status, body))
    }
}

async fn read_chunked<R: AsyncBufReadExt + Unpin>(r: &mut R) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut line = String::new();
        r.read_line(&mut line).await?;
        let size_text = line.trim().split(';').next().unwrap_or("");
        let size = usize::from_str_radix(size_text, 16).map_err(|_| invalid("bad chunk size"))?;
        if body.len() + size > BODY_MAX_BYTES {
            return Err(invalid("response body too large"));
        }
        if size == 0 {
            read_head(r).await?; // trailers and the final blank line
            return Ok(body);
        }
        let start = body.len();
        body.resize(start + size, 0);
        r.read_exact(&mut body[start..]).await?;
        let mut crlf = [0u8; 2];
        r.read_exact(&mut crlf).await?;
    }
}

/// GETs `path` from `addr` on a fresh connection (health checks).
pub async fn get(addr: SocketAddr, path: &str) -> io::Result<(u16, String)> {
    let mut stream = TcpStream::connect(addr).await?;
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(req.as_bytes()).await?;
    let mut r = BufReader::new(stream);
    let head = read_head(&mut r).await?;
    let status = head.first().and_then(|l| l.split_whitespace().nth(1)).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut body = String::new();
    r.take(BODY_MAX_BYTES as u64).read_to_string(&mut body).await?;
    Ok((status, body))
}
