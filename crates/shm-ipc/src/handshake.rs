//! The version handshake: each side sends one fixed-size hello with its region's memfd
//! attached (`SCM_RIGHTS`); each checks the other's before mapping anything.
//!
//! ```text
//! 0  magic "SHMI"   4 version   8 flags (bit 0: accepted)   12 descriptor ring entries
//! 16 class count    20 zero     24 8 × (slice size u32, slice count u32)   88 region bytes u64
//! ```
//!
//! The client speaks first. The server answers in every case, with its own version, so
//! a client of another version learns why; it attaches its memfd and sets "accepted"
//! only when the client's hello was good.

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

/// What one side announces.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hello {
    pub(crate) version: u32,
    pub(crate) accepted: bool,
    pub(crate) desc_cap: u32,
    pub(crate) classes: Vec<ClassSpec>,
    pub(crate) region_len: u64,
}

impl Hello {
    pub(crate) fn new(layout: &Layout, accepted: bool) -> Hello {
        Hello {
            version: VERSION,
            accepted,
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
        put(8, if self.accepted { ACCEPTED } else { 0 });
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
        if flags & !ACCEPTED != 0 || get(20) != 0 {
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
/// creates this side's region for `layout`, exchanges hellos, and maps the peer's
/// region once its hello and its descriptor passed every check. This side's and the
/// peer's regions, in that order.
pub(crate) async fn run(
    sock: &dyn Control,
    layout: Layout,
    client: bool,
) -> Result<(Region, Region), Error> {
    let (mine, fd) = Region::create(layout)?;
    let mut hello = Hello::new(mine.layout(), true);
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
    let peer = Region::map_peer(&peer_fd, peer_layout)?;
    Ok((mine, peer))
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
    }
}
