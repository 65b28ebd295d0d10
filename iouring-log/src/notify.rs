//! A single-threaded "something changed" signal: waiters re-check their condition after every
//! notification. Used for write completions and appends within one shard.

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
