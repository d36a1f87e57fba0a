//! Getting passwords: generated, typed at the terminal, or read from standard input.

use std::io::BufRead;

use anyhow::{bail, Context};
use rand::distributions::Alphanumeric;
use rand::rngs::OsRng;
use rand::Rng;

/// A random alphanumeric password of `len` characters from the OS random source.
pub fn generate(len: usize) -> String {
    OsRng.sample_iter(&Alphanumeric).take(len).map(char::from).collect()
}

/// Reads one line from standard input (for scripts: `--password-stdin`).
pub fn from_stdin() -> anyhow::Result<String> {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).context("cannot read the password from standard input")?;
    let pw = line.strip_suffix('\n').unwrap_or(&line);
    let pw = pw.strip_suffix('\r').unwrap_or(pw);
    check(pw)?;
    Ok(pw.to_string())
}

/// Asks twice on the terminal without echo; both entries must match.
pub fn prompt_twice() -> anyhow::Result<String> {
    let no_tty = "cannot read a password from the terminal (use --password-stdin)";
    let first = rpassword::prompt_password("Password: ").context(no_tty)?;
    check(&first)?;
    let second = rpassword::prompt_password("Repeat password: ").context(no_tty)?;
    if first != second {
        bail!("passwords do not match");
    }
    Ok(first)
}

fn check(pw: &str) -> anyhow::Result<()> {
    if pw.is_empty() {
        bail!("the password is empty");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn generated_passwords_are_alphanumeric_and_fresh() {
        let a = super::generate(16);
        assert_eq!(a.len(), 16);
        assert!(a.chars().all(|c| c.is_ascii_alphanumeric()));
        assert_ne!(a, super::generate(16));
    }
}
