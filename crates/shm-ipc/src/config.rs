//! Session settings.

use std::time::Duration;

use crate::layout::{ClassSpec, Layout};

/// What a send does when this side's shared memory has no free slice for the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exhaustion {
    /// Send the message's bytes over the socket instead (one copy into the socket on
    /// each side). The descriptor ring still carries a marker for it, so the stream's
    /// order is kept. The default: a send never fails or stalls because the peer is slow
    /// to drop what it received, and two sides that each hold the other's memory cannot
    /// deadlock.
    Fallback,
    /// Wait up to this long for the peer to give slices back, then fail with
    /// [`Error::Exhausted`](crate::Error::Exhausted). Data never leaves shared memory.
    Wait(Duration),
}

/// Settings of a session; each side announces its own region's shape in the handshake.
///
/// Defaults: a 64 MiB region per side in four size classes (see
/// [`size_classes`](Self::size_classes)), a descriptor ring of 1024 entries, a 50 µs spin
/// before parking, [`Exhaustion::Fallback`], a 5 s handshake timeout, 1024 streams opened
/// by the peer at once, 64 messages per stream inbox, 64 MiB per message.
#[derive(Debug, Clone)]
pub struct Config {
    pub(crate) region_size: usize,
    pub(crate) classes: Vec<(u32, u32)>,
    pub(crate) queue_capacity: u32,
    pub(crate) spin: Duration,
    pub(crate) exhaustion: Exhaustion,
    pub(crate) handshake_timeout: Duration,
    pub(crate) max_streams: usize,
    pub(crate) stream_inbox: usize,
    pub(crate) max_message_len: u32,
    pub(crate) futex_wake: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            region_size: 64 << 20,
            classes: vec![(256, 4), (4 << 10, 12), (64 << 10, 32), (1 << 20, 52)],
            queue_capacity: 1024,
            spin: Duration::from_micros(50),
            exhaustion: Exhaustion::Fallback,
            handshake_timeout: Duration::from_secs(5),
            max_streams: 1024,
            stream_inbox: 64,
            max_message_len: 64 << 20,
            futex_wake: true,
        }
    }
}

impl Config {
    /// Bytes of slices in this side's region (default 64 MiB); the rings and header come
    /// on top. Pages are only backed by memory once touched.
    pub fn region_size(mut self, bytes: usize) -> Self {
        self.region_size = bytes;
        self
    }

    /// Size classes as `(slice size, share)`: each class gets `share` parts of the
    /// region's bytes (the shares are relative weights), cut into slices of that size.
    /// Sizes must be multiples of 64 and grow strictly. Default: 256 B (4 %), 4 KiB
    /// (12 %), 64 KiB (32 %), 1 MiB (52 %). A message takes slices of the smallest class
    /// that holds its remainder, or of the largest class while more than that remains.
    pub fn size_classes(mut self, classes: impl IntoIterator<Item = (u32, u32)>) -> Self {
        self.classes = classes.into_iter().collect();
        self
    }

    /// Descriptor ring entries (a power of two, 2 to 65536; default 1024). Every slice of
    /// a message takes one entry until the peer's reader takes it.
    pub fn queue_capacity(mut self, entries: u32) -> Self {
        self.queue_capacity = entries;
        self
    }

    /// How long, at most, the session's reader polls shared memory before it parks on
    /// the socket (default 50 µs; zero parks at once). A message that arrives while it
    /// polls costs no wake-up on either side (a wake through the socket is a system
    /// call for the writer and a scheduler round trip for the reader); the price is a
    /// core kept busy (yielding to other tasks) meanwhile. The reader polls the whole
    /// window while a reply is due ([`Session::reply_due`](crate::Session::reply_due))
    /// and whenever the peer's traffic has not lately been sparse (gaps of three
    /// windows and more on average: then it parks at once). Raise it to the
    /// peer's typical reply time for request and response traffic
    /// (`benches/benches/ipc_pingpong.rs` uses 200 µs).
    pub fn spin(mut self, spin: Duration) -> Self {
        self.spin = spin;
        self
    }

    /// What a send does when shared memory is full (default [`Exhaustion::Fallback`]).
    pub fn exhaustion(mut self, policy: Exhaustion) -> Self {
        self.exhaustion = policy;
        self
    }

    /// Whether this side's reader, when it parks, waits on its `parked` word in shared
    /// memory (a futex, through an io_uring of its own: Linux 6.7 and later) rather
    /// than on the socket (default: true). The hello tells the peer, whose writers
    /// then wake it with `FUTEX_WAKE` instead of a byte on the socket: 1.6 µs of system
    /// calls a wake-up against 2.7 here. Where io_uring is refused (an older kernel, a
    /// seccomp profile), the reader waits on the socket as with `false`.
    pub fn futex_wake(mut self, on: bool) -> Self {
        self.futex_wake = on;
        self
    }

    /// Bound on connecting and on the handshake of an accepted connection (default 5 s).
    pub fn handshake_timeout(mut self, timeout: Duration) -> Self {
        self.handshake_timeout = timeout;
        self
    }

    /// How many streams may be open at once on each side (default 1024): this side's
    /// [`open_stream`](crate::Session::open_stream) fails past it, and a stream the peer
    /// opens past it is refused (closed at once, its data dropped).
    pub fn max_streams(mut self, n: usize) -> Self {
        self.max_streams = n.max(1);
        self
    }

    /// Messages a stream's inbox holds before the session stops taking more from the
    /// peer (default 64). A full inbox is backpressure: the session's reader waits for
    /// that stream's receiver, so the peer's queue and memory fill and its sends fall back
    /// or wait. Other streams of the session wait too (head-of-line blocking), so read
    /// every stream you open or accept, or close it. While it waits, the reader still
    /// reads up to 256 KiB ahead from the socket, but frames (a hang-up's cause among
    /// them) are looked at only once that stream's receiver takes a message.
    pub fn stream_inbox(mut self, n: usize) -> Self {
        self.stream_inbox = n.max(1);
        self
    }

    /// Longest message sent or accepted (default 64 MiB, at most 4 GiB - 1).
    pub fn max_message_len(mut self, bytes: u32) -> Self {
        self.max_message_len = bytes;
        self
    }

    /// The class specs of this side's region.
    pub(crate) fn class_specs(&self) -> Vec<ClassSpec> {
        let total: u64 = self.classes.iter().map(|&(_, w)| u64::from(w)).sum();
        self.classes
            .iter()
            .map(|&(size, share)| {
                let bytes = (self.region_size as u64 * u64::from(share))
                    .checked_div(total)
                    .unwrap_or(0);
                let count = if size == 0 {
                    0
                } else {
                    bytes / u64::from(size)
                };
                ClassSpec {
                    size,
                    count: count.clamp(1, u64::from(u32::MAX)) as u32,
                }
            })
            .collect()
    }

    pub(crate) fn layout(&self) -> std::io::Result<Layout> {
        Layout::new(self.queue_capacity, &self.class_specs()).map_err(|v| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("shm-ipc config: {v}"),
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_layout_is_about_64_mib() {
        let l = Config::default().layout().unwrap();
        assert!(l.data_bytes <= 64 << 20 && l.data_bytes > 60 << 20);
        assert_eq!(l.classes.len(), 4);
        assert_eq!(l.classes[3].count, 33);
    }

    #[test]
    fn bad_settings_are_invalid_input() {
        let e = Config::default().queue_capacity(3).layout().unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput);
        assert!(Config::default().size_classes([]).layout().is_err());
        assert!(Config::default().size_classes([(100, 1)]).layout().is_err());
    }
}
