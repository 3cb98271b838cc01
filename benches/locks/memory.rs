//! Memory and CPU figures of the bench process: a counting allocator (for a deterministic
//! count of what the watchdog keeps per lock, and of allocations per cycle), resident memory, the resident part of thread
//! stacks, and a thread's CPU time.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering::Relaxed};

/// The system allocator, counting the bytes live in blocks allocated while counting is on.
/// Off (one relaxed load per call) except around the watchdog's memory probes.
pub struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);
/// Blocks allocated (and reallocated) while counting is on, by any thread.
static BLOCKS: AtomicIsize = AtomicIsize::new(0);

#[cfg(all(target_os = "linux", target_env = "gnu"))]
extern "C" {
    fn malloc_usable_size(ptr: *mut std::ffi::c_void) -> usize;
}

/// What malloc really set aside for a block (its rounding included, its 8-byte chunk header
/// not), where glibc can tell; else the size asked for.
fn size_of_block(ptr: *mut u8, layout: Layout) -> isize {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: `ptr` is a live block from the system allocator (glibc malloc).
    let size = unsafe { malloc_usable_size(ptr.cast()) };
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    let size = {
        let _ = ptr;
        layout.size()
    };
    let _ = layout;
    size as isize
}

// SAFETY: every call is passed on to `System` unchanged; the counting only reads the blocks'
// sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() && COUNTING.load(Relaxed) {
            LIVE.fetch_add(size_of_block(p, layout), Relaxed);
            BLOCKS.fetch_add(1, Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() && COUNTING.load(Relaxed) {
            LIVE.fetch_add(size_of_block(p, layout), Relaxed);
            BLOCKS.fetch_add(1, Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        if COUNTING.load(Relaxed) {
            LIVE.fetch_sub(size_of_block(ptr, layout), Relaxed);
        }
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let counting = COUNTING.load(Relaxed);
        let old = if counting {
            size_of_block(ptr, layout)
        } else {
            0
        };
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if counting && !p.is_null() {
            // SAFETY of the layout: `realloc`'s contract makes this size valid for the align.
            let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
            LIVE.fetch_add(size_of_block(p, new) - old, Relaxed);
            BLOCKS.fetch_add(1, Relaxed);
        }
        p
    }
}

/// Counts heap bytes (and blocks allocated) from now on, from zero.
pub fn start_counting() {
    LIVE.store(0, Relaxed);
    BLOCKS.store(0, Relaxed);
    COUNTING.store(true, Relaxed);
}

/// Bytes allocated and not freed since [`start_counting`] (blocks allocated before it and
/// freed since count negatively); counting goes on.
pub fn counted() -> isize {
    LIVE.load(Relaxed)
}

/// Blocks allocated or reallocated since [`start_counting`].
pub fn blocks_allocated() -> isize {
    BLOCKS.load(Relaxed)
}

pub fn stop_counting() {
    COUNTING.store(false, Relaxed);
}

/// Resident memory of the process (VmRSS), in MiB.
pub fn rss_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0.0);
    kib / 1024.0
}

/// Resident memory, in MiB, of the mappings that contain any of `addrs`: given the address
/// of a local variable of each thread, its stack (with what glibc keeps at the stack's top:
/// the thread's TLS and descriptor). Read from `/proc/self/smaps`.
pub fn resident_mib_of_mappings(addrs: &mut [usize]) -> f64 {
    addrs.sort_unstable();
    let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap_or_default();
    let mut kib = 0u64;
    let mut holds = false;
    for line in smaps.lines() {
        if let Some((start, end)) = mapping_range(line) {
            let first = addrs.partition_point(|&a| a < start);
            holds = first < addrs.len() && addrs[first] < end;
        } else if holds {
            if let Some(v) = line.strip_prefix("Rss:") {
                kib += v
                    .trim()
                    .trim_end_matches("kB")
                    .trim()
                    .parse::<u64>()
                    .unwrap_or(0);
            }
        }
    }
    kib as f64 / 1024.0
}

/// The address range of an smaps header line (`start-end perms offset dev inode path`).
fn mapping_range(line: &str) -> Option<(usize, usize)> {
    let (start, end) = line.split_whitespace().next()?.split_once('-')?;
    let start = usize::from_str_radix(start, 16).ok()?;
    let end = usize::from_str_radix(end, 16).ok()?;
    Some((start, end))
}

/// The ids of this process's threads named `name` (as truncated to 15 bytes by the kernel).
pub fn threads_named(name: &str) -> Vec<u32> {
    let comm = &name[..name.len().min(15)];
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|tid| {
            std::fs::read_to_string(format!("/proc/self/task/{tid}/comm"))
                .is_ok_and(|c| c.trim_end() == comm)
        })
        .collect()
}

/// CPU time of thread `tid` of this process so far, in µs (`schedstat`: ns on a CPU).
pub fn thread_cpu_us(tid: u32) -> f64 {
    schedstat_ns(&format!("/proc/self/task/{tid}/schedstat")) / 1e3
}

/// CPU time of the calling thread so far, in µs.
pub fn own_cpu_us() -> f64 {
    schedstat_ns("/proc/thread-self/schedstat") / 1e3
}

/// This process's CPU time so far (all its threads, user + system), in µs, and its context
/// switches (voluntary or not).
pub fn process_cpu_us_and_switches() -> (f64, u64) {
    // SAFETY: `getrusage` only writes the struct it is given.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let us = |t: libc::timeval| t.tv_sec as f64 * 1e6 + t.tv_usec as f64;
    let cpu = us(usage.ru_utime) + us(usage.ru_stime);
    (cpu, (usage.ru_nvcsw + usage.ru_nivcsw) as u64)
}

/// Runs the calling thread `levels` nice levels below where it runs now (Linux: nice is per
/// thread), so that other processes, such as the server, go first when both want a CPU.
pub fn lower_own_priority(levels: i32) {
    // SAFETY: plain system calls on the calling thread (`who` 0), no memory passed. Its own
    // nice value is always readable (and may be -1, so it is not checked as an error).
    let set = unsafe {
        let now = libc::getpriority(libc::PRIO_PROCESS, 0);
        libc::setpriority(libc::PRIO_PROCESS, 0, (now + levels).min(19))
    };
    assert_eq!(set, 0, "setpriority: {}", std::io::Error::last_os_error());
}

fn schedstat_ns(path: &str) -> f64 {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(f64::NAN)
}
