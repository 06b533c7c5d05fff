//! Entry point: parse flags, set up logging, dispatch. Exit codes: 0 ok (scan: no leftovers),
//! 1 error, 2 usage error, 3 scan found leftovers.

use std::io::IsTerminal;
use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;
use volume_leftovers::FatalError;
use volume_leftovers::cli::{Cli, Command, LogFormat};

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let filter = EnvFilter::try_new(&cli.log).unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    let result = match cli.command {
        Command::Crd => volume_leftovers::crd_yaml()
            .map(|y| {
                print!("{y}");
                ExitCode::SUCCESS
            })
            .map_err(FatalError::from),
        Command::Run(args) => volume_leftovers::run(args)
            .await
            .map(|()| ExitCode::SUCCESS),
        Command::Scan(args) => scan(args.output).await,
    };
    result.unwrap_or_else(|e| {
        tracing::error!("{e}");
        ExitCode::FAILURE
    })
}

async fn scan(format: volume_leftovers::scan::Format) -> Result<ExitCode, FatalError> {
    let client = volume_leftovers::client().await?;
    let mut out = std::io::stdout().lock();
    let found = volume_leftovers::scan::run(client, format, &mut out).await?;
    Ok(if found == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(3)
    })
}
