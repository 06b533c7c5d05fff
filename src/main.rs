//! Entry point: parse flags, set up logging, dispatch. Exit codes: 0 ok (scan: no leftovers),
//! 1 error (explain: not a finding), 2 usage error, 3 scan found leftovers, 4 scan incomplete
//! (something it needs could not be read; stderr names it).

use std::io::IsTerminal;
use std::process::ExitCode;

use tracing_subscriber::EnvFilter;
use volume_leftovers::run::FatalError;
use volume_leftovers::run::cli::{Cli, Command, LogFormat, ScanArgs};
use volume_leftovers::scan::{Format, Outcome};

fn main() -> ExitCode {
    use clap::{CommandFactory, FromArgMatches};
    let args = volume_leftovers::run::cli::plugin_args(std::env::args_os().collect());
    let plugin = args
        .first()
        .and_then(|a| std::path::Path::new(a).file_name())
        == Some(std::ffi::OsStr::new(
            volume_leftovers::run::cli::PLUGIN_NAME,
        ));
    let mut command = Cli::command();
    if plugin {
        // Its help and errors name it as it was typed.
        command = command.bin_name("kubectl leftovers");
    }
    let cli = match Cli::from_arg_matches(&command.get_matches_from(args)) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let filter = log_filter(&cli.log);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    match cli.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
    match cli.command {
        Command::Crd => match volume_leftovers::crd_yaml() {
            Ok(y) => {
                print!("{y}");
                ExitCode::SUCCESS
            }
            Err(e) => fatal("crd", &FatalError::from(e)),
        },
        Command::Run(args) => {
            // The operator is one loop (its feeds, decisions and writes are polled by one task);
            // a second worker thread would only carry the connections' TLS and HTTP parsing, and
            // costs more in wake-ups between threads than it saves (about 10% of the operator's
            // CPU at 10,000 PVs, examples/fleet `alternate=1`). TOKIO_WORKER_THREADS overrides.
            // `scan` keeps tokio's default: its figure is wall time.
            let workers = std::env::var("TOKIO_WORKER_THREADS")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(1);
            match runtime(Some(workers)) {
                Ok(rt) => match rt.block_on(volume_leftovers::run::operator(args)) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => fatal("run", &e),
                },
                Err(e) => fatal("run", &FatalError::Runtime(e)),
            }
        }
        Command::Completion(args) => {
            let name = if args.plugin {
                volume_leftovers::run::cli::PLUGIN_NAME
            } else {
                "volume-leftovers"
            };
            clap_complete::generate(
                args.shell,
                &mut Cli::command(),
                name,
                &mut std::io::stdout(),
            );
            ExitCode::SUCCESS
        }
        Command::Scan(args) => match runtime(None) {
            Ok(rt) => rt.block_on(scan(args)),
            Err(e) => fatal("scan", &FatalError::Runtime(e)),
        },
        Command::Explain(args) => match runtime(None) {
            Ok(rt) => {
                let (mut out, mut err) = (std::io::stdout().lock(), std::io::stderr().lock());
                match rt.block_on(volume_leftovers::run::explain::run(
                    args, &mut out, &mut err,
                )) {
                    Ok(()) => ExitCode::SUCCESS,
                    Err(e) => fatal("explain", &e.into()),
                }
            }
            Err(e) => fatal("explain", &FatalError::Runtime(e)),
        },
    }
}

/// The async runtime: `workers` worker threads, else tokio's default (one per CPU).
fn runtime(workers: Option<usize>) -> std::io::Result<tokio::runtime::Runtime> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = workers {
        b.worker_threads(n.max(1));
    }
    b.enable_all().build()
}

/// The log filter. kube-client logs every failed request at ERROR on its own; the operator
/// reports each failure itself, once per change of state and with backoff, so those lines are
/// off unless the filter names kube_client.
fn log_filter(spec: &str) -> EnvFilter {
    let spec = if spec.contains("kube_client") {
        spec.to_string()
    } else {
        format!("{spec},kube_client::client::builder=off")
    };
    EnvFilter::try_new(&spec).unwrap_or_else(|_| EnvFilter::new("info"))
}

/// One line on stderr, naming the command and the cause.
fn fatal(command: &str, e: &FatalError) -> ExitCode {
    eprintln!("volume-leftovers {command}: {e}");
    ExitCode::FAILURE
}

async fn scan(args: ScanArgs) -> ExitCode {
    let (client, server) = match volume_leftovers::watch::client::client(args.request_timeout).await
    {
        Ok(c) => c,
        Err(e) => return fatal("scan", &FatalError::from(e)),
    };
    let census = match args.census.settings() {
        Ok(c) => c,
        Err(e) => return fatal("scan", &FatalError::Census(e)),
    };
    let prices = match args.pricing.prices() {
        Ok(p) => p,
        Err(e) => return fatal("scan", &FatalError::Prices(e)),
    };
    let mut out = std::io::stdout().lock();
    let exclusions = args.exclude.exclusions();
    let snapshots = args.snapshots.asked(&args.graces);
    let graces = args.graces.graces();
    match volume_leftovers::scan::run(
        client,
        &server,
        args.request_timeout,
        volume_leftovers::scan::Asked {
            exclusions: &exclusions,
            census: census.as_ref(),
            prices: prices.as_deref(),
            snapshots: &snapshots,
            graces,
            progress: &volume_leftovers::scan::progress::Progress::on_terminal(),
        },
        args.output
            .unwrap_or_else(|| Format::default_for(std::io::stdout().is_terminal())),
        &mut out,
    )
    .await
    {
        Ok((report, outcome)) => {
            held_back(&report, &graces);
            let code = match outcome {
                Outcome::Clean => ExitCode::SUCCESS,
                Outcome::Found => ExitCode::from(3),
                Outcome::Incomplete => incomplete(&report, &server),
            };
            // Every run ends with one line that sums it up.
            eprintln!(
                "volume-leftovers scan: {}",
                volume_leftovers::scan::output::summary(&report, prices.as_deref())
            );
            code
        }
        Err(e) => fatal("scan", &FatalError::from(e)),
    }
}

/// What a scan held back (states that have not lasted their grace, which the operator would not
/// publish yet either): one line, so that a scan that reports nothing is never silently clean.
fn held_back(
    report: &volume_leftovers::scan::ScanResult,
    graces: &volume_leftovers::decide::plan::Graces,
) {
    const SHOWN: usize = 10;
    if report.held.is_empty() {
        return;
    }
    let mut named: Vec<String> = report
        .held
        .iter()
        .take(SHOWN)
        .map(ToString::to_string)
        .collect();
    if report.held.len() > SHOWN {
        named.push(format!("and {} more", report.held.len() - SHOWN));
    }
    eprintln!(
        "volume-leftovers scan: held back {} state(s) that have not lasted their grace (--grace {}s, --delete-grace {}s, --expansion-grace {}s), not reported: {}",
        report.held.len(),
        graces.grace.as_secs(),
        graces.delete_grace.as_secs(),
        graces.expansion_grace.as_secs(),
        named.join("; ")
    );
}

/// Says on stderr why the report is incomplete (exit 4).
fn incomplete(report: &volume_leftovers::scan::ScanResult, server: &str) -> ExitCode {
    if !report.missing.is_empty() {
        eprintln!(
            "volume-leftovers scan: the census is incomplete: the identity may not {} on {server}; rows say null where they depend on it",
            report.missing.join(" or ")
        );
    }
    for claim in &report.unknown_claims {
        eprintln!("volume-leftovers scan: the {claim}; its row says claim_missing null");
    }
    for failed in &report.census_failed {
        eprintln!("volume-leftovers scan: {failed}");
    }
    for failed in &report.cloud_failed {
        eprintln!("volume-leftovers scan: {failed}");
    }
    for unknown in &report.snapshots.unknown {
        eprintln!("volume-leftovers scan: {unknown}");
    }
    ExitCode::from(4)
}
