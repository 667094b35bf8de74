//! `agent`: the command-line interface of the agent runtime. Exit codes and output
//! follow `CONTRACT.md`.

mod cli;
mod commands;
mod confinement;
mod console;
mod error;
mod interrupt;
mod output;
mod progress;
mod run_setup;
mod screen;
mod store;

use std::process::ExitCode;

use agent::trace::telemetry::Telemetry;
use clap::Parser;

use crate::cli::{Cli, Command, TraceCommand};
use crate::error::CliError;

fn main() -> ExitCode {
    agent::tools::exec_confined_if_asked();
    let cli = Cli::parse();
    let telemetry = match Telemetry::install(&cli.telemetry()) {
        Ok(telemetry) => telemetry,
        Err(err) => {
            eprintln!("agent: {err}");
            return ExitCode::from(2);
        }
    };
    let code = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => {
            let code = runtime.block_on(execute(cli));
            drop(runtime);
            code
        }
        Err(err) => Err(CliError::Internal(format!(
            "cannot start the async runtime: {err}"
        ))),
    };
    telemetry.shutdown();
    match code {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("agent: {err}");
            ExitCode::from(err.exit_code())
        }
    }
}

async fn execute(cli: Cli) -> Result<u8, CliError> {
    match cli.command {
        Command::Run(args) => commands::run::run(*args).await,
        Command::Submit(args) => commands::submit::submit(*args).await,
        Command::Wait(args) => commands::wait::wait(args).await,
        Command::Worker(args) => commands::worker::worker(args).await,
        Command::Serve(args) => commands::serve::serve(args).await,
        Command::Queue(args) => commands::queue::queue(args).await,
        Command::Resume(args) => commands::resume::resume(*args).await,
        Command::Send(args) => commands::send::send(*args).await,
        Command::Sessions(args) => commands::sessions::sessions(args).await,
        Command::Show(args) => commands::show::show(args).await,
        Command::Cancel(args) => commands::cancel::cancel(args).await,
        Command::Pause(args) => commands::pause::pause(args).await,
        Command::Fork(args) => commands::fork::fork(args).await,
        Command::Approve(args) => commands::approve::approve(args).await,
        Command::Deny(args) => commands::approve::deny(args).await,
        Command::Trace {
            command: TraceCommand::Show { file },
        } => commands::trace::show(&file),
        Command::Trace {
            command: TraceCommand::Stats(args),
        } => commands::trace::stats(args).await,
        Command::Model { command } => commands::model::model(command).await,
        Command::Agents { command } => commands::agents::agents(command),
    }
}
