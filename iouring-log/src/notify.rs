//! A single-threaded "something changed" signal: waiters re-check their condition after every
//! notification. Used for write completions and appends within one shard; [`AnyChanged`] waits
//! for the first of several.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

#[derive(Default)]
pub struct Notify {
    generation: Cell<u64>,
    wakers: RefCell<Vec<Waker>>,
}

impl Notify {
    pub fn generation(&self) -> u64 {
        self.generation.get()
    }

    /// Wakes every task waiting on a generation older than the new one.
    pub fn notify_all(&self) {
        self.generation.set(self.generation.get() + 1);
        for waker in self.wakers.borrow_mut().drain(..) {
            waker.wake();
        }
    }

    /// Completes once the generation differs from `seen`.
    pub fn changed(&self, seen: u64) -> Changed<'_> {
        Changed { notify: self, seen }
    }
}

pub struct Changed<'a> {
    notify: &'a Notify,
    seen: u64,
}

impl Future for Changed<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.notify.generation.get() != self.seen {
            return Poll::Ready(());
        }
        let mut wakers = self.notify.wakers.borrow_mut();
        if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
            wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

/// Completes once any of the watched signals moved past the generation recorded with it: a
/// long-polling fetch waits on the partitions it reads, and only on those.
pub struct AnyChanged {
    watched: Vec<(std::rc::Rc<Notify>, u64)>,
}

impl AnyChanged {
    /// Watches each `(signal, generation seen)`; never completes if `watched` is empty.
    pub fn new(watched: Vec<(std::rc::Rc<Notify>, u64)>) -> AnyChanged {
        AnyChanged { watched }
    }
}

impl Future for AnyChanged {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self
            .watched
            .iter()
            .any(|(n, seen)| n.generation.get() != *seen)
        {
            return Poll::Ready(());
        }
        for (n, _) in &self.watched {
            let mut wakers = n.wakers.borrow_mut();
            if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                wakers.push(cx.waker().clone());
            }
        }
        Poll::Pending
    }
}

/// A log's "watermarks moved or the log failed" signal: waiters of this log wait on `log`;
/// a listener shared by many logs (a shard's long-polling fetches) is woken too.
#[derive(Default)]
pub struct Progress {
    pub log: Notify,
    listener: Option<std::rc::Rc<Notify>>,
}

impl Progress {
    pub fn with_listener(listener: Option<std::rc::Rc<Notify>>) -> Progress {
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
    use std::rc::Rc;
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
}
