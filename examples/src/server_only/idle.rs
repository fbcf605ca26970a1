//! Idle connections: what a server spends on connections that stay open with nothing
//! on them, in memory per connection and in CPU time while they idle.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use bytes::Bytes;
use thrift_wire::{Binary, Codec, LinkBuffer, MessageHeader, MessageType, Utf8Bytes};
use volo_core::codec::ttheader::{Header, HeaderLimits};
use volo_core::codec::{Framing, Protocol, write_message};

use super::process::{ServerKind, ServerProcess};
use super::sys::{on_cpus, raise_nofile};
use crate::echo::{EchoServiceEchoArgs, EchoServiceEchoResult, Request};

/// How long a connect, a write or a read of one idle connection's call may take.
const IO_LIMIT: Duration = Duration::from_secs(5);

/// What [`idle`] runs.
#[derive(Debug, Clone)]
pub struct IdleSettings {
    /// The program to run as server child (see [`super::Settings::exe`]).
    pub exe: PathBuf,
    /// The servers, one after the other, each in a fresh child.
    pub servers: Vec<ServerKind>,
    /// Connections to open to each.
    pub conns: usize,
    /// Message bytes of the one call made on each connection.
    pub size: usize,
    /// The idle window over which the server's CPU time is measured.
    pub window: Duration,
    /// Pause after the connections are open, before memory is read (the server
    /// finishes what the last calls started).
    pub settle: Duration,
    /// The server child's CPUs.
    pub server_cpus: Vec<usize>,
    /// This process's CPUs while it opens connections.
    pub client_cpus: Vec<usize>,
}

/// For each server: a fresh child; one call on a connection that is then closed (so
/// what the first call sets up once is not counted per connection); its memory; then
/// `conns` connections, each opened and used for one `echo` (TTHeader over Framed,
/// Binary, as Volo's client sends it) so that the server has really taken it on, and
/// left open; its memory again; its CPU time over `window` with nothing sent. Returns
/// a line per server (and the open-files limits first):
///
/// `idle server=.. spin=.. conns=<asked> opened=<n> closed_by_server=<n>
/// rss_before_kb=<n> rss_after_kb=<n> rss_per_conn_bytes=<n> idle_secs=<s>
/// idle_cpu_ms_per_s=<ms>`, where `rss_per_conn_bytes` is (VmRSS after − VmRSS before)
/// / `opened`, user-space memory only (socket buffers are the kernel's), and
/// `closed_by_server` counts the connections found closed at the end. Opening stops at
/// the first connection that fails (a server's connection limit, say): an
/// `idle_stopped` line says where and why.
pub fn idle(s: &IdleSettings) -> io::Result<Vec<String>> {
    on_cpus(&s.client_cpus, || idle_pinned(s))
}

fn idle_pinned(s: &IdleSettings) -> io::Result<Vec<String>> {
    let nofile = raise_nofile()?;
    let mut lines = vec![format!("nofile process=bench {}", nofile.fields())];
    let request = echo_frame(s.size)?;
    let msg = "x".repeat(s.size);
    for &server in &s.servers {
        let mut child = ServerProcess::spawn(&s.exe, server, &s.server_cpus)?;
        lines.push(format!(
            "nofile process=server {} {}",
            server.fields(),
            child.nofile()
        ));
        let addr = child.addr();
        drop(call_on_new_connection(addr, &request, &msg)?);
        std::thread::sleep(s.settle);
        let before = child.usage()?;
        let mut conns = Vec::with_capacity(s.conns);
        for i in 0..s.conns {
            match call_on_new_connection(addr, &request, &msg) {
                Ok(conn) => conns.push(conn),
                Err(e) => {
                    lines.push(format!(
                        "idle_stopped {} at={} error={:?}",
                        server.fields(),
                        i + 1,
                        e.to_string()
                    ));
                    break;
                }
            }
        }
        std::thread::sleep(s.settle);
        let after = child.usage()?;
        let started = Instant::now();
        std::thread::sleep(s.window);
        let end = child.usage()?;
        let idle = started.elapsed();
        let closed = conns.iter().filter(|c| closed_by_peer(c)).count();
        let opened = conns.len();
        drop(conns);
        child.stop()?;
        let grown = (after.rss_kb as i64 - before.rss_kb as i64) * 1024;
        let cpu_ms = end.cpu_us().saturating_sub(after.cpu_us()) as f64 / 1000.0;
        lines.push(format!(
            "idle {} conns={} opened={opened} closed_by_server={closed} rss_before_kb={} \
             rss_after_kb={} rss_per_conn_bytes={:.0} idle_secs={:.1} idle_cpu_ms_per_s={:.3}",
            server.fields(),
            s.conns,
            before.rss_kb,
            after.rss_kb,
            grown as f64 / opened.max(1) as f64,
            idle.as_secs_f64(),
            cpu_ms / idle.as_secs_f64(),
        ));
    }
    Ok(lines)
}

/// A new connection to `addr`, on which `request` was sent and its answer, an echo
/// of `msg`, read and checked.
fn call_on_new_connection(addr: SocketAddr, request: &[u8], msg: &str) -> io::Result<TcpStream> {
    let mut conn = TcpStream::connect_timeout(&addr, IO_LIMIT)?;
    conn.set_nodelay(true)?;
    conn.set_read_timeout(Some(IO_LIMIT))?;
    conn.set_write_timeout(Some(IO_LIMIT))?;
    conn.write_all(request)?;
    let mut length = [0u8; 4];
    conn.read_exact(&mut length)?;
    let n = u32::from_be_bytes(length) as usize;
    if n > 1 << 24 {
        return Err(bad(format!("a reply of {n} bytes")));
    }
    let mut frame = vec![0u8; 4 + n];
    frame[..4].copy_from_slice(&length);
    conn.read_exact(&mut frame[4..])?;
    check_reply(Bytes::from(frame), msg)?;
    Ok(conn)
}

/// One `echo` call of `size` bytes as Volo's client frames it: TTHeader over Framed,
/// Binary.
pub(super) fn echo_frame(size: usize) -> io::Result<Bytes> {
    let mut ttheader = Header::new(1, Protocol::Binary);
    ttheader.inner_framed = true;
    let header = MessageHeader {
        name: Utf8Bytes::from_static("echo"),
        ty: MessageType::Call,
        seq_id: 1,
    };
    let args = EchoServiceEchoArgs {
        req: Request {
            action: Utf8Bytes::from_static("echo"),
            msg: Utf8Bytes::from("x".repeat(size)),
        },
    };
    let mut out = LinkBuffer::new();
    write_message::<Binary, _>(
        &mut out,
        Framing::TTHeader,
        Some(&ttheader),
        &header,
        &args,
        usize::MAX,
    )
    .map_err(|e| bad(e.to_string()))?
    .map_err(|len| bad(format!("a request of {len} bytes")))?;
    let len = out.len();
    Ok(out.next(len))
}

/// Checks that `frame` (a whole TTHeader frame) answers `echo` with `msg`.
pub(super) fn check_reply(frame: Bytes, msg: &str) -> io::Result<()> {
    // The message, past the header and the Framed length inside it if there is one.
    let (_, message) =
        Header::decode(&frame, &HeaderLimits::default()).map_err(|e| bad(e.to_string()))?;
    let (header, result): (MessageHeader, EchoServiceEchoResult) = Codec::<Binary>::new()
        .decode_message(message)
        .map_err(|e| bad(e.to_string()))?;
    match result.success {
        Some(r) if header.ty == MessageType::Reply && r.msg.as_str() == msg => Ok(()),
        _ => Err(bad(format!("not an echo of the request: {header:?}"))),
    }
}

/// Whether the server has closed `conn` (a read would see its end, or an error).
fn closed_by_peer(conn: &TcpStream) -> bool {
    if conn.set_nonblocking(true).is_err() {
        return true;
    }
    let mut byte = [0u8; 1];
    match conn.peek(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => e.kind() != io::ErrorKind::WouldBlock,
    }
}

fn bad(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The request frame is what a server would cut and decode: TTHeader, a Framed
    /// length, then the call.
    #[test]
    fn the_request_frame_is_ttheader_over_framed() {
        let frame = echo_frame(16).unwrap();
        assert_eq!(&frame[4..6], &[0x10, 0x00], "TTHeader magic");
        let length = u32::from_be_bytes(frame[..4].try_into().unwrap()) as usize;
        assert_eq!(length + 4, frame.len());
        let (ttheader, message) = Header::decode(&frame, &HeaderLimits::default()).unwrap();
        assert!(ttheader.inner_framed, "a Framed length inside the header");
        let inner = frame.len() - message.len() - 4;
        let length = u32::from_be_bytes(frame[inner..inner + 4].try_into().unwrap()) as usize;
        assert_eq!(length, message.len());
        let (header, args): (MessageHeader, EchoServiceEchoArgs) =
            Codec::<Binary>::new().decode_message(message).unwrap();
        assert_eq!(
            (header.name.as_str(), header.ty),
            ("echo", MessageType::Call)
        );
        assert_eq!(args.req.msg.as_str(), "x".repeat(16));
    }
}
