//! Every system call volo-core makes itself, each with what makes it sound. The rest
//! of the crate reaches the kernel through std, tokio and netpoll-rs.

use std::os::fd::{AsRawFd, BorrowedFd};

use nix::libc;

/// A clock `clock_gettime` and `clock_getres` know.
pub(crate) use libc::CLOCK_MONOTONIC_COARSE;

/// The kernel's `clockid_t`.
pub(crate) type ClockId = libc::clockid_t;

/// `clock_gettime(clock)`: seconds and nanoseconds, `None` when the kernel refuses.
///
/// `libc` directly rather than `nix::time::clock_gettime`: the coarse clock is read
/// on every call (by the timeout, the breakers, the transport), and the wrapper's own
/// work around the call made each read markedly dearer.
#[inline]
pub(crate) fn clock_gettime(clock: ClockId) -> Option<(u64, u32)> {
    clock_query(libc::clock_gettime, clock)
}

/// `clock_getres(clock)`: the clock's tick, as seconds and nanoseconds.
pub(crate) fn clock_getres(clock: ClockId) -> Option<(u64, u32)> {
    clock_query(libc::clock_getres, clock)
}

/// `query` (`clock_gettime` or `clock_getres`) of `clock`.
#[inline]
fn clock_query(
    query: unsafe extern "C" fn(libc::clockid_t, *mut libc::timespec) -> libc::c_int,
    clock: ClockId,
) -> Option<(u64, u32)> {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable `timespec` that outlives the call, and both
    // functions write nothing else; a clock id the kernel does not know is an error
    // return, not undefined behaviour.
    let rc = unsafe { query(clock, &mut ts) };
    if rc != 0 {
        return None;
    }
    Some((
        u64::try_from(ts.tv_sec).ok()?,
        u32::try_from(ts.tv_nsec).ok()?,
    ))
}

/// Shuts a socket down both ways: the peer reads the end after what the kernel took,
/// and a send waiting for room fails. Fails only on a socket already gone
/// (`ENOTCONN`), which is as good, so the error is dropped.
pub(crate) fn shutdown_both(fd: BorrowedFd<'_>) {
    let _ = nix::sys::socket::shutdown(fd.as_raw_fd(), nix::sys::socket::Shutdown::Both);
}
