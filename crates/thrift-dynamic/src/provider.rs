//! The current descriptor of a set of IDL files, read again when they change.

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;

use crate::descriptor::Descriptor;
use crate::error::LoadError;

/// The current [`Descriptor`] of a set of IDL files, swapped for a new one when the
/// files change, while calls go on with the one they took.
///
/// - [`current`](Self::current) is one atomic load: call it per call.
/// - [`reload`](Self::reload) reads the files again if any of those the current
///   descriptor came from (roots and includes) changed in size, time or content. A new
///   descriptor that loads replaces the current one. One that does not (a syntax
///   error, an unknown type, a missing root) leaves the current one in place: the
///   error is returned and logged once (a `warn` line naming the file, line and
///   column), and not again until the files change once more.
/// - [`watch`](Self::watch) calls `reload` on a timer, in a tokio task.
///
/// Kitex's file provider reads its IDL once; a gateway that must not restart to learn
/// a new method needs the reload.
#[derive(Debug)]
pub struct IdlProvider {
    idls: Vec<PathBuf>,
    includes: Vec<PathBuf>,
    current: ArcSwap<Descriptor>,
    /// What the files looked like when last read, and whether that read failed.
    seen: Mutex<Seen>,
}

#[derive(Debug)]
struct Seen {
    stamps: Vec<(PathBuf, Stamp)>,
    failed: bool,
}

/// A file's size, modification time and a hash of its content; `None` when it cannot
/// be read.
type Stamp = Option<(u64, Option<SystemTime>, u64)>;

impl IdlProvider {
    /// Reads `idls` (and their includes, looked for next to the including file and in
    /// `includes`). The first read must succeed: there is no last good descriptor yet.
    pub fn new(
        idls: &[impl AsRef<Path>],
        includes: &[impl AsRef<Path>],
    ) -> Result<Self, LoadError> {
        let idls: Vec<PathBuf> = idls.iter().map(|p| p.as_ref().to_path_buf()).collect();
        let includes: Vec<PathBuf> = includes.iter().map(|p| p.as_ref().to_path_buf()).collect();
        let before = stamps(&idls);
        let first = Descriptor::from_files(&idls, &includes)?;
        let stamps = stamps_after(before, &first);
        Ok(IdlProvider {
            idls,
            includes,
            current: ArcSwap::from_pointee(first),
            seen: Mutex::new(Seen {
                stamps,
                failed: false,
            }),
        })
    }

    /// The current descriptor.
    pub fn current(&self) -> Descriptor {
        Descriptor::clone(&self.current.load())
    }

    /// Reads the files again if they changed since they were last read. `Ok(true)`
    /// when a new descriptor replaced the current one; `Ok(false)` when nothing
    /// changed (or the change is the one that failed already); `Err` when the changed
    /// files do not load (the current descriptor stays).
    pub fn reload(&self) -> Result<bool, LoadError> {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let now: Vec<(PathBuf, Stamp)> = seen
            .stamps
            .iter()
            .map(|(p, _)| (p.clone(), stamp(p)))
            .collect();
        if now == seen.stamps {
            return Ok(false);
        }
        // Stamped before reading: a change made during the read is seen next time.
        let before = stamps(&self.idls);
        match Descriptor::from_files(&self.idls, &self.includes) {
            Ok(d) => {
                seen.stamps = stamps_after(before, &d);
                seen.failed = false;
                self.current.store(Arc::new(d));
                tracing::info!(idl = ?self.idls, "IDL reloaded");
                Ok(true)
            }
            Err(e) => {
                // The failed state is remembered, so that it is logged once.
                seen.stamps = now;
                if !seen.failed {
                    tracing::warn!(
                        idl = ?self.idls,
                        error = %e,
                        "IDL changed but does not load; keeping the last good one"
                    );
                }
                seen.failed = true;
                Err(e)
            }
        }
    }

    /// Calls [`reload`](Self::reload) every `every` in a tokio task (the reads are
    /// small and done in the task). The task ends when the returned [`Watch`] is
    /// dropped.
    pub fn watch(self: &Arc<Self>, every: Duration) -> Watch {
        let provider = Arc::clone(self);
        let task = tokio::spawn(async move {
            let mut tick = tokio::time::interval(every);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                // Errors are logged by `reload`.
                let _ = provider.reload();
            }
        });
        Watch { task }
    }
}

/// A running [`IdlProvider::watch`]: dropping it stops the task.
#[derive(Debug)]
pub struct Watch {
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The stamps of `roots`, taken before a read.
fn stamps(roots: &[PathBuf]) -> Vec<(PathBuf, Stamp)> {
    roots.iter().map(|p| (p.clone(), stamp(p))).collect()
}

/// The stamps of every file `d` was read from: those of the roots as taken before the
/// read, and the includes' now (an include changed during the read is read again at
/// the next change of any file; the roots are the files users edit).
fn stamps_after(before: Vec<(PathBuf, Stamp)>, d: &Descriptor) -> Vec<(PathBuf, Stamp)> {
    let mut out = before;
    for p in d.paths() {
        if !out.iter().any(|(q, _)| same_file(q, p)) {
            out.push((p.clone(), stamp(p)));
        }
    }
    out
}

fn same_file(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (a.canonicalize(), b.canonicalize()),
            (Ok(x), Ok(y)) if x == y
        )
}

fn stamp(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    let len = meta.len();
    let modified = meta.modified().ok();
    if len > thrift_codegen::MAX_IDL_FILE {
        // Not read: the load refuses it anyway.
        return Some((len, modified, 0));
    }
    let text = std::fs::read(path).ok()?;
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    Some((len, modified, h.finish()))
}
