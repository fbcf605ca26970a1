//! Where things are in a region: computed by both sides from the parameters the owner
//! announces in the handshake, and checked before the peer's region is mapped. Nothing
//! of the layout is ever read back from shared memory.
//!
//! ```text
//! 0      header: magic, version                       (owner writes once)
//! 64     parked   u32  owner is (about to be) blocked on the socket; peer clears it
//! 128    waiting  u32  owner waits for slices or queue room; peer clears it
//! 192    desc.tail u32 (owner)     256  desc.head u32 (peer)
//! 320    rel.tail  u32 (peer)      384  rel.head  u32 (owner)
//! 448    descriptor ring: desc_cap × 16 bytes   (owner → peer)
//! ...    release ring:    rel_cap × 8 bytes     (peer → owner: owner's slice indices)
//! ...    slices, class by class, each class 64-byte aligned
//! ```

use crate::error::Violation;

/// Layout version; both sides must speak the same.
pub(crate) const VERSION: u32 = 1;
/// The first bytes of every region (and of the handshake message).
pub(crate) const MAGIC: u32 = u32::from_le_bytes(*b"SHMI");
/// At most this many size classes.
pub(crate) const MAX_CLASSES: usize = 8;
/// Bounds on what a peer may announce, so a lying peer cannot make us map or walk
/// something absurd.
pub(crate) const MAX_SLICE: u32 = 16 << 20;
pub(crate) const MAX_SLICES: u32 = 1 << 20;
pub(crate) const MAX_DESC_CAP: u32 = 1 << 16;
pub(crate) const MAX_REGION: u64 = 4 << 30;

pub(crate) const OFF_PARKED: usize = 64;
pub(crate) const OFF_WAITING: usize = 128;
pub(crate) const OFF_DESC_TAIL: usize = 192;
pub(crate) const OFF_DESC_HEAD: usize = 256;
pub(crate) const OFF_REL_TAIL: usize = 320;
pub(crate) const OFF_REL_HEAD: usize = 384;
pub(crate) const OFF_DESC_RING: usize = 448;

/// Bytes of one descriptor in the ring (two u64 words).
pub(crate) const DESC_WORDS: usize = 2;

/// One size class: `count` slices of `size` bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClassSpec {
    pub(crate) size: u32,
    pub(crate) count: u32,
}

/// A class placed in the region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Class {
    pub(crate) size: u32,
    pub(crate) count: u32,
    /// Global index of the class's first slice.
    pub(crate) first: u32,
    /// Byte offset of the class's first slice.
    pub(crate) offset: usize,
}

/// The computed layout of one region.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) desc_cap: u32,
    pub(crate) rel_cap: u32,
    pub(crate) rel_off: usize,
    pub(crate) classes: Vec<Class>,
    pub(crate) slices: u32,
    pub(crate) data_bytes: u64,
    pub(crate) total: usize,
}

fn align64(n: u64) -> u64 {
    n.div_ceil(64) * 64
}

impl Layout {
    /// Computes and checks a layout. Every number may come from the peer, so all of
    /// them are bounded and all arithmetic is checked.
    pub(crate) fn new(desc_cap: u32, specs: &[ClassSpec]) -> Result<Layout, Violation> {
        if !(2..=MAX_DESC_CAP).contains(&desc_cap) || !desc_cap.is_power_of_two() {
            return Err(Violation::Layout("descriptor ring capacity"));
        }
        if specs.is_empty() || specs.len() > MAX_CLASSES {
            return Err(Violation::Layout("number of size classes"));
        }
        let mut slices: u32 = 0;
        for s in specs {
            if s.size == 0 || s.size > MAX_SLICE || s.size % 64 != 0 {
                return Err(Violation::Layout("slice size"));
            }
            if s.count == 0 || s.count > MAX_SLICES {
                return Err(Violation::Layout("slice count"));
            }
            slices = slices
                .checked_add(s.count)
                .filter(|&n| n <= MAX_SLICES)
                .ok_or(Violation::Layout("total slice count"))?;
        }
        if specs.windows(2).any(|w| w[0].size >= w[1].size) {
            return Err(Violation::Layout("size classes must grow strictly"));
        }
        // The release ring holds every slice at once, so an honest side never finds it full.
        let rel_cap = slices.next_power_of_two().max(2);
        let rel_off = OFF_DESC_RING as u64 + u64::from(desc_cap) * (DESC_WORDS as u64 * 8);
        let mut off = align64(rel_off + u64::from(rel_cap) * 8);
        let mut classes = Vec::with_capacity(specs.len());
        let mut first = 0u32;
        let mut data_bytes = 0u64;
        for s in specs {
            let bytes = u64::from(s.size) * u64::from(s.count);
            classes.push(Class {
                size: s.size,
                count: s.count,
                first,
                offset: off as usize,
            });
            first += s.count;
            data_bytes += bytes;
            off = align64(off + bytes);
            if off > MAX_REGION {
                return Err(Violation::Layout("region too large"));
            }
        }
        Ok(Layout {
            desc_cap,
            rel_cap,
            rel_off: rel_off as usize,
            classes,
            slices,
            data_bytes,
            total: off as usize,
        })
    }

    /// The class of global slice `index`, or `None` if no slice has that index.
    pub(crate) fn class_of(&self, index: u32) -> Option<usize> {
        if index >= self.slices {
            return None;
        }
        self.classes
            .iter()
            .position(|c| index >= c.first && index - c.first < c.count)
    }

    /// Byte offset and capacity of global slice `index`, checked.
    pub(crate) fn slice(&self, index: u32) -> Option<(usize, u32)> {
        let c = &self.classes[self.class_of(index)?];
        let off = c.offset + (index - c.first) as usize * c.size as usize;
        Some((off, c.size))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn specs() -> Vec<ClassSpec> {
        vec![
            ClassSpec {
                size: 256,
                count: 4,
            },
            ClassSpec {
                size: 4096,
                count: 2,
            },
        ]
    }

    #[test]
    fn layout_places_classes_after_rings() {
        let l = Layout::new(8, &specs()).unwrap();
        assert_eq!(l.slices, 6);
        assert_eq!(l.rel_cap, 8);
        assert_eq!(l.rel_off, OFF_DESC_RING + 8 * 16);
        assert_eq!(l.classes[0].offset, (l.rel_off + 64).div_ceil(64) * 64);
        assert_eq!(l.classes[1].offset, l.classes[0].offset + 1024);
        assert_eq!(l.total, l.classes[1].offset + 8192);
        assert_eq!(l.slice(0), Some((l.classes[0].offset, 256)));
        assert_eq!(l.slice(3), Some((l.classes[0].offset + 768, 256)));
        assert_eq!(l.slice(4), Some((l.classes[1].offset, 4096)));
        assert_eq!(l.slice(5), Some((l.classes[1].offset + 4096, 4096)));
        assert_eq!(l.slice(6), None);
        assert_eq!(l.slice(u32::MAX), None);
    }

    #[test]
    fn layout_rejects_absurd_parameters() {
        let bad = |cap, s: &[ClassSpec]| Layout::new(cap, s).is_err();
        assert!(bad(3, &specs()));
        assert!(bad(0, &specs()));
        assert!(bad(1 << 20, &specs()));
        assert!(bad(8, &[]));
        assert!(bad(
            8,
            &[ClassSpec {
                size: 100,
                count: 1
            }]
        ));
        assert!(bad(8, &[ClassSpec { size: 64, count: 0 }]));
        assert!(bad(
            8,
            &[ClassSpec {
                size: MAX_SLICE,
                count: MAX_SLICES
            }]
        ));
        assert!(bad(
            8,
            &[
                ClassSpec {
                    size: 128,
                    count: 1
                },
                ClassSpec { size: 64, count: 1 }
            ]
        ));
        assert!(bad(8, &[ClassSpec { size: 64, count: 1 }; 9]));
    }
}
