//! A single-threaded "something changed" signal: waiters re-check their condition after every
//! notification. Used for write completions and appends within one shard; [`AnyChanged`] waits
//! for the first of several.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Where a waiting future's waker sits: slot index and the generation it was registered in
/// (a notification empties every slot, so a registration of an older generation is gone).
type Registration = Option<(usize, u64)>;

#[derive(Default)]
pub struct Notify {
    generation: Cell<u64>,
    waiters: RefCell<Waiters>,
}

/// Wakers of the current generation; a future removes its own when dropped, so a waiter that
/// gives up (a closed connection racing its read against the stop signal) leaves nothing
/// behind.
#[derive(Default)]
struct Waiters {
    slots: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl Notify {
    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// Wakes every task waiting on a generation older than the new one.
    pub fn notify_all(&self) {
        self.generation.set(self.generation.get() + 1);
        let slots = {
            let mut w = self.waiters.borrow_mut();
            w.free.clear();
            std::mem::take(&mut w.slots)
        };
        for waker in slots.into_iter().flatten() {
            waker.wake();
        }
    }

    /// Completes once the generation differs from `seen`.
    pub fn changed(&self, seen: u64) -> Changed<'_> {
        Changed {
            notify: self,
            seen,
            registered: None,
        }
    }

    /// Wakers registered and not yet woken or dropped.
    pub fn waiting(&self) -> usize {
        let w = self.waiters.borrow();
        w.slots.len() - w.free.len()
    }

    /// Puts `waker` in this generation's slot of `registered` (taking a slot if it has none).
    fn register(&self, registered: &mut Registration, waker: &Waker) {
        let generation = self.generation.get();
        let mut w = self.waiters.borrow_mut();
        if let Some((i, g)) = *registered {
            if g == generation {
                let slot = &mut w.slots[i];
                if !slot.as_ref().is_some_and(|old| old.will_wake(waker)) {
                    *slot = Some(waker.clone());
                }
                return;
            }
        }
        let i = match w.free.pop() {
            Some(i) => {
                w.slots[i] = Some(waker.clone());
                i
            }
            None => {
                w.slots.push(Some(waker.clone()));
                w.slots.len() - 1
            }
        };
        *registered = Some((i, generation));
    }

    /// Frees the slot of `registered` if it is still this generation's.
    fn deregister(&self, registered: Registration) {
        if let Some((i, g)) = registered {
            if g == self.generation.get() {
                let mut w = self.waiters.borrow_mut();
                w.slots[i] = None;
                w.free.push(i);
            }
        }
    }
}

pub struct Changed<'a> {
    notify: &'a Notify,
    seen: u64,
    registered: Registration,
}

impl Future for Changed<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.notify.generation.get() != this.seen {
            return Poll::Ready(());
        }
        this.notify.register(&mut this.registered, cx.waker());
        Poll::Pending
    }
}

impl Drop for Changed<'_> {
    fn drop(&mut self) {
        self.notify.deregister(self.registered.take());
    }
}

/// Completes once any of the watched signals moved past the generation recorded with it: a
/// long-polling fetch waits on the partitions it reads, and only on those.
pub struct AnyChanged {
    watched: Vec<(Rc<Notify>, u64, Registration)>,
}

impl AnyChanged {
    /// Watches each `(signal, generation seen)`; never completes if `watched` is empty.
    pub fn new(watched: Vec<(Rc<Notify>, u64)>) -> AnyChanged {
        AnyChanged {
            watched: watched.into_iter().map(|(n, g)| (n, g, None)).collect(),
        }
    }
}

impl Future for AnyChanged {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this
            .watched
            .iter()
            .any(|(n, seen, _)| n.generation.get() != *seen)
        {
            return Poll::Ready(());
        }
        for (n, _, registered) in &mut this.watched {
            n.register(registered, cx.waker());
        }
        Poll::Pending
    }
}

impl Drop for AnyChanged {
    fn drop(&mut self) {
        for (n, _, registered) in &mut self.watched {
            n.deregister(registered.take());
        }
    }
}

/// A log's "watermarks moved or the log failed" signal: waiters of this log wait on `log`;
/// a listener shared by many logs (a shard's long-polling fetches) is woken too.
#[derive(Default)]
pub struct Progress {
    pub log: Notify,
    listener: Option<Rc<Notify>>,
}

impl Progress {
    pub fn with_listener(listener: Option<Rc<Notify>>) -> Progress {
        Progress {
            log: Notify::default(),
            listener,
        }
    }

    pub fn notify_all(&self) {
        self.log.notify_all();
        if let Some(l) = &self.listener {
            l.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);
    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn any_changed_wakes_on_a_watched_signal_only() {
        let (a, b, other) = (
            Rc::new(Notify::default()),
            Rc::new(Notify::default()),
            Rc::new(Notify::default()),
        );
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut f = AnyChanged::new(vec![
            (a.clone(), a.generation()),
            (b.clone(), b.generation()),
        ]);
        assert!(Pin::new(&mut f).poll(&mut cx).is_pending());
        other.notify_all();
        assert_eq!(count.0.load(Ordering::SeqCst), 0, "not watched");
        b.notify_all();
        assert_eq!(count.0.load(Ordering::SeqCst), 1);
        assert!(Pin::new(&mut f).poll(&mut cx).is_ready());
    }

    #[test]
    fn a_dropped_waiter_leaves_nothing_behind() {
        let n = Notify::default();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        for _ in 0..1000 {
            let mut f = n.changed(n.generation());
            assert!(Pin::new(&mut f).poll(&mut cx).is_pending());
            assert!(
                Pin::new(&mut f).poll(&mut cx).is_pending(),
                "re-poll keeps one slot"
            );
            assert_eq!(n.waiting(), 1);
        }
        assert_eq!(n.waiting(), 0, "every dropped future took its waker back");
        assert!(n.waiters.borrow().slots.len() <= 1, "slots are reused");
        let mut kept = n.changed(n.generation());
        assert!(Pin::new(&mut kept).poll(&mut cx).is_pending());
        let mut any = AnyChanged::new(vec![]);
        let shared = Rc::new(Notify::default());
        let mut watching = AnyChanged::new(vec![(shared.clone(), shared.generation())]);
        assert!(Pin::new(&mut any).poll(&mut cx).is_pending());
        assert!(Pin::new(&mut watching).poll(&mut cx).is_pending());
        assert_eq!(shared.waiting(), 1);
        drop(watching);
        assert_eq!(shared.waiting(), 0);
        n.notify_all();
        assert_eq!(
            count.0.load(Ordering::SeqCst),
            1,
            "the kept waiter is woken once"
        );
        assert_eq!(n.waiting(), 0);
        drop(kept); // registered in an older generation: nothing to free
        assert_eq!(n.waiting(), 0);
    }
}
