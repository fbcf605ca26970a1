//! A slab whose keys carry a generation: the mio `Token` of a registration is its slot
//! index and the slot's generation, so an event that arrives for a connection that has
//! since closed (and whose slot now holds another one) finds a different generation
//! and is dropped instead of reaching the wrong connection. Netpoll gets the same from
//! storing the connection pointer in `epoll_data`; here there is no map lookup either.

use mio::Token;

/// The token the poller's `mio::Waker` uses; no slab key is ever equal to it.
pub(crate) const WAKER_TOKEN: Token = Token(usize::MAX);

/// Slots are numbered below this, so `(generation, index)` never spells `WAKER_TOKEN`.
const MAX_SLOTS: usize = u32::MAX as usize;

/// Generations count modulo 2^30, so a token fits in 62 bits: the io_uring driver
/// keeps an operation's kind in the two bits left of its `user_data`.
const GENERATION_MASK: u32 = (1 << 30) - 1;

/// The next generation of a slot.
fn next_generation(generation: u32) -> u32 {
    generation.wrapping_add(1) & GENERATION_MASK
}

#[derive(Debug)]
struct Slot<T> {
    generation: u32,
    value: Option<T>,
}

/// Values addressed by generation-checked tokens.
#[derive(Debug)]
pub(crate) struct Slab<T> {
    slots: Vec<Slot<T>>,
    free: Vec<u32>,
    len: usize,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            slots: Vec::new(),
            free: Vec::new(),
            len: 0,
        }
    }
}

fn token(index: u32, generation: u32) -> Token {
    Token(((generation as usize) << 32) | index as usize)
}

fn split(token: Token) -> (usize, u32) {
    ((token.0 & 0xffff_ffff), (token.0 >> 32) as u32)
}

impl<T> Slab<T> {
    /// Stores the value `make` builds from its own token; `None` when the slab is full.
    pub(crate) fn insert_with(&mut self, make: impl FnOnce(Token) -> T) -> Option<Token> {
        let index = match self.free.pop() {
            Some(i) => i,
            None if self.slots.len() < MAX_SLOTS => {
                self.slots.push(Slot {
                    generation: 0,
                    value: None,
                });
                (self.slots.len() - 1) as u32
            }
            None => return None,
        };
        let slot = &mut self.slots[index as usize];
        let t = token(index, slot.generation);
        slot.value = Some(make(t));
        self.len += 1;
        Some(t)
    }

    /// The value `token` names, if it is still the one stored there.
    pub(crate) fn get(&self, token: Token) -> Option<&T> {
        let (index, generation) = split(token);
        let slot = self.slots.get(index)?;
        if slot.generation != generation {
            return None;
        }
        slot.value.as_ref()
    }

    /// Removes the value `token` names (if it is still there); the slot's generation
    /// moves on, so the token never matches again.
    pub(crate) fn remove(&mut self, token: Token) -> Option<T> {
        let (index, generation) = split(token);
        let slot = self.slots.get_mut(index)?;
        if slot.generation != generation {
            return None;
        }
        let value = slot.value.take()?;
        slot.generation = next_generation(slot.generation);
        self.free.push(index as u32);
        self.len -= 1;
        Some(value)
    }

    /// Takes every value out.
    pub(crate) fn drain(&mut self) -> Vec<T> {
        let mut out = Vec::with_capacity(self.len);
        for (index, slot) in self.slots.iter_mut().enumerate() {
            if let Some(v) = slot.value.take() {
                slot.generation = next_generation(slot.generation);
                self.free.push(index as u32);
                out.push(v);
            }
        }
        self.len = 0;
        out
    }

    /// How many values are stored.
    pub(crate) fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stale_token_misses_after_close_and_reuse() {
        let mut slab = Slab::default();
        let a = slab.insert_with(|_| "a").unwrap();
        assert_eq!(slab.get(a), Some(&"a"));
        assert_eq!(slab.remove(a), Some("a"));
        // The slot is reused by the next connection, under a new generation.
        let b = slab.insert_with(|_| "b").unwrap();
        assert_eq!(split(a).0, split(b).0, "same slot");
        assert_ne!(a, b);
        assert_eq!(slab.get(a), None, "a stale event must not reach b");
        assert_eq!(slab.remove(a), None, "nor remove it");
        assert_eq!(slab.get(b), Some(&"b"));
        assert_eq!(slab.len(), 1);
    }

    #[test]
    fn values_know_their_own_token() {
        let mut slab = Slab::default();
        let tokens: Vec<Token> = (0..100).map(|_| slab.insert_with(|t| t).unwrap()).collect();
        for t in &tokens {
            assert_eq!(slab.get(*t), Some(t));
            assert_ne!(*t, WAKER_TOKEN);
        }
        assert_eq!(slab.drain().len(), 100);
        assert!(tokens.iter().all(|t| slab.get(*t).is_none()));
        assert_eq!(slab.len(), 0);
    }

    #[test]
    fn generations_wrap_without_matching_the_waker_token() {
        let mut slab = Slab::default();
        let t = slab.insert_with(|_| ()).unwrap();
        slab.remove(t);
        slab.slots[0].generation = GENERATION_MASK;
        let t = slab.insert_with(|_| ()).unwrap();
        assert_eq!(split(t), (0, GENERATION_MASK));
        assert_ne!(t, WAKER_TOKEN);
        assert!(t.0 < 1 << 62, "a token leaves two bits of a u64 free");
        slab.remove(t);
        let t = slab.insert_with(|_| ()).unwrap();
        assert_eq!(split(t), (0, 0), "wrapped to generation 0");
        assert_eq!(slab.get(t), Some(&()));
    }
}
