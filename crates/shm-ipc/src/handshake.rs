//! The version handshake: each side sends one fixed-size hello with its region's memfd
//! attached (`SCM_RIGHTS`); each checks the other's before mapping anything.
//!
//! ```text
//! 0  magic "SHMI"   4 version   8 flags (bit 0: accepted, bit 1: futex)   12 ring entries
//! 16 class count    20 zero     24 8 × (slice size u32, slice count u32)   88 region bytes u64
//! ```
//!
//! The client speaks first. The server answers in every case, with its own version, so
//! a client of another version learns why; it attaches its memfd and sets "accepted"
//! only when the client's hello was good. The futex flag says that the sender's reader
//! parks on its `parked` word (wake it with `FUTEX_WAKE`, see [`crate::futex`]), not
//! on the socket (wake it with a byte).

use std::future::poll_fn;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::task::{Context, Poll};

use crate::error::{Error, Violation};
use crate::layout::{ClassSpec, Layout, MAGIC, MAX_CLASSES, VERSION};
use crate::region::Region;
use crate::sys::Control;

pub(crate) const HELLO_LEN: usize = 96;
const ACCEPTED: u32 = 1;
const FUTEX: u32 = 2;

/// What one side announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hello {
    pub(crate) version: u32,
    pub(crate) accepted: bool,
    /// The sender's reader parks on its `parked` word: wake it with `FUTEX_WAKE`.
    pub(crate) futex: bool,
    pub(crate) desc_cap: u32,
    pub(crate) classes: Vec<ClassSpec>,
    pub(crate) region_len: u64,
}

impl Hello {
    pub(crate) fn new(layout: &Layout, accepted: bool) -> Hello {
        Hello {
            version: VERSION,
            accepted,
            futex: false,
            desc_cap: layout.desc_cap,
            classes: layout
                .classes
                .iter()
                .map(|c| ClassSpec {
                    size: c.size,
                    count: c.count,
                })
                .collect(),
            region_len: layout.total as u64,
        }
    }

    pub(crate) fn encode(&self) -> [u8; HELLO_LEN] {
        let mut b = [0u8; HELLO_LEN];
        let mut put = |at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        put(0, MAGIC);
        put(4, self.version);
        put(
            8,
            if self.accepted { ACCEPTED } else { 0 } | if self.futex { FUTEX } else { 0 },
        );
        put(12, self.desc_cap);
        put(16, self.classes.len() as u32);
        for (i, c) in self.classes.iter().take(MAX_CLASSES).enumerate() {
            put(24 + i * 8, c.size);
            put(28 + i * 8, c.count);
        }
        b[88..96].copy_from_slice(&self.region_len.to_le_bytes());
        b
    }

    /// Parses a hello; the version is reported before anything else is looked at.
    pub(crate) fn decode(b: &[u8; HELLO_LEN]) -> Result<Hello, Violation> {
        let get = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        if get(0) != MAGIC {
            return Err(Violation::Handshake("no magic"));
        }
        let version = get(4);
        let flags = get(8);
        let n = get(16) as usize;
        if flags & !(ACCEPTED | FUTEX) != 0 || get(20) != 0 {
            return Err(Violation::Handshake("unknown flags"));
        }
        if n > MAX_CLASSES {
            return Err(Violation::Handshake("too many classes"));
        }
        let mut len = [0u8; 8];
        len.copy_from_slice(&b[88..96]);
        Ok(Hello {
            version,
            accepted: flags & ACCEPTED != 0,
            futex: flags & FUTEX != 0,
            desc_cap: get(12),
            classes: (0..n)
                .map(|i| ClassSpec {
                    size: get(24 + i * 8),
                    count: get(28 + i * 8),
                })
                .collect(),
            region_len: u64::from_le_bytes(len),
        })
    }

    /// The layout of the sender's region, checked.
    pub(crate) fn layout(&self) -> Result<Layout, Violation> {
        if self.version != VERSION {
            return Err(Violation::Version(self.version));
        }
        let layout = Layout::new(self.desc_cap, &self.classes)?;
        if layout.total as u64 != self.region_len {
            return Err(Violation::Handshake(
                "region length does not match the layout",
            ));
        }
        Ok(layout)
    }
}

/// Runs the handshake on `sock`, as the client (which speaks first) or the server:
/// creates this side's region for `layout`, exchanges hellos (ours says whether our
/// reader parks on a `futex`), and maps the peer's region once its hello and its
/// descriptor passed every check. This side's and the peer's regions, in that order,
/// and whether the peer's reader parks on a futex.
pub(crate) async fn run(
    sock: &dyn Control,
    layout: Layout,
    client: bool,
    futex: bool,
) -> Result<(Region, Region, bool), Error> {
    let (mine, fd) = Region::create(layout)?;
    let mut hello = Hello::new(mine.layout(), true);
    hello.futex = futex;
    let (peer, fds) = if client {
        send(sock, &hello, Some(fd.as_fd())).await?;
        let (peer, fds) = recv(sock).await?;
        if peer.version != hello.version {
            return Err(Violation::Version(peer.version).into());
        }
        if !peer.accepted {
            return Err(Violation::Handshake("the server refused our hello").into());
        }
        (peer, fds)
    } else {
        let (peer, fds) = recv(sock).await?;
        if let Err(v) = peer.layout() {
            hello.accepted = false;
            send(sock, &hello, None).await?;
            return Err(v.into());
        }
        send(sock, &hello, Some(fd.as_fd())).await?;
        (peer, fds)
    };
    drop(fd);
    let peer_layout = peer.layout()?;
    let [peer_fd] =
        <[_; 1]>::try_from(fds).map_err(|_| Violation::Handshake("no region descriptor"))?;
    let peer_futex = peer.futex;
    let peer = Region::map_peer(&peer_fd, peer_layout)?;
    Ok((mine, peer, peer_futex))
}

/// Sends one hello, with `fd` attached if given, in one message.
pub(crate) async fn send(
    sock: &dyn Control,
    hello: &Hello,
    fd: Option<BorrowedFd<'_>>,
) -> io::Result<()> {
    let bytes = hello.encode();
    let sent = when_ready(
        |cx| sock.poll_write_ready(cx),
        || sock.try_send_with_fd(&bytes, fd),
    )
    .await?;
    if sent != bytes.len() {
        // The message is small and the socket fresh; the rest would arrive without the
        // descriptor, so this is not resumed.
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "short write of a handshake message",
        ));
    }
    Ok(())
}

/// Reads one hello and the descriptors that came with it (all of them, owned).
pub(crate) async fn recv(sock: &dyn Control) -> Result<(Hello, Vec<OwnedFd>), Error> {
    let mut buf = [0u8; HELLO_LEN];
    let mut got = 0;
    let mut fds = Vec::new();
    while got < HELLO_LEN {
        let (n, more) = when_ready(
            |cx| sock.poll_read_ready(cx),
            || sock.try_recv_with_fds(&mut buf[got..]),
        )
        .await?;
        fds.extend(more);
        if fds.len() > 1 {
            return Err(Violation::Handshake("more than one descriptor").into());
        }
        if n == 0 {
            return Err(Violation::Handshake("connection closed during the handshake").into());
        }
        got += n;
    }
    Ok((Hello::decode(&buf)?, fds))
}

/// Waits for `ready` and calls `f` until it does not return `WouldBlock`.
async fn when_ready<T>(
    ready: impl Fn(&mut Context<'_>) -> Poll<io::Result<()>>,
    mut f: impl FnMut() -> io::Result<T>,
) -> io::Result<T> {
    loop {
        poll_fn(&ready).await?;
        match f() {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            r => return r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sync::Ordering;
    use crate::sys::fake::{Script, Step, block_on};
    use std::io::ErrorKind::{ConnectionReset, PermissionDenied, WouldBlock};

    #[test]
    fn hello_round_trip_and_checks() {
        let layout = crate::Config::default().layout().unwrap();
        let h = Hello::new(&layout, true);
        let d = Hello::decode(&h.encode()).unwrap();
        assert_eq!(d, h);
        assert_eq!(d.layout().unwrap(), layout);

        let mut bad = h.encode();
        bad[0] = b'X';
        assert!(Hello::decode(&bad).is_err());
        let mut v2 = h.clone();
        v2.version = 2;
        assert_eq!(
            Hello::decode(&v2.encode()).unwrap().layout(),
            Err(Violation::Version(2))
        );
        let mut lie = h.clone();
        lie.region_len += 1;
        assert!(lie.layout().is_err());
        let mut flags = h.encode();
        flags[8] = 0x80;
        assert!(Hello::decode(&flags).is_err());
        let mut many = h.encode();
        many[16] = 9;
        assert!(Hello::decode(&many).is_err());
        // The futex flag travels beside "accepted".
        let mut futex = h.clone();
        futex.futex = true;
        assert_eq!(futex.encode()[8], 3);
        assert_eq!(Hello::decode(&futex.encode()).unwrap(), futex);
    }

    fn layout(queue: u32) -> Layout {
        crate::Config::default()
            .region_size(64 << 10)
            .size_classes([(256, 1), (4096, 1)])
            .queue_capacity(queue)
            .layout()
            .unwrap()
    }

    fn hello(layout: &Layout, accepted: bool) -> [u8; HELLO_LEN] {
        Hello::new(layout, accepted).encode()
    }

    /// What a handshake sent, decoded.
    fn sent(s: &Script) -> Hello {
        let bytes: [u8; HELLO_LEN] = s.written().try_into().expect("one whole hello");
        Hello::decode(&bytes).unwrap()
    }

    fn violation(r: Result<impl std::fmt::Debug, Error>) -> Violation {
        match r {
            Err(Error::Protocol(v)) => v,
            other => panic!("not a violation: {other:?}"),
        }
    }

    /// Descriptors that are not sockets, for scripts that pass some.
    fn some_fd() -> OwnedFd {
        std::fs::File::open("/dev/null").unwrap().into()
    }

    #[test]
    fn a_hello_is_read_across_short_reads() {
        let h = hello(&layout(16), true);
        let s = Script::new([
            Step::NotReady,
            Step::Read(h[..10].to_vec()),
            Step::Fail(WouldBlock),
            Step::Read(h[10..60].to_vec()),
            Step::Read(h[60..].to_vec()),
        ]);
        let (got, fds) = block_on(recv(&s)).unwrap();
        assert_eq!(got, Hello::decode(&h).unwrap());
        assert!(fds.is_empty());
        assert_eq!(s.left(), 0);
    }

    #[test]
    fn a_hang_up_or_an_error_mid_hello_ends_the_handshake() {
        let h = hello(&layout(16), true);
        let s = Script::new([Step::Read(h[..40].to_vec()), Step::Eof]);
        assert_eq!(
            violation(block_on(recv(&s))),
            Violation::Handshake("connection closed during the handshake")
        );
        for kind in [ConnectionReset, PermissionDenied] {
            let s = Script::new([Step::Read(h[..40].to_vec()), Step::Fail(kind)]);
            match block_on(recv(&s)) {
                Err(Error::Io(e)) => assert_eq!(e.kind(), kind),
                other => panic!("{other:?}"),
            }
        }
    }

    #[test]
    #[cfg_attr(miri, ignore = "opens /dev/null")]
    fn at_most_one_descriptor_comes_with_a_hello() {
        let h = hello(&layout(16), true);
        let s = Script::new([
            Step::ReadFds(h[..10].to_vec(), vec![some_fd()]),
            Step::Read(h[10..].to_vec()),
        ]);
        assert_eq!(block_on(recv(&s)).unwrap().1.len(), 1);
        let s = Script::new([
            Step::ReadFds(h[..10].to_vec(), vec![some_fd()]),
            Step::ReadFds(h[10..].to_vec(), vec![some_fd()]),
        ]);
        assert_eq!(
            violation(block_on(recv(&s))),
            Violation::Handshake("more than one descriptor")
        );
    }

    #[test]
    fn a_hello_goes_whole_in_one_message_or_fails() {
        let h = Hello::new(&layout(16), true);
        let s = Script::new([Step::Fail(WouldBlock), Step::NotReady, Step::Write(500)]);
        block_on(send(&s, &h, None)).unwrap();
        assert_eq!(sent(&s), h);
        assert_eq!(s.fds_sent(), 0);

        let s = Script::new([Step::Write(HELLO_LEN - 1)]);
        let e = block_on(send(&s, &h, None)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WriteZero);
        let s = Script::new([Step::Fail(PermissionDenied)]);
        let e = block_on(send(&s, &h, None)).unwrap_err();
        assert_eq!(e.kind(), PermissionDenied);
    }

    #[test]
    #[cfg_attr(miri, ignore = "creates memfds")]
    fn the_client_speaks_first_and_maps_the_servers_region() {
        let (server, server_fd) = Region::create(layout(32)).unwrap();
        let h = hello(server.layout(), true);
        // A read before the client's hello went would meet the write step: a panic.
        let s = Script::new([
            Step::Write(HELLO_LEN),
            Step::NotReady,
            Step::ReadFds(h[..30].to_vec(), vec![server_fd]),
            Step::Fail(WouldBlock),
            Step::Read(h[30..].to_vec()),
        ]);
        let (mine, peer, peer_futex) = block_on(run(&s, layout(16), true, true)).unwrap();
        let mut ours = Hello::new(mine.layout(), true);
        ours.futex = true;
        assert_eq!(sent(&s), ours, "our hello says our reader parks on a futex");
        assert!(!peer_futex, "the server's did not");
        assert_eq!(s.fds_sent(), 1);
        assert_eq!(peer.layout(), server.layout());
        server.parked().store(7, Ordering::Relaxed);
        assert_eq!(peer.parked().load(Ordering::Relaxed), 7, "the same memory");
    }

    #[test]
    #[cfg_attr(miri, ignore = "creates memfds")]
    fn the_server_refuses_a_bad_hello_without_its_descriptor() {
        let mut lie = Hello::new(&layout(16), true);
        lie.region_len += 64;
        let s = Script::new([Step::Read(lie.encode().to_vec()), Step::Write(HELLO_LEN)]);
        assert_eq!(
            violation(block_on(run(&s, layout(16), false, false))),
            Violation::Handshake("region length does not match the layout")
        );
        assert!(!sent(&s).accepted);
        assert_eq!(s.fds_sent(), 0);
    }

    #[test]
    #[cfg_attr(miri, ignore = "creates memfds")]
    fn the_client_stops_at_a_refusal_another_version_or_no_descriptor() {
        let l = layout(16);
        let mut other = Hello::new(&l, true);
        other.version = 9;
        let cases = [
            (
                hello(&l, false),
                Violation::Handshake("the server refused our hello"),
            ),
            (other.encode(), Violation::Version(9)),
            (
                hello(&l, true),
                Violation::Handshake("no region descriptor"),
            ),
        ];
        for (answer, want) in cases {
            let s = Script::new([Step::Write(HELLO_LEN), Step::Read(answer.to_vec())]);
            assert_eq!(violation(block_on(run(&s, l.clone(), true, false))), want);
        }
    }
}
