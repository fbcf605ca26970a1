//! Read blocks shared by a poller's connections, in size classes, so that a connection
//! holds an input block only while it has unconsumed input, and steady traffic reuses
//! blocks instead of allocating them, small frames and large ones alike.
//!
//! Classes: [`CLASSES`] sizes, `Config::read_chunk` times 1, 4, 16, 64 (64 KiB to 4 MiB
//! by default). Ordinary reads use the smallest; a frame whose length is known and does
//! not fit the block it started in moves to the class that holds it whole, so it is
//! handed out as one slice, without a copy, and the next frame that large reuses the
//! block. A frame above the largest class gets a block of its own that is freed after.
//!
//! A connection whose input empties gives its block back; the next read takes one. A
//! block comes back while frames cut from it may still be alive (the consumer is using
//! them); it is reused only once they are gone (`BytesMut::try_reclaim` tells), and until
//! then its memory belongs to those frames. Blocks are never grown in place, so a block
//! stays in its class. Each class keeps at most `Config::pooled_blocks` blocks divided by
//! 8 per class step (at least one), so what a poller keeps in all classes together is
//! bounded by about twice what its smallest class keeps.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::BytesMut;

use crate::sync::lock;

/// Size classes.
pub(crate) const CLASSES: usize = 4;

/// Each class's blocks are this many times larger than the previous class's.
const GROWTH: usize = 4;

/// Blocks looked at per `take` before a new one is allocated.
const TRIES: usize = 8;

/// Shelf slots allocated up front per class; a class allowed more grows past this.
const MAX_PRESIZED: usize = 1024;

/// Which class a block came from: it goes back there. `None`: a block of its own size,
/// not kept.
pub(crate) type Class = Option<usize>;

#[derive(Debug)]
struct Shelf {
    size: usize,
    max_blocks: usize,
    /// Oldest returned first: the longer ago a block came back, the likelier its frames
    /// are gone.
    blocks: Mutex<VecDeque<BytesMut>>,
}

#[derive(Debug)]
pub(crate) struct BlockPool {
    shelves: Vec<Shelf>,
}

impl BlockPool {
    /// Classes of `block_size` × 1, 4, 16, 64; the smallest keeps up to `max_blocks`.
    pub(crate) fn new(block_size: usize, max_blocks: usize) -> Self {
        let shelves = (0..CLASSES)
            .map(|k| {
                let kept = (max_blocks >> (3 * k)).max(1);
                Shelf {
                    size: block_size.saturating_mul(GROWTH.pow(k as u32)),
                    max_blocks: kept,
                    // Room for every block the class may keep (up to a cap), so giving
                    // a block back never allocates once the poller is up.
                    blocks: Mutex::new(VecDeque::with_capacity(kept.min(MAX_PRESIZED))),
                }
            })
            .collect();
        BlockPool { shelves }
    }

    /// The smallest block size.
    pub(crate) fn block_size(&self) -> usize {
        self.shelves[0].size
    }

    /// An empty block with room for at least `min` bytes, from the smallest class that
    /// holds them: a returned one whose frames are all gone (oldest first; blocks still
    /// in use go to the back), else a new one. Above the largest class, a new block of
    /// exactly `min` bytes that is not kept.
    pub(crate) fn take(&self, min: usize) -> (BytesMut, Class) {
        let Some(class) = self.shelves.iter().position(|s| s.size >= min) else {
            return (BytesMut::with_capacity(min), None);
        };
        let shelf = &self.shelves[class];
        let mut blocks = lock(&shelf.blocks);
        for _ in 0..TRIES.min(blocks.len()) {
            let Some(mut block) = blocks.pop_front() else {
                break;
            };
            block.clear();
            if block.try_reclaim(shelf.size) {
                return (block, Some(class));
            }
            // Frames cut from it are still alive: keep it for later.
            blocks.push_back(block);
        }
        drop(blocks);
        (BytesMut::with_capacity(shelf.size), Some(class))
    }

    /// Takes back a connection's block (its readable part already consumed or copied
    /// elsewhere) into the class it came from.
    pub(crate) fn give(&self, block: BytesMut, class: Class) {
        let Some(shelf) = class.and_then(|k| self.shelves.get(k)) else {
            return;
        };
        if block.capacity() == 0 && block.is_empty() {
            // Nothing of it left to reclaim later through this handle.
            return;
        }
        let mut blocks = lock(&shelf.blocks);
        if blocks.len() < shelf.max_blocks {
            blocks.push_back(block);
        }
    }

    /// Blocks waiting to be reused in `class`.
    #[cfg(test)]
    pub(crate) fn len(&self, class: usize) -> usize {
        lock(&self.shelves[class].blocks).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_reused_once_its_frames_are_gone() {
        let pool = BlockPool::new(1024, 8);
        let (mut block, class) = pool.take(1);
        assert_eq!(class, Some(0));
        let ptr = block.as_ptr();
        block.extend_from_slice(&[7; 100]);
        let frame = block.split_to(100).freeze();
        pool.give(block, class);
        // The frame still points into the block: taking now must not hand it out, and
        // the block stays in the pool for later.
        let (other, _) = pool.take(1);
        assert_ne!(other.as_ptr(), ptr);
        assert_eq!(pool.len(0), 1, "the shared block is kept");
        drop(other);
        assert_eq!(&frame[..], &[7; 100][..]);
        drop(frame);
        let (again, _) = pool.take(1);
        assert_eq!(again.as_ptr(), ptr, "the same memory, reclaimed");
        assert!(again.capacity() >= 1024 && again.is_empty());
    }

    #[test]
    fn sizes_pick_the_smallest_class_that_holds_them() {
        let pool = BlockPool::new(1024, 64);
        for (min, class, size) in [
            (0, Some(0), 1024),
            (1024, Some(0), 1024),
            (1025, Some(1), 4096),
            (16 * 1024, Some(2), 16 * 1024),
            (64 * 1024, Some(3), 64 * 1024),
        ] {
            let (block, got) = pool.take(min);
            assert_eq!(got, class, "{min} bytes");
            assert!(block.capacity() >= size, "{min} bytes");
            assert!(block.capacity() < 2 * size, "{min} bytes");
        }
        let (block, class) = pool.take(64 * 1024 + 1);
        assert_eq!(class, None, "above the largest class: a block of its own");
        assert!(block.capacity() > 64 * 1024);
        pool.give(block, class);
        assert!((0..CLASSES).all(|k| pool.len(k) == 0), "and it is not kept");
    }

    #[test]
    fn a_large_block_comes_back_to_its_class() {
        let pool = BlockPool::new(1024, 64);
        let (block, class) = pool.take(10_000);
        let ptr = block.as_ptr();
        pool.give(block, class);
        assert_eq!(pool.len(2), 1);
        let (small, _) = pool.take(10);
        assert_ne!(
            small.as_ptr(),
            ptr,
            "small reads do not take the large block"
        );
        let (again, _) = pool.take(9_000);
        assert_eq!(again.as_ptr(), ptr);
    }

    #[test]
    fn every_class_is_bounded() {
        let pool = BlockPool::new(1024, 16);
        for k in 0..CLASSES {
            let size = 1024 * GROWTH.pow(k as u32);
            for _ in 0..40 {
                pool.give(BytesMut::with_capacity(size), Some(k));
            }
        }
        let kept: Vec<usize> = (0..CLASSES).map(|k| pool.len(k)).collect();
        assert_eq!(kept, [16, 2, 1, 1]);
    }
}
