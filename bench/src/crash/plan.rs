//! What the crash harness runs, drawn from its seed: each session's script of
//! calculator, `append_line` and `sleep` calls with the answer it must end with,
//! and where each kill is aimed.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// SplitMix64: a tiny generator whose sequence is fixed by its seed on every
/// platform and version, which is what `--seed` promises.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// The generator for `seed`, mixed with `stream` so that independent parts of
    /// a run (one per session, one per attempt) draw independent sequences.
    pub fn new(seed: u64, stream: u64) -> Self {
        let mut rng = Self(seed ^ stream.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        rng.next();
        rng
    }

    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `low..=high`.
    pub fn between(&mut self, low: u64, high: u64) -> u64 {
        low + self.next() % (high.saturating_sub(low) + 1)
    }

    /// True with probability `percent` / 100.
    pub fn percent(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// One model response of a session's script.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    /// `left operation right` with the calculator (idempotent).
    Calculate {
        left: i64,
        operation: &'static str,
        right: i64,
    },
    /// One line appended to the workspace's effects file (not idempotent).
    Append { line: String },
    /// A sleep of some milliseconds (idempotent).
    Sleep { millis: u64 },
    /// A calculation and a sleep in one turn, run concurrently.
    CalculateWhileSleeping { left: i64, right: i64, millis: u64 },
}

/// The file `append_line` writes in each session's workspace.
pub const EFFECTS_FILE: &str = "effects.txt";

/// One session of the harness.
#[derive(Debug, Clone)]
pub struct SessionPlan {
    /// Its number in the run.
    pub index: usize,
    /// Its task text, unique in the store (it finds the session's id).
    pub task: String,
    /// Its script.
    pub steps: Vec<Step>,
    /// Its workspace directory.
    pub workspace: PathBuf,
}

impl SessionPlan {
    /// Draws session `index` of the run tagged `tag`: most are a few mixed steps;
    /// some are long enough (over 100 events) for the engine to snapshot them.
    pub fn draw(seed: u64, tag: &str, index: usize, dir: &Path) -> anyhow::Result<Self> {
        let mut rng = Rng::new(seed, 1_000_003 + index as u64);
        let task = format!("crash {tag} session {index}");
        let long = rng.percent(12);
        let count = if long { 40 } else { rng.between(3, 6) as usize };
        let steps = (0..count)
            .map(|k| {
                let choice = if long { 0 } else { rng.between(0, 3) };
                let left = i64::try_from(rng.between(0, 999)).unwrap_or(0);
                let right = i64::try_from(rng.between(0, 999)).unwrap_or(0);
                match choice {
                    0 => Step::Calculate {
                        left,
                        operation: ["add", "subtract", "multiply"]
                            .get(usize::try_from(rng.between(0, 2)).unwrap_or(0))
                            .copied()
                            .unwrap_or("add"),
                        right,
                    },
                    1 => Step::Append {
                        line: format!("{task} line {k}"),
                    },
                    2 => Step::Sleep {
                        millis: rng.between(50, 600),
                    },
                    _ => Step::CalculateWhileSleeping {
                        left,
                        right,
                        millis: rng.between(50, 400),
                    },
                }
            })
            .collect();
        let workspace = dir.join(format!("ws-{index}"));
        std::fs::create_dir_all(&workspace)?;
        Ok(Self {
            index,
            task,
            steps,
            workspace,
        })
    }

    /// The model's responses, as a scripted model takes them: one per step,
    /// then the finish.
    pub fn responses(&self) -> Vec<Value> {
        let calculator = |left: i64, operation: &str, right: i64| {
            json!({"tool_name": "calculator",
                   "arguments": {"left": left, "operation": operation, "right": right}})
        };
        let sleep = |millis: u64| json!({"tool_name": "sleep", "arguments": {"seconds": millis as f64 / 1000.0}});
        let mut responses: Vec<Value> = self
            .steps
            .iter()
            .map(|step| match step {
                Step::Calculate {
                    left,
                    operation,
                    right,
                } => with_type(calculator(*left, operation, *right)),
                Step::Append { line } => json!({"type": "tool_call", "tool_name": "append_line",
                    "arguments": {"path": EFFECTS_FILE, "line": line}}),
                Step::Sleep { millis } => with_type(sleep(*millis)),
                Step::CalculateWhileSleeping {
                    left,
                    right,
                    millis,
                } => json!({"type": "tool_calls",
                    "calls": [calculator(*left, "multiply", *right), sleep(*millis)]}),
            })
            .collect();
        responses.push(json!({"type": "finish", "answer": self.answer()}));
        responses
    }

    /// The answer the session must end with.
    pub fn answer(&self) -> String {
        format!("{} done after {} steps", self.task, self.steps.len())
    }

    /// The lines its `append_line` calls write.
    pub fn lines(&self) -> Vec<&str> {
        self.steps
            .iter()
            .filter_map(|step| match step {
                Step::Append { line } => Some(line.as_str()),
                _ => None,
            })
            .collect()
    }

    /// Model responses it may take (its steps and the finish).
    pub fn max_steps(&self) -> usize {
        self.steps.len() + 1
    }

    /// The flags of `agent run` / `agent submit` for this session, asking
    /// the model of spec `model`.
    pub fn run_flags(&self, model: &str, store: &str) -> Vec<String> {
        vec![
            "--model".into(),
            model.to_owned(),
            "--tools".into(),
            "calculator,append_line,sleep".into(),
            "--workspace".into(),
            self.workspace.display().to_string(),
            "--max-steps".into(),
            self.max_steps().to_string(),
            "--store".into(),
            store.to_owned(),
            "--json".into(),
        ]
    }
}

fn with_type(mut call: Value) -> Value {
    if let Value::Object(fields) = &mut call {
        fields.insert("type".into(), json!("tool_call"));
    }
    call
}

/// The result the calculator must give for `left operation right`.
pub fn calculated(left: i64, operation: &str, right: i64) -> Option<i64> {
    match operation {
        "add" => left.checked_add(right),
        "subtract" => left.checked_sub(right),
        "multiply" => left.checked_mul(right),
        _ => None,
    }
}

/// Where one `agent run` / `agent resume` process is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aim {
    /// Once the log holds this many events, after 0–2 ms: between commits, or
    /// inside the next one.
    AfterEvents { events: usize, jitter_ms: u64 },
    /// While a tool call is in flight (its dispatch is the last event).
    InToolCall { jitter_ms: u64 },
    /// At a random moment after the start: opening the store, taking the lease,
    /// in a commit, in a model or tool step.
    AtRandomTime { millis: u64 },
    /// Right around the commit that crosses 100 events, when the engine writes
    /// its snapshot.
    AroundSnapshot { events: usize, jitter_ms: u64 },
    /// Around the lease keeper's first renewal, a second after the lease was taken.
    AroundLeaseRenewal { millis: u64 },
}

impl Aim {
    /// Draws an aim for an attempt on a session whose log holds `events` events
    /// of an expected `total`.
    pub fn draw(rng: &mut Rng, events: usize, total: usize, long: bool) -> Self {
        if long && events < 97 && rng.percent(50) {
            return Self::AroundSnapshot {
                events: usize::try_from(rng.between(97, 100)).unwrap_or(100),
                jitter_ms: rng.between(0, 3),
            };
        }
        match rng.between(0, 9) {
            0..=3 => Self::AfterEvents {
                events: usize::try_from(
                    rng.between(events as u64 + 1, total.max(events + 1) as u64),
                )
                .unwrap_or(total),
                jitter_ms: rng.between(0, 2),
            },
            4..=6 => Self::InToolCall {
                jitter_ms: rng.between(0, 40),
            },
            7 | 8 => Self::AtRandomTime {
                millis: rng.between(0, 400),
            },
            _ => Self::AroundLeaseRenewal {
                millis: rng.between(900, 1200),
            },
        }
    }

    /// The name of its kind, for the report.
    pub fn kind(self) -> &'static str {
        match self {
            Self::AfterEvents { .. } => "after_events",
            Self::InToolCall { .. } => "in_tool_call",
            Self::AtRandomTime { .. } => "at_random_time",
            Self::AroundSnapshot { .. } => "around_snapshot",
            Self::AroundLeaseRenewal { .. } => "around_lease_renewal",
        }
    }
}

/// Roughly how many events a finished session of `plan` has: the start, per
/// step a request and response plus a dispatch and result per call, the finish.
pub fn expected_events(plan: &SessionPlan) -> usize {
    let calls: usize = plan
        .steps
        .iter()
        .map(|step| match step {
            Step::CalculateWhileSleeping { .. } => 2,
            _ => 1,
        })
        .sum();
    2 + plan.steps.len() * 2 + calls * 2 + 3
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_draws_the_same_sequence_every_time() {
        let first: Vec<u64> = {
            let mut rng = Rng::new(7, 3);
            (0..5).map(|_| rng.next()).collect()
        };
        let again: Vec<u64> = {
            let mut rng = Rng::new(7, 3);
            (0..5).map(|_| rng.next()).collect()
        };
        assert_eq!(first, again);
        let other: Vec<u64> = {
            let mut rng = Rng::new(8, 3);
            (0..5).map(|_| rng.next()).collect()
        };
        assert_ne!(first, other);
    }

    #[test]
    fn between_stays_in_its_bounds() {
        let mut rng = Rng::new(1, 1);
        for _ in 0..1000 {
            let n = rng.between(3, 6);
            assert!((3..=6).contains(&n));
        }
    }
}
