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

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use tokio::io::Interest;
use tokio::net::UnixStream;

use crate::error::{Error, Violation};
use crate::layout::{ClassSpec, Layout, MAGIC, MAX_CLASSES, VERSION};
use crate::sys;

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

pub(crate) async fn send(sock: &UnixStream, hello: &Hello, fd: Option<&OwnedFd>) -> io::Result<()> {
    let bytes = hello.encode();
    let raw = fd.map(|f| f.as_raw_fd());
    sock.async_io(Interest::WRITABLE, || {
        sys::send_with_fd(sock.as_raw_fd(), &bytes, raw)
    })
    .await
}

/// Reads one hello and the descriptors that came with it (all of them, owned).
pub(crate) async fn recv(sock: &UnixStream) -> Result<(Hello, Vec<OwnedFd>), Error> {
    let mut buf = [0u8; HELLO_LEN];
    let mut got = 0;
    let mut fds = Vec::new();
    while got < HELLO_LEN {
        let (n, more) = sock
            .async_io(Interest::READABLE, || {
                sys::recv_with_fds(sock.as_raw_fd(), &mut buf[got..])
            })
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
