//! One spare box per thread for the calls the poller runs.
//!
//! A call on the poller is boxed before its first poll, so that it can move to a task
//! if it must wait; most calls finish in that poll, and their box can serve the next
//! call. Kept per connection, the spare would cost every idle connection the size of a
//! call (a few KiB: as large as the service stack makes it); kept per thread it costs
//! each poller thread one. The box's type is erased in the thread's slot and checked
//! when taken back.

use std::any::TypeId;
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll, Waker};

/// A `Box<Option<T>>` holding `None`, its type erased.
struct Erased {
    ptr: NonNull<u8>,
    ty: TypeId,
    /// Frees the box as the `Box<Option<T>>` it is.
    free: unsafe fn(NonNull<u8>),
}

impl Drop for Erased {
    fn drop(&mut self) {
        // SAFETY: `ptr` and `free` were made together by `give::<T>` from a
        // `Box<Option<T>>`, and the box was not taken back (`take` forgets the
        // `Erased` it takes the box from).
        unsafe { (self.free)(self.ptr) }
    }
}

/// # Safety
///
/// `ptr` is from `Box::into_raw` of a `Box<Option<T>>`, not freed yet.
unsafe fn free<T>(ptr: NonNull<u8>) {
    // SAFETY: as the caller promises.
    drop(unsafe { Box::from_raw(ptr.as_ptr().cast::<Option<T>>()) });
}

thread_local! {
    static SPARE: Cell<Option<Erased>> = const { Cell::new(None) };
}

/// An empty pinned box for a `T`: this thread's spare if it is one for a `T`, else a
/// new one.
pub(crate) fn take<T: 'static>() -> Pin<Box<Option<T>>> {
    let spare = SPARE.with(Cell::take);
    match spare {
        Some(erased) if erased.ty == TypeId::of::<T>() => {
            let erased = std::mem::ManuallyDrop::new(erased);
            // SAFETY: `give::<T>` made the pointer from a `Box<Option<T>>` (the type
            // ids match) holding `None`, and `ManuallyDrop` keeps `Erased` from
            // freeing it. Pinning it again is sound: no `T` is in it, and a `T` put
            // in through `Pin::set` stays where it is until it is dropped there.
            unsafe { Pin::new_unchecked(Box::from_raw(erased.ptr.as_ptr().cast::<Option<T>>())) }
        }
        // None, or a spare for another type, which is freed.
        _ => Box::pin(None),
    }
}

/// Empties `slot` (dropping its `T` in place) and keeps it as this thread's spare,
/// freeing the spare it replaces.
pub(crate) fn give<T: 'static>(mut slot: Pin<Box<Option<T>>>) {
    slot.set(None);
    // SAFETY: the box holds `None`: the `T` that was pinned in it was dropped in place
    // just now, as `Pin` requires, and nothing else relies on the box's address until
    // `take` pins it again.
    let raw = Box::into_raw(unsafe { Pin::into_inner_unchecked(slot) });
    let erased = Erased {
        // SAFETY: `Box::into_raw` never returns null.
        ptr: unsafe { NonNull::new_unchecked(raw.cast::<u8>()) },
        ty: TypeId::of::<T>(),
        free: free::<T>,
    };
    SPARE.with(|s| s.set(Some(erased)));
}

/// Makes a call with `make` in this thread's spare box and polls it once, with a
/// no-op waker (whoever keeps a call that waits polls it again with a real one): its
/// output if it finished there (the box stays as the spare), else the box holding it.
pub(crate) fn poll_first<F: Future + 'static>(
    make: impl FnOnce() -> F,
) -> Result<F::Output, Pin<Box<Option<F>>>> {
    let mut slot = take::<F>();
    slot.set(Some(make()));
    let mut cx = Context::from_waker(Waker::noop());
    match slot.as_mut().as_pin_mut().map(|call| call.poll(&mut cx)) {
        Some(Poll::Ready(out)) => {
            give(slot);
            Ok(out)
        }
        _ => Err(slot),
    }
}

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;

    /// Counts its drops.
    struct Counted(Arc<AtomicUsize>);

    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_given_box_is_taken_again_for_the_same_type() {
        let drops = Arc::new(AtomicUsize::new(0));
        let mut slot = take::<Counted>();
        slot.set(Some(Counted(Arc::clone(&drops))));
        let at = std::ptr::from_ref::<Option<Counted>>(&slot);
        give(slot);
        assert_eq!(
            drops.load(Ordering::SeqCst),
            1,
            "its value dropped in place"
        );
        let again = take::<Counted>();
        assert_eq!(std::ptr::from_ref::<Option<Counted>>(&again), at);
        assert!(again.is_none());
        let fresh = take::<Counted>();
        assert_ne!(
            std::ptr::from_ref::<Option<Counted>>(&fresh),
            at,
            "one spare only"
        );
    }

    #[test]
    fn a_spare_of_another_type_is_freed_not_reused() {
        give(take::<[u64; 8]>());
        let other = take::<String>();
        assert!(other.is_none());
        // Nothing is left for the first type either.
        give(other);
        assert!(take::<[u64; 8]>().is_none());
    }

    #[test]
    fn a_pinned_future_runs_in_a_reused_box() {
        let mut slot = take::<std::future::Ready<u32>>();
        slot.set(Some(std::future::ready(7)));
        give(slot);
        let mut slot = take::<std::future::Ready<u32>>();
        slot.set(Some(std::future::ready(8)));
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        let polled = slot.as_mut().as_pin_mut().map(|f| f.poll(&mut cx));
        assert_eq!(polled, Some(std::task::Poll::Ready(8)));
        give(slot);
    }

    #[test]
    fn the_spare_is_freed_when_its_thread_ends() {
        let drops = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&drops);
        std::thread::spawn(move || {
            let mut slot = take::<Counted>();
            slot.set(Some(Counted(counted)));
            give(slot);
        })
        .join()
        .unwrap();
        // The value was dropped by `give`; the box itself by the thread's end, which
        // Miri's leak check sees.
        assert_eq!(drops.load(Ordering::SeqCst), 1);
    }
}
