//! Who holds a lease, and whether that holder still lives: host, boot, PID and the
//! process start time, so that a dead, zombie or reused PID is never taken for the
//! holder. Linux reads `/proc`; elsewhere only lease expiry decides.

use std::fs;

/// The identity of a process, as recorded with a lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessIdentity {
    /// Host name.
    pub host: String,
    /// Kernel boot id; a reboot changes it (empty when unknown).
    pub boot_id: String,
    /// Process id.
    pub pid: u32,
    /// Start time in clock ticks since boot (0 when unknown).
    pub start_ticks: u64,
}

/// Whether a lease holder is alive, as far as this host can tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Liveness {
    /// The holder runs.
    Alive,
    /// The holder is gone (exited, zombie, rebooted, or its PID was reused).
    Dead,
    /// Another host, or no `/proc`: only expiry can tell.
    Unknown,
}

impl ProcessIdentity {
    /// This process.
    pub fn current() -> Self {
        let pid = std::process::id();
        Self {
            host: read_trimmed("/proc/sys/kernel/hostname")
                .or_else(|| std::env::var("HOSTNAME").ok())
                .unwrap_or_else(|| "unknown-host".into()),
            boot_id: read_trimmed("/proc/sys/kernel/random/boot_id").unwrap_or_default(),
            pid,
            start_ticks: process_stat(pid).map_or(0, |stat| stat.start_ticks),
        }
    }

    /// Whether `self` (a recorded holder) is alive, judged from `observer`'s host.
    pub fn liveness(&self, observer: &ProcessIdentity) -> Liveness {
        if self.host != observer.host || observer.boot_id.is_empty() {
            return Liveness::Unknown;
        }
        if self.boot_id != observer.boot_id {
            return Liveness::Dead;
        }
        match process_stat(self.pid) {
            None => Liveness::Dead,
            Some(stat) if matches!(stat.state, 'Z' | 'X' | 'x') => Liveness::Dead,
            Some(stat) if self.start_ticks != 0 && stat.start_ticks != self.start_ticks => {
                Liveness::Dead
            }
            Some(_) => Liveness::Alive,
        }
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    fs::read_to_string(path)
        .ok()
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
}

/// The fields of `/proc/PID/stat` that identify a process.
struct ProcStat {
    state: char,
    start_ticks: u64,
}

fn process_stat(pid: u32) -> Option<ProcStat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces; the fields
    // after its last ')' start with field 3, the state; field 22 is the start time.
    let rest = &text[text.rfind(')')? + 1..];
    let mut fields = rest.split_whitespace();
    let state = fields.next()?.chars().next()?;
    let start_ticks = fields.nth(18)?.parse().ok()?;
    Some(ProcStat { state, start_ticks })
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    #[test]
    fn this_process_is_alive_and_a_reaped_child_is_dead() {
        let me = ProcessIdentity::current();
        if me.boot_id.is_empty() {
            return;
        }
        assert_eq!(me.liveness(&me), Liveness::Alive);
        let mut child = Command::new("true").spawn().unwrap();
        let child_pid = child.id();
        child.wait().unwrap();
        let gone = ProcessIdentity {
            pid: child_pid,
            ..me.clone()
        };
        assert_eq!(gone.liveness(&me), Liveness::Dead);
    }

    #[test]
    fn a_reused_pid_or_another_boot_is_dead_and_another_host_unknown() {
        let me = ProcessIdentity::current();
        if me.boot_id.is_empty() {
            return;
        }
        let reused = ProcessIdentity {
            start_ticks: me.start_ticks + 1,
            ..me.clone()
        };
        assert_eq!(reused.liveness(&me), Liveness::Dead);
        let rebooted = ProcessIdentity {
            boot_id: "another-boot".into(),
            ..me.clone()
        };
        assert_eq!(rebooted.liveness(&me), Liveness::Dead);
        let remote = ProcessIdentity {
            host: "elsewhere".into(),
            ..me.clone()
        };
        assert_eq!(remote.liveness(&me), Liveness::Unknown);
    }

    #[test]
    fn a_zombie_is_dead() {
        let me = ProcessIdentity::current();
        if me.boot_id.is_empty() {
            return;
        }
        let mut child = Command::new("true").spawn().unwrap();
        let pid = child.id();
        let zombie = (0..200).find_map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(10));
            process_stat(pid).filter(|stat| stat.state == 'Z')
        });
        let zombie = zombie.expect("the unreaped child becomes a zombie");
        let holder = ProcessIdentity {
            pid,
            start_ticks: zombie.start_ticks,
            ..me.clone()
        };
        assert_eq!(holder.liveness(&me), Liveness::Dead);
        child.wait().unwrap();
    }
}
