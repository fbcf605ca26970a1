//! The system calls: sealed memfds, file descriptors over a Unix socket, and the
//! non-blocking one-byte send of a wake-up. Errors become `io::Error` in `syscall!`.

use std::io::{self, IoSlice};
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use nix::fcntl::{FcntlArg, SealFlag, fcntl};
use nix::libc;
use nix::sys::memfd::{MFdFlags, memfd_create};
use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};

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

/// Sends `bytes` with `fd` attached (`SCM_RIGHTS`) in one `sendmsg`; `WouldBlock` if the
/// socket cannot take all of it now (nothing is sent then: the message is small and the
/// socket fresh, so a short write is reported as an error).
pub(crate) fn send_with_fd(sock: RawFd, bytes: &[u8], fd: Option<RawFd>) -> io::Result<()> {
    let fds;
    let cmsgs: &[ControlMessage<'_>] = match fd {
        Some(fd) => {
            fds = [fd];
            &[ControlMessage::ScmRights(&fds)]
        }
        None => &[],
    };
    let n = sendmsg::<()>(
        sock,
        &[IoSlice::new(bytes)],
        cmsgs,
        MsgFlags::MSG_DONTWAIT | MsgFlags::MSG_NOSIGNAL,
        None,
    )?;
    if n != bytes.len() {
        return Err(io::Error::new(
            io::ErrorKind::WriteZero,
            "short write of a handshake message",
        ));
    }
    Ok(())
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
        send_with_fd(a.as_raw_fd(), b"hello", Some(fd.as_raw_fd())).unwrap();
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
