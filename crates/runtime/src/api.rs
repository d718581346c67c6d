//! The client API of a front-end node: length-delimited postcard frames
//! over TCP, `ClientFrame::Request { id, program }` in and
//! `ServerFrame::Response { id, outcome }` out, answered as transactions
//! finish (not necessarily in order).
//!
//! Each connection has at most [`MAX_IN_FLIGHT`] requests in the node at
//! once: past that its reader waits, so a client that pipelines without
//! bound is slowed by TCP, not buffered. A frame that does not decode
//! closes the connection. This module must never run a transaction
//! itself: it only hands programs to the node loop.
//!
//! A front-end with a password takes nothing but `ClientFrame::Auth` with
//! that password first; anything else is refused (`ServerFrame::Refused`)
//! and the connection closed. With `client_tls`, the connection is TLS.

use crate::frame::{self, ClientFrame, ServerFrame};
use crate::node::Request;
use crate::security::{Access, Stream, WriteHalf};
use std::sync::Arc;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, mpsc, oneshot};

/// Requests one connection may have in flight.
pub const MAX_IN_FLIGHT: usize = 4096;

/// What the API answers a request sent before the password.
pub const NOAUTH: &str = "NOAUTH Authentication required.";
/// What it answers a wrong password.
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

pub async fn serve_clients(listener: TcpListener, requests: mpsc::Sender<Request>, access: Access) {
    let access = Arc::new(access);
    loop {
        let Ok((stream, peer)) = listener.accept().await else { continue };
        let requests = requests.clone();
        let access = Arc::clone(&access);
        tokio::spawn(async move {
            let stream = match Stream::accept(stream, access.tls.as_ref()).await {
                Ok(s) => s,
                Err(e) => {
                    tracing::debug!(%peer, error = %e, "client TLS handshake failed");
                    return;
                }
            };
            if let Err(e) = connection(stream, requests, &access).await {
                tracing::debug!(%peer, error = %e, "client connection closed");
            }
        });
    }
}

/// Whether a connection may send requests after `frame`: `Ok(true)` when
/// it authenticated (the frame was the password), `Ok(false)` when the
/// frame is a request of a connection that needs no password, and the
/// refusal to send otherwise.
fn admit(frame: &ClientFrame, access: &Access) -> Result<bool, ServerFrame> {
    match (frame, &access.password) {
        (ClientFrame::Auth { password }, Some(expected)) if expected.matches(password) => Ok(true),
        (ClientFrame::Auth { .. }, Some(_)) => Err(ServerFrame::Refused { reason: WRONGPASS.into() }),
        // No password configured: any is accepted, as Redis's `nopass`.
        (ClientFrame::Auth { .. }, None) => Ok(true),
        (ClientFrame::Request { .. }, Some(_)) => Err(ServerFrame::Refused { reason: NOAUTH.into() }),
        (ClientFrame::Request { .. }, None) => Ok(false),
    }
}

async fn connection(stream: Stream, requests: mpsc::Sender<Request>, access: &Access) -> std::io::Result<()> {
    let (r, w) = stream.into_split();
    let mut r = BufReader::new(r);
    let mut w = BufWriter::new(w);
    let mut buf = Vec::new();
    // The first frame decides whether the connection may go on.
    let Some(first) = frame::read_value::<_, ClientFrame>(&mut r, &mut buf).await? else { return Ok(()) };
    let mut pending = match admit(&first, access) {
        Ok(true) => {
            frame::write_value(&mut w, &ServerFrame::Authenticated).await?;
            w.flush().await?;
            None
        }
        Ok(false) => Some(first),
        Err(refusal) => {
            frame::write_value(&mut w, &refusal).await?;
            w.flush().await?;
            return w.shutdown().await;
        }
    };
    let (answers_tx, answers_rx) = mpsc::unbounded_channel::<ServerFrame>();
    let writer = tokio::spawn(write_answers(w, answers_rx));
    let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let result = loop {
        let frame = match pending.take() {
            Some(f) => f,
            None => match frame::read_value::<_, ClientFrame>(&mut r, &mut buf).await {
                Ok(Some(f)) => f,
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            },
        };
        let (id, program) = match frame {
            ClientFrame::Request { id, program } => (id, program),
            // The password comes first or not at all (answering repeated
            // ones would queue answers nobody bounds).
            ClientFrame::Auth { .. } => {
                let _ =
                    answers_tx.send(ServerFrame::Refused { reason: "ERR the password goes in the first frame".into() });
                break Ok(());
            }
        };
        let permit = permits.clone().acquire_owned().await.expect("the semaphore is never closed");
        let (reply, outcome) = oneshot::channel();
        if requests.send(Request { program, reply }).await.is_err() {
            break Ok(()); // the node is stopping
        }
        let answers = answers_tx.clone();
        tokio::spawn(async move {
            if let Ok(outcome) = outcome.await {
                let _ = answers.send(ServerFrame::Response { id, outcome });
            }
            drop(permit);
        });
    };
    drop(answers_tx);
    // Answers still owed are written before the connection closes.
    let _ = writer.await;
    result
}

async fn write_answers(
    mut w: BufWriter<WriteHalf>,
    mut answers: mpsc::UnboundedReceiver<ServerFrame>,
) -> std::io::Result<()> {
    while let Some(first) = answers.recv().await {
        frame::write_value(&mut w, &first).await?;
        while let Ok(more) = answers.try_recv() {
            frame::write_value(&mut w, &more).await?;
        }
        w.flush().await?;
    }
    w.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::Password;
    use meridian_core::Program;

    #[test]
    fn only_the_password_first_admits_a_connection() {
        let locked = Access { password: Some(Password::new(b"s3cret")), tls: None };
        let request = ClientFrame::Request { id: 1, program: Program::new(Vec::new()) };
        let auth = |p: &[u8]| ClientFrame::Auth { password: p.to_vec() };
        assert_eq!(admit(&auth(b"s3cret"), &locked), Ok(true));
        assert_eq!(admit(&auth(b"s3cret!"), &locked), Err(ServerFrame::Refused { reason: WRONGPASS.into() }));
        assert_eq!(admit(&request, &locked), Err(ServerFrame::Refused { reason: NOAUTH.into() }));
        let open = Access::default();
        assert_eq!(admit(&request, &open), Ok(false), "no password: the first request runs");
        assert_eq!(admit(&auth(b"anything"), &open), Ok(true), "as Redis's nopass user");
    }
}
