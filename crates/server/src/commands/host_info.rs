//! `hostInfo`: the machine the server runs on, as mongod describes a Linux host, read
//! from /proc and /sys: its memory (and the cgroup's limit on it), its cores, sockets
//! and NUMA nodes, the kernel and the page size.

use super::Ctx;
use basalt_error::Result;
use bson::{doc, Document};
use std::collections::HashSet;

pub fn host_info(_ctx: &Ctx<'_>, _body: &Document) -> Result<Document> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as i32;
    let memory_mb = basalt_storage::physical_memory_mb().unwrap_or(0);
    let cpus = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    // A core is a (socket, core) pair; a machine that does not say has one socket and
    // as many cores as processors.
    let sockets = cpu_values(&cpus, "physical id")
        .collect::<HashSet<_>>()
        .len()
        .max(1);
    let physical_cores = cpus
        .split("\n\n")
        .filter_map(|cpu| {
            Some((
                cpu_values(cpu, "physical id").next()?,
                cpu_values(cpu, "core id").next()?,
            ))
        })
        .collect::<HashSet<_>>()
        .len();
    let numa_nodes = std::fs::read_dir("/sys/devices/system/node")
        .map(|dir| {
            dir.filter_map(|entry| entry.ok())
                .filter(|entry| {
                    let name = entry.file_name();
                    let name = name.to_string_lossy();
                    name.strip_prefix("node")
                        .is_some_and(|n| n.parse::<u32>().is_ok())
                })
                .count()
        })
        .unwrap_or(0)
        .max(1);
    let page_size = page_size();
    Ok(doc! {
        "system": {
            "currentTime": bson::DateTime::now(),
            "hostname": host_name(),
            "cpuAddrSize": 64,
            "memSizeMB": memory_mb as i64,
            "memLimitMB": memory_limit_mb(memory_mb) as i64,
            "numCores": cores,
            "numCoresAvailableToProcess": cores,
            "numPhysicalCores": if physical_cores > 0 { physical_cores as i32 } else { cores },
            "numCpuSockets": sockets as i32,
            "cpuArch": std::env::consts::ARCH,
            "numaEnabled": numa_nodes > 1,
            "numNumaNodes": numa_nodes as i32,
        },
        "os": {
            "type": read_trimmed("/proc/sys/kernel/ostype").unwrap_or_else(|| std::env::consts::OS.to_string()),
            "name": os_pretty_name(),
            "version": read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_default(),
        },
        "extra": {
            "versionString": read_trimmed("/proc/version").unwrap_or_default(),
            "kernelVersion": read_trimmed("/proc/sys/kernel/osrelease").unwrap_or_default(),
            "cpuFrequencyMHz": cpu_values(&cpus, "cpu MHz").next().unwrap_or_default(),
            "cpuString": cpu_values(&cpus, "model name").next().unwrap_or_default(),
            "pageSize": page_size as i64,
            "numPages": (memory_mb * 1024 * 1024 / page_size.max(1)) as i64,
            "maxOpenFiles": max_open_files(),
        },
    })
}

/// The values of field `name` in /proc/cpuinfo's text, one per processor.
fn cpu_values<'a>(cpus: &'a str, name: &'a str) -> impl Iterator<Item = &'a str> {
    cpus.lines()
        .filter_map(|line| line.split_once(':'))
        .filter(move |(key, _)| key.trim() == name)
        .map(|(_, value)| value.trim())
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

pub(crate) fn host_name() -> String {
    read_trimmed("/proc/sys/kernel/hostname").unwrap_or_else(|| "localhost".to_string())
}

/// The distribution's name, as mongod reports it from /etc/os-release.
fn os_pretty_name() -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix("PRETTY_NAME="))
                .map(|v| v.trim_matches('"').to_string())
        })
        .unwrap_or_else(|| std::env::consts::OS.to_string())
}

/// The memory the process may use: the machine's, or its cgroup's limit when lower
/// (cgroup v2's `memory.max`, v1's `memory.limit_in_bytes`).
fn memory_limit_mb(memory_mb: u64) -> u64 {
    [
        "/sys/fs/cgroup/memory.max",
        "/sys/fs/cgroup/memory/memory.limit_in_bytes",
    ]
    .iter()
    .find_map(|path| read_trimmed(path)?.parse::<u64>().ok())
    .map_or(memory_mb, |bytes| (bytes / (1024 * 1024)).min(memory_mb))
}

/// The page size the kernel gave the process (`AT_PAGESZ` in its auxiliary vector).
fn page_size() -> u64 {
    const AT_PAGESZ: u64 = 6;
    let auxv = std::fs::read("/proc/self/auxv").unwrap_or_default();
    auxv.chunks_exact(16)
        .map(|pair| {
            let word = |bytes: &[u8]| u64::from_ne_bytes(bytes.try_into().unwrap_or([0; 8]));
            (word(&pair[..8]), word(&pair[8..]))
        })
        .find(|(kind, _)| *kind == AT_PAGESZ)
        .map_or(4096, |(_, size)| size)
}

/// The soft limit on the process's open files (`Max open files` in /proc/self/limits).
fn max_open_files() -> i64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|limits| {
            let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
            line.split_whitespace().nth(3)?.parse().ok()
        })
        .unwrap_or(0)
}
