//! `braid`: command line of the Braid SMB 3.1.1 file server.

mod bench;
mod check;
mod cli;
mod config;
mod first_run;
mod fsutil;
mod logging;
mod names;
mod password;
mod reload;
mod serve;
mod status;
mod systemd;
mod users;

use std::process::ExitCode;

use clap::Parser;

use cli::{Cli, Command, UserCommand};

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            // One line, no backtrace: `{:#}` joins the context chain with ": ".
            let msg = format!("{e:#}").replace('\n', " ");
            eprintln!("braid: error: {msg}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Serve(args) => serve::run(args, cli.verbose),
        Command::Check(args) => {
            print!("{}", check::run(&args.config)?);
            Ok(())
        }
        Command::User(UserCommand::Add(args)) => {
            let pw = if args.password_stdin { password::from_stdin()? } else { password::prompt_twice()? };
            let path = &args.config.config;
            let how = users::add_to_file(path, &args.name, &smb_auth::nt_hash(&pw), args.update)?;
            let verb = match how {
                users::Added::New => "added user",
                users::Added::Updated => "updated password of user",
            };
            println!("braid: {verb} {:?} in {}", args.name, path.display());
            Ok(())
        }
        Command::Bench(args) => bench::run(*args),
        Command::Status(args) => status::run(&args),
        Command::Reload(args) => {
            println!("braid: {}", reload::run(&args.config.config, args.admin)?);
            Ok(())
        }
        Command::User(UserCommand::Del(args)) => {
            let path = &args.config.config;
            let shares = users::del_from_file(path, &args.name)?;
            println!("braid: removed user {:?} from {} ({shares} share list(s) updated)", args.name, path.display());
            Ok(())
        }
    }
}
