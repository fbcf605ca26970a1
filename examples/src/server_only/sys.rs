//! The operating-system calls of server-only mode: which CPUs a thread runs on, the
//! open-files limit, and what a process has used (CPU time, resident memory).

use std::io;

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::sys::resource::{Resource, UsageWho, getrlimit, getrusage, setrlimit};
use nix::unistd::Pid;

use crate::cli::Usage;

/// A CPU list, as a command-line value (see [`parse_cpus`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuList(pub Vec<usize>);

impl std::str::FromStr for CpuList {
    type Err = Usage;

    fn from_str(list: &str) -> Result<CpuList, Usage> {
        parse_cpus(list).map(CpuList)
    }
}

/// Reads a CPU list: numbers and ranges separated by commas (`0`, `0,2`, `1-3`).
pub fn parse_cpus(list: &str) -> Result<Vec<usize>, Usage> {
    let bad = |why: &str| Usage(format!("CPU list {list:?}: {why}"));
    let mut cpus = Vec::new();
    for part in list.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let number = |s: &str| s.trim().parse::<usize>().map_err(|e| bad(&e.to_string()));
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(bad("a range must go up"));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(number(part)?),
        }
    }
    cpus.sort_unstable();
    cpus.dedup();
    if cpus.is_empty() {
        return Err(bad("no CPU"));
    }
    if cpus.iter().any(|&c| c >= CpuSet::count()) {
        return Err(bad(&format!("CPUs go up to {}", CpuSet::count() - 1)));
    }
    Ok(cpus)
}

/// Keeps the calling thread, and the threads it starts from now on, on `cpus`
/// (`sched_setaffinity`). Called before a process starts any thread, it pins the
/// whole process.
pub fn pin(cpus: &[usize]) -> io::Result<()> {
    let mut set = CpuSet::new();
    for &cpu in cpus {
        set.set(cpu).map_err(io::Error::from)?;
    }
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| {
        io::Error::new(
            io::Error::from(e).kind(),
            format!("pinning to CPUs {cpus:?}: {e}"),
        )
    })
}

/// Runs `f` with the calling thread (and the threads and processes it starts) on
/// `cpus`, and puts the thread's CPUs back after.
pub fn on_cpus<T>(cpus: &[usize], f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    let saved = SavedCpus::now()?;
    pin(cpus)?;
    let out = f();
    saved.restore()?;
    out
}

/// The CPUs the calling thread may run on, saved to be put back with
/// [`restore`](Self::restore) after a [`pin`].
#[derive(Debug, Clone, Copy)]
pub struct SavedCpus(CpuSet);

impl SavedCpus {
    /// The calling thread's CPUs now.
    pub fn now() -> io::Result<SavedCpus> {
        sched_getaffinity(Pid::from_raw(0))
            .map(SavedCpus)
            .map_err(io::Error::from)
    }

    /// Puts the calling thread back on them.
    pub fn restore(&self) -> io::Result<()> {
        sched_setaffinity(Pid::from_raw(0), &self.0).map_err(io::Error::from)
    }
}

/// `RLIMIT_NOFILE` before and after [`raise_nofile`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoFile {
    /// The soft limit found.
    pub was: u64,
    /// The soft limit now.
    pub now: u64,
    /// The hard limit (the most an unprivileged process may raise the soft one to).
    pub hard: u64,
}

impl NoFile {
    /// `was=<n> now=<n> hard=<n>`.
    pub fn fields(&self) -> String {
        format!("was={} now={} hard={}", self.was, self.now, self.hard)
    }
}

/// Raises the soft open-files limit as far as the hard limit allows (with no hard
/// limit, to the kernel's `fs.nr_open`), so thousands of connections fit.
pub fn raise_nofile() -> io::Result<NoFile> {
    let (was, hard) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    let mut want = hard;
    if hard == nix::sys::resource::RLIM_INFINITY {
        // The kernel refuses a soft limit above fs.nr_open.
        want = std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(was);
    }
    if want > was {
        setrlimit(Resource::RLIMIT_NOFILE, want, hard).map_err(io::Error::from)?;
    }
    let (now, _) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
    Ok(NoFile { was, now, hard })
}

/// What a process has used: its CPU time (user and system, `getrusage(RUSAGE_SELF)`:
/// all its threads, to the microsecond), its context switches (voluntary: a thread
/// waited, so each is followed by a wake-up; involuntary: a thread was preempted) and
/// its memory (`VmRSS`, `VmHWM` of `/proc/self/status`: the pages of its own it has
/// in RAM; socket buffers are the kernel's and not counted).
///
/// For a process that is not ours to ask ([`of_pid`](Self::of_pid): a Kitex server),
/// the same read from `/proc/PID`: CPU time in clock ticks (10 ms), context switches
/// of its live threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProcessUsage {
    /// CPU time in user mode, µs.
    pub utime_us: u64,
    /// CPU time in the kernel on its behalf, µs.
    pub stime_us: u64,
    /// Resident set now, KiB.
    pub rss_kb: u64,
    /// Resident set at its peak, KiB.
    pub hwm_kb: u64,
    /// Voluntary context switches (waits), all threads.
    pub vcsw: u64,
    /// Involuntary context switches (preemptions), all threads.
    pub ivcsw: u64,
    /// Socket reads and writes that moved data on the process's netpoll-rs reactors
    /// (`netpoll_rs::io_counts`: system calls under epoll, completions under
    /// io_uring); 0 for a process that is not ours.
    pub reads: u64,
    /// See `reads`.
    pub writes: u64,
}

impl ProcessUsage {
    /// The calling process's usage now.
    pub fn of_self() -> io::Result<ProcessUsage> {
        let ru = getrusage(UsageWho::RUSAGE_SELF).map_err(io::Error::from)?;
        let us = |t: nix::sys::time::TimeVal| {
            u64::try_from(t.tv_sec()).unwrap_or(0) * 1_000_000
                + u64::try_from(t.tv_usec()).unwrap_or(0)
        };
        let path = "/proc/self/status";
        let (rss_kb, hwm_kb) = memory_kb(&std::fs::read_to_string(path)?, path)?;
        let count = |n: std::ffi::c_long| u64::try_from(n).unwrap_or(0);
        let io = netpoll_rs::io_counts();
        Ok(ProcessUsage {
            utime_us: us(ru.user_time()),
            stime_us: us(ru.system_time()),
            rss_kb,
            hwm_kb,
            vcsw: count(ru.voluntary_context_switches()),
            ivcsw: count(ru.involuntary_context_switches()),
            reads: io.reads,
            writes: io.writes,
        })
    }

    /// Process `pid`'s usage now, from `/proc/PID/stat` (CPU time in clock ticks,
    /// taken as 10 ms: `USER_HZ` is 100 on Linux), `/proc/PID/status` (memory) and
    /// each `/proc/PID/task/TID/status` (context switches of its live threads).
    pub fn of_pid(pid: u32) -> io::Result<ProcessUsage> {
        let dir = format!("/proc/{pid}");
        let stat = std::fs::read_to_string(format!("{dir}/stat"))?;
        let (utime, stime) = stat_times(&stat).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, format!("{dir}/stat: {stat:?}"))
        })?;
        let path = format!("{dir}/status");
        let (rss_kb, hwm_kb) = memory_kb(&std::fs::read_to_string(&path)?, &path)?;
        let mut usage = ProcessUsage {
            utime_us: utime * 10_000,
            stime_us: stime * 10_000,
            rss_kb,
            hwm_kb,
            vcsw: 0,
            ivcsw: 0,
            reads: 0,
            writes: 0,
        };
        for task in std::fs::read_dir(format!("{dir}/task"))? {
            // A thread that ended since the listing has nothing left to count.
            let Ok(status) = std::fs::read_to_string(task?.path().join("status")) else {
                continue;
            };
            usage.vcsw += status_count(&status, "voluntary_ctxt_switches").unwrap_or(0);
            usage.ivcsw += status_count(&status, "nonvoluntary_ctxt_switches").unwrap_or(0);
        }
        Ok(usage)
    }

    /// User and system CPU time together, µs.
    pub fn cpu_us(&self) -> u64 {
        self.utime_us + self.stime_us
    }

    /// Context switches, both kinds.
    pub fn csw(&self) -> u64 {
        self.vcsw + self.ivcsw
    }

    /// `usage utime_us=<n> stime_us=<n> rss_kb=<n> hwm_kb=<n> vcsw=<n> ivcsw=<n>
    /// reads=<n> writes=<n>`: what a server child answers to `usage`.
    pub fn line(&self) -> String {
        format!(
            "usage utime_us={} stime_us={} rss_kb={} hwm_kb={} vcsw={} ivcsw={} reads={} \
             writes={}",
            self.utime_us,
            self.stime_us,
            self.rss_kb,
            self.hwm_kb,
            self.vcsw,
            self.ivcsw,
            self.reads,
            self.writes
        )
    }

    /// Reads a [`line`](Self::line) back; `None` if it is not one.
    pub fn parse(line: &str) -> Option<ProcessUsage> {
        let rest = line.trim().strip_prefix("usage ")?;
        let mut u = ProcessUsage::default();
        let mut seen = 0u8;
        for field in rest.split_whitespace() {
            let (key, value) = field.split_once('=')?;
            let value: u64 = value.parse().ok()?;
            let (slot, bit) = match key {
                "utime_us" => (&mut u.utime_us, 1),
                "stime_us" => (&mut u.stime_us, 2),
                "rss_kb" => (&mut u.rss_kb, 4),
                "hwm_kb" => (&mut u.hwm_kb, 8),
                "vcsw" => (&mut u.vcsw, 16),
                "ivcsw" => (&mut u.ivcsw, 32),
                // Optional: 0 when absent.
                "reads" => (&mut u.reads, 0),
                "writes" => (&mut u.writes, 0),
                _ => continue,
            };
            *slot = value;
            seen |= bit;
        }
        (seen == 63).then_some(u)
    }
}

/// The 1, 5 and 15-minute load averages (`/proc/loadavg`), as `0.52 0.80 1.10`; empty
/// where that cannot be read.
pub fn load_average() -> String {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    load.split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

/// The user and system CPU times, in clock ticks, of a `/proc/PID/stat` line: its
/// 14th and 15th fields, counted after the command name (which may hold blanks and
/// parentheses, so the fields start after its last `)`).
fn stat_times(stat: &str) -> Option<(u64, u64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace().skip(11);
    Some((fields.next()?.parse().ok()?, fields.next()?.parse().ok()?))
}

/// The first value after `key:` in the text of a `/proc/PID/status` that `parse`
/// reads (given the value with its blanks trimmed).
fn status_value<T>(status: &str, key: &str, parse: impl Fn(&str) -> Option<T>) -> Option<T> {
    status
        .lines()
        .find_map(|line| parse(line.strip_prefix(key)?.strip_prefix(':')?.trim()))
}

/// The number after `key:` in the text of a `/proc/PID/status`.
fn status_count(status: &str, key: &str) -> Option<u64> {
    status_value(status, key, |v| v.parse().ok())
}

/// `VmRSS` and `VmHWM`, in KiB, of the text of a `/proc/PID/status` read from `path`.
fn memory_kb(status: &str, path: &str) -> io::Result<(u64, u64)> {
    let kb = |key| {
        status_kb(status, key).ok_or_else(|| {
            io::Error::new(io::ErrorKind::InvalidData, format!("no {key} in {path}"))
        })
    };
    Ok((kb("VmRSS")?, kb("VmHWM")?))
}

/// The value in KiB of `key` (`VmRSS`, `VmHWM`...) in the text of a `/proc/PID/status`.
fn status_kb(status: &str, key: &str) -> Option<u64> {
    status_value(status, key, |v| v.strip_suffix("kB")?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpus("0").unwrap(), [0]);
        assert_eq!(parse_cpus("1, 0,1").unwrap(), [0, 1]);
        assert_eq!(parse_cpus("2-4,0").unwrap(), [0, 2, 3, 4]);
        assert!(parse_cpus("").is_err());
        assert!(parse_cpus("3-1").is_err());
        assert!(parse_cpus("x").is_err());
        assert!(parse_cpus("100000").is_err());
    }

    #[test]
    fn usage_lines_read_back() {
        let u = ProcessUsage {
            utime_us: 1_234_567,
            stime_us: 89,
            rss_kb: 10_240,
            hwm_kb: 20_480,
            vcsw: 7,
            ivcsw: 3,
            reads: 40,
            writes: 30,
        };
        assert_eq!(
            u.line(),
            "usage utime_us=1234567 stime_us=89 rss_kb=10240 hwm_kb=20480 vcsw=7 ivcsw=3 \
             reads=40 writes=30"
        );
        // A line without the counts (an older child) reads back with them 0.
        assert_eq!(
            ProcessUsage::parse("usage utime_us=1 stime_us=2 rss_kb=3 hwm_kb=4 vcsw=5 ivcsw=6")
                .map(|u| (u.reads, u.writes)),
            Some((0, 0))
        );
        assert_eq!(u.csw(), 10);
        assert_eq!(ProcessUsage::parse(&u.line()), Some(u));
        assert_eq!(ProcessUsage::parse(&format!("{}\n", u.line())), Some(u));
        assert_eq!(u.cpu_us(), 1_234_656);
        assert_eq!(
            ProcessUsage::parse("usage utime_us=1 stime_us=2 rss_kb=3"),
            None
        );
        assert_eq!(
            ProcessUsage::parse("usage utime_us=1 stime_us=2 rss_kb=3 hwm_kb=4"),
            None,
            "no context switches"
        );
        assert_eq!(
            ProcessUsage::parse("usage utime_us=x stime_us=2 rss_kb=3 hwm_kb=4 vcsw=1 ivcsw=1"),
            None
        );
        assert_eq!(ProcessUsage::parse("listening 127.0.0.1:1"), None);
    }

    #[test]
    fn status_fields() {
        let status = "Name:\tx\nVmHWM:\t   20480 kB\nVmRSS:\t   10240 kB\nThreads:\t3\n";
        assert_eq!(status_kb(status, "VmRSS"), Some(10240));
        assert_eq!(status_kb(status, "VmHWM"), Some(20480));
        assert_eq!(status_kb(status, "VmSwap"), None);
        assert_eq!(
            status_count("voluntary_ctxt_switches:\t42\n", "voluntary_ctxt_switches"),
            Some(42)
        );
        assert_eq!(
            status_count(
                "nonvoluntary_ctxt_switches:\t5\n",
                "voluntary_ctxt_switches"
            ),
            None
        );
        let mine = ProcessUsage::of_self().unwrap();
        assert!(mine.rss_kb > 0 && mine.hwm_kb >= mine.rss_kb, "{mine:?}");
    }

    #[test]
    fn stat_lines_give_their_cpu_times_whatever_the_command_name() {
        let line = "1234 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 250 37 0 0 20 0 4 0 99 1000 50";
        assert_eq!(stat_times(line), Some((250, 37)));
        assert_eq!(stat_times("1234 (x) S 1 2"), None);
        // This process, read as another would be: the same figures, to the tick.
        let me = ProcessUsage::of_pid(std::process::id()).unwrap();
        let mine = ProcessUsage::of_self().unwrap();
        assert!(me.rss_kb > 0 && me.hwm_kb >= me.rss_kb, "{me:?}");
        assert!(me.cpu_us() <= mine.cpu_us() + 20_000, "{me:?} {mine:?}");
        assert!(me.csw() > 0, "{me:?}");
    }
}
