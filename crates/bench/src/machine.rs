//! What a result was measured on: processor, cores, memory, system and the code's
//! version, so a figure can be compared with another only when that makes sense.

use std::process::Command;

#[derive(Clone, Debug)]
pub(crate) struct Machine {
    pub cpu: String,
    pub cores: usize,
    pub memory_gib: f64,
    pub os: String,
    pub kernel: String,
    pub basalt_version: &'static str,
    /// `git rev-parse HEAD` of the working directory, `+dirty` with uncommitted changes.
    pub git_commit: String,
}

impl Machine {
    pub(crate) fn detect() -> Machine {
        let read = |path: &str| std::fs::read_to_string(path).unwrap_or_default();
        let cpu = read("/proc/cpuinfo")
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|rest| rest.split(':').nth(1))
            .map_or_else(|| "unknown".to_string(), |m| m.trim().to_string());
        let memory_kib: f64 = read("/proc/meminfo")
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or(0.0);
        let os = read("/etc/os-release")
            .lines()
            .find_map(|l| l.strip_prefix("PRETTY_NAME="))
            .map_or_else(
                || std::env::consts::OS.to_string(),
                |n| n.trim_matches('"').to_string(),
            );
        Machine {
            cpu,
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            memory_gib: memory_kib / (1024.0 * 1024.0),
            os,
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            basalt_version: env!("CARGO_PKG_VERSION"),
            git_commit: git_commit(),
        }
    }
}

fn git_commit() -> String {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match git(&["rev-parse", "HEAD"]) {
        Some(commit) => {
            let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{commit}+dirty")
            } else {
                commit
            }
        }
        None => "unknown".to_string(),
    }
}
