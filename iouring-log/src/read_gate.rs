//! Admission of the shard's O_DIRECT chunk reads to the device: at most
//! [`READ_BYTES_IN_FLIGHT_MAX`] bytes in flight, reads a fetch waits for before read-ahead.
//!
//! The virtual disks these nodes run on read fastest with a few MiB in flight and slower with
//! more (fio, 1 MiB reads of a fresh file: ~3 GB/s at 4 in flight, ~2.5 at 16; 4 MiB reads
//! ~2 GB/s at 4 in flight), and the block layer merges adjacent reads submitted together into
//! requests of up to 4 MiB. Every fetch's misses and every position's read-ahead started at
//! once kept 10–16 merged requests in flight, and a catch-up drained at ~1.6 GB/s where fio
//! read 2.1–3 GB/s; appends' writes also waited behind all of them.
//!
//! A read a fetch waits for ([`Class::Fetch`]) is admitted before any read-ahead; a read-ahead
//! a fetch has started waiting for ([`Urgency::raise`]) before other read-ahead. A read larger
//! than the bound is admitted alone. A waiter whose future is dropped leaves the queue.
//! Reads through the page cache do not come here (they mostly copy memory).
//!
//! Thread-local (one gate per shard).

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use crate::limits::READ_BYTES_IN_FLIGHT_MAX;

/// Who waits for a read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    /// A fetch (or another reader) waits for the bytes now.
    Fetch,
    /// Read ahead of a consumer position: nobody waits yet.
    ReadAhead,
}

/// Set when a fetch starts waiting for a read-ahead that has not been admitted yet, so it goes
/// before the other read-ahead.
#[derive(Default, Clone)]
pub struct Urgency(Rc<Cell<bool>>);

impl Urgency {
    pub fn raise(&self) {
        self.0.set(true);
    }
}

thread_local! {
    static GATE: RefCell<Gate> = RefCell::new(Gate::default());
}

/// Counters of the shard's gate (for metrics and tests).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct GateStats {
    /// Reads admitted, and their bytes.
    pub reads: u64,
    pub read_bytes: u64,
    /// Reads that waited for room, and how long they waited in all.
    pub waited: u64,
    pub wait_nanos: u64,
    /// The most bytes ever in flight at once (at most the bound, or one larger read alone).
    pub in_flight_max: usize,
}

#[derive(Default)]
struct Gate {
    in_flight: usize,
    stats: GateStats,
    /// Set by tests; otherwise [`READ_BYTES_IN_FLIGHT_MAX`].
    limit: Option<usize>,
    fetch: VecDeque<Rc<Waiter>>,
    ahead: VecDeque<Rc<Waiter>>,
}

struct Waiter {
    bytes: usize,
    since: Instant,
    urgency: Urgency,
    granted: Cell<bool>,
    waker: RefCell<Option<Waker>>,
}

impl Gate {
    fn limit(&self) -> usize {
        self.limit.unwrap_or(READ_BYTES_IN_FLIGHT_MAX)
    }

    fn fits(&self, bytes: usize) -> bool {
        self.in_flight == 0 || self.in_flight + bytes <= self.limit()
    }

    /// The waiter to admit next: the first fetch read, else the first urgent read-ahead, else
    /// the first read-ahead.
    fn next(&self) -> Option<(Class, usize)> {
        if !self.fetch.is_empty() {
            return Some((Class::Fetch, 0));
        }
        let urgent = self.ahead.iter().position(|w| w.urgency.0.get());
        match urgent {
            Some(i) => Some((Class::ReadAhead, i)),
            None => (!self.ahead.is_empty()).then_some((Class::ReadAhead, 0)),
        }
    }

    fn admitted(&mut self, bytes: usize) {
        self.in_flight += bytes;
        let s = &mut self.stats;
        s.reads += 1;
        s.read_bytes += bytes as u64;
        s.in_flight_max = s.in_flight_max.max(self.in_flight);
    }

    fn queue(&mut self, class: Class) -> &mut VecDeque<Rc<Waiter>> {
        match class {
            Class::Fetch => &mut self.fetch,
            Class::ReadAhead => &mut self.ahead,
        }
    }

    /// Admits waiters in order while they fit; returns the wakers to wake (outside the borrow).
    fn pump(&mut self) -> Vec<Waker> {
        let mut wake = Vec::new();
        while let Some((class, i)) = self.next() {
            let bytes = self.queue(class)[i].bytes;
            if !self.fits(bytes) {
                break;
            }
            let w = self.queue(class).remove(i).expect("queued waiter");
            self.admitted(bytes);
            self.stats.waited += 1;
            self.stats.wait_nanos +=
                u64::try_from(w.since.elapsed().as_nanos()).unwrap_or(u64::MAX);
            w.granted.set(true);
            let waker = w.waker.borrow_mut().take();
            wake.extend(waker);
        }
        wake
    }

    fn release(&mut self, bytes: usize) -> Vec<Waker> {
        self.in_flight -= bytes;
        self.pump()
    }
}

fn with_gate<T>(f: impl FnOnce(&mut Gate) -> (T, Vec<Waker>)) -> T {
    let (out, wake) = GATE.with(|g| f(&mut g.borrow_mut()));
    for w in wake {
        w.wake();
    }
    out
}

/// Bytes admitted and not yet released, on this shard.
#[cfg(test)]
fn in_flight() -> usize {
    GATE.with(|g| g.borrow().in_flight)
}

/// The shard's counters.
pub fn stats() -> GateStats {
    GATE.with(|g| g.borrow().stats)
}

/// Overrides the bound on this shard (tests).
#[cfg(test)]
fn set_limit(bytes: usize) {
    GATE.with(|g| g.borrow_mut().limit = Some(bytes));
}

/// Holds `bytes` of the shard's read bound until dropped (when the read completed).
pub struct Permit {
    bytes: usize,
}

impl Drop for Permit {
    fn drop(&mut self) {
        let bytes = self.bytes;
        with_gate(|g| ((), g.release(bytes)));
    }
}

/// Waits until a read of `bytes` may go to the device.
pub fn admit(bytes: usize, class: Class, urgency: Urgency) -> Admit {
    Admit {
        bytes,
        class,
        urgency,
        waiter: None,
        done: false,
    }
}

pub struct Admit {
    bytes: usize,
    class: Class,
    urgency: Urgency,
    waiter: Option<Rc<Waiter>>,
    done: bool,
}

impl Future for Admit {
    type Output = Permit;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Permit> {
        let this = &mut *self;
        assert!(!this.done, "Admit polled after it completed");
        if let Some(w) = &this.waiter {
            if w.granted.get() {
                this.done = true;
                return Poll::Ready(Permit { bytes: this.bytes });
            }
            *w.waker.borrow_mut() = Some(cx.waker().clone());
            return Poll::Pending;
        }
        let (bytes, class) = (this.bytes, this.class);
        let waiter = GATE.with(|g| {
            let mut g = g.borrow_mut();
            // Nobody ahead of it (a fetch read passes queued read-ahead) and room: admitted.
            let ahead_of_it = match class {
                Class::Fetch => !g.fetch.is_empty(),
                Class::ReadAhead => g.next().is_some(),
            };
            if !ahead_of_it && g.fits(bytes) {
                g.admitted(bytes);
                return None;
            }
            let w = Rc::new(Waiter {
                bytes,
                since: Instant::now(),
                urgency: this.urgency.clone(),
                granted: Cell::new(false),
                waker: RefCell::new(Some(cx.waker().clone())),
            });
            g.queue(class).push_back(w.clone());
            Some(w)
        });
        match waiter {
            None => {
                this.done = true;
                Poll::Ready(Permit { bytes })
            }
            Some(w) => {
                this.waiter = Some(w);
                Poll::Pending
            }
        }
    }
}

impl Drop for Admit {
    fn drop(&mut self) {
        let Some(w) = self.waiter.take() else {
            return;
        };
        if self.done {
            return;
        }
        let (class, bytes) = (self.class, self.bytes);
        with_gate(|g| {
            if w.granted.get() {
                // Admitted but never taken: the room goes to the next.
                return ((), g.release(bytes));
            }
            let q = g.queue(class);
            if let Some(i) = q.iter().position(|x| Rc::ptr_eq(x, &w)) {
                q.remove(i);
            }
            ((), Vec::new())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn poll(a: &mut Admit) -> Option<Permit> {
        let mut cx = Context::from_waker(Waker::noop());
        match Pin::new(a).poll(&mut cx) {
            Poll::Ready(p) => Some(p),
            Poll::Pending => None,
        }
    }

    #[test]
    fn fetch_reads_go_before_read_ahead_and_the_bound_holds() {
        set_limit(2 << 20);
        let mb = 1 << 20;
        let mut a1 = admit(mb, Class::ReadAhead, Urgency::default());
        let mut a2 = admit(mb, Class::ReadAhead, Urgency::default());
        let p1 = poll(&mut a1).expect("room");
        let p2 = poll(&mut a2).expect("room");
        assert_eq!(in_flight(), 2 * mb);
        let mut a3 = admit(mb, Class::ReadAhead, Urgency::default());
        let late = Urgency::default();
        let mut a4 = admit(mb, Class::ReadAhead, late.clone());
        let mut f = admit(mb, Class::Fetch, Urgency::default());
        assert!(poll(&mut a3).is_none());
        assert!(poll(&mut a4).is_none());
        assert!(poll(&mut f).is_none(), "full");
        drop(p1);
        let pf = poll(&mut f).expect("the fetch read goes first");
        assert!(poll(&mut a3).is_none());
        late.raise();
        drop(p2);
        assert!(
            poll(&mut a3).is_none(),
            "a read-ahead a fetch waits for goes first"
        );
        let p4 = poll(&mut a4).expect("urgent read-ahead");
        drop(pf);
        let p3 = poll(&mut a3).expect("then the rest");
        drop((p3, p4));
        assert_eq!(in_flight(), 0);
        let s = stats();
        assert_eq!((s.reads, s.read_bytes), (5, 5 * mb as u64));
        assert_eq!(s.waited, 3, "the fetch read and two read-ahead waited");
        assert_eq!(s.in_flight_max, 2 * mb, "never more than the bound");
    }

    #[test]
    fn a_dropped_waiter_leaves_the_queue_and_a_large_read_goes_alone() {
        set_limit(2 << 20);
        let mut big = admit(8 << 20, Class::Fetch, Urgency::default());
        let p = poll(&mut big).expect("nothing in flight: admitted alone");
        let mut w1 = admit(4096, Class::Fetch, Urgency::default());
        let mut w2 = admit(4096, Class::Fetch, Urgency::default());
        assert!(poll(&mut w1).is_none());
        assert!(poll(&mut w2).is_none());
        drop(w1);
        GATE.with(|g| assert_eq!(g.borrow().fetch.len(), 1, "the dropped waiter is gone"));
        drop(p);
        let granted_not_taken = w2;
        GATE.with(|g| assert_eq!(g.borrow().in_flight, 4096));
        drop(granted_not_taken);
        assert_eq!(in_flight(), 0, "room of a permit never taken is given back");
        assert_eq!(stats().in_flight_max, 8 << 20, "a larger read alone");
    }
}
