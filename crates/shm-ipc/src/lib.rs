//! Shared-memory IPC between two processes on one machine, in the model of CloudWeGo's
//! shmipc.
//!
//! A socket copies every byte twice (into the kernel and out of it) and costs a system
//! call per read and write on each side. Here the bytes go through memory both
//! processes map, and the Unix socket carries only the set-up, wake-ups, and the rare
//! message that does not fit: a large message is written once by the sender and read
//! in place by the receiver.
//!
//! An echo over shared memory, both sides in one process:
//!
//! ```
//! use bytes::Buf;
//! use shm_ipc::{Config, Listener, Session};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> std::io::Result<()> {
//! let path = std::env::temp_dir().join(format!("shm-ipc-doc-{}", std::process::id()));
//! let config = Config::default().region_size(1 << 20);
//! let listener = Listener::bind(&path, config.clone())?;
//!
//! // An echo server: every message of every stream goes back.
//! tokio::spawn(async move {
//!     let session = listener.accept().await?;
//!     while let Some(stream) = session.accept_stream().await? {
//!         tokio::spawn(async move {
//!             while let Ok(Some(msg)) = stream.recv().await {
//!                 if stream.send(msg).await.is_err() {
//!                     break;
//!                 }
//!             }
//!         });
//!     }
//!     std::io::Result::Ok(())
//! });
//!
//! let session = Session::connect(&path, config).await?;
//! let stream = session.open_stream()?;
//! stream.send(&b"hello over shared memory"[..]).await?;
//! let mut reply = stream.recv().await?.expect("an echo");
//! assert_eq!(reply.copy_to_bytes(reply.remaining()), &b"hello over shared memory"[..]);
//! session.close();
//! # Ok(())
//! # }
//! ```
//!
//! # How a session works
//!
//! - **Set-up.** [`Session::connect`] connects to a [`Listener`]'s socket. Each side
//!   creates its own region, an anonymous `memfd` (nothing in `/dev/shm`) sealed against
//!   shrinking and growing, and sends it with its version and layout in one hello
//!   (`SCM_RIGHTS`). Each checks the other's hello (version, layout bounds, that the fd is
//!   a sealed memfd large enough) before mapping it, so the peer can never truncate the
//!   mapping under us (`SIGBUS`).
//! - **Per-direction ownership.** A side allocates only from its own region and *lends*
//!   slices to the peer: a message is copied into slices of the sender's region and
//!   announced by descriptors in the sender's ring; the receiver hands out
//!   [`Bytes`](bytes::Bytes) over those slices (no copy) and, when they are dropped,
//!   puts the slice indices in the sender's release ring. So the allocator's free lists
//!   (lock-free Treiber stacks with an ABA tag, one per size class) are in the owner's
//!   private memory where the peer cannot corrupt them, and the two rings in shared
//!   memory are single-producer single-consumer.
//! - **Size classes.** By default 256 B, 4 KiB, 64 KiB and 1 MiB slices in a 64 MiB
//!   region ([`Config::size_classes`]). A message takes slices of the smallest class that
//!   holds its remainder (the largest while more remains), so it may span several
//!   slices, each with its descriptor.
//! - **Wake-ups only when needed.** Each side's reader task polls shared memory for a
//!   while ([`Config::spin`], 50 µs by default, at most) then raises a `parked` flag in
//!   its region and waits; a writer wakes it only if it sees that flag. While the peer
//!   is busy, sending costs no system call. The reader waits on the flag itself (a
//!   futex wait in an io_uring of its own, which tokio watches) and the writer wakes
//!   it with `FUTEX_WAKE` ([`Config::futex_wake`], on by default; Linux 6.7 and
//!   later); where io_uring is refused it waits on the socket and the writer sends a
//!   one-byte wake frame. Each side's hello says which way it waits. A `FUTEX_WAKE`
//!   never blocks and never touches the word, so a peer can make us wake for nothing
//!   but cannot stall a writer (an eventfd could: see the `futex` module). How long
//!   it polls depends on what it expects: the whole window while a reply is due
//!   ([`Session::reply_due`]; a reply that becomes due gets a parked reader up), and
//!   the whole window too unless the peer's traffic has lately been sparse (gaps of
//!   three windows and more on average): then it parks at once. Before it parks it
//!   yields at least once, and polls on while the runtime has other tasks to run.
//! - **Streams** ([`Stream`]) share the session, told apart by the id in each
//!   descriptor; both sides open them (odd ids from the connecting side, even from the
//!   accepting one). A stream gets its id with its first descriptor, so each side's ids
//!   reach the peer in increasing order and the peer needs to remember only the highest
//!   it saw to tell a new stream from one it already closed. A stream is opened
//!   implicitly by its first message; a `Close` descriptor (in ring order, after its
//!   data) ends one direction; closing or dropping a `Stream` ends ours and drops what
//!   the peer sends after. Each stream has a bounded inbox ([`Config::stream_inbox`]);
//!   a full inbox stops the session's reader (backpressure to the peer), and the peer
//!   may have at most [`Config::max_streams`] open (more are refused: closed at once).
//! - **Copies.** [`Stream::send`] copies a `Buf` into the slices once;
//!   [`Stream::send_with`] lets the caller write the message in place instead. The
//!   receiver's [`Message`] is `Bytes` over the sender's slices: no copy.
//! - **Exhaustion.** When this side's region is full a send falls back to the socket
//!   by default ([`Exhaustion::Fallback`]): a marker descriptor keeps the stream's order
//!   and the bytes follow on the socket. [`Exhaustion::Wait`] waits for slices instead,
//!   up to a deadline.
//! - **Failure.** A peer that dies is seen as a hang-up of the socket: the session ends
//!   with [`Error::PeerClosed`], pending and later calls fail with it, the slices it held
//!   are taken back. The memfd descriptors are closed as soon as they are mapped; the
//!   socket and the mappings go away when the session and every buffer received from it
//!   are dropped. No thread is started: a session is one tokio task.
//!
//! # Region layout
//!
//! Each side's region (offsets from the start; the layout is computed by both sides
//! from the creator's hello, never read from shared memory):
//!
//! ```text
//! 0      header: magic, version
//! 64     parked   u32   the owner is parked on the socket (peer clears it, sends a wake)
//! 128    waiting  u32   a send of the owner waits for slices or ring room
//! 192    descriptor ring tail (owner)      256  descriptor ring head (peer)
//! 320    release ring tail (peer)          384  release ring head (owner)
//! 448    descriptor ring: queue_capacity × 16 bytes (owner → peer)
//! ...    release ring: (slice count rounded up to a power of two) × 8 bytes
//! ...    slices, class after class, each class 64-byte aligned
//! ```
//!
//! The socket carries, after the hello, only one-byte wake frames, data frames of the
//! exhaustion fallback (`2`, length `u32`, bytes) and a one-byte goodbye.
//!
//! # An untrusted peer
//!
//! The peer can write anything into both regions at any time. So: every value read from
//! shared memory (ring indices, descriptor words, released slice indices) is read once,
//! into a local, and checked before use — indices against the capacity, slice indices
//! and lengths against the layout this side computed from the peer's hello (itself
//! bounded), stream ids against the ids that exist, released slices against what this
//! side lent (no double release). A failed check ends the session with
//! [`Error::Protocol`]; it never panics or reads outside a mapping. Control words are
//! only accessed atomically; no offset is ever taken from shared memory.
//!
//! What cannot be prevented: the peer can change the bytes of a slice it lent us while
//! we read them (it can write its own region). Such bytes are only ever data handed to
//! the user, exactly as untrusted as bytes read from a socket; nothing this crate
//! decides depends on them. Copy a message out first if you need it to stay put.
#![warn(
    missing_docs,
    missing_debug_implementations,
    rust_2018_idioms,
    unreachable_pub
)]
// Under `cfg(loom)` only the queue and the free lists are built, for the models.
#![cfg_attr(loom, allow(dead_code, unused_imports))]

mod desc;
mod error;
mod freelist;
mod layout;
mod park;
mod ring;
mod sync;

#[cfg(not(loom))]
mod config;
#[cfg(not(loom))]
mod conn;
#[cfg(not(loom))]
mod control;
#[cfg(not(loom))]
mod futex;
#[cfg(not(loom))]
mod handshake;
#[cfg(not(loom))]
mod message;
#[cfg(not(loom))]
mod reader;
#[cfg(not(loom))]
mod region;
#[cfg(not(loom))]
mod session;
#[cfg(not(loom))]
mod spin;
#[cfg(not(loom))]
mod stream;
#[cfg(not(loom))]
mod sys;
#[cfg(all(test, not(loom)))]
mod tests;

#[cfg(not(loom))]
pub use config::{Config, Exhaustion};
pub use error::{Error, Violation};
#[cfg(not(loom))]
pub use message::Message;
#[cfg(not(loom))]
pub use session::{Listener, ReplyDue, Session, Stats};
#[cfg(not(loom))]
pub use stream::Stream;
