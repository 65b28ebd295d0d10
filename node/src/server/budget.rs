//! The node-wide budget of request bytes (`queued.max.request.bytes`, Kafka's name): a
//! connection takes a frame's memory from it before reading the frame's body and gives it back
//! when that memory is freed (the request handled, its records appended). When the budget is
//! spent, connections read nothing more until memory comes back: TCP pushes back on the
//! clients instead of the broker running out of memory. One budget serves every shard;
//! waiters are served in arrival order, so a large request is not starved by small ones.
//!
//! A request larger than the whole budget is let in when nothing else holds any (it runs
//! alone): memory held is at most the budget, or one request when a single one exceeds it.
//! Owns only its counter and its queue of waiters; knows nothing of sockets or frames.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

pub struct RequestBudget {
    /// `None`: unbounded (`queued.max.request.bytes=-1`).
    capacity: Option<usize>,
    state: Mutex<State>,
}

struct State {
    available: usize,
    next_ticket: u64,
    /// Connections waiting, oldest first.
    queue: VecDeque<Waiter>,
}

struct Waiter {
    ticket: u64,
    waker: Option<Waker>,
}

/// Memory taken from the budget; given back when dropped (on any thread).
pub struct BudgetPermit {
    budget: Option<Arc<RequestBudget>>,
    bytes: usize,
}

impl RequestBudget {
    /// A budget of `capacity` bytes; `None` never makes anyone wait.
    pub fn new(capacity: Option<usize>) -> Arc<RequestBudget> {
        Arc::new(RequestBudget {
            capacity,
            state: Mutex::new(State {
                available: capacity.unwrap_or(0),
                next_ticket: 0,
                queue: VecDeque::new(),
            }),
        })
    }

    /// Bytes not held by any request (the whole capacity when unbounded: 0).
    pub fn available(&self) -> usize {
        self.lock().available
    }

    /// Connections waiting for memory.
    pub fn waiting(&self) -> usize {
        self.lock().queue.len()
    }

    /// Completes once `bytes` (or, for a request larger than the budget, the whole budget) are
    /// taken, after every earlier waiter.
    pub fn acquire(self: &Arc<Self>, bytes: usize) -> Acquire {
        Acquire {
            budget: self.clone(),
            bytes,
            ticket: None,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock leaves plain counters behind: still consistent.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The bytes a request of `bytes` is charged, if it may take them now.
    fn charge(&self, state: &State, bytes: usize) -> Option<usize> {
        let capacity = self.capacity?;
        if state.available >= bytes {
            Some(bytes)
        } else if state.available == capacity {
            Some(capacity)
        } else {
            None
        }
    }

    fn release(&self, bytes: usize) {
        let waker = {
            let mut s = self.lock();
            s.available += bytes;
            s.queue.front_mut().and_then(|w| w.waker.take())
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

pub struct Acquire {
    budget: Arc<RequestBudget>,
    bytes: usize,
    /// Set once queued.
    ticket: Option<u64>,
}

impl Future for Acquire {
    type Output = BudgetPermit;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<BudgetPermit> {
        let this = self.get_mut();
        let budget = &this.budget;
        if budget.capacity.is_none() {
            return Poll::Ready(BudgetPermit {
                budget: None,
                bytes: 0,
            });
        }
        let mut s = budget.lock();
        let first = match this.ticket {
            None => s.queue.is_empty(),
            Some(t) => s.queue.front().is_some_and(|w| w.ticket == t),
        };
        if first {
            if let Some(charged) = budget.charge(&s, this.bytes) {
                s.available -= charged;
                if this.ticket.take().is_some() {
                    s.queue.pop_front();
                }
                // The next waiter may fit in what is left.
                let next = s.queue.front_mut().and_then(|w| w.waker.take());
                drop(s);
                if let Some(w) = next {
                    w.wake();
                }
                return Poll::Ready(BudgetPermit {
                    budget: Some(budget.clone()),
                    bytes: charged,
                });
            }
        }
        match this.ticket {
            None => {
                let ticket = s.next_ticket;
                s.next_ticket += 1;
                s.queue.push_back(Waiter {
                    ticket,
                    waker: Some(cx.waker().clone()),
                });
                this.ticket = Some(ticket);
            }
            Some(t) => {
                if let Some(w) = s.queue.iter_mut().find(|w| w.ticket == t) {
                    w.waker = Some(cx.waker().clone());
                }
            }
        }
        Poll::Pending
    }
}

impl Drop for Acquire {
    /// A waiter that gives up (its connection closing) leaves the queue; if it was first, the
    /// next one gets its turn.
    fn drop(&mut self) {
        let Some(t) = self.ticket else { return };
        let waker = {
            let mut s = self.budget.lock();
            let Some(at) = s.queue.iter().position(|w| w.ticket == t) else {
                return;
            };
            s.queue.remove(at);
            if at == 0 {
                s.queue.front_mut().and_then(|w| w.waker.take())
            } else {
                None
            }
        };
        if let Some(w) = waker {
            w.wake();
        }
    }
}

impl BudgetPermit {
    /// Bytes this permit holds.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

impl Drop for BudgetPermit {
    fn drop(&mut self) {
        if let Some(b) = self.budget.take() {
            b.release(self.bytes);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_lite::future::{block_on, poll_once};

    #[test]
    fn unbounded_never_waits() {
        let b = RequestBudget::new(None);
        let p = block_on(b.acquire(usize::MAX));
        assert_eq!(p.bytes(), 0);
    }

    #[test]
    fn waits_until_memory_comes_back_in_order() {
        let b = RequestBudget::new(Some(100));
        let p1 = block_on(b.acquire(60));
        assert_eq!(b.available(), 40);
        let mut big = Box::pin(b.acquire(50));
        assert!(block_on(poll_once(&mut big)).is_none(), "50 > 40 available");
        // A small request behind the waiting one waits too (no overtaking).
        let mut small = Box::pin(b.acquire(10));
        assert!(block_on(poll_once(&mut small)).is_none());
        assert_eq!(b.waiting(), 2);
        drop(p1);
        let p2 = block_on(poll_once(&mut big)).expect("fits once 60 came back");
        let p3 = block_on(poll_once(&mut small)).expect("the next waiter fits too");
        assert_eq!(b.available(), 40);
        drop((p2, p3));
        assert_eq!(b.available(), 100);
        assert_eq!(b.waiting(), 0);
    }

    #[test]
    fn a_request_larger_than_the_budget_runs_alone() {
        let b = RequestBudget::new(Some(100));
        let p1 = block_on(b.acquire(1));
        let mut huge = Box::pin(b.acquire(1000));
        assert!(
            block_on(poll_once(&mut huge)).is_none(),
            "waits for the budget to empty"
        );
        drop(p1);
        let p = block_on(poll_once(&mut huge)).expect("alone now");
        assert_eq!(p.bytes(), 100);
        assert_eq!(b.available(), 0);
        drop(p);
        assert_eq!(b.available(), 100);
    }

    #[test]
    fn a_dropped_waiter_leaves_the_queue_and_passes_its_turn() {
        let b = RequestBudget::new(Some(100));
        let p1 = block_on(b.acquire(90));
        let mut first = Box::pin(b.acquire(50));
        let mut second = Box::pin(b.acquire(10));
        assert!(block_on(poll_once(&mut first)).is_none());
        assert!(block_on(poll_once(&mut second)).is_none());
        drop(first);
        assert_eq!(b.waiting(), 1);
        let p2 = block_on(poll_once(&mut second)).expect("10 fits, and it is first now");
        drop((p1, p2));
        assert_eq!(b.available(), 100);
    }

    #[test]
    fn permits_released_on_another_thread_wake_the_waiter() {
        let b = RequestBudget::new(Some(10));
        let p = block_on(b.acquire(10));
        let t = std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(20));
            drop(p);
        });
        let p2 = block_on(b.acquire(10));
        assert_eq!(p2.bytes(), 10);
        t.join().unwrap();
    }
}
