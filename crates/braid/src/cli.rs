//! Command-line syntax: every subcommand, flag and help text.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

/// Top-level `braid` command.
#[derive(Debug, Parser)]
#[command(
    name = "braid",
    version,
    about = "Braid: a memory-safe SMB 3.1.1 file server",
    long_about = "Braid: a memory-safe SMB 3.1.1 file server.\n\n\
        Shares are described in a TOML file (braid.toml). Users are stored as NT hashes, \
        never as plaintext passwords; manage them with `braid user`.",
    after_long_help = "Examples:\n  \
        braid serve                          # first run: creates ./braid.toml and ./braid-data\n  \
        braid serve --config /etc/braid.toml\n  \
        braid check --config /etc/braid.toml\n  \
        braid user add alice --config /etc/braid.toml"
)]
pub struct Cli {
    /// More logging: -v for debug, -vv for trace (overrides RUST_LOG and the config's `log`).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the SMB server.
    #[command(
        long_about = "Run the SMB server until interrupted (Ctrl-C or SIGTERM).\n\n\
            Without --config, braid works in the current directory: it serves ./braid-data \
            as share `data` on 127.0.0.1:4455. On the first start (no ./braid.toml yet) it \
            creates ./braid-data and writes ./braid.toml (mode 0600) with a user `braid` whose \
            random password is printed once and never stored in plaintext. Later starts read \
            ./braid.toml.",
        after_long_help = "Examples:\n  \
            braid serve\n  \
            braid serve --config /etc/braid.toml\n  \
            braid serve --config braid.toml --listen 0.0.0.0:445 --listen [::]:445\n  \
            braid serve -v"
    )]
    Serve(ServeArgs),

    /// Validate a configuration file and print a summary.
    #[command(
        long_about = "Validate a configuration file and print a summary of what would be \
            served. Exits non-zero, naming the file, line and key, if anything is wrong. \
            Share paths must exist.",
        after_long_help = "Examples:\n  \
            braid check --config /etc/braid.toml\n  \
            braid check                      # checks ./braid.toml"
    )]
    Check(ConfigArg),

    /// Add, update or remove users in a configuration file.
    #[command(subcommand)]
    User(UserCommand),
}

/// Arguments of `braid serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Configuration file to use [default: ./braid.toml, created on first start].
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Address to listen on instead of the config's `listen` (repeatable; IPv6 as [::1]:4455).
    #[arg(short, long, value_name = "ADDR")]
    pub listen: Vec<SocketAddr>,
}

/// A `--config FILE` argument defaulting to ./braid.toml.
#[derive(Debug, Args)]
pub struct ConfigArg {
    /// Configuration file.
    #[arg(short, long, value_name = "FILE", default_value = "braid.toml")]
    pub config: PathBuf,
}

/// `braid user ...` subcommands.
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Add a user (or change a password with --update).
    #[command(
        long_about = "Add a user to the configuration file, storing the NT hash of the \
            password. The password is asked twice on the terminal (not echoed), or read \
            as one line from standard input with --password-stdin. The rest of the file, \
            comments and formatting included, is kept as it is.\n\n\
            An existing user is refused unless --update is given; with --update the user's \
            hash is replaced, or the user is added if missing.",
        after_long_help = "Examples:\n  \
            braid user add alice --config /etc/braid.toml\n  \
            echo 'S3cret-pass' | braid user add alice --config braid.toml --password-stdin\n  \
            braid user add alice --config braid.toml --update"
    )]
    Add(UserAddArgs),

    /// Remove a user (also from every share's `users` list).
    #[command(
        long_about = "Remove a user from the configuration file, and from the `users` list \
            of every share. The rest of the file is kept as it is.",
        after_long_help = "Examples:\n  \
            braid user del alice --config /etc/braid.toml"
    )]
    Del(UserDelArgs),
}

/// Arguments of `braid user add`.
#[derive(Debug, Args)]
pub struct UserAddArgs {
    /// User name.
    pub name: String,

    #[command(flatten)]
    pub config: ConfigArg,

    /// Read the password as one line from standard input instead of the terminal.
    #[arg(long)]
    pub password_stdin: bool,

    /// Replace the password of an existing user (adds the user if missing).
    #[arg(long)]
    pub update: bool,
}

/// Arguments of `braid user del`.
#[derive(Debug, Args)]
pub struct UserDelArgs {
    /// User name.
    pub name: String,

    #[command(flatten)]
    pub config: ConfigArg,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
