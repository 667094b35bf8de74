//! `agent-bench local-suite`: small tool-use tasks (arithmetic, reading, listing and
//! searching files, two-step tasks) run by a real `agent` process on a local GGUF
//! model, per strategy, with and without the action grammar and the repeated-call
//! guard. Prints one JSON line per configuration: how many tasks were answered
//! correctly, the share of model responses that needed feedback, the guard's
//! interventions, load time, prompt and generation speed and peak memory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context;
use serde_json::{Value, json};

use crate::workers::agent_binary;

/// Arguments of `agent-bench local-suite`.
#[derive(Debug, clap::Args)]
pub struct LocalSuiteArgs {
    /// The GGUF model file (default: the one `agent model pull` writes).
    #[arg(long)]
    model: Option<PathBuf>,
    /// The `agent` binary (default: the one beside this benchmark).
    #[arg(long)]
    agent: Option<PathBuf>,
    /// Strategies to run, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "react,plan-execute")]
    strategies: Vec<String>,
    /// Grammar settings to run: `on` (the default of `--model local`), `off`.
    #[arg(long, value_delimiter = ',', default_value = "on,off")]
    grammar: Vec<Switch>,
    /// Repeated-call guard settings to run: `on` (the default), `off`.
    #[arg(long, value_delimiter = ',', default_value = "on,off")]
    guard: Vec<Switch>,
    /// Model responses allowed per task.
    #[arg(long, default_value_t = 6)]
    max_steps: u32,
    /// Run only the first N tasks of the suite.
    #[arg(long)]
    tasks: Option<usize>,
    /// Print each task's outcome on stderr as it ends.
    #[arg(long)]
    verbose: bool,
}

/// A setting that is on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Switch {
    On,
    Off,
}

/// One task of the suite: what is asked, the tools offered, what a correct answer holds.
struct Task {
    prompt: &'static str,
    tools: &'static str,
    expect: Expect,
    kind: &'static str,
}

/// What a correct answer contains.
enum Expect {
    /// This number among the numbers of the answer.
    Number(f64),
    /// This text, ignoring case.
    Text(&'static str),
}

impl Expect {
    /// Whether `answer` to `prompt` is correct. A number counts when it is the
    /// answer's last, or when it appears and the prompt does not hold it (so an
    /// answer that only repeats the task's operands is not taken for a result).
    fn holds(&self, prompt: &str, answer: &str) -> bool {
        let same = |a: &f64, b: &f64| (a - b).abs() < 1e-9;
        match self {
            Self::Number(wanted) => {
                let found = numbers_in(answer);
                found.last().is_some_and(|last| same(last, wanted))
                    || (found.iter().any(|n| same(n, wanted))
                        && !numbers_in(prompt).iter().any(|n| same(n, wanted)))
            }
            Self::Text(wanted) => answer.to_lowercase().contains(&wanted.to_lowercase()),
        }
    }
}

/// The numbers written in `text` (`84`, `2.5`, `1,000` as 1000).
fn numbers_in(text: &str) -> Vec<f64> {
    let cleaned: String = text
        .chars()
        .filter(|c| *c != ',')
        .map(|c| {
            if c.is_ascii_digit() || c == '.' {
                c
            } else {
                ' '
            }
        })
        .collect();
    cleaned
        .split_whitespace()
        .filter_map(|word| word.trim_matches('.').parse().ok())
        .collect()
}

/// The files every task's workspace holds.
const FILES: &[(&str, &str)] = &[
    ("notes.txt", "The launch code is 4711.\n"),
    ("config.toml", "name = \"orbit\"\nport = 8080\n"),
    ("team.txt", "Alice leads the team. Bob writes the tests.\n"),
    ("todo.md", "- buy milk\n- fix the bike\n"),
    ("numbers.txt", "14\n"),
    ("src/lib.rs", "pub fn answer() -> u32 {\n    42\n}\n"),
];

const CALC: &str = "calculator";
const FILE_TOOLS: &str = "read_file,list_dir,search";

fn suite() -> Vec<Task> {
    let task = |prompt, tools, expect, kind| Task {
        prompt,
        tools,
        expect,
        kind,
    };
    use Expect::{Number, Text};
    vec![
        task("What is 12 times 7?", CALC, Number(84.0), "arithmetic"),
        task(
            "What is 144 divided by 16?",
            CALC,
            Number(9.0),
            "arithmetic",
        ),
        task("What is 365 plus 289?", CALC, Number(654.0), "arithmetic"),
        task("What is 1000 minus 357?", CALC, Number(643.0), "arithmetic"),
        task("What is 23 times 19?", CALC, Number(437.0), "arithmetic"),
        task("What is 2.5 times 4?", CALC, Number(10.0), "arithmetic"),
        task("Compute 999 plus 1.", CALC, Number(1000.0), "arithmetic"),
        task("What is 96 divided by 8?", CALC, Number(12.0), "arithmetic"),
        task(
            "What is the launch code in notes.txt?",
            FILE_TOOLS,
            Number(4711.0),
            "read",
        ),
        task(
            "Which port does config.toml set?",
            FILE_TOOLS,
            Number(8080.0),
            "read",
        ),
        task(
            "Who leads the team, according to team.txt?",
            FILE_TOOLS,
            Text("alice"),
            "read",
        ),
        task(
            "What number does the function in src/lib.rs return?",
            FILE_TOOLS,
            Number(42.0),
            "read",
        ),
        task(
            "What name does config.toml set?",
            FILE_TOOLS,
            Text("orbit"),
            "read",
        ),
        task(
            "Which file is in the src directory?",
            FILE_TOOLS,
            Text("lib.rs"),
            "list",
        ),
        task(
            "Which file in the current directory has the .md extension?",
            FILE_TOOLS,
            Text("todo.md"),
            "list",
        ),
        task(
            "Search the files for the word milk. Which file contains it?",
            FILE_TOOLS,
            Text("todo.md"),
            "search",
        ),
        task(
            "Search the files for Bob. Which file mentions him?",
            FILE_TOOLS,
            Text("team.txt"),
            "search",
        ),
        task(
            "Search the files for the words launch code. Which file has them?",
            FILE_TOOLS,
            Text("notes.txt"),
            "search",
        ),
        task(
            "What is 12 times 7, plus 5?",
            CALC,
            Number(89.0),
            "two-step",
        ),
        task(
            "What is 10 plus 5, times 2?",
            CALC,
            Number(30.0),
            "two-step",
        ),
        task(
            "Read numbers.txt and multiply the number in it by 3.",
            "read_file,calculator",
            Number(42.0),
            "two-step",
        ),
        task(
            "Read config.toml and add 1 to the port it sets.",
            "read_file,calculator",
            Number(8081.0),
            "two-step",
        ),
    ]
}

/// What one task's run showed.
#[derive(Default)]
struct Outcome {
    correct: bool,
    finished: bool,
    exit_reason: String,
    answer: String,
    responses: u64,
    feedback: u64,
    repeated: u64,
    wall: Duration,
    load_ms: Option<u64>,
    prompt_tokens: u64,
    prompt_ms: u64,
    output_tokens: u64,
    generation_ms: u64,
    peak_rss_mb: f64,
}

/// One configuration of the matrix.
struct Config<'a> {
    strategy: &'a str,
    grammar: Switch,
    guard: Switch,
}

/// Runs every configuration over the suite and prints a JSON line for each.
pub fn local_suite(args: LocalSuiteArgs) -> anyhow::Result<()> {
    let agent = agent_binary(args.agent.as_ref())?;
    let model = match &args.model {
        Some(path) => path.clone(),
        None => PathBuf::from(".agent/models/qwen2.5-coder-0.5b-instruct-q4_k_m.gguf"),
    };
    let model = std::fs::canonicalize(&model).with_context(|| {
        format!(
            "no model at {}: run `agent model pull` or pass --model",
            model.display()
        )
    })?;
    let workspace = workspace()?;
    let mut tasks = suite();
    tasks.truncate(args.tasks.unwrap_or(tasks.len()));
    for strategy in &args.strategies {
        for &grammar in &args.grammar {
            for &guard in &args.guard {
                let config = Config {
                    strategy,
                    grammar,
                    guard,
                };
                let outcomes = tasks
                    .iter()
                    .map(|task| {
                        let outcome =
                            run_task(&agent, &model, &workspace, &config, task, args.max_steps)?;
                        if args.verbose {
                            eprintln!(
                                "{} grammar={:?} guard={:?} [{}] {:?}: {} {} ({:.1} s)",
                                strategy,
                                grammar,
                                guard,
                                task.kind,
                                task.prompt,
                                if outcome.correct { "ok" } else { "WRONG" },
                                outcome.exit_reason,
                                outcome.wall.as_secs_f64()
                            );
                        }
                        Ok(outcome)
                    })
                    .collect::<anyhow::Result<Vec<_>>>()?;
                println!("{}", summary(&config, &tasks, &outcomes, args.max_steps));
            }
        }
    }
    std::fs::remove_dir_all(&workspace).ok();
    Ok(())
}

/// A fresh directory with the suite's files.
fn workspace() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("agent-local-suite-{}", std::process::id()));
    std::fs::remove_dir_all(&dir).ok();
    for (path, content) in FILES {
        let file = dir.join(path);
        std::fs::create_dir_all(file.parent().unwrap_or(&dir))?;
        std::fs::write(&file, content)?;
    }
    Ok(dir)
}

fn run_task(
    agent: &Path,
    model: &Path,
    workspace: &Path,
    config: &Config<'_>,
    task: &Task,
    max_steps: u32,
) -> anyhow::Result<Outcome> {
    let mut spec = format!("local:{}", model.display());
    if config.grammar == Switch::Off {
        spec.push_str("?grammar=off");
    }
    let trace = workspace.join(".agent/suite-trace.jsonl");
    let db = workspace.join(".agent/suite.db");
    std::fs::create_dir_all(workspace.join(".agent"))?;
    std::fs::remove_file(&trace).ok();
    let mut command = Command::new(agent);
    command
        .current_dir(workspace)
        .env("RUST_LOG", "agent_providers=info")
        .env("NO_COLOR", "1")
        .args(["run", task.prompt, "--model", &spec, "--tools", task.tools])
        .args(["--strategy", config.strategy, "--json"])
        .args(["--max-steps", &max_steps.to_string()])
        .arg("--trace")
        .arg(&trace)
        .arg("--store")
        .arg(format!("sqlite://{}", db.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if config.guard == Switch::Off {
        command.arg("--allow-repeated-calls");
    }
    let started = Instant::now();
    let mut child = command
        .spawn()
        .with_context(|| format!("cannot start {}", agent.display()))?;
    let status_file = format!("/proc/{}/status", child.id());
    let mut peak_rss_mb = 0.0f64;
    while child.try_wait()?.is_none() {
        if let Some(rss) = crate::vm_hwm_mb(&status_file) {
            peak_rss_mb = peak_rss_mb.max(rss);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output()?;
    let wall = started.elapsed();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let result: Value = stdout
        .lines()
        .rev()
        .find_map(|line| serde_json::from_str(line).ok())
        .with_context(|| {
            format!(
                "no RunResult for {:?}: {}",
                task.prompt,
                String::from_utf8_lossy(&output.stderr)
            )
        })?;
    let exit_reason = text_field(&result, "exit_reason").to_owned();
    let answer = text_field(&result, "answer").to_owned();
    let mut outcome = Outcome {
        finished: exit_reason == "finished",
        correct: exit_reason == "finished" && task.expect.holds(task.prompt, &answer),
        exit_reason,
        answer,
        wall,
        peak_rss_mb,
        ..Outcome::default()
    };
    count_trace(&trace, &mut outcome)?;
    read_log(&String::from_utf8_lossy(&output.stderr), &mut outcome);
    Ok(outcome)
}

/// The text at `key` of a JSON object, empty when absent or not text.
fn text_field<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or("")
}

/// Model responses, feedback and guard answers from the run's trace.
fn count_trace(trace: &Path, outcome: &mut Outcome) -> anyhow::Result<()> {
    let text = std::fs::read_to_string(trace)
        .with_context(|| format!("the run wrote no trace at {}", trace.display()))?;
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else {
            continue;
        };
        match event.get("event_type").and_then(Value::as_str) {
            Some("model_action") => outcome.responses += 1,
            Some("model_feedback") => {
                outcome.responses += 1;
                outcome.feedback += 1;
            }
            Some("repeated_call") => outcome.repeated += 1,
            _ => {}
        }
    }
    Ok(())
}

/// Load time and generation figures from the `local` provider's log lines.
fn read_log(stderr: &str, outcome: &mut Outcome) {
    for line in stderr.lines() {
        let fields: BTreeMap<&str, u64> = line
            .split_whitespace()
            .filter_map(|word| word.split_once('='))
            .filter_map(|(key, value)| Some((key, value.parse().ok()?)))
            .collect();
        if line.contains("local model loaded") {
            outcome.load_ms = fields.get("load_ms").copied();
        } else if line.contains("local generation") {
            let field = |name| fields.get(name).copied().unwrap_or(0);
            outcome.prompt_tokens += field("prompt_tokens");
            outcome.prompt_ms += field("prompt_ms");
            outcome.output_tokens += field("output_tokens");
            outcome.generation_ms += field("generation_ms");
        }
    }
}

fn per_second(count: u64, ms: u64) -> f64 {
    if ms == 0 {
        0.0
    } else {
        (count as f64 * 1000.0 / ms as f64 * 10.0).round() / 10.0
    }
}

fn summary(config: &Config<'_>, tasks: &[Task], outcomes: &[Outcome], max_steps: u32) -> Value {
    let total = |field: fn(&Outcome) -> u64| outcomes.iter().map(field).sum::<u64>();
    let succeeded = outcomes.iter().filter(|o| o.correct).count();
    let responses = total(|o| o.responses);
    let feedback = total(|o| o.feedback);
    let mut by_kind: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for (task, outcome) in tasks.iter().zip(outcomes) {
        let entry = by_kind.entry(task.kind).or_default();
        entry.0 += usize::from(outcome.correct);
        entry.1 += 1;
    }
    let mut load_ms: Vec<u64> = outcomes.iter().filter_map(|o| o.load_ms).collect();
    load_ms.sort_unstable();
    let wall_s: f64 = outcomes.iter().map(|o| o.wall.as_secs_f64()).sum();
    json!({
        "bench": "local_suite",
        "strategy": config.strategy,
        "grammar": config.grammar == Switch::On,
        "guard": config.guard == Switch::On,
        "max_steps": max_steps,
        "tasks": outcomes.len(),
        "succeeded": succeeded,
        "success_rate": round2(succeeded as f64 / outcomes.len().max(1) as f64),
        "by_kind": by_kind
            .iter()
            .map(|(kind, (ok, all))| (kind.to_string(), json!(format!("{ok}/{all}"))))
            .collect::<serde_json::Map<_, _>>(),
        "finished": outcomes.iter().filter(|o| o.finished).count(),
        "exit_reasons": outcomes.iter().fold(BTreeMap::<&str, usize>::new(), |mut counts, o| {
            *counts.entry(o.exit_reason.as_str()).or_default() += 1;
            counts
        }),
        "model_responses": responses,
        "feedback": feedback,
        "feedback_share": round2(feedback as f64 / responses.max(1) as f64),
        "repeated_calls_answered": total(|o| o.repeated),
        "mean_task_s": round2(wall_s / outcomes.len().max(1) as f64),
        "load_ms_median": load_ms.get(load_ms.len() / 2),
        "prompt_tokens_per_s": per_second(total(|o| o.prompt_tokens), total(|o| o.prompt_ms)),
        "generation_tokens_per_s": per_second(total(|o| o.output_tokens), total(|o| o.generation_ms)),
        "peak_rss_mb": outcomes.iter().map(|o| o.peak_rss_mb).fold(0.0, f64::max).round(),
        "wrong": tasks.iter().zip(outcomes).filter(|(_, o)| !o.correct).map(|(task, o)| json!({
            "task": task.prompt,
            "exit_reason": o.exit_reason,
            "answer": o.answer,
        })).collect::<Vec<_>>(),
    })
}

fn round2(value: f64) -> f64 {
    (value * 100.0).round() / 100.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_found_as_whole_numbers() {
        let ask = "What is 12 times 7?";
        assert!(Expect::Number(84.0).holds(ask, "12 * 7 = 84."));
        assert!(Expect::Number(84.0).holds(ask, "84 is 12 times 7"));
        assert!(Expect::Number(1000.0).holds("999 plus 1", "The result is 1,000"));
        assert!(Expect::Number(10.0).holds("2.5 times 4", "2.5 times 4 is 10.0"));
        assert!(!Expect::Number(9.0).holds("144 divided by 16", "the answer is 19"));
        assert!(!Expect::Number(12.0).holds("96 divided by 8", "96 / 8"));
        assert!(Expect::Text("alice").holds("who?", "Alice leads it"));
    }

    #[test]
    fn the_suite_has_at_least_twenty_tasks_of_every_kind() {
        let tasks = suite();
        assert!(tasks.len() >= 20);
        for kind in ["arithmetic", "read", "list", "search", "two-step"] {
            assert!(tasks.iter().any(|task| task.kind == kind), "{kind}");
        }
    }

    #[test]
    fn the_provider_log_lines_are_read() {
        let mut outcome = Outcome::default();
        read_log(
            "INFO agent_providers::local: local model loaded model=Q load_ms=473 parameters=6\n\
             INFO agent_providers::local: local generation prompt_tokens=325 prompt_ms=2302 output_tokens=26 generation_ms=1487 grammar=true\n\
             INFO agent_providers::local: local generation prompt_tokens=435 prompt_ms=2981 output_tokens=29 generation_ms=1587 grammar=true",
            &mut outcome,
        );
        assert_eq!(outcome.load_ms, Some(473));
        assert_eq!(outcome.prompt_tokens, 760);
        assert_eq!(outcome.generation_ms, 3074);
    }
}
