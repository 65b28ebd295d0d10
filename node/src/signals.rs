//! SIGTERM/SIGINT handling: blocked in every thread, awaited by the main thread with
//! `sigwait`, which then asks the shards to stop.

/// Blocks SIGTERM and SIGINT in the calling thread and every thread it starts afterwards.
pub fn block_termination_signals() -> libc::sigset_t {
    // SAFETY: `set` is a local sigset initialised by sigemptyset before use; pthread_sigmask
    // only changes this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

/// Waits for SIGTERM or SIGINT; returns the signal number.
pub fn wait_for_termination(set: &libc::sigset_t) -> i32 {
    let mut sig = 0;
    // SAFETY: `set` was initialised by `block_termination_signals`; `sig` is a valid out pointer.
    unsafe { libc::sigwait(set, &mut sig) };
    sig
}
