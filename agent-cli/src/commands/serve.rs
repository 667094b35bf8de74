//! `agent serve`: the HTTP API on the store, with in-process workers, until
//! SIGINT or SIGTERM; then streams end, requests in flight are answered, workers
//! drain, and it exits 0. SIGHUP reloads the tokens (`AGENT_API_TOKENS` and
//! `--token-file`) without stopping. Without a configured token it serves only
//! on a loopback address, with a fresh token printed once on stderr.

use std::time::Duration;

use agent::store::shown_url;
use agent_runtime::Agents;
use agent_server::{ServeOptions, ServerState, Tokens};

use crate::cli::ServeArgs;
use crate::commands::worker::{shutdown_on_signals, stderr_log};
use crate::error::CliError;
use crate::run_setup::current_dir;
use crate::store;

/// The variable of comma-separated API tokens.
const TOKENS_VAR: &str = "AGENT_API_TOKENS";

/// Serves until a stop signal.
pub async fn serve(args: ServeArgs) -> Result<u8, CliError> {
    let tokens = configured_tokens(&args)?;
    let configured = !tokens.is_empty();
    let tokens = if tokens.is_empty() {
        if !args.listen.ip().is_loopback() {
            return Err(CliError::Usage(format!(
                "refusing to serve on {} without an API token: anyone who reaches that address could run agents as this user; set {TOKENS_VAR} (comma-separated) or --token-file, or listen on a loopback address",
                args.listen
            )));
        }
        let (tokens, token) =
            Tokens::generate().map_err(|err| CliError::Internal(err.to_string()))?;
        eprintln!(
            "agent serve: no API token configured; this run accepts only this one (set {TOKENS_VAR} or --token-file to choose your own):\n  Authorization: Bearer {token}"
        );
        tokens
    } else {
        tokens
    };
    let store = store::open(&args.store.store).await?;
    crate::confinement::note_for_worker();
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|err| CliError::Usage(format!("cannot listen on {}: {err}", args.listen)))?;
    let address = listener
        .local_addr()
        .map_err(|err| CliError::Internal(format!("the listening address is unknown: {err}")))?;
    let shutdown = shutdown_on_signals()?;
    let cwd = current_dir()?;
    let agents = Agents::find(args.agents.file.as_deref(), &cwd)?;
    let state = ServerState::new(store, tokens)
        .with_cwd(cwd)
        .with_agents(agents)
        .allow_adhoc(args.allow_adhoc)
        .with_shutdown(shutdown);
    eprintln!(
        "agent serve: listening on http://{address} (store {}, {} in-process worker(s)); the web page is at http://{address}/",
        shown_url(&args.store.store),
        args.workers
    );
    reload_tokens_on_hangup(&args, &state, configured)?;
    let options = ServeOptions {
        workers: usize::from(args.workers),
        drain: Duration::from_secs_f64(args.drain),
        log: stderr_log(),
        ..ServeOptions::default()
    };
    agent_server::serve(listener, state, options)
        .await
        .map_err(|err| CliError::Internal(format!("the server stopped: {err}")))?;
    eprintln!("agent serve: stopped");
    Ok(0)
}

/// On each SIGHUP, reads the tokens and the agents file again and serves with
/// them from then on; tokens or agents that cannot be read, or no tokens at
/// all, leave the current ones in place (a server that printed its own token
/// keeps it).
fn reload_tokens_on_hangup(
    args: &ServeArgs,
    state: &ServerState,
    configured: bool,
) -> Result<(), CliError> {
    let mut hangups = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(|err| CliError::Internal(format!("cannot listen for SIGHUP: {err}")))?;
    let (args, state, log) = (args.clone(), state.clone(), stderr_log());
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            match configured_tokens(&args) {
                Ok(tokens) if tokens.is_empty() => log(&format!(
                    "agent serve: SIGHUP: no tokens in {TOKENS_VAR} or --token-file{}; the current ones stay",
                    if configured {
                        ""
                    } else {
                        " (this run serves with the token it printed)"
                    }
                )),
                Ok(tokens) => {
                    state.replace_tokens(tokens);
                    log("agent serve: SIGHUP: tokens reloaded");
                }
                Err(err) => log(&format!(
                    "agent serve: SIGHUP: the tokens cannot be reloaded, the current ones stay: {err}"
                )),
            }
            match std::env::current_dir()
                .map_err(|err| err.to_string())
                .and_then(|cwd| {
                    Agents::find(args.agents.file.as_deref(), &cwd).map_err(|err| err.to_string())
                }) {
                Ok(agents) => {
                    let count = agents.iter().count();
                    state.replace_agents(agents);
                    log(&format!("agent serve: SIGHUP: {count} agent(s) reloaded"));
                }
                Err(err) => log(&format!(
                    "agent serve: SIGHUP: the agents cannot be reloaded, the current ones stay: {err}"
                )),
            }
        }
    });
    Ok(())
}

/// The tokens of `AGENT_API_TOKENS` and `--token-file`, together.
fn configured_tokens(args: &ServeArgs) -> Result<Tokens, CliError> {
    let from_env = match std::env::var(TOKENS_VAR) {
        Ok(list) => Tokens::from_list(&list)
            .map_err(|err| CliError::Usage(format!("{TOKENS_VAR}: {err}")))?,
        Err(_) => Tokens::default(),
    };
    let from_file = match &args.token_file {
        Some(path) => Tokens::from_file(path).map_err(|err| CliError::Usage(err.to_string()))?,
        None => Tokens::default(),
    };
    Ok(from_env.merged(from_file))
}
