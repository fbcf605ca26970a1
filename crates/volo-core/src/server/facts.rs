//! What the server knows of a service from its IDL, apart from the dispatcher that
//! layers wrap: its name and which of its methods are oneway.

use std::collections::HashSet;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use super::ServiceInfo;

/// A service's name and oneway methods, as the server reads them for every call
/// before any layer runs: from a generated dispatcher's [`ServiceInfo`]
/// ([`of`](Self::of)), or given at run time ([`new`](Self::new)) by a server whose
/// IDL is read while it runs (a generic server).
#[derive(Clone)]
pub struct ServiceFacts {
    /// The service's name (on a multiplexed server, the name it is registered under).
    name: &'static str,
    oneway: Oneway,
}

#[derive(Clone)]
enum Oneway {
    /// Generated code's answer.
    Static(fn(&str) -> bool),
    /// An answer made at run time (it may read an IDL that reloads).
    Dynamic(Arc<dyn Fn(&str) -> bool + Send + Sync>),
}

impl ServiceFacts {
    /// What `S` says of itself.
    pub fn of<S: ServiceInfo>() -> Self {
        ServiceFacts {
            name: S::NAME,
            oneway: Oneway::Static(S::is_oneway),
        }
    }

    /// A service named `name` whose oneway methods `is_oneway` picks out (asked for
    /// every call, so it should be cheap; it may change its answers while the server
    /// runs).
    ///
    /// The name is interned: each distinct name is kept for the life of the process
    /// (the server's contexts carry it without a copy per call), so servers built
    /// again and again under a few names cost nothing more.
    pub fn new(name: &str, is_oneway: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        ServiceFacts {
            name: intern(name),
            oneway: Oneway::Dynamic(Arc::new(is_oneway)),
        }
    }

    /// The service's name.
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether `method` is oneway (the server answers no call of it).
    pub fn is_oneway(&self, method: &str) -> bool {
        match &self.oneway {
            Oneway::Static(f) => f(method),
            Oneway::Dynamic(f) => f(method),
        }
    }

    /// The same service under another name (a multiplexed server's registration).
    pub(crate) fn named(self, name: &'static str) -> Self {
        ServiceFacts { name, ..self }
    }
}

impl fmt::Debug for ServiceFacts {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let oneway = match self.oneway {
            Oneway::Static(_) => "generated",
            Oneway::Dynamic(_) => "given at run time",
        };
        f.debug_struct("ServiceFacts")
            .field("name", &self.name)
            .field("oneway", &oneway)
            .finish()
    }
}

/// `name` as a `&'static str`: the first time a name is seen it is leaked, then
/// found again.
fn intern(name: &str) -> &'static str {
    static NAMES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut names = NAMES.lock().unwrap_or_else(PoisonError::into_inner);
    let names = names.get_or_insert_with(HashSet::new);
    if let Some(&known) = names.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    names.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_interned_once() {
        let a = ServiceFacts::new(&String::from("Interned"), |_| false);
        let b = ServiceFacts::new(&String::from("Interned"), |_| false);
        assert!(std::ptr::eq(a.name(), b.name()));
        let c = ServiceFacts::new("Other", |_| false);
        assert_eq!(c.name(), "Other");
    }

    #[test]
    fn oneway_answers_may_change_while_serving() {
        use std::sync::atomic::{AtomicBool, Ordering};
        let flag = Arc::new(AtomicBool::new(false));
        let seen = Arc::clone(&flag);
        let facts = ServiceFacts::new("S", move |m| m == "ping" && seen.load(Ordering::Relaxed));
        assert!(!facts.is_oneway("ping"));
        flag.store(true, Ordering::Relaxed);
        assert!(facts.is_oneway("ping"));
        assert!(!facts.is_oneway("other"));
    }
}
