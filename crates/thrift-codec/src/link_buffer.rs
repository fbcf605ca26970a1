//! `LinkBuffer`: a chain of `Bytes` nodes that every layer passes around.

use std::collections::VecDeque;
use std::io::IoSlice;

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// A byte queue made of linked [`Bytes`] nodes plus one writable tail.
///
/// This is the buffer of Kitex's Netpoll, on Rust's reference-counted bytes:
///
/// - **Writer side.** Small writes go into the tail (`BytesMut`), one contiguous
///   allocation reserved up front with [`reserve`](LinkBuffer::reserve). A large
///   string or binary is [`insert`](LinkBuffer::insert)ed as a node of its own: the tail's
///   written part is frozen into a node (no copy; the tail keeps its spare capacity)
///   and the caller's `Bytes` follows it, so a 1 MiB payload is never copied on encode.
/// - **Reader side.** [`next`](LinkBuffer::next) hands out `Bytes` that are slices of
///   the nodes: zero-copy inside one node, one copy only when a read spans nodes.
///   [`peek`](LinkBuffer::peek) looks without consuming, [`skip`](LinkBuffer::skip) drops.
///   Netpoll's explicit `Release` is not needed: a node's memory is freed when the last
///   `Bytes` that points into it is dropped.
/// - **Flush.** `LinkBuffer` implements [`Buf`], so a transport calls
///   [`chunks_vectored`](Buf::chunks_vectored) to fill a bounded `iovec` array for one
///   `writev`, then [`advance`](Buf::advance) by what the kernel took: a partial write
///   keeps its place and no byte is sent twice.
///
/// ```
/// use bytes::{Buf, Bytes};
/// use thrift_wire::LinkBuffer;
///
/// let mut buf = LinkBuffer::new();
/// buf.write(b"head");
/// buf.insert(Bytes::from(vec![7u8; 8192])); // a node of its own, not copied
/// buf.write(b"tail");
/// assert_eq!(buf.len(), 4 + 8192 + 4);
/// assert_eq!(&buf.next(4)[..], b"head");
/// assert_eq!(buf.next(8192).len(), 8192);
/// assert_eq!(buf.peek(4), Some(&b"tail"[..]));
/// ```
#[derive(Debug, Default)]
pub struct LinkBuffer {
    /// Readable nodes in order, all non-empty; the tail's filled part follows them.
    nodes: VecDeque<Bytes>,
    /// Written-but-not-frozen bytes (its `len`) and spare capacity.
    tail: BytesMut,
    /// Bytes readable in `nodes` (not counting `tail`).
    nodes_len: usize,
}

impl LinkBuffer {
    /// An empty buffer. Allocates nothing until written to.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty buffer whose tail can take `capacity` bytes without reallocating.
    pub fn with_capacity(capacity: usize) -> Self {
        LinkBuffer {
            nodes: VecDeque::new(),
            tail: BytesMut::with_capacity(capacity),
            nodes_len: 0,
        }
    }

    /// Readable bytes in the whole chain.
    #[inline]
    pub fn len(&self) -> usize {
        self.nodes_len + self.tail.len()
    }

    /// Whether nothing is readable.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// How many nodes hold readable bytes (the tail counts when it has any).
    pub fn node_count(&self) -> usize {
        self.nodes.len() + usize::from(!self.tail.is_empty())
    }

    /// Drops all readable bytes; keeps the tail's allocation when nothing else
    /// shares it, so a buffer reused for encoding allocates nothing in steady state.
    pub fn clear(&mut self) {
        self.nodes.clear();
        self.nodes_len = 0;
        self.tail.clear();
    }

    // ---------------------------------------------------------------- writer side

    /// Makes room for `additional` more bytes in the tail, in one allocation.
    #[inline]
    pub fn reserve(&mut self, additional: usize) {
        self.tail.reserve(additional);
    }

    /// The writable tail, for `BufMut` writes. Bytes put here are readable at once.
    #[inline]
    pub fn tail_mut(&mut self) -> &mut BytesMut {
        &mut self.tail
    }

    /// Appends a copy of `src` to the tail.
    #[inline]
    pub fn write(&mut self, src: &[u8]) {
        self.tail.extend_from_slice(src);
    }

    /// Appends `n` zeroed bytes as one contiguous region and returns it to be filled in
    /// place (Netpoll's `Malloc`).
    pub fn malloc(&mut self, n: usize) -> &mut [u8] {
        let start = self.tail.len();
        self.tail.resize(start + n, 0);
        &mut self.tail[start..]
    }

    /// Appends `bytes` as a node of its own, without copying them. Bytes written to the
    /// tail before stay before it; bytes written after go after it.
    pub fn insert(&mut self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        self.freeze_tail();
        self.nodes_len += bytes.len();
        self.nodes.push_back(bytes);
    }

    /// Moves the tail's written bytes into a node of their own (no copy); the tail keeps
    /// its spare capacity for later writes. A reader that fills the tail from a socket
    /// calls this before it swaps in a new block: what was written stays where it is,
    /// and only a frame that straddles the two blocks is copied, when it is taken.
    pub fn freeze_tail(&mut self) {
        if !self.tail.is_empty() {
            let node = self.tail.split().freeze();
            self.nodes_len += node.len();
            self.nodes.push_back(node);
        }
    }

    // ---------------------------------------------------------------- reader side

    /// The first `n` readable bytes as one slice, without consuming them; `None` when
    /// fewer than `n` are readable. When they span nodes, those nodes are merged into
    /// one first (a copy of `n` bytes, once).
    pub fn peek(&mut self, n: usize) -> Option<&[u8]> {
        if n > self.len() {
            return None;
        }
        if self.nodes.is_empty() {
            return Some(&self.tail[..n]);
        }
        if self.nodes[0].len() < n {
            let merged = self.take_copied(n);
            self.nodes_len += merged.len();
            self.nodes.push_front(merged);
        }
        Some(&self.nodes[0][..n])
    }

    /// Removes and returns the first `n` readable bytes: a slice of a node when they lie
    /// in one (no copy), else one copy. Returns fewer when fewer are readable.
    pub fn next(&mut self, n: usize) -> Bytes {
        let n = n.min(self.len());
        match self.nodes.front_mut() {
            None => self.tail.split_to(n).freeze(),
            Some(front) if front.len() >= n => {
                let out = front.split_to(n);
                if front.is_empty() {
                    self.nodes.pop_front();
                }
                self.nodes_len -= n;
                out
            }
            Some(_) => self.take_copied(n),
        }
    }

    /// Discards the first `n` readable bytes (fewer if fewer are readable).
    pub fn skip(&mut self, n: usize) {
        self.advance(n.min(self.len()));
    }

    /// Removes and returns the first node whole (the tail's written bytes, frozen, when
    /// no other node is left), without copying: a transport that hands the kernel
    /// buffers it must keep alive until the kernel is done (io_uring) takes them out
    /// this way. `None` when nothing is readable.
    pub fn pop_node(&mut self) -> Option<Bytes> {
        if self.nodes.is_empty() {
            self.freeze_tail();
        }
        let node = self.nodes.pop_front()?;
        self.nodes_len -= node.len();
        Some(node)
    }

    /// Puts `bytes` back in front of everything readable (what a transport took with
    /// [`pop_node`](Self::pop_node) and the kernel did not send).
    pub fn push_front(&mut self, bytes: Bytes) {
        if bytes.is_empty() {
            return;
        }
        self.nodes_len += bytes.len();
        self.nodes.push_front(bytes);
    }

    /// Copies the first `n` bytes (`n <= len`) out of however many nodes hold them.
    fn take_copied(&mut self, n: usize) -> Bytes {
        let mut out = BytesMut::with_capacity(n);
        while out.len() < n {
            let want = n - out.len();
            let chunk = self.chunk();
            let take = want.min(chunk.len());
            out.extend_from_slice(&chunk[..take]);
            self.advance(take);
        }
        out.freeze()
    }
}

impl Buf for LinkBuffer {
    #[inline]
    fn remaining(&self) -> usize {
        self.len()
    }

    #[inline]
    fn chunk(&self) -> &[u8] {
        match self.nodes.front() {
            Some(front) => front,
            None => &self.tail,
        }
    }

    fn advance(&mut self, mut cnt: usize) {
        assert!(cnt <= self.len(), "advance past the end of a LinkBuffer");
        while cnt > 0 {
            match self.nodes.front_mut() {
                Some(front) => {
                    let take = cnt.min(front.len());
                    front.advance(take);
                    self.nodes_len -= take;
                    cnt -= take;
                    if front.is_empty() {
                        self.nodes.pop_front();
                    }
                }
                None => {
                    self.tail.advance(cnt);
                    cnt = 0;
                }
            }
        }
    }

    fn chunks_vectored<'a>(&'a self, dst: &mut [IoSlice<'a>]) -> usize {
        let mut n = 0;
        for node in self
            .nodes
            .iter()
            .map(|b| &b[..])
            .chain(std::iter::once(&self.tail[..]))
        {
            if n == dst.len() {
                break;
            }
            if !node.is_empty() {
                dst[n] = IoSlice::new(node);
                n += 1;
            }
        }
        n
    }

    fn copy_to_bytes(&mut self, len: usize) -> Bytes {
        assert!(
            len <= self.len(),
            "copy_to_bytes past the end of a LinkBuffer"
        );
        self.next(len)
    }
}

// `BufMut` writes land in the tail, so encoders and framing can use `put_*` directly.
// SAFETY: every method forwards to the tail `BytesMut`, whose own `BufMut` impl upholds
// the trait's contract (`chunk_mut` is the spare capacity; `advance_mut` only after it
// was initialised by the caller, as the trait requires of callers).
unsafe impl BufMut for LinkBuffer {
    #[inline]
    fn remaining_mut(&self) -> usize {
        self.tail.remaining_mut()
    }

    #[inline]
    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller guarantees that `cnt` bytes of `chunk_mut()` (the tail's
        // spare capacity) were initialised, which is the tail's own precondition.
        unsafe { self.tail.advance_mut(cnt) }
    }

    #[inline]
    fn chunk_mut(&mut self) -> &mut bytes::buf::UninitSlice {
        self.tail.chunk_mut()
    }

    #[inline]
    fn put_slice(&mut self, src: &[u8]) {
        self.tail.extend_from_slice(src);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_pop_whole_and_go_back_in_front() {
        let mut buf = LinkBuffer::new();
        buf.write(b"ab");
        buf.insert(Bytes::from_static(b"cdef"));
        buf.write(b"gh");
        assert_eq!(&buf.pop_node().unwrap()[..], b"ab");
        let cdef = buf.pop_node().unwrap();
        assert_eq!(&cdef[..], b"cdef");
        assert_eq!(buf.len(), 2);
        buf.push_front(cdef.slice(2..));
        assert_eq!(buf.len(), 4);
        buf.write(b"ij");
        assert_eq!(&buf.next(6)[..], b"efghij");
        assert!(buf.pop_node().is_none());
        buf.push_front(Bytes::new());
        assert!(buf.is_empty());
    }

    fn filled(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn insert_keeps_order_and_does_not_copy() {
        let big = Bytes::from(filled(10_000, 3));
        let big_ptr = big.as_ptr();
        let mut buf = LinkBuffer::with_capacity(64);
        buf.write(b"abc");
        buf.insert(big.clone());
        buf.write(b"xyz");
        assert_eq!(buf.node_count(), 3);
        assert_eq!(&buf.next(3)[..], b"abc");
        let got = buf.next(10_000);
        assert_eq!(
            got.as_ptr(),
            big_ptr,
            "inserted node must be handed out as is"
        );
        assert_eq!(got, big);
        assert_eq!(&buf.next(3)[..], b"xyz");
        assert!(buf.is_empty());
    }

    #[test]
    fn next_across_nodes_copies_once_and_keeps_the_rest() {
        let mut buf = LinkBuffer::new();
        buf.insert(Bytes::from_static(b"hello "));
        buf.insert(Bytes::from_static(b"wor"));
        buf.write(b"ld!");
        assert_eq!(&buf.next(8)[..], b"hello wo");
        assert_eq!(buf.len(), 4);
        assert_eq!(&buf.next(100)[..], b"rld!");
        assert!(buf.is_empty());
    }

    #[test]
    fn peek_merges_only_when_needed() {
        let mut buf = LinkBuffer::new();
        buf.insert(Bytes::from_static(b"ab"));
        buf.insert(Bytes::from_static(b"cd"));
        assert_eq!(buf.peek(1), Some(&b"a"[..]));
        assert_eq!(buf.node_count(), 2);
        assert_eq!(buf.peek(3), Some(&b"abc"[..]));
        assert_eq!(buf.len(), 4);
        assert_eq!(buf.peek(5), None);
        assert_eq!(&buf.next(4)[..], b"abcd");
    }

    #[test]
    fn partial_writev_resumes_where_it_stopped() {
        let mut buf = LinkBuffer::new();
        buf.write(b"0123");
        buf.insert(Bytes::from_static(b"4567"));
        buf.write(b"89");
        {
            let mut slices = [IoSlice::new(&[]); 8];
            assert_eq!(buf.chunks_vectored(&mut slices), 3);
        }
        // A kernel that took 6 bytes: the next flush starts at byte 6, exactly once.
        buf.advance(6);
        let mut slices = [IoSlice::new(&[]); 8];
        let mut rest = Vec::new();
        let n = buf.chunks_vectored(&mut slices);
        for s in &slices[..n] {
            rest.extend_from_slice(s);
        }
        assert_eq!(rest, b"6789");
    }

    #[test]
    fn bounded_iovec_count() {
        let mut buf = LinkBuffer::new();
        for i in 0..10u8 {
            buf.insert(Bytes::from(vec![i; 3]));
        }
        let mut slices = [IoSlice::new(&[]); 4];
        assert_eq!(buf.chunks_vectored(&mut slices), 4);
        assert_eq!(&*slices[3], &[3, 3, 3]);
    }

    #[test]
    fn skip_and_malloc() {
        let mut buf = LinkBuffer::new();
        buf.malloc(4).copy_from_slice(b"wxyz");
        buf.insert(Bytes::from_static(b"12"));
        buf.skip(5);
        assert_eq!(&buf.next(10)[..], b"2");
        buf.skip(3);
        assert!(buf.is_empty());
    }

    #[test]
    fn buf_mut_writes_land_in_the_tail_after_inserted_nodes() {
        let mut buf = LinkBuffer::new();
        buf.insert(Bytes::from_static(b"ab"));
        // `put_bytes` goes through `chunk_mut` and `advance_mut`.
        buf.put_bytes(b'z', 300);
        buf.put_u16(0x0102);
        assert_eq!(buf.len(), 2 + 300 + 2);
        assert_eq!(&buf.next(2)[..], b"ab");
        let rest = buf.next(302);
        assert!(rest[..300].iter().all(|&b| b == b'z'));
        assert_eq!(&rest[300..], &[1, 2]);
    }

    #[test]
    fn clear_keeps_the_tail_allocation() {
        let mut buf = LinkBuffer::with_capacity(1024);
        buf.write(&filled(512, 1));
        let cap = buf.tail_mut().capacity();
        buf.clear();
        assert_eq!(buf.tail_mut().capacity(), cap);
        assert!(buf.is_empty());
    }
}
