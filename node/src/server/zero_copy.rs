//! Sending a range of a segment file to a socket with `sendfile(2)`, on glommio's blocking
//! thread pool so that a page-cache miss never stalls the shard's reactor. The socket is
//! non-blocking; when its buffer is full the helper thread waits with `poll(2)`.

use std::io;
use std::os::fd::RawFd;

/// Sends `len` bytes of `file` from `position` to `socket`. The caller keeps both file
/// descriptors open until the returned future completes.
pub async fn sendfile_all(socket: RawFd, file: RawFd, position: u64, len: usize) -> io::Result<()> {
    glommio::executor()
        .spawn_blocking(move || sendfile_blocking(socket, file, position, len))
        .await
}

fn sendfile_blocking(
    socket: RawFd,
    file: RawFd,
    mut position: u64,
    mut len: usize,
) -> io::Result<()> {
    // Segment bytes are written with O_DIRECT, so a consumer behind the head reads them from the
    // device: ask for this range and as much again beyond it in one go (a consumer reading a
    // backlog asks for the next range next) instead of the kernel's 128 KiB readahead steps.
    // Advisory: a failure changes nothing.
    // SAFETY: plain syscall on a descriptor the caller keeps open.
    unsafe {
        libc::posix_fadvise(
            file,
            position as libc::off_t,
            (len as libc::off_t).saturating_mul(2),
            libc::POSIX_FADV_WILLNEED,
        );
    }
    while len > 0 {
        let mut offset = position as libc::off_t;
        // SAFETY: both descriptors are open for the duration of this call (the caller holds
        // them); `offset` is a valid pointer to a local.
        let n = unsafe { libc::sendfile(socket, file, &mut offset, len) };
        if n < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock => wait_writable(socket)?,
                io::ErrorKind::Interrupted => {}
                _ => return Err(e),
            }
            continue;
        }
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "segment file ended before the range sent",
            ));
        }
        position += n as u64;
        len -= n as usize;
    }
    Ok(())
}

fn wait_writable(socket: RawFd) -> io::Result<()> {
    let mut pfd = libc::pollfd {
        fd: socket,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: `pfd` is a valid pollfd array of length 1.
    let r = unsafe { libc::poll(&mut pfd, 1, crate::limits::SENDFILE_POLL_TIMEOUT_MS) };
    match r {
        1.. if pfd.revents & (libc::POLLERR | libc::POLLHUP) != 0 => {
            Err(io::Error::new(io::ErrorKind::BrokenPipe, "peer closed"))
        }
        1.. => Ok(()),
        0 => Err(io::Error::new(
            io::ErrorKind::TimedOut,
            "socket not writable for 30 s",
        )),
        _ => {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            }
        }
    }
}
