//! The method names of a client bound to one service of a multiplexed server
//! ([`Client::with_multiplexed_service`](super::Client::with_multiplexed_service)):
//! `Service:method`, each made once, on its method's first call, and shared by every
//! call after it.
//!
//! Calls look their name up without a lock: a fixed table of slots, each filled once
//! (`OnceLock`) and never changed, found by the method's hash with linear probing. A
//! lookup reads a slot or two; nothing is written after a method's first call, so calls
//! on many threads share the table without contending for it.

use std::borrow::Cow;
use std::fmt;
use std::hash::BuildHasher;
use std::sync::{Arc, OnceLock};

use foldhash::fast::FixedState;
use thrift_wire::Utf8Bytes;

use super::MethodName;
use crate::codec::SERVICE_SEPARATOR;

/// Methods whose names are kept. A service with more has the names of the methods that
/// find no slot made per call (correct, one allocation each).
const SLOTS: usize = 128;

/// A slot of the table: a method and its prefixed name, set once.
type Slot = OnceLock<(&'static str, Arc<Utf8Bytes>)>;

/// The `Service:method` names of one bound service.
pub(crate) struct MethodNames {
    service: Cow<'static, str>,
    /// A method and its prefixed name, in the slot its hash picks or the next free one.
    slots: Box<[Slot]>,
}

impl fmt::Debug for MethodNames {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MethodNames")
            .field("service", &self.service)
            .finish_non_exhaustive()
    }
}

impl MethodNames {
    /// No names made yet, for `service`.
    pub(crate) fn new(service: Cow<'static, str>) -> Self {
        MethodNames {
            service,
            slots: (0..SLOTS).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The service the names are prefixed with.
    pub(crate) fn service(&self) -> &str {
        &self.service
    }

    /// `Service:method`: made on the method's first call, a shared copy afterwards; made
    /// per call for a name known only at run time (a generic call's).
    pub(crate) fn get(&self, method: &MethodName) -> Arc<Utf8Bytes> {
        match method {
            MethodName::Static(m) => self.get_static(m),
            MethodName::Shared(m) => self.make(m.as_str()),
        }
    }

    fn get_static(&self, method: &'static str) -> Arc<Utf8Bytes> {
        // The hash's low bits pick the first slot (the table size is a power of two).
        let start = FixedState::default().hash_one(method) as usize;
        for i in 0..SLOTS {
            let slot = &self.slots[start.wrapping_add(i) % SLOTS];
            // An empty slot is this method's (the table only grows, so the method is
            // in no later slot); a race for it leaves one method there, and the loser
            // goes on to the next.
            let (held, name) = slot.get_or_init(|| (method, self.make(method)));
            if *held == method {
                return Arc::clone(name);
            }
        }
        self.make(method)
    }

    fn make(&self, method: &str) -> Arc<Utf8Bytes> {
        Arc::new(Utf8Bytes::from(format!(
            "{}{SERVICE_SEPARATOR}{method}",
            self.service
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name known only at run time gets its prefixed name too, made per call.
    #[test]
    fn a_runtime_name_is_prefixed_as_well() {
        let names = MethodNames::new("Calc".into());
        let name = MethodName::from(String::from("add"));
        assert_eq!(names.get(&name).as_str(), "Calc:add");
        assert_eq!(names.get(&MethodName::Static("add")).as_str(), "Calc:add");
    }

    #[test]
    fn each_name_is_made_once_and_shared() {
        let names = MethodNames::new("Calc".into());
        let add = names.get_static("add");
        assert_eq!(add.as_str(), "Calc:add");
        assert_eq!(names.get_static("sub").as_str(), "Calc:sub");
        // The second call of a method gets the same bytes, not a new string.
        assert_eq!(names.get_static("add").as_ptr(), add.as_ptr());
        // Another spelling of the same text (another `&'static str`) finds it too.
        let again = String::from("add").leak();
        assert_eq!(names.get_static(again).as_ptr(), add.as_ptr());
    }

    /// More methods than slots: every name is still right, and those that found a slot
    /// keep it.
    #[test]
    fn a_full_table_still_names_every_method() {
        let names = MethodNames::new("S".into());
        let methods: Vec<&'static str> =
            (0..SLOTS + 40).map(|i| &*format!("m{i}").leak()).collect();
        let first: Vec<Arc<Utf8Bytes>> = methods.iter().map(|m| names.get_static(m)).collect();
        let mut kept = 0;
        for (m, name) in methods.iter().zip(&first) {
            let again = names.get_static(m);
            assert_eq!(again.as_str(), format!("S:{m}"));
            kept += usize::from(again.as_ptr() == name.as_ptr());
        }
        assert_eq!(kept, SLOTS, "every slot holds one method's name");
    }

    /// Threads racing for the same empty slots each get their own method's name.
    #[test]
    fn racing_threads_get_their_own_names() {
        let names = std::sync::Arc::new(MethodNames::new("Svc".into()));
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let names = std::sync::Arc::clone(&names);
                std::thread::spawn(move || {
                    for round in 0..200 {
                        let m: &'static str = ["a", "b", "c", "d", "e"][(t + round) % 5];
                        assert_eq!(names.get_static(m).as_str(), format!("Svc:{m}"));
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        let filled = names.slots.iter().filter(|s| s.get().is_some()).count();
        assert_eq!(filled, 5, "one slot per method");
    }
}
