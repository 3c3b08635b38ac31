//! How a topic config's value is checked, as Kafka's `ConfigDef` types and validators
//! check it, and the canonical form it is stored and reported in (Kafka prints the
//! parsed value: `" 42 "` is `42`, `TRUE` is `true`, `delete, compact` is
//! `delete,compact`). Errors are the text after Kafka's "Invalid value V for
//! configuration NAME: ".

/// A config's type and bounds.
#[derive(Debug, Clone, Copy)]
pub(super) enum Check {
    /// An INT between the two bounds (inclusive).
    Int(i64, i64),
    /// A LONG of at least the bound.
    Long(i64),
    /// A DOUBLE between 0 and 1 (`min.cleanable.dirty.ratio`).
    Ratio,
    /// A BOOLEAN (`true` or `false`, any case).
    Bool,
    /// A STRING, one of these.
    OneOf(&'static [&'static str]),
    /// A LIST whose items are each one of these (may be empty).
    ListOf(&'static [&'static str]),
    /// `*`, or a list of `partition:broker` pairs (the throttled replicas lists).
    Replicas,
    /// `compression.gzip.level`: -1 (the codec's default) or 1 to 9.
    GzipLevel,
    /// `remote.storage.enable`: a BOOLEAN that may only be false (no tiered storage).
    LocalOnly,
}

impl Check {
    /// The value in canonical form, or why it is refused.
    pub(super) fn check(self, value: &str) -> Result<String, String> {
        let trimmed = value.trim();
        match self {
            Check::Int(min, max) => {
                let v: i32 = trimmed
                    .parse()
                    .map_err(|_| "Not a number of type INT".to_string())?;
                bounded(i64::from(v), min, max)
            }
            Check::Long(min) => {
                let v: i64 = trimmed
                    .parse()
                    .map_err(|_| "Not a number of type LONG".to_string())?;
                bounded(v, min, i64::MAX)
            }
            Check::Ratio => {
                let v: f64 = trimmed
                    .parse()
                    .ok()
                    .filter(|v: &f64| v.is_finite())
                    .ok_or_else(|| "Not a number of type DOUBLE".to_string())?;
                if v < 0.0 {
                    Err("Value must be at least 0".into())
                } else if v > 1.0 {
                    Err("Value must be no more than 1".into())
                } else {
                    Ok(java_double(v))
                }
            }
            Check::Bool => boolean(trimmed),
            Check::LocalOnly => match boolean(trimmed)?.as_str() {
                "false" => Ok("false".into()),
                _ => Err(
                    "Tiered Storage functionality is disabled in the broker. Topic \
                          cannot be configured with remote log storage."
                        .into(),
                ),
            },
            Check::OneOf(allowed) => match allowed.iter().find(|a| **a == trimmed) {
                Some(a) => Ok((*a).to_string()),
                None => Err(format!("String must be one of: {}", allowed.join(", "))),
            },
            Check::ListOf(allowed) => {
                let items = list(trimmed);
                match items.iter().find(|i| !allowed.contains(i)) {
                    Some(_) => Err(format!("String must be one of: {}", allowed.join(", "))),
                    None => Ok(items.join(",")),
                }
            }
            Check::Replicas => {
                let items = list(trimmed);
                let pair = |item: &str| {
                    item.split_once(':').is_some_and(|(p, b)| {
                        p.trim().parse::<i32>().is_ok() && b.trim().parse::<i32>().is_ok()
                    })
                };
                if items == ["*"] || items.iter().all(|i| pair(i)) {
                    Ok(items.join(","))
                } else {
                    Err(
                        "must be the literal '*' or a list of replicas in the following \
                         format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
                            .into(),
                    )
                }
            }
            Check::GzipLevel => {
                let v: i32 = trimmed
                    .parse()
                    .map_err(|_| "Not a number of type INT".to_string())?;
                if v == -1 || (1..=9).contains(&v) {
                    Ok(v.to_string())
                } else {
                    Err("Value must be between 1 and 9, or -1 for the codec's default".into())
                }
            }
        }
    }
}

/// The items of a LIST value, trimmed, with empty items and repeats dropped (Kafka
/// keeps the order given).
pub(super) fn list(value: &str) -> Vec<&str> {
    // A set beside the list: a hostile value may hold a million distinct items.
    let mut seen = std::collections::HashSet::new();
    value
        .split(',')
        .map(str::trim)
        .filter(|i| !i.is_empty() && seen.insert(*i))
        .collect()
}

fn bounded(v: i64, min: i64, max: i64) -> Result<String, String> {
    if v < min {
        Err(format!("Value must be at least {min}"))
    } else if v > max {
        Err(format!("Value must be no more than {max}"))
    } else {
        Ok(v.to_string())
    }
}

fn boolean(value: &str) -> Result<String, String> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok("true".into()),
        "false" => Ok("false".into()),
        _ => Err("Expected value to be either true or false".into()),
    }
}

/// A double as Java's `Double.toString` prints the ones a ratio can be: `1.0`, `0.5`.
fn java_double(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.1}")
    } else {
        v.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_come_back_as_kafka_prints_them_or_with_kafkas_reason() {
        assert_eq!(Check::Long(i64::MIN).check(" 42 "), Ok("42".into()));
        assert_eq!(Check::Bool.check("TRUE"), Ok("true".into()));
        assert_eq!(Check::Ratio.check("1"), Ok("1.0".into()));
        assert_eq!(Check::Ratio.check("0.70"), Ok("0.7".into()));
        assert_eq!(
            Check::ListOf(&["compact", "delete"]).check("delete, compact,delete"),
            Ok("delete,compact".into())
        );
        assert_eq!(
            Check::ListOf(&["compact", "delete"]).check(""),
            Ok("".into())
        );
        assert_eq!(Check::Replicas.check("0:1, 0:2"), Ok("0:1,0:2".into()));
        assert_eq!(Check::Replicas.check("*"), Ok("*".into()));
        for (check, value, why) in [
            (Check::Int(1, 5), "abc", "Not a number of type INT"),
            (Check::Int(1, 5), "99999999999", "Not a number of type INT"),
            (Check::Int(1, 5), "0", "Value must be at least 1"),
            (Check::Long(-1), "-2", "Value must be at least -1"),
            (
                Check::Long(-1),
                "99999999999999999999",
                "Not a number of type LONG",
            ),
            (Check::Ratio, "2", "Value must be no more than 1"),
            (Check::Ratio, "NaN", "Not a number of type DOUBLE"),
            (
                Check::Bool,
                "yes",
                "Expected value to be either true or false",
            ),
        ] {
            assert_eq!(check.check(value), Err(why.to_string()), "{value}");
        }
        assert!(Check::OneOf(&["CreateTime", "LogAppendTime"])
            .check("Now")
            .is_err());
        assert!(Check::ListOf(&["compact", "delete"])
            .check("shred")
            .is_err());
        assert!(Check::Replicas.check("x").is_err());
        assert!(Check::LocalOnly.check("true").is_err());
        assert_eq!(Check::LocalOnly.check("False"), Ok("false".into()));
        assert!(Check::GzipLevel.check("0").is_err());
        assert_eq!(Check::GzipLevel.check("-1"), Ok("-1".into()));
    }
}
