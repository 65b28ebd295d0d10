//! The process' own figures from `/proc/self`, as Prometheus' client libraries name them
//! (`process_cpu_seconds_total`, `process_resident_memory_bytes`, `process_open_fds`,
//! `process_start_time_seconds`).

/// What `/proc/self` says; a figure that cannot be read is `None` and left out.
#[derive(Debug, Clone, Default)]
pub struct ProcessFacts {
    pub cpu_seconds: Option<f64>,
    pub resident_bytes: Option<u64>,
    pub open_fds: Option<u64>,
    pub start_time_seconds: Option<f64>,
}

pub fn read() -> ProcessFacts {
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    // SAFETY: as above.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64;
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    // Fields after the command name (which may hold spaces), which ends at the last ')'.
    let fields: Vec<&str> = stat
        .as_deref()
        .and_then(|s| s.rsplit_once(')'))
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // proc(5): utime is field 14, stime 15, starttime 22; `fields[0]` is field 3.
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let cpu_seconds = match (field(14), field(15)) {
        (Some(u), Some(s)) if ticks > 0.0 => Some((u + s) as f64 / ticks),
        _ => None,
    };
    let boot_time = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<u64>().ok())
    });
    let start_time_seconds = match (field(22), boot_time) {
        (Some(start), Some(boot)) if ticks > 0.0 => Some(boot as f64 + start as f64 / ticks),
        _ => None,
    };
    let resident_bytes = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map(|pages| pages * page);
    let open_fds = std::fs::read_dir("/proc/self/fd")
        .ok()
        .map(|d| d.count() as u64);
    ProcessFacts {
        cpu_seconds,
        resident_bytes,
        open_fds,
        start_time_seconds,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_this_process() {
        let p = super::read();
        assert!(p.resident_bytes.unwrap() > 0);
        assert!(p.open_fds.unwrap() >= 3);
        assert!(p.cpu_seconds.is_some());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = p.start_time_seconds.unwrap();
        assert!(
            start <= now + 1.0 && start > now - 86400.0 * 365.0,
            "{start}"
        );
    }
}
