//! Locking that a panic elsewhere does not spoil.

use std::sync::{Mutex, MutexGuard, PoisonError};

/// Locks a mutex; a panic elsewhere while it was held does not make the state unusable
/// here (every critical section leaves it consistent between statements).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}
