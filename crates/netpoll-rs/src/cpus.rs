//! How many CPUs this process may use: what thread pools should be sized from.
//!
//! A process in a container sees every CPU of the host, but may run on fewer: its
//! affinity mask (`taskset`, cpusets) says which CPUs it may run on, and a CPU quota of
//! its cgroup (Kubernetes' CPU limit) how much CPU time it gets per period. A pool
//! sized for the host's CPUs under a quota of 4 has more threads than CPU time to run
//! them, and the kernel throttles the whole process once the quota is spent.
//!
//! [`CpuBudget::current`] reads both:
//! - the affinity mask (`sched_getaffinity`);
//! - the CPU quota of the process's cgroup and of each of its ancestors (the nearest
//!   limit is not always the tightest: the smallest quota over period wins), under
//!   cgroup v2 (`cpu.max`) and cgroup v1 (`cpu.cfs_quota_us` over `cpu.cfs_period_us`),
//!   both when a machine mounts both (a "hybrid" layout). Where the hierarchies are
//!   mounted comes from `/proc/self/mountinfo`, the process's place in them from
//!   `/proc/self/cgroup`.
//!
//! The usable count is the smaller of the two, a quota rounded up (a quota of 1.5 CPUs
//! keeps two threads busy part of the time; rounding down would leave half a CPU
//! unused), and at least 1. `std::thread::available_parallelism` reads the same
//! sources but rounds a quota down and says nothing of where the number came from,
//! which [`CpuBudget`] keeps, so that a program can log it.
//!
//! The files are read through [`Files`], so the parsing and the walk up the hierarchy
//! are tested on cgroup trees written by the tests. A file that is missing or does
//! not parse means no limit from it: a limit that cannot be read is not applied, and
//! the count falls back to the affinity mask.

use std::path::{Path, PathBuf};

/// A CPU quota: `quota` microseconds of CPU time per `period` microseconds, set on the
/// cgroup at `cgroup`.
#[derive(Debug, Clone, PartialEq)]
pub struct Quota {
    /// CPU time allowed per period, in microseconds.
    pub quota: u64,
    /// The period, in microseconds.
    pub period: u64,
    /// The cgroup directory whose file set it.
    pub cgroup: PathBuf,
}

impl Quota {
    /// The quota in CPUs (2.5: two and a half CPUs' worth of time).
    pub fn cpus(&self) -> f64 {
        self.quota as f64 / self.period as f64
    }
}

/// What this process may use, and why.
#[derive(Debug, Clone, PartialEq)]
pub struct CpuBudget {
    /// CPUs in the affinity mask (`None`: it could not be read).
    pub affinity: Option<usize>,
    /// The tightest CPU quota over the process's cgroups, if any.
    pub quota: Option<Quota>,
    /// The CPUs to size thread pools for: the smaller of the affinity count and the
    /// quota rounded up, at least 1.
    pub usable: usize,
}

impl CpuBudget {
    /// The budget of this process now.
    pub fn current() -> CpuBudget {
        CpuBudget::from_sources(&Procfs, crate::sys::affinity_count())
    }

    /// The budget from cgroup files read through `files`, and the affinity count.
    pub fn from_sources(files: &impl Files, affinity: Option<usize>) -> CpuBudget {
        let quota = tightest_quota(files);
        let from_quota = quota.as_ref().map(|q| {
            // Whole CPUs, rounded up; a quota tiny enough to round to 0 still runs.
            (q.quota.div_ceil(q.period)).max(1) as usize
        });
        let usable = match (affinity, from_quota) {
            (Some(a), Some(q)) => a.min(q),
            (Some(n), None) | (None, Some(n)) => n,
            (None, None) => std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
        .max(1);
        CpuBudget {
            affinity,
            quota,
            usable,
        }
    }
}

impl std::fmt::Display for CpuBudget {
    /// `usable=<n> affinity=<n|?> quota=<cpus>@<cgroup>|none`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "usable={}", self.usable)?;
        match self.affinity {
            Some(a) => write!(f, " affinity={a}")?,
            None => write!(f, " affinity=?")?,
        }
        match &self.quota {
            Some(q) => write!(f, " quota={:.2}@{}", q.cpus(), q.cgroup.display()),
            None => write!(f, " quota=none"),
        }
    }
}

/// Follows the budget of a running process, whose thread pools were sized at start:
/// a quota can change while it runs (a container's CPU limit resized in place, a
/// cpuset moved), and the pools do not change with it. [`observe`](Self::observe)
/// each new reading (a server does it every 30 s); it says when the usable count
/// differs from the last reading, so that the change is logged once, with the count
/// the pools were sized for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BudgetWatch {
    sized_for: usize,
    last: usize,
}

/// A change of the usable count seen by a [`BudgetWatch`].
#[derive(Debug, Clone, PartialEq)]
pub struct BudgetChange {
    /// The usable count the thread pools were sized for.
    pub sized_for: usize,
    /// The usable count at the reading before.
    pub was: usize,
    /// The reading now.
    pub now: CpuBudget,
}

impl BudgetWatch {
    /// A watch over pools sized for `sized_for` usable CPUs.
    pub fn new(sized_for: usize) -> BudgetWatch {
        BudgetWatch {
            sized_for,
            last: sized_for,
        }
    }

    /// Takes a new reading: the change when its usable count differs from the last
    /// reading's, `None` otherwise.
    pub fn observe(&mut self, now: CpuBudget) -> Option<BudgetChange> {
        if now.usable == self.last {
            return None;
        }
        let was = std::mem::replace(&mut self.last, now.usable);
        Some(BudgetChange {
            sized_for: self.sized_for,
            was,
            now,
        })
    }
}

/// Where the cgroup files are read from: the real `/proc` and `/sys`, or, in tests, a
/// tree in memory.
pub trait Files {
    /// The whole text of the file at `path`, or `None` when it cannot be read.
    fn read(&self, path: &Path) -> Option<String>;
}

/// The real files.
#[derive(Debug, Clone, Copy, Default)]
pub struct Procfs;

impl Files for Procfs {
    fn read(&self, path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok()
    }
}

/// One line of `/proc/self/mountinfo` that mounts a cgroup hierarchy.
#[derive(Debug, PartialEq)]
struct CgroupMount {
    /// The part of the hierarchy mounted (`/` unless a container sees a subtree).
    root: PathBuf,
    /// Where it is mounted.
    mount_point: PathBuf,
    /// `cgroup2`, or `cgroup` (v1) with its controllers.
    version: Version,
}

#[derive(Debug, PartialEq)]
enum Version {
    V2,
    /// The controllers of a v1 hierarchy (`cpu`, `cpuacct`...).
    V1(Vec<String>),
}

/// The cgroup mounts of a mountinfo text. Lines that do not parse are skipped.
fn cgroup_mounts(mountinfo: &str) -> Vec<CgroupMount> {
    let mut mounts = Vec::new();
    for line in mountinfo.lines() {
        // `id parent dev root mount-point options [optional...] - fstype source super`
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let left: Vec<&str> = left.split(' ').collect();
        let right: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(mount_point)) = (left.get(3), left.get(4)) else {
            continue;
        };
        let version = match right.first() {
            Some(&"cgroup2") => Version::V2,
            Some(&"cgroup") => {
                let options = right.get(2).copied().unwrap_or_default();
                Version::V1(options.split(',').map(str::to_owned).collect())
            }
            _ => continue,
        };
        mounts.push(CgroupMount {
            root: PathBuf::from(unescape(root)),
            mount_point: PathBuf::from(unescape(mount_point)),
            version,
        });
    }
    mounts
}

/// mountinfo's octal escapes (`\040` for a blank) undone; a bad escape is kept as is.
fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let code = bytes
            .get(i + 1..i + 4)
            .filter(|_| bytes[i] == b'\\')
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| u8::from_str_radix(d, 8).ok());
        match code {
            Some(c) => {
                out.push(c);
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The tightest quota over the process's cgroups, v2 and v1 alike.
fn tightest_quota(files: &impl Files) -> Option<Quota> {
    let membership = files.read(Path::new("/proc/self/cgroup"))?;
    let mountinfo = files.read(Path::new("/proc/self/mountinfo"))?;
    let mounts = cgroup_mounts(&mountinfo);
    let mut best: Option<Quota> = None;
    for line in membership.lines() {
        // `id:controllers:path`; v2's line is `0::path`.
        let mut parts = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let v2 = id == "0" && controllers.is_empty();
        let v1_cpu = controllers.split(',').any(|c| c == "cpu");
        if !v2 && !v1_cpu {
            continue;
        }
        let mount = mounts.iter().find(|m| match &m.version {
            Version::V2 => v2,
            Version::V1(controllers) => v1_cpu && controllers.iter().any(|c| c == "cpu"),
        });
        let Some(mount) = mount else { continue };
        // The path is from the hierarchy's root; the mount shows `root` and below.
        let Ok(inside) = Path::new(path).strip_prefix(&mount.root) else {
            continue;
        };
        let mut dir = mount.mount_point.join(inside);
        loop {
            let quota = if v2 {
                read_cpu_max(files, &dir)
            } else {
                read_cfs(files, &dir)
            };
            if let Some(q) = quota
                && best.as_ref().is_none_or(|b| q.cpus() < b.cpus())
            {
                best = Some(q);
            }
            if dir == mount.mount_point || !dir.pop() {
                break;
            }
        }
    }
    best
}

/// cgroup v2's `cpu.max`: `max PERIOD` (no limit) or `QUOTA PERIOD`.
fn read_cpu_max(files: &impl Files, dir: &Path) -> Option<Quota> {
    let text = files.read(&dir.join("cpu.max"))?;
    let mut fields = text.split_whitespace();
    let quota = fields.next()?.parse().ok()?;
    let period = fields.next()?.parse().ok()?;
    quota_of(quota, period, dir)
}

/// cgroup v1's `cpu.cfs_quota_us` (-1: no limit) over `cpu.cfs_period_us`.
fn read_cfs(files: &impl Files, dir: &Path) -> Option<Quota> {
    let quota: i64 = files
        .read(&dir.join("cpu.cfs_quota_us"))?
        .trim()
        .parse()
        .ok()?;
    let period = files
        .read(&dir.join("cpu.cfs_period_us"))?
        .trim()
        .parse()
        .ok()?;
    quota_of(u64::try_from(quota).ok()?, period, dir)
}

fn quota_of(quota: u64, period: u64, dir: &Path) -> Option<Quota> {
    (quota > 0 && period > 0).then(|| Quota {
        quota,
        period,
        cgroup: dir.to_path_buf(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// A file tree in memory.
    #[derive(Default)]
    struct Tree(HashMap<PathBuf, String>);

    impl Tree {
        fn with(mut self, path: &str, text: &str) -> Self {
            self.0.insert(PathBuf::from(path), text.to_owned());
            self
        }
    }

    impl Files for Tree {
        fn read(&self, path: &Path) -> Option<String> {
            self.0.get(path).cloned()
        }
    }

    const V2_MOUNT: &str = "30 23 0:26 / /sys/fs/cgroup rw,nosuid - cgroup2 cgroup2 rw\n";

    fn v2(path: &str) -> Tree {
        Tree::default()
            .with("/proc/self/cgroup", &format!("0::{path}\n"))
            .with("/proc/self/mountinfo", V2_MOUNT)
    }

    /// A quota resized while the process runs: the watch reports each change once,
    /// with the count the pools were sized for, and nothing while it stays.
    #[test]
    fn a_watch_reports_each_change_of_the_usable_count_once() {
        let quota = |q: &str| v2("/pod").with("/sys/fs/cgroup/pod/cpu.max", q);
        let start = CpuBudget::from_sources(&quota("200000 100000"), Some(8));
        let mut watch = BudgetWatch::new(start.usable);
        assert_eq!(watch.observe(start.clone()), None);
        let shrunk = CpuBudget::from_sources(&quota("100000 100000"), Some(8));
        let change = watch.observe(shrunk.clone()).unwrap();
        assert_eq!((change.sized_for, change.was, change.now.usable), (2, 2, 1));
        assert_eq!(watch.observe(shrunk), None, "reported once");
        let grown = CpuBudget::from_sources(&quota("max 100000"), Some(8));
        let change = watch.observe(grown).unwrap();
        assert_eq!((change.sized_for, change.was, change.now.usable), (2, 1, 8));
    }

    #[test]
    fn no_cgroup_files_leave_the_affinity_count() {
        let b = CpuBudget::from_sources(&Tree::default(), Some(6));
        assert_eq!((b.usable, b.quota), (6, None));
    }

    #[test]
    fn a_v2_quota_is_rounded_up_and_capped_by_the_affinity() {
        let t =
            v2("/kubepods/pod1").with("/sys/fs/cgroup/kubepods/pod1/cpu.max", "150000 100000\n");
        let b = CpuBudget::from_sources(&t, Some(8));
        assert_eq!(b.usable, 2);
        let q = b.quota.unwrap();
        assert_eq!((q.quota, q.period), (150_000, 100_000));
        assert_eq!(q.cgroup, Path::new("/sys/fs/cgroup/kubepods/pod1"));
        // Fewer CPUs in the mask than the quota: the mask wins.
        let t = v2("/a").with("/sys/fs/cgroup/a/cpu.max", "400000 100000");
        assert_eq!(CpuBudget::from_sources(&t, Some(3)).usable, 3);
    }

    #[test]
    fn max_means_no_v2_limit_and_an_ancestor_can_be_tighter() {
        let t = v2("/a/b/c")
            .with("/sys/fs/cgroup/a/b/c/cpu.max", "max 100000")
            .with("/sys/fs/cgroup/a/b/cpu.max", "300000 100000")
            .with("/sys/fs/cgroup/a/cpu.max", "100000 50000");
        let b = CpuBudget::from_sources(&t, Some(16));
        assert_eq!(b.usable, 2);
        assert_eq!(b.quota.unwrap().cgroup, Path::new("/sys/fs/cgroup/a"));
    }

    #[test]
    fn a_tiny_quota_still_gives_one_cpu() {
        let t = v2("/x").with("/sys/fs/cgroup/x/cpu.max", "1000 100000");
        assert_eq!(CpuBudget::from_sources(&t, Some(4)).usable, 1);
    }

    #[test]
    fn a_v1_quota_is_read_through_the_cpu_hierarchy() {
        let t = Tree::default()
            .with(
                "/proc/self/cgroup",
                "4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n1:name=systemd:/\n",
            )
            .with(
                "/proc/self/mountinfo",
                "31 23 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw,mode=755\n\
                 32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime shared:9 - cgroup cgroup rw,cpu,cpuacct\n\
                 35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
            )
            .with("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_quota_us", "250000\n")
            .with("/sys/fs/cgroup/cpu,cpuacct/docker/abc/cpu.cfs_period_us", "100000\n")
            .with("/sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_quota_us", "-1\n")
            .with("/sys/fs/cgroup/cpu,cpuacct/docker/cpu.cfs_period_us", "100000\n");
        let b = CpuBudget::from_sources(&t, Some(32));
        assert_eq!(b.usable, 3);
        assert_eq!(
            b.quota.unwrap().cgroup,
            Path::new("/sys/fs/cgroup/cpu,cpuacct/docker/abc")
        );
    }

    #[test]
    fn a_container_seeing_a_subtree_strips_the_mount_root() {
        // Inside a container the v1 hierarchy's /docker/abc is mounted at the mount
        // point, and /proc/self/cgroup still names the full path.
        let t = Tree::default()
            .with("/proc/self/cgroup", "3:cpu:/docker/abc\n")
            .with(
                "/proc/self/mountinfo",
                "40 31 0:29 /docker/abc /sys/fs/cgroup/cpu ro - cgroup cgroup rw,cpu\n",
            )
            .with("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "50000")
            .with("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000");
        let b = CpuBudget::from_sources(&t, Some(8));
        assert_eq!(b.usable, 1);
        assert_eq!(b.quota.unwrap().cgroup, Path::new("/sys/fs/cgroup/cpu"));
    }

    #[test]
    fn in_a_hybrid_layout_the_tighter_of_v1_and_v2_wins() {
        let t = Tree::default()
            .with("/proc/self/cgroup", "1:cpu:/\n0::/svc\n")
            .with(
                "/proc/self/mountinfo",
                "32 31 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
                 41 31 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
            )
            .with("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "600000")
            .with("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000")
            .with("/sys/fs/cgroup/unified/svc/cpu.max", "200000 100000");
        let b = CpuBudget::from_sources(&t, Some(8));
        assert_eq!(b.usable, 2);
        assert_eq!(
            b.quota.unwrap().cgroup,
            Path::new("/sys/fs/cgroup/unified/svc")
        );
    }

    #[test]
    fn unreadable_or_bad_files_apply_no_limit() {
        for cpu_max in [
            "",
            "lots 100000",
            "100000",
            "0 100000",
            "100000 0",
            "-5 100000",
        ] {
            let t = v2("/a").with("/sys/fs/cgroup/a/cpu.max", cpu_max);
            let b = CpuBudget::from_sources(&t, Some(4));
            assert_eq!((b.usable, &b.quota), (4, &None), "{cpu_max:?}");
        }
        // A path outside the mounted subtree, and garbage in both files.
        let t = Tree::default()
            .with("/proc/self/cgroup", "3:cpu:/elsewhere\nnonsense\n")
            .with(
                "/proc/self/mountinfo",
                "40 31 0:29 /docker/abc /sys/fs/cgroup/cpu ro - cgroup cgroup rw,cpu\nbad line\n",
            );
        assert_eq!(CpuBudget::from_sources(&t, Some(2)).usable, 2);
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        assert_eq!(unescape(r"/mnt/my\040cgroup"), "/mnt/my cgroup");
        assert_eq!(unescape(r"/odd\04"), r"/odd\04");
        assert_eq!(unescape(r"\\x"), r"\\x");
    }

    #[test]
    fn this_machine_gives_a_budget_within_its_mask() {
        let b = CpuBudget::current();
        assert!(b.usable >= 1);
        if let Some(a) = b.affinity {
            assert!(b.usable <= a, "{b}");
        }
        assert!(b.to_string().starts_with(&format!("usable={} ", b.usable)));
    }
}
