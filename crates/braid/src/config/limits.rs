//! Provisioned performance per share: `iops`, `burst_iops`, `burst_seconds` or
//! `burst_credits`, `throughput`, `ingress`, `egress`, `max_file_iops`,
//! `max_file_throughput`, and `provisioned = { model = "...", size = "1TiB" }`, a preset
//! whose values the explicit keys override. Rates are per second: IOPS are integers, byte
//! rates sizes ("200MiB", "200MiB/s") or integer bytes.

use braid_qos::{Limits, Model};
use serde::Deserialize;
use toml::Spanned;

use super::{parse_size, ConfigError, Ctx, RawShare};

/// Length of a full burst when a share sets `burst_iops` and neither `burst_seconds` nor
/// `burst_credits` (nor a preset sizes the bucket): an hour, as Azure Files provisions it.
pub const DEFAULT_BURST_SECONDS: u64 = 3600;
/// Largest IOPS value accepted.
const MAX_IOPS: u64 = 1_000_000_000;
/// Smallest byte rate: one IO unit (64 KiB) per second. Below that a single large I/O would
/// wait for minutes.
const MIN_RATE: u64 = 64 << 10;
/// Smallest provisioned size.
const MIN_PROVISIONED: u64 = 1 << 30;
/// Longest `burst_seconds`: a day.
const MAX_BURST_SECONDS: u64 = 86_400;

/// `provisioned = { model = "azure-v1", size = "1TiB" }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProvisioned {
    model: Spanned<String>,
    // A size such as "1TiB", or integer bytes.
    size: Spanned<toml::Value>,
}

/// The model names of the configuration.
const MODELS: [(&str, Model); 6] = [
    ("azure-v1", Model::AzureV1),
    ("azure-v2-ssd", Model::AzureV2Ssd),
    ("azure-v2-hdd", Model::AzureV2Hdd),
    ("anf-standard", Model::AnfStandard),
    ("anf-premium", Model::AnfPremium),
    ("anf-ultra", Model::AnfUltra),
];

impl Ctx<'_> {
    /// A share's limits: the preset's, then each explicit key over it, then the burst
    /// bucket. No key at all: no limit.
    pub(super) fn share_limits(&self, s: &RawShare, what: &str) -> Result<Limits, ConfigError> {
        let mut l = match &s.provisioned {
            None => Limits::default(),
            Some(p) => self.preset(p, what)?,
        };
        let counts = [(&s.iops, "iops", &mut l.iops), (&s.max_file_iops, "max_file_iops", &mut l.max_file_iops)];
        for (v, key, field) in counts {
            if let Some(n) = self.count(v, what, key, MAX_IOPS)? {
                *field = Some(n);
            }
        }
        let rates = [
            (&s.throughput, "throughput", &mut l.throughput),
            (&s.ingress, "ingress", &mut l.ingress),
            (&s.egress, "egress", &mut l.egress),
            (&s.max_file_throughput, "max_file_throughput", &mut l.max_file_throughput),
        ];
        for (v, key, field) in rates {
            if let Some(n) = self.rate(v, what, key)? {
                *field = Some(n);
            }
        }
        self.burst(s, what, &mut l)?;
        Ok(l)
    }

    /// `burst_iops` with `burst_seconds` (credits = (burst_iops − iops) × seconds) or
    /// `burst_credits`; a burst as high as the baseline is no burst.
    fn burst(&self, s: &RawShare, what: &str, l: &mut Limits) -> Result<(), ConfigError> {
        if let (Some(_), Some(c)) = (&s.burst_seconds, &s.burst_credits) {
            return Err(self.err(c.span(), format!("{what}: set burst_seconds or burst_credits, not both")));
        }
        if let Some(b) = self.count(&s.burst_iops, what, "burst_iops", MAX_IOPS)? {
            l.burst_iops = Some(b);
        }
        let seconds = self.count(&s.burst_seconds, what, "burst_seconds", MAX_BURST_SECONDS)?;
        let credits = self.count(&s.burst_credits, what, "burst_credits", u64::MAX >> 1)?;
        let Some(burst) = l.burst_iops else {
            return match s.burst_seconds.as_ref().map(Spanned::span).or(s.burst_credits.as_ref().map(Spanned::span)) {
                Some(span) => Err(self.err(span, format!("{what}: burst_seconds and burst_credits need burst_iops"))),
                None => Ok(()),
            };
        };
        // The key to blame: the explicit one of the two (a preset has no line).
        let blame = s.burst_iops.as_ref().or(s.iops.as_ref()).map(Spanned::span).unwrap_or_default();
        let Some(base) = l.iops else {
            return Err(self.err(blame, format!("{what}: burst_iops needs iops (the baseline the burst rises above)")));
        };
        if burst < base {
            return Err(self.err(blame, format!("{what}: burst_iops {burst} is below iops {base}")));
        }
        if burst == base {
            l.burst_iops = None;
            l.burst_credits = None;
            return Ok(());
        }
        l.burst_credits = match (seconds, credits) {
            (Some(secs), _) => Some((burst - base).saturating_mul(secs)),
            (None, Some(c)) => Some(c),
            (None, None) => l.burst_credits.or(Some((burst - base).saturating_mul(DEFAULT_BURST_SECONDS))),
        };
        Ok(())
    }

    /// The limits of `provisioned = { model, size }`.
    fn preset(&self, p: &Spanned<RawProvisioned>, what: &str) -> Result<Limits, ConfigError> {
        let raw = p.get_ref();
        let name = raw.model.get_ref();
        let Some(&(_, model)) = MODELS.iter().find(|(n, _)| n.eq_ignore_ascii_case(name.trim())) else {
            let known: Vec<String> = MODELS.iter().map(|(n, _)| format!("{n:?}")).collect();
            return Err(self.err(raw.model.span(), format!("{what}: provisioned: model {name:?} is unknown (use {})", known.join(", "))));
        };
        let size = match raw.size.get_ref() {
            toml::Value::Integer(n) => u64::try_from(*n).ok(),
            toml::Value::String(s) => parse_size(s),
            _ => None,
        };
        let size = size.ok_or_else(|| {
            self.err(raw.size.span(), format!("{what}: provisioned: size {} is not a size (e.g. \"1TiB\", \"100GiB\")", raw.size.get_ref()))
        })?;
        if size < MIN_PROVISIONED {
            return Err(self.err(raw.size.span(), format!("{what}: provisioned: size {} is too small (at least 1GiB)", raw.size.get_ref())));
        }
        Ok(braid_qos::provisioned(model, size))
    }

    /// A positive count up to `max`; zero is refused (it would stop every request: leaving
    /// the key out is "no limit").
    fn count(&self, v: &Option<Spanned<i64>>, what: &str, key: &str, max: u64) -> Result<Option<u64>, ConfigError> {
        let Some(v) = v else { return Ok(None) };
        let n = *v.get_ref();
        match u64::try_from(n) {
            Ok(0) => Err(self.err(v.span(), format!("{what}: {key}: 0 would stop all I/O (leave the key out for no limit)"))),
            Ok(n) if n <= max => Ok(Some(n)),
            _ => Err(self.err(v.span(), format!("{what}: {key}: {n} is out of range (1..{max})"))),
        }
    }

    /// A byte rate: integer bytes per second, or a size such as "200MiB" or "200MiB/s".
    fn rate(&self, v: &Option<Spanned<toml::Value>>, what: &str, key: &str) -> Result<Option<u64>, ConfigError> {
        let Some(v) = v else { return Ok(None) };
        let bytes = match v.get_ref() {
            toml::Value::Integer(n) => u64::try_from(*n).map_err(|_| format!("{n} is negative")),
            toml::Value::String(s) => {
                let size = s.trim().strip_suffix("/s").unwrap_or(s);
                parse_size(size).ok_or_else(|| format!("{s:?} is not a rate (use bytes per second, or e.g. \"200MiB\", \"1GiB/s\")"))
            }
            other => Err(format!("expected a rate such as \"200MiB\" or 209715200, found a {}", other.type_str())),
        };
        match bytes {
            Ok(0) => Err(self.err(v.span(), format!("{what}: {key}: 0 would stop all I/O (leave the key out for no limit)"))),
            Ok(n) if n < MIN_RATE => Err(self.err(v.span(), format!("{what}: {key}: {} is too small (at least 64KiB per second)", v.get_ref()))),
            Ok(n) => Ok(Some(n)),
            Err(m) => Err(self.err(v.span(), format!("{what}: {key}: {m}"))),
        }
    }
}

/// One line for `braid check`, e.g. `4024 IOPS, burst 10000 IOPS (21513600 credits, 60 min),
/// ingress 81 MiB/s, egress 122 MiB/s`.
pub fn describe(l: &Limits) -> String {
    if l.is_unlimited() {
        return "unlimited".to_string();
    }
    let mut parts = Vec::new();
    if let Some(n) = l.iops {
        parts.push(format!("{n} IOPS"));
    }
    if let (Some(b), Some(c)) = (l.burst_iops, l.burst_credits) {
        let above = b.saturating_sub(l.iops.unwrap_or(0)).max(1);
        parts.push(format!("burst {b} IOPS ({c} credits, {})", duration(c / above)));
    }
    for (name, v) in [("throughput", l.throughput), ("ingress", l.ingress), ("egress", l.egress)] {
        if let Some(n) = v {
            parts.push(format!("{name} {}", rate(n)));
        }
    }
    if let Some(n) = l.max_file_iops {
        parts.push(format!("per file {n} IOPS"));
    }
    if let Some(n) = l.max_file_throughput {
        parts.push(format!("per file {}", rate(n)));
    }
    parts.join(", ")
}

/// "5 s", "90 s", "60 min".
fn duration(secs: u64) -> String {
    if secs >= 120 && secs % 60 == 0 {
        format!("{} min", secs / 60)
    } else {
        format!("{secs} s")
    }
}

/// "203 MiB/s", "1.50 MiB/s", "512 KiB/s", "70000 B/s".
fn rate(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    match bytes {
        b if b % MIB == 0 => format!("{} MiB/s", b / MIB),
        b if b >= MIB => format!("{:.2} MiB/s", b as f64 / MIB as f64),
        b if b % 1024 == 0 => format!("{} KiB/s", b / 1024),
        b => format!("{b} B/s"),
    }
}
