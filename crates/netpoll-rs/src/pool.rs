//! Read blocks shared by a poller's connections, so that a connection holds an input
//! block only while it has unconsumed input, and steady traffic reuses blocks instead
//! of allocating them.
//!
//! One size class: `Config::read_chunk`. A connection whose input empties gives its
//! block back; the next read takes one. A block comes back while frames cut from it may
//! still be alive (the consumer is using them); it is reused only once they are gone
//! (`BytesMut::try_reclaim` tells), and until then its memory belongs to those frames.
//! Blocks that grew for a large frame are freed rather than kept.

use std::collections::VecDeque;
use std::sync::Mutex;

use bytes::BytesMut;

use crate::poller::lock;

/// How many times the block size a reclaimed block may be and still be kept.
const MAX_GROWTH: usize = 4;

/// Blocks looked at per `take` before a new one is allocated.
const TRIES: usize = 8;

#[derive(Debug)]
pub(crate) struct BlockPool {
    /// Oldest returned first: the longer ago a block came back, the likelier its frames
    /// are gone.
    blocks: Mutex<VecDeque<BytesMut>>,
    block_size: usize,
    max_blocks: usize,
}

impl BlockPool {
    pub(crate) fn new(block_size: usize, max_blocks: usize) -> Self {
        BlockPool {
            blocks: Mutex::new(VecDeque::new()),
            block_size,
            max_blocks,
        }
    }

    /// An empty block with room for at least one read: a returned one whose frames are
    /// all gone (oldest first; blocks still in use go to the back), else a new one.
    pub(crate) fn take(&self) -> BytesMut {
        let mut blocks = lock(&self.blocks);
        for _ in 0..TRIES.min(blocks.len()) {
            let Some(mut block) = blocks.pop_front() else {
                break;
            };
            block.clear();
            if block.try_reclaim(self.block_size) {
                if block.capacity() <= MAX_GROWTH * self.block_size {
                    return block;
                }
                // Grown for a large frame: let it go rather than keep it for small reads.
                continue;
            }
            // Frames cut from it are still alive: keep it for later.
            blocks.push_back(block);
        }
        drop(blocks);
        BytesMut::with_capacity(self.block_size)
    }

    /// Takes back a connection's block (its readable part already consumed).
    pub(crate) fn give(&self, block: BytesMut) {
        if block.capacity() == 0 && block.is_empty() {
            // Nothing of it left to reclaim later through this handle.
            return;
        }
        let mut blocks = lock(&self.blocks);
        if blocks.len() < self.max_blocks {
            blocks.push_back(block);
        }
    }

    /// Blocks waiting to be reused.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.blocks).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_block_is_reused_once_its_frames_are_gone() {
        let pool = BlockPool::new(1024, 8);
        let mut block = pool.take();
        let ptr = block.as_ptr();
        block.extend_from_slice(&[7; 100]);
        let frame = block.split_to(100).freeze();
        pool.give(block);
        // The frame still points into the block: taking now must not hand it out, and
        // the block stays in the pool for later.
        let other = pool.take();
        assert_ne!(other.as_ptr(), ptr);
        assert_eq!(pool.len(), 1, "the shared block is kept");
        drop(other);
        assert_eq!(&frame[..], &[7; 100][..]);
        drop(frame);
        let again = pool.take();
        assert_eq!(again.as_ptr(), ptr, "the same memory, reclaimed");
        assert!(again.capacity() >= 1024 && again.is_empty());
    }

    #[test]
    fn the_pool_is_bounded_and_drops_grown_blocks() {
        let pool = BlockPool::new(1024, 2);
        for _ in 0..5 {
            pool.give(BytesMut::with_capacity(1024));
        }
        assert_eq!(pool.len(), 2);
        let _ = pool.take();
        let _ = pool.take();
        pool.give(BytesMut::with_capacity(1024 * 64));
        let b = pool.take();
        assert!(b.capacity() < 1024 * 64, "a grown block is not handed out");
        assert_eq!(pool.len(), 0);
    }
}
