//! The start-up notice about how started programs are confined: once per
//! process, only when the session may start programs, and recorded in the
//! session's configuration.

use agent::tools::{ChildPolicy, Confinement};
use agent_runtime::SessionConfig;

/// Probes confinement when `config` may start programs, says on stderr (unless
/// the output is JSON) when Landlock is unavailable, and records the outcome in
/// `config`.
pub fn note(config: &mut SessionConfig, json: bool) {
    if !config.starts_programs() {
        return;
    }
    let found = probe();
    if let Confinement::Unconfined(why) = &found
        && !json
    {
        eprintln!("{}", unconfined_notice(why));
    }
    config.confinement = Some(found.record());
}

/// Probes confinement for a worker and says on stderr when it is unavailable.
pub fn note_for_worker() {
    if let Confinement::Unconfined(why) = probe() {
        eprintln!("{}", unconfined_notice(&why));
    }
}

fn probe() -> Confinement {
    ChildPolicy::new(Vec::new()).probe()
}

fn unconfined_notice(why: &str) -> String {
    format!(
        "agent: note: programs started by run_command and --finish-when are not confined ({why}); they get a scrubbed environment but may write wherever this user can"
    )
}
