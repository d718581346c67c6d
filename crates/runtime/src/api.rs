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

use crate::frame::{self, ClientFrame, ServerFrame};
use crate::node::Request;
use std::sync::Arc;
use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, mpsc, oneshot};

/// Requests one connection may have in flight.
pub const MAX_IN_FLIGHT: usize = 4096;

pub async fn serve_clients(listener: TcpListener, requests: mpsc::Sender<Request>) {
    loop {
        let Ok((stream, peer)) = listener.accept().await else { continue };
        let _ = stream.set_nodelay(true);
        let requests = requests.clone();
        tokio::spawn(async move {
            if let Err(e) = connection(stream, requests).await {
                tracing::debug!(%peer, error = %e, "client connection closed");
            }
        });
    }
}

async fn connection(stream: TcpStream, requests: mpsc::Sender<Request>) -> std::io::Result<()> {
    let (r, w) = stream.into_split();
    let (answers_tx, answers_rx) = mpsc::unbounded_channel::<ServerFrame>();
    let writer = tokio::spawn(write_answers(BufWriter::new(w), answers_rx));
    let permits = Arc::new(Semaphore::new(MAX_IN_FLIGHT));
    let mut r = BufReader::new(r);
    let mut buf = Vec::new();
    let result = loop {
        let frame = match frame::read_value::<_, ClientFrame>(&mut r, &mut buf).await {
            Ok(Some(f)) => f,
            Ok(None) => break Ok(()),
            Err(e) => break Err(e),
        };
        let ClientFrame::Request { id, program } = frame;
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
    mut w: BufWriter<tokio::net::tcp::OwnedWriteHalf>,
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
