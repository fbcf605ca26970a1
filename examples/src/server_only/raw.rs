//! The raw load generator (`--loadgen raw`): the least a caller can spend per call, so
//! that one core of load generation can offer a server most of what it can take.
//!
//! Each call takes an idle connection (or opens one: at most one per caller), writes
//! one `echo` request encoded once beforehand (TTHeader over Framed, Binary, as Volo's
//! and our clients frame it), reads one whole frame back and checks that it answers
//! `echo` with the message sent. No client stack, no pool policy, no per-call
//! encoding: what is left is the two system calls of a call and the check.

use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::idle::{check_reply, echo_frame};

/// Largest reply taken, bytes.
const MAX_REPLY: usize = 1 << 24;

/// The raw callers' shared state: the request, the message it must come back with,
/// and the idle connections.
#[derive(Debug, Clone)]
pub(crate) struct RawCaller {
    addr: SocketAddr,
    request: Bytes,
    msg: Arc<str>,
    idle: Arc<Mutex<Vec<Conn>>>,
}

#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    input: BytesMut,
}

impl RawCaller {
    /// Callers of `echo` with `size`-byte messages to `addr`.
    pub(crate) fn new(addr: SocketAddr, size: usize) -> io::Result<RawCaller> {
        Ok(RawCaller {
            addr,
            request: echo_frame(size)?,
            msg: "x".repeat(size).into(),
            idle: Arc::default(),
        })
    }

    /// One call; whether it was answered with the echo. A connection that failed is
    /// dropped, the next call opens another.
    pub(crate) async fn call(&self) -> bool {
        let conn = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        let mut conn = match conn {
            Some(conn) => conn,
            None => match TcpStream::connect(self.addr).await {
                Ok(stream) => {
                    let _ = stream.set_nodelay(true);
                    Conn {
                        stream,
                        input: BytesMut::with_capacity(self.request.len() + 256),
                    }
                }
                Err(_) => return false,
            },
        };
        let answered = self.exchange(&mut conn).await;
        match answered.map(|reply| check_reply(reply, &self.msg)) {
            Ok(Ok(())) => {
                self.idle
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(conn);
                true
            }
            _ => false,
        }
    }

    /// Writes the request and reads one whole frame.
    async fn exchange(&self, conn: &mut Conn) -> io::Result<Bytes> {
        conn.stream.write_all(&self.request).await?;
        loop {
            if conn.input.len() >= 4 {
                let len = 4 + u32::from_be_bytes([
                    conn.input[0],
                    conn.input[1],
                    conn.input[2],
                    conn.input[3],
                ]) as usize;
                if len > MAX_REPLY {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("a reply of {len} bytes"),
                    ));
                }
                if conn.input.len() >= len {
                    return Ok(conn.input.split_to(len).freeze());
                }
                conn.input.reserve(len - conn.input.len());
            }
            if conn.stream.read_buf(&mut conn.input).await? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a server that echoes the request's frame back as it came: that is no
    /// reply, so the call fails; and a peer that closes fails it too.
    #[test]
    fn a_raw_call_checks_the_reply() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move {
                let (mut s, _) = listener.accept().await.unwrap();
                let mut buf = vec![0u8; 4096];
                let n = s.read(&mut buf).await.unwrap();
                s.write_all(&buf[..n]).await.unwrap();
            });
            let caller = RawCaller::new(addr, 16).unwrap();
            assert!(!caller.call().await, "a request is not a reply");
            assert!(!caller.call().await, "nobody listens any more");
        });
    }
}
