//! The system calls: sealed memfds and their mappings, file descriptors over a Unix
//! socket, and the non-blocking one-byte send of a wake-up. Apart from binding,
//! accepting and connecting the socket (tokio's, in `session`), nothing else in the
//! crate calls the system: the handshake and the session reach the control socket
//! through [`Control`], and their regions through [`sealed_memfd`],
//! [`check_peer_memfd`] and [`Mapping`]. The calls made through libc here go through
//! `syscall!`, where `-1` becomes `errno` as an `io::Error`; the others go through nix,
//! memmap2 and tokio, which return `io::Error` (or nix's `Errno`, converted by `?`).

use std::fmt;
use std::io::{self, IoSlice};
use std::mem;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::task::{Context, Poll};

use bytes::BytesMut;
use memmap2::{MmapOptions, MmapRaw};
use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::libc;
use nix::sys::memfd::{MFdFlags, memfd_create};
use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
use tokio::io::Interest;
use tokio::net::UnixStream;

#[cfg(test)]
use std::sync::atomic::AtomicU64;

#[cfg(test)]
pub(crate) mod fake;

/// The control socket as a session uses it: readiness, and calls that never block.
///
/// The handshake, the session's reader and its writers reach the socket only through
/// this trait, so tests drive them with a scripted fake. Outside tests it is tokio's
/// [`UnixStream`].
///
/// Contract for implementers:
/// - `poll_read_ready` and `poll_write_ready` return `Ready(Ok(()))` when a call in
///   that direction may make progress; otherwise `Pending`, and the task is woken
///   when it may.
/// - A `try_` call that cannot make progress now returns `WouldBlock`; the next
///   readiness poll in its direction then returns `Pending` until it can, so a caller
///   that waits for readiness after `WouldBlock` does not spin.
/// - `Ok(0)` from a read is end of stream. Any other error is returned as it is.
/// - One task may read while another writes.
pub(crate) trait Control: fmt::Debug + Send + Sync {
    /// Waits until a read may make progress.
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// Waits until a write may make progress.
    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>>;

    /// Reads into `buf`'s spare capacity (`BufMut::chunk_mut`); how many bytes came.
    fn try_read(&self, buf: &mut BytesMut) -> io::Result<usize>;

    /// Writes from `bufs`, in order; how many bytes went.
    fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize>;

    /// Sends `bytes` in one message with `fd` attached (`SCM_RIGHTS`); how many bytes
    /// went (the descriptor goes with the first of them).
    fn try_send_with_fd(&self, bytes: &[u8], fd: Option<BorrowedFd<'_>>) -> io::Result<usize>;

    /// Receives into `buf`, with every descriptor that came along, owned.
    fn try_recv_with_fds(&self, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)>;

    /// Sends one byte without blocking: whether it went (not if the socket is full, shut
    /// or the peer is gone).
    fn send_byte(&self, byte: u8) -> bool;

    /// Shuts both directions, so the peer sees end of stream now.
    fn shutdown(&self);
}

impl Control for UnixStream {
    fn poll_read_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        UnixStream::poll_read_ready(self, cx)
    }

    fn poll_write_ready(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        UnixStream::poll_write_ready(self, cx)
    }

    fn try_read(&self, buf: &mut BytesMut) -> io::Result<usize> {
        self.try_read_buf(buf)
    }

    fn try_write(&self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
        self.try_write_vectored(bufs)
    }

    fn try_send_with_fd(&self, bytes: &[u8], fd: Option<BorrowedFd<'_>>) -> io::Result<usize> {
        // `try_io` clears tokio's readiness on `WouldBlock`, as the contract wants.
        self.try_io(Interest::WRITABLE, || {
            send_with_fd(self.as_raw_fd(), bytes, fd.map(|f| f.as_raw_fd()))
        })
    }

    fn try_recv_with_fds(&self, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
        self.try_io(Interest::READABLE, || recv_with_fds(self.as_raw_fd(), buf))
    }

    fn send_byte(&self, byte: u8) -> bool {
        send_byte(self, byte)
    }

    fn shutdown(&self) {
        shutdown(self);
    }
}

/// Calls a libc function, mapping `-1` to the thread's `errno` as an `io::Error`.
macro_rules! syscall {
    ($fn:ident ( $($arg:expr),* $(,)? )) => {{
        #[allow(unused_unsafe)]
        // SAFETY: the caller checks the arguments of `$fn` at the call site.
        let res = unsafe { libc::$fn($($arg),*) };
        if res == -1 {
            Err(io::Error::last_os_error())
        } else {
            Ok(res)
        }
    }};
}

/// An anonymous memory file of `len` bytes, sealed against shrinking and growing, so
/// the peer can neither truncate it under our mapping (a `SIGBUS`) nor change its size.
pub(crate) fn sealed_memfd(len: usize) -> io::Result<OwnedFd> {
    let fd = memfd_create(
        c"shm-ipc",
        MFdFlags::MFD_CLOEXEC | MFdFlags::MFD_ALLOW_SEALING,
    )?;
    let len =
        libc::off_t::try_from(len).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    nix::unistd::ftruncate(&fd, len)?;
    fcntl(
        &fd,
        FcntlArg::F_ADD_SEALS(
            SealFlag::F_SEAL_SHRINK | SealFlag::F_SEAL_GROW | SealFlag::F_SEAL_SEAL,
        ),
    )?;
    Ok(fd)
}

/// Checks that `fd` (from the peer) is a memfd sealed against shrinking, at least
/// `len` bytes long: then mapping `len` bytes of it can never fault.
pub(crate) fn check_peer_memfd(fd: &OwnedFd, len: usize) -> Result<(), &'static str> {
    let seals = fcntl(fd, FcntlArg::F_GET_SEALS).map_err(|_| "not a memfd")?;
    let seals = SealFlag::from_bits_truncate(seals);
    if !seals.contains(SealFlag::F_SEAL_SHRINK) {
        return Err("not sealed against shrinking");
    }
    let st = nix::sys::stat::fstat(fd).map_err(|_| "fstat failed")?;
    if st.st_mode & libc::S_IFMT != libc::S_IFREG {
        return Err("not a regular file");
    }
    if u64::try_from(st.st_size).map_or(true, |size| size < len as u64) {
        return Err("smaller than its layout");
    }
    Ok(())
}

/// Sends `bytes` with `fd` attached (`SCM_RIGHTS`) in one non-blocking `sendmsg`; how
/// many bytes went.
pub(crate) fn send_with_fd(sock: RawFd, bytes: &[u8], fd: Option<RawFd>) -> io::Result<usize> {
    let fds;
    let cmsgs: &[ControlMessage<'_>] = match fd {
        Some(fd) => {
            fds = [fd];
            &[ControlMessage::ScmRights(&fds)]
        }
        None => &[],
    };
    Ok(sendmsg::<()>(
        sock,
        &[IoSlice::new(bytes)],
        cmsgs,
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        None,
    )?)
}

/// One `recvmsg` into `buf`; every descriptor that came with it is returned owned (so
/// none leaks, however many the peer sent). `Ok((0, _))` is end of stream.
pub(crate) fn recv_with_fds(sock: RawFd, buf: &mut [u8]) -> io::Result<(usize, Vec<OwnedFd>)> {
    // Room for 8 descriptors; the kernel closes any beyond that (MSG_CTRUNC).
    const SPACE: usize = 8 * mem::size_of::<RawFd>();
    let mut cbuf = [0u64; (SPACE + 64) / 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: an all-zero msghdr is a valid "no name, no iov, no control" header.
    let mut msg: libc::msghdr = unsafe { mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf.as_mut_ptr().cast();
    msg.msg_controllen = mem::size_of_val(&cbuf) as _;
    // SAFETY: `msg` points at `iov` (describing `buf`, writable for its length) and at
    // `cbuf` (writable for `msg_controllen` bytes, u64-aligned as cmsghdr needs); all
    // outlive the call and the kernel keeps no pointer.
    let n = syscall!(recvmsg(
        sock,
        &mut msg,
        libc::MSG_CMSG_CLOEXEC | libc::MSG_DONTWAIT
    ))?;
    let mut fds = Vec::new();
    // SAFETY: `msg` was filled by the kernel: CMSG_FIRSTHDR/NXTHDR walk the control
    // buffer within `msg_controllen`, and each SCM_RIGHTS payload holds
    // `(cmsg_len - CMSG_LEN(0)) / 4` descriptors that are now ours to own.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c).cast::<RawFd>();
                let bytes = (*c).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..bytes / mem::size_of::<RawFd>() {
                    fds.push(OwnedFd::from_raw_fd(data.add(i).read_unaligned()));
                }
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n as usize, fds))
}

/// Sends one byte without blocking; `false` if the socket is full (the peer then has
/// unread bytes and is awake or about to be) or the peer is gone.
pub(crate) fn send_byte(sock: &impl AsRawFd, byte: u8) -> bool {
    let b = [byte];
    // SAFETY: `b` is readable for 1 byte for the duration of the call; the fd is kept
    // open by the borrowed owner.
    let r = syscall!(send(
        sock.as_raw_fd(),
        b.as_ptr().cast(),
        1,
        libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL
    ));
    matches!(r, Ok(1))
}

/// Shuts both directions of the socket, so the peer sees end of stream now, even while
/// something here still holds the descriptor.
pub(crate) fn shutdown(sock: &impl AsRawFd) {
    // An error means the socket is already shut or the peer is gone: nothing to do.
    // SAFETY: plain integer arguments; the fd is kept open by the borrowed owner.
    let _ = syscall!(shutdown(sock.as_raw_fd(), libc::SHUT_RDWR));
}

/// A shared, writable mapping of a whole memfd (in tests, possibly plain memory):
/// readable and writable from [`as_ptr`](Self::as_ptr) for the length it was made
/// with, 8-aligned at least, as long as the value lives.
#[derive(Debug)]
pub(crate) struct Mapping(Backing);

#[derive(Debug)]
enum Backing {
    /// Page-aligned.
    Shared(MmapRaw),
    /// Memory of this process standing in for a memfd, so tests of the session's logic
    /// need no memfd and Miri runs them.
    #[cfg(test)]
    Memory(Box<[AtomicU64]>),
}

impl Mapping {
    /// Maps the first `len` bytes of `fd`, shared. The caller makes sure the file is at
    /// least that long and cannot shrink, or touching the mapping may fault.
    pub(crate) fn shared(fd: BorrowedFd<'_>, len: usize) -> io::Result<Mapping> {
        let map = MmapOptions::new().len(len).map_raw(fd.as_raw_fd())?;
        Ok(Mapping(Backing::Shared(map)))
    }

    /// `len` zeroed bytes of this process's memory (rounded up to whole words).
    #[cfg(test)]
    pub(crate) fn memory(len: usize) -> Mapping {
        let words = (0..len.div_ceil(8)).map(|_| AtomicU64::new(0)).collect();
        Mapping(Backing::Memory(words))
    }

    /// The first byte.
    pub(crate) fn as_ptr(&self) -> *mut u8 {
        match &self.0 {
            Backing::Shared(map) => map.as_mut_ptr(),
            // Every byte is inside an `AtomicU64`, so inside an `UnsafeCell`: writable
            // through a pointer that came from a shared reference.
            #[cfg(test)]
            Backing::Memory(words) => words.as_ptr().cast::<u8>().cast_mut(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixStream;

    #[test]
    fn memfd_is_sealed_and_passes_over_a_socket() {
        let fd = sealed_memfd(8192).unwrap();
        assert_eq!(check_peer_memfd(&fd, 8192), Ok(()));
        assert_eq!(check_peer_memfd(&fd, 8193), Err("smaller than its layout"));
        assert!(nix::unistd::ftruncate(&fd, 4096).is_err(), "sealed");
        let (a, b) = UnixStream::pair().unwrap();
        assert_eq!(
            send_with_fd(a.as_raw_fd(), b"hello", Some(fd.as_raw_fd())).unwrap(),
            5
        );
        let mut buf = [0u8; 16];
        let (n, fds) = recv_with_fds(b.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        assert_eq!(fds.len(), 1);
        assert_eq!(check_peer_memfd(&fds[0], 8192), Ok(()));
        assert!(send_byte(&a, 7));
        let (n, fds) = recv_with_fds(b.as_raw_fd(), &mut buf).unwrap();
        assert_eq!((n, buf[0], fds.len()), (1, 7, 0));
        shutdown(&a);
        let (n, _) = recv_with_fds(b.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(n, 0);
        assert!(!send_byte(&a, 1));
    }

    #[test]
    fn unsealed_or_odd_fds_are_refused() {
        let plain = memfd_create(c"plain", MFdFlags::MFD_CLOEXEC).unwrap();
        nix::unistd::ftruncate(&plain, 4096).unwrap();
        assert!(check_peer_memfd(&plain, 4096).is_err());
        let (a, _b) = UnixStream::pair().unwrap();
        assert_eq!(check_peer_memfd(&OwnedFd::from(a), 0), Err("not a memfd"));
    }
}
