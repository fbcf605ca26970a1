//! A mapped region: this side's own (created here, lent to the peer) or the peer's
//! (received over the socket, checked, then mapped).
//!
//! The mapping is `MAP_SHARED` and the peer writes into it concurrently, so nothing
//! here ever forms a `&mut` to it or reads a plain value from it twice: the control
//! words are only touched through atomics, ring entries are copied out into locals once
//! (see [`ring`](crate::ring)), and every offset comes from the [`Layout`] this side
//! computed and checked, never from shared memory.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::slice;

use crate::error::Violation;
use crate::layout::{self, DESC_WORDS, Layout};
use crate::ring::RingRef;
use crate::sync::{AtomicU32, AtomicU64, Ordering};
use crate::sys::{self, Mapping};

/// One mapped region and its layout.
#[derive(Debug)]
pub(crate) struct Region {
    map: Mapping,
    layout: Layout,
}

impl Region {
    /// Creates this side's region in a new sealed memfd; returns the fd to send.
    pub(crate) fn create(layout: Layout) -> io::Result<(Region, OwnedFd)> {
        let fd = sys::sealed_memfd(layout.total)?;
        let map = Mapping::shared(fd.as_fd(), layout.total)?;
        Ok((Region::own(map, layout), fd))
    }

    /// This side's region in memory of this process, as if created and mapped (tests
    /// of the session's logic: no memfd, so Miri runs them).
    #[cfg(test)]
    pub(crate) fn in_memory(layout: Layout) -> Region {
        Region::own(Mapping::memory(layout.total), layout)
    }

    /// A new region of this side over `map`: writes its header.
    fn own(map: Mapping, layout: Layout) -> Region {
        let region = Region { map, layout };
        region.u32_at(0).store(layout::MAGIC, Ordering::Relaxed);
        region.u32_at(4).store(layout::VERSION, Ordering::Relaxed);
        region
    }

    /// Maps the peer's region after checking that `fd` is a memfd sealed against
    /// shrinking and large enough for `layout` (so no access within it can fault).
    pub(crate) fn map_peer(fd: &OwnedFd, layout: Layout) -> Result<Region, crate::Error> {
        sys::check_peer_memfd(fd, layout.total).map_err(Violation::Region)?;
        let map = Mapping::shared(fd.as_fd(), layout.total)?;
        let region = Region { map, layout };
        if region.u32_at(0).load(Ordering::Relaxed) != layout::MAGIC {
            return Err(Violation::Region("no magic in the region header").into());
        }
        Ok(region)
    }

    pub(crate) fn layout(&self) -> &Layout {
        &self.layout
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= layout::OFF_DESC_RING);
        // SAFETY: `off` is a fixed header offset, 4-aligned and inside the mapping (the
        // layout always starts with the header and is `total` >= OFF_DESC_RING bytes
        // long, all mapped); the mapping is 8-aligned at least (page-aligned when it is
        // a memfd's) and lives as long as `self`.
        // `AtomicU32` has the size and alignment of `u32`, and the word is only ever
        // accessed atomically, by both processes.
        unsafe { &*self.map.as_ptr().add(off).cast::<AtomicU32>() }
    }

    fn words(&self, off: usize, n: usize) -> &[AtomicU64] {
        assert!(off.is_multiple_of(8) && off + n * 8 <= self.layout.total);
        // SAFETY: the range is inside the mapping (asserted against the layout, whose
        // `total` bytes are all mapped), 8-aligned (so is the start of the mapping), and
        // only accessed atomically while `self` keeps the mapping alive.
        unsafe { slice::from_raw_parts(self.map.as_ptr().add(off).cast::<AtomicU64>(), n) }
    }

    /// Set by the owner before it blocks on the socket; cleared by whoever wakes it.
    pub(crate) fn parked(&self) -> &AtomicU32 {
        self.u32_at(layout::OFF_PARKED)
    }

    /// Set by the owner while a send waits for slices or ring room.
    pub(crate) fn waiting(&self) -> &AtomicU32 {
        self.u32_at(layout::OFF_WAITING)
    }

    /// Descriptors from the owner to the peer.
    pub(crate) fn desc_ring(&self) -> RingRef<'_, DESC_WORDS> {
        RingRef::new(
            "descriptor",
            self.u32_at(layout::OFF_DESC_HEAD),
            self.u32_at(layout::OFF_DESC_TAIL),
            self.words(
                layout::OFF_DESC_RING,
                self.layout.desc_cap as usize * DESC_WORDS,
            ),
        )
    }

    /// The owner's slice indices, given back by the peer.
    pub(crate) fn release_ring(&self) -> RingRef<'_, 1> {
        RingRef::new(
            "release",
            self.u32_at(layout::OFF_REL_HEAD),
            self.u32_at(layout::OFF_REL_TAIL),
            self.words(self.layout.rel_off, self.layout.rel_cap as usize),
        )
    }

    /// The first `len` bytes of slice `index`, for reading; `None` if out of bounds.
    ///
    /// The peer can write these bytes while we read them (it can in any shared
    /// mapping); they are data handed to the user, never metadata we act on.
    pub(crate) fn slice(&self, index: u32, len: usize) -> Option<&[u8]> {
        let (off, cap) = self.layout.slice(index)?;
        if len > cap as usize {
            return None;
        }
        // SAFETY: `off + len <= off + cap <= total`, checked by the layout; the bytes
        // are mapped while `self` lives. Another process may write them concurrently,
        // which is the nature of shared memory and documented at the crate root.
        Some(unsafe { slice::from_raw_parts(self.map.as_ptr().add(off), len) })
    }

    /// Lends the first `len` bytes of slice `index` of this side's own region to `f`
    /// for writing. The caller must hold the slice: allocated to it, not lent yet.
    pub(crate) fn with_slice_mut<R>(
        &self,
        index: u32,
        len: usize,
        f: impl FnOnce(&mut [u8]) -> R,
    ) -> R {
        let (off, cap) = self.layout.slice(index).expect("own slice index");
        assert!(len <= cap as usize, "write past the slice");
        // SAFETY: the range is inside the slice, hence inside the mapping (checked by
        // the layout) which `self` keeps alive for the call. The slice was handed to
        // this writer alone by the free list and is not lent yet, so nothing else in
        // this process reads or writes it while `f` runs, and `f` cannot keep the
        // borrow. (A malicious peer could write it too: it maps our region; it would
        // only corrupt the message it is about to receive.)
        let bytes = unsafe { slice::from_raw_parts_mut(self.map.as_ptr().add(off), len) };
        f(bytes)
    }
}
