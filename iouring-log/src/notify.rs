//! A single-threaded "something changed" signal: waiters re-check their condition after every
//! notification. Used for write completions and appends within one shard; [`AnyChanged`] waits
//! for the first of several; [`Moved`] subscribes once to many signals and collects which of
//! them moved.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::{Rc, Weak};
use std::task::{Context, Poll, Waker};

/// Where a waiting future's waker sits: slot index and the generation it was registered in
/// (a notification empties every slot, so a registration of an older generation is gone).
type Registration = Option<(usize, u64)>;

#[derive(Default)]
pub struct Notify {
    generation: Cell<u64>,
    waiters: RefCell<Waiters>,
    /// Standing subscriptions ([`Moved::watch`]): each notification marks its token there.
    watchers: RefCell<Vec<(Weak<Moved>, u32)>>,
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
        let mut watchers = self.watchers.borrow_mut();
        if !watchers.is_empty() {
            watchers.retain(|(moved, token)| match moved.upgrade() {
                Some(moved) => {
                    moved.mark(*token);
                    true
                }
                None => false,
            });
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

/// A standing subscription to many signals, each under a token, that collects the tokens of
/// those notified since they were last taken: a fetch session over a thousand partitions
/// learns which of them moved without registering on each of them for every request, and a
/// request costs what moved, not what the session holds. A signal keeps only a weak reference:
/// dropping the `Moved` ends its subscriptions (pruned at the signal's next notification or
/// subscription).
#[derive(Default)]
pub struct Moved {
    state: RefCell<MovedState>,
    signal: Notify,
}

#[derive(Default)]
struct MovedState {
    /// Per token: marked (in `list`) and the signal it watches.
    marked: Vec<bool>,
    watching: Vec<Option<Rc<Notify>>>,
    list: Vec<u32>,
}

impl Moved {
    /// Watches `notify` under `token` unless that token already watches it (a token watches
    /// one signal: a new one replaces the old, whose subscription then only marks spuriously).
    pub fn watch(self: &Rc<Self>, token: u32, notify: &Rc<Notify>) {
        let i = token as usize;
        let mut s = self.state.borrow_mut();
        if s.watching.len() <= i {
            s.watching.resize(i + 1, None);
        }
        if s.watching[i]
            .as_ref()
            .is_some_and(|w| Rc::ptr_eq(w, notify))
        {
            return;
        }
        s.watching[i] = Some(notify.clone());
        drop(s);
        let mut watchers = notify.watchers.borrow_mut();
        watchers.retain(|(m, _)| m.strong_count() > 0);
        watchers.push((Rc::downgrade(self), token));
    }

    /// Marks `token` as moved (once until taken) and wakes whoever waits on [`Moved::signal`].
    pub fn mark(&self, token: u32) {
        {
            let i = token as usize;
            let mut s = self.state.borrow_mut();
            if s.marked.len() <= i {
                s.marked.resize(i + 1, false);
            }
            if s.marked[i] {
                return;
            }
            s.marked[i] = true;
            s.list.push(token);
        }
        self.signal.notify_all();
    }

    /// Marks every token below `n`.
    pub fn mark_all(&self, n: u32) {
        {
            let mut guard = self.state.borrow_mut();
            let s = &mut *guard;
            if s.marked.len() < n as usize {
                s.marked.resize(n as usize, false);
            }
            for (token, marked) in s.marked.iter_mut().enumerate().take(n as usize) {
                if !*marked {
                    *marked = true;
                    s.list.push(token as u32);
                }
            }
        }
        self.signal.notify_all();
    }

    /// The tokens marked since the last take, in the order marked; unmarks them.
    pub fn take(&self) -> Vec<u32> {
        let mut s = self.state.borrow_mut();
        let list = std::mem::take(&mut s.list);
        for &t in &list {
            s.marked[t as usize] = false;
        }
        list
    }

    /// Notified whenever a token is newly marked.
    pub fn signal(&self) -> &Notify {
        &self.signal
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

    #[test]
    fn moved_collects_each_notified_token_once_until_taken() {
        let (a, b) = (Rc::new(Notify::default()), Rc::new(Notify::default()));
        let moved = Rc::new(Moved::default());
        moved.watch(0, &a);
        moved.watch(1, &b);
        moved.watch(1, &b);
        assert_eq!(b.watchers.borrow().len(), 1, "watched once");
        assert!(moved.take().is_empty());
        let seen = moved.signal().generation();
        b.notify_all();
        b.notify_all();
        a.notify_all();
        assert_ne!(moved.signal().generation(), seen, "the waiter is woken");
        assert_eq!(moved.take(), vec![1, 0], "once each, in the order moved");
        assert!(moved.take().is_empty());
        moved.mark_all(2);
        assert_eq!(moved.take(), vec![0, 1]);
        // Dropping the subscriber ends its subscriptions.
        drop(moved);
        a.notify_all();
        assert!(a.watchers.borrow().is_empty(), "pruned");
        let again = Rc::new(Moved::default());
        again.watch(3, &b);
        assert_eq!(
            b.watchers.borrow().len(),
            1,
            "the dead one pruned on subscribing"
        );
        b.notify_all();
        assert_eq!(again.take(), vec![3]);
    }
}
