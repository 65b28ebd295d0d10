//! Saying so when something waits far longer than it should: a future raced against a timer
//! that calls `on_slow` once (then keeps waiting). Costs nothing when the future is ready at
//! once (no timer is armed).

use std::future::Future;
use std::time::Duration;

/// Awaits `fut`; if it is not done after `after`, calls `on_slow` once and keeps waiting.
pub async fn warn_if_slow<F: Future>(fut: F, after: Duration, on_slow: impl FnOnce()) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    if let Some(out) = futures_lite::future::poll_once(&mut fut).await {
        return out;
    }
    let slow = async {
        glommio::timer::sleep(after).await;
        on_slow();
        std::future::pending::<F::Output>().await
    };
    futures_lite::future::or(fut, slow).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    #[test]
    fn warns_once_for_a_slow_future_and_never_for_a_ready_one() {
        glommio::LocalExecutorBuilder::default()
            .spawn(|| async {
                let warned = Cell::new(0);
                let slow = glommio::timer::sleep(Duration::from_millis(80));
                warn_if_slow(slow, Duration::from_millis(10), || {
                    warned.set(warned.get() + 1)
                })
                .await;
                assert_eq!(warned.get(), 1);
                let v = warn_if_slow(async { 7 }, Duration::ZERO, || warned.set(99)).await;
                assert_eq!((v, warned.get()), (7, 1));
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
